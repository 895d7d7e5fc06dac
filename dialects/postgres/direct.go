package postgres

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
)

// The direct path: a query through database/sql runs on pgx's pgconn
// directly, as pgx's stdlib would run it through pgx.Conn.Query with the
// default exec mode (cache_statement): the statement prepared once per
// connection under a name, its parameters encoded by pgx's
// ExtendedQueryBuilder with the connection's type map, its results asked
// for in the formats the stdlib asks for and turned into the same
// driver.Values. What it saves per query is what the stdlib and pgx.Conn
// build afresh each time: the argument slice, pgx's rows, the stdlib's
// rows, one closure per column and the column names (about a tenth of a
// point select's instructions).
//
// It is taken only where it cannot differ from the stdlib: the exec mode
// is cache_statement with a statement cache, no tracer is configured
// (pgx's tracers see pgx.Conn.Query, which the direct path skips), and
// no argument is one of pgx's query options (QueryExecMode,
// QueryResultFormats, a QueryRewriter such as NamedArgs), which pgx.Conn
// reads from the front of the arguments. Everything else goes to the
// stdlib.

// databaseSQLFormats are the result formats pgx's stdlib asks for: binary
// for these types, text for all others.
var databaseSQLFormats = map[uint32]int16{
	pgtype.BoolOID: 1, pgtype.ByteaOID: 1, pgtype.CIDOID: 1, pgtype.DateOID: 1,
	pgtype.Float4OID: 1, pgtype.Float8OID: 1, pgtype.Int2OID: 1, pgtype.Int4OID: 1,
	pgtype.Int8OID: 1, pgtype.OIDOID: 1, pgtype.TimestampOID: 1, pgtype.TimestamptzOID: 1,
	pgtype.XIDOID: 1,
}

// decodeFunc turns a column's non-NULL value into the driver.Value pgx's
// stdlib gives for it.
type decodeFunc func(src []byte) (driver.Value, error)

// directStmt is a statement the direct path prepared on one connection.
// Its decoders keep their scan targets between calls, as the stdlib's do
// between the rows of one result: a connection runs one query at a time.
type directStmt struct {
	sd      *pgconn.StatementDescription
	formats []int16                   // the result formats, by column
	fields  []pgconn.FieldDescription // sd.Fields with those formats
	names   []string                  // the column names
	decode  []decodeFunc              // by column
	seq     uint64                    // the order it was last prepared in (its name has the first)
	// onServer: prepared on the server under its name; not after a
	// carried reset deallocated it (carry.go), until its next run
	// prepares it again.
	onServer bool
}

// direct is a connection's state for the direct path.
type direct struct {
	on    bool // the conditions hold (see above)
	types *pgtype.Map
	stmts map[string]*directStmt
	max   int      // pgx's statement_cache_capacity
	seq   uint64   // for the next statement's name
	stale []string // names to deallocate on the server before the next prepare
	eqb   pgx.ExtendedQueryBuilder
	args  []any
	rows  directRows // reused: a connection has one result open at a time
}

// initDirect decides whether the connection takes the direct path.
func (c *conn) initDirect() {
	cfg := c.pgx().Config()
	d := &c.direct
	d.on = cfg.DefaultQueryExecMode == pgx.QueryExecModeCacheStatement &&
		cfg.StatementCacheCapacity > 0 && cfg.Tracer == nil
	d.types = c.pgx().TypeMap()
	d.max = cfg.StatementCacheCapacity
}

// QueryContext runs query with args as pgx's stdlib would, on the direct
// path where it can (see above).
func (c *conn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	d := &c.direct
	if !d.on || query == "" || (len(args) > 0 && isQueryOption(args[0].Value)) {
		if err := c.runDue(ctx); err != nil {
			return nil, err
		}
		c.stdlibCached = true // pgx may have prepared it (see carriable)
		return c.sc.QueryContext(ctx, query, args)
	}
	before := c.repliesRead()
	rows, err := c.queryDirect(ctx, query, args)
	if err != nil {
		return nil, c.unanswered(err, before)
	}
	return rows, nil
}

// queryDirect is QueryContext on the direct path.
func (c *conn) queryDirect(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	d := &c.direct
	p := c.pgx()
	if p.IsClosed() {
		return nil, driver.ErrBadConn
	}
	if c.carry.due || c.customDue() {
		if err := c.beforeDirect(ctx, query); err != nil {
			return nil, err
		}
	}
	st, err := c.statement(ctx, query)
	if err == nil && len(st.sd.ParamOIDs) != len(args) {
		err = fmt.Errorf("expected %d arguments, got %d", len(st.sd.ParamOIDs), len(args))
	}
	if err == nil {
		err = d.build(st, args)
	}
	if err != nil {
		if st != nil {
			c.forget(query, st) // as pgx drops a statement after any error
		}
		if pgconn.SafeToRetry(err) {
			return nil, driver.ErrBadConn
		}
		return nil, err
	}
	var rr *pgconn.ResultReader
	var pl *pgconn.Pipeline
	redescribed := false
	probe := probeNone
	if c.probes(p.PgConn(), query) {
		probe = probeUnnamed
	}
	switch {
	case c.carry.due || !st.onServer:
		if rr, pl, redescribed, err = c.prepareRun(ctx, st, c.carry.due, probe != probeNone); err != nil {
			return nil, c.prepareRunFailed(query, st, err)
		}
	case probe != probeNone:
		if rr, pl, probe, err = c.queryProbed(ctx, st, query); err != nil {
			return nil, c.prepareRunFailed(query, st, err)
		}
	default:
		rr = p.PgConn().ExecStatement(ctx, st.sd, d.eqb.ParamValues, d.eqb.ParamFormats, st.formats)
	}
	r := &d.rows
	if r.rr != nil {
		r = new(directRows)
	}
	*r = directRows{c: c, st: st, rr: rr, pl: pl, query: query, probe: probe}
	if redescribed {
		// Asked for in the formats of st's old description: read by the
		// result's own (carry.go, redescribe).
		r.decode = decoders(d.types, rr.FieldDescriptions())
	}
	// Read the first row now, as the stdlib does: a statement's error then
	// reaches the caller of Query, not of Next.
	if r.more = rr.NextRow(); !r.more {
		if err := r.end(); err != nil {
			r.rr = nil
			return nil, err
		}
	}
	r.fresh = true
	return r, nil
}

// ExecContext runs query with args as pgx's stdlib would, on the direct
// path where it can: pgx.Conn.Exec runs a statement without arguments
// over the simple protocol (several statements in one text), which the
// stdlib is left to do.
func (c *conn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	d := &c.direct
	if !d.on || len(args) == 0 || isQueryOption(args[0].Value) {
		if c.carry.due && len(args) == 0 && c.carriable() && carries(query) {
			return c.execCarriedSimple(ctx, query)
		}
		if err := c.runDue(ctx); err != nil {
			return nil, err
		}
		if len(args) == 0 && c.probes(c.pgx().PgConn(), query) {
			return c.execSimpleProbed(ctx, query)
		}
		c.stdlibCached = c.stdlibCached || len(args) > 0 // pgx may have prepared it (see carriable)
		return c.sc.ExecContext(ctx, query, args)
	}
	before := c.repliesRead()
	res, err := c.execDirect(ctx, query, args)
	if err != nil {
		err = c.unanswered(err, before)
	}
	return res, err
}

// execDirect is ExecContext on the direct path.
func (c *conn) execDirect(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	d := &c.direct
	p := c.pgx()
	if p.IsClosed() {
		return nil, driver.ErrBadConn
	}
	if c.carry.due || c.customDue() {
		if err := c.beforeDirect(ctx, query); err != nil {
			return nil, err
		}
	}
	var tag pgconn.CommandTag
	st, err := c.statement(ctx, query)
	if err == nil {
		err = d.build(st, args)
	}
	if err == nil && (c.carry.due || !st.onServer) {
		var rr *pgconn.ResultReader
		var pl *pgconn.Pipeline
		probe := c.probes(p.PgConn(), query)
		if rr, pl, _, err = c.prepareRun(ctx, st, c.carry.due, probe); err != nil {
			return nil, c.prepareRunFailed(query, st, err)
		}
		tag, err = rr.Close()
		if probe && err == nil {
			err = c.readProbe(pl, probeUnnamed)
		}
		err = c.closeCarried(pl, err)
	} else if err == nil {
		if c.probes(p.PgConn(), query) {
			tag, err = c.execProbed(ctx, st, query)
		} else {
			tag, err = p.PgConn().ExecStatement(ctx, st.sd, d.eqb.ParamValues, d.eqb.ParamFormats, st.formats).Close()
		}
	}
	if err != nil {
		if st != nil {
			c.forget(query, st)
		}
		if pgconn.SafeToRetry(err) {
			return nil, driver.ErrBadConn
		}
	}
	return driver.RowsAffected(tag.RowsAffected()), err
}

// build encodes args for st into d.eqb.
func (d *direct) build(st *directStmt, args []driver.NamedValue) error {
	for i := range args {
		d.args = append(d.args, args[i].Value)
	}
	err := d.eqb.Build(d.types, st.sd, d.args)
	clear(d.args)
	d.args = d.args[:0]
	return err
}

// isQueryOption reports an argument that pgx.Conn.Query reads as an option
// of the query when it comes first.
func isQueryOption(v any) bool {
	switch v.(type) {
	case pgx.QueryExecMode, pgx.QueryResultFormats, pgx.QueryResultFormatsByOID, pgx.QueryRewriter:
		return true
	}
	return false
}

// statement returns query's statement, prepared on the server under a name
// of the direct path's own if it is not yet.
func (c *conn) statement(ctx context.Context, query string) (*directStmt, error) {
	d := &c.direct
	if st, ok := d.stmts[query]; ok {
		return st, nil
	}
	pc := c.pgx().PgConn()
	if err := c.dropStale(ctx); err != nil {
		return nil, err
	}
	if d.stmts == nil {
		d.stmts = make(map[string]*directStmt)
	}
	if len(d.stmts) >= d.max {
		for q, st := range d.stmts { // any one: eviction is rare
			c.forget(q, st)
			break
		}
	}
	d.seq++
	name := "pooldriver_" + strconv.FormatUint(d.seq, 10)
	sd, err := pc.Prepare(ctx, name, query, nil)
	if err != nil {
		// A statement the server parsed but could not describe exists
		// under its name all the same.
		if pe := (*pgconn.PrepareError)(nil); errors.As(err, &pe) && pe.ParseComplete {
			d.stale = append(d.stale, name)
		}
		return nil, err
	}
	st := newDirectStmt(d.types, sd)
	st.seq, st.onServer = d.seq, true
	d.stmts[query] = st
	return st, nil
}

// newDirectStmt sets up sd's result formats and decoders.
func newDirectStmt(m *pgtype.Map, sd *pgconn.StatementDescription) *directStmt {
	st := &directStmt{sd: sd, formats: make([]int16, len(sd.Fields)), fields: make([]pgconn.FieldDescription, len(sd.Fields)), names: make([]string, len(sd.Fields))}
	for i, f := range sd.Fields {
		st.formats[i] = databaseSQLFormats[f.DataTypeOID]
		f.Format = st.formats[i]
		st.fields[i] = f
		st.names[i] = f.Name
	}
	st.decode = decoders(m, st.fields)
	return st
}

// forget drops query's statement from the cache after an error, as pgx
// drops a statement of its cache after any error of its rows; the server
// deallocates it before the next prepare.
func (c *conn) forget(query string, st *directStmt) {
	d := &c.direct
	if d.stmts[query] == st {
		delete(d.stmts, query)
		d.stale = append(d.stale, st.sd.Name)
	}
}

// dropStale deallocates the statements the cache dropped.
func (c *conn) dropStale(ctx context.Context) error {
	d := &c.direct
	for len(d.stale) > 0 {
		if err := c.pgx().PgConn().Deallocate(ctx, d.stale[0]); err != nil {
			return err
		}
		d.stale = d.stale[1:]
	}
	d.stale = nil
	return nil
}

// directRows is the result of a query on the direct path, read as pgx's
// stdlib reads it.
type directRows struct {
	c     *conn
	st    *directStmt
	rr    *pgconn.ResultReader
	pl    *pgconn.Pipeline // the carried reset's (carry.go) or the probe's (xact.go), closed after rr; or nil
	probe probeHow         // how the transaction id's probe follows rr in pl (readProbe)
	query string
	// decode: the decoders of a statement whose description had no
	// columns but whose result has (a FETCH from a cursor declared
	// later), made for this result.
	decode []decodeFunc
	names  []string
	more   bool // the current row is one
	fresh  bool // the current row is the first, read by QueryContext
	done   bool
	err    error
}

var (
	_ driver.RowsColumnTypeDatabaseTypeName = (*directRows)(nil)
	_ driver.RowsColumnTypeLength           = (*directRows)(nil)
	_ driver.RowsColumnTypePrecisionScale   = (*directRows)(nil)
	_ driver.RowsColumnTypeScanType         = (*directRows)(nil)
)

// fields returns the result's column descriptions.
func (r *directRows) fields() []pgconn.FieldDescription {
	if len(r.st.fields) > 0 {
		return r.st.fields
	}
	return r.rr.FieldDescriptions()
}

// Columns returns the column names, shared by every result of the
// statement (database/sql hands the slice to its caller as it is, as it
// does the stdlib's).
func (r *directRows) Columns() []string {
	if len(r.st.names) > 0 {
		return r.st.names
	}
	if r.names == nil {
		fds := r.rr.FieldDescriptions()
		r.names = make([]string, len(fds))
		for i := range fds {
			r.names[i] = fds[i].Name
		}
	}
	return r.names
}

// Next reads the next row into dest.
func (r *directRows) Next(dest []driver.Value) error {
	if r.fresh {
		r.fresh = false
	} else if !r.done {
		r.more = r.rr.NextRow()
	}
	if !r.more {
		if err := r.end(); err != nil {
			return err
		}
		return io.EOF
	}
	dec := r.decode
	if dec == nil {
		if dec = r.st.decode; len(dec) == 0 {
			r.decode = decoders(r.c.direct.types, r.rr.FieldDescriptions())
			dec = r.decode
		}
	}
	for i, v := range r.rr.Values() {
		if v == nil {
			dest[i] = nil
			continue
		}
		var err error
		if dest[i], err = dec[i](v); err != nil {
			return fmt.Errorf("convert field %d failed: %w", i, err)
		}
	}
	return nil
}

// end closes the result reader, once, and returns its error; an error
// drops the statement from the cache.
func (r *directRows) end() error {
	if !r.done {
		r.done, r.more = true, false
		_, err := r.rr.Close()
		if r.probe != probeNone && err == nil {
			err = r.c.readProbe(r.pl, r.probe)
		}
		if r.pl != nil {
			err = r.c.closeCarried(r.pl, err)
			r.pl = nil
		}
		if err != nil {
			r.err = err
			r.c.forget(r.query, r.st)
		}
	}
	return r.err
}

// Close reads the rest of the result and returns the result's error.
func (r *directRows) Close() error {
	err := r.end()
	r.rr = nil // the connection's rows may be reused
	return err
}

// ColumnTypeDatabaseTypeName returns the type's name in upper case, or its
// OID where the type map does not know it.
func (r *directRows) ColumnTypeDatabaseTypeName(i int) string {
	oid := r.fields()[i].DataTypeOID
	if t, ok := r.c.direct.types.TypeForOID(oid); ok {
		return strings.ToUpper(t.Name)
	}
	return strconv.FormatInt(int64(oid), 10)
}

// varHeaderSize is what a variable-length type's modifier counts beyond
// its length.
const varHeaderSize = 4

// ColumnTypeLength returns the length of a variable-length column.
func (r *directRows) ColumnTypeLength(i int) (int64, bool) {
	f := r.fields()[i]
	switch f.DataTypeOID {
	case pgtype.TextOID, pgtype.ByteaOID:
		return math.MaxInt64, true
	case pgtype.VarcharOID, pgtype.BPCharOID:
		return int64(f.TypeModifier - varHeaderSize), true
	case pgtype.VarbitOID:
		return int64(f.TypeModifier), true
	}
	return 0, false
}

// ColumnTypePrecisionScale returns a numeric column's precision and scale.
func (r *directRows) ColumnTypePrecisionScale(i int) (precision, scale int64, ok bool) {
	f := r.fields()[i]
	if f.DataTypeOID != pgtype.NumericOID {
		return 0, 0, false
	}
	mod := f.TypeModifier - varHeaderSize
	return int64((mod >> 16) & 0xffff), int64(mod & 0xffff), true
}

// ColumnTypeScanType returns the Go type a column scans into.
func (r *directRows) ColumnTypeScanType(i int) reflect.Type {
	switch r.fields()[i].DataTypeOID {
	case pgtype.Float8OID, pgtype.NumericOID:
		return reflect.TypeFor[float64]()
	case pgtype.Float4OID:
		return reflect.TypeFor[float32]()
	case pgtype.Int8OID:
		return reflect.TypeFor[int64]()
	case pgtype.Int4OID:
		return reflect.TypeFor[int32]()
	case pgtype.Int2OID:
		return reflect.TypeFor[int16]()
	case pgtype.BoolOID:
		return reflect.TypeFor[bool]()
	case pgtype.DateOID, pgtype.TimestampOID, pgtype.TimestamptzOID:
		return reflect.TypeFor[time.Time]()
	case pgtype.ByteaOID:
		return reflect.TypeFor[[]byte]()
	}
	return reflect.TypeFor[string]()
}

// decoders returns, for each column of fds, the conversion pgx's stdlib
// makes of its values: the same scan plans into the same Go types.
func decoders(m *pgtype.Map, fds []pgconn.FieldDescription) []decodeFunc {
	out := make([]decodeFunc, len(fds))
	for i, fd := range fds {
		out[i] = decoder(m, fd.DataTypeOID, fd.Format)
	}
	return out
}

func decoder(m *pgtype.Map, oid uint32, format int16) decodeFunc {
	switch oid {
	case pgtype.BoolOID:
		return scanned[bool](m, oid, format, func(d bool) (driver.Value, error) { return d, nil })
	case pgtype.ByteaOID, pgtype.JSONOID, pgtype.JSONBOID, pgtype.XMLOID:
		return scanned[[]byte](m, oid, format, func(d []byte) (driver.Value, error) { return d, nil })
	case pgtype.CIDOID, pgtype.OIDOID, pgtype.XIDOID:
		return scanned[pgtype.Uint32](m, oid, format, pgtype.Uint32.Value)
	case pgtype.DateOID:
		return scanned[pgtype.Date](m, oid, format, pgtype.Date.Value)
	case pgtype.Float4OID:
		return scanned[float32](m, oid, format, func(d float32) (driver.Value, error) { return float64(d), nil })
	case pgtype.Float8OID:
		return scanned[float64](m, oid, format, func(d float64) (driver.Value, error) { return d, nil })
	case pgtype.Int2OID:
		return scanned[int16](m, oid, format, func(d int16) (driver.Value, error) { return int64(d), nil })
	case pgtype.Int4OID:
		return scanned[int32](m, oid, format, func(d int32) (driver.Value, error) { return int64(d), nil })
	case pgtype.Int8OID:
		return scanned[int64](m, oid, format, func(d int64) (driver.Value, error) { return d, nil })
	case pgtype.TimestampOID:
		return scanned[pgtype.Timestamp](m, oid, format, pgtype.Timestamp.Value)
	case pgtype.TimestamptzOID:
		return scanned[pgtype.Timestamptz](m, oid, format, pgtype.Timestamptz.Value)
	}
	return scanned[string](m, oid, format, func(d string) (driver.Value, error) { return d, nil })
}

// scanned returns a decoder that scans a value into a T with the type
// map's plan, then converts it with value. A scan error wins, as in the
// stdlib, except where the stdlib returns the value beside it (bool,
// []byte, the numbers, string), which database/sql drops with the error.
func scanned[T any](m *pgtype.Map, oid uint32, format int16, value func(T) (driver.Value, error)) decodeFunc {
	var d T
	plan := m.PlanScan(oid, format, &d)
	return func(src []byte) (driver.Value, error) {
		if err := plan.Scan(src, &d); err != nil {
			return nil, err
		}
		return value(d)
	}
}
