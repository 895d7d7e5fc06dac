package postgres

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/pooldriver/pooldriver/dialects"
	"github.com/pooldriver/pooldriver/dialects/internal/sqllex"
)

var _ dialects.CommitResolver = (*conn)(nil)

// The id of a transaction, learnt without a round trip of its own: inside
// a transaction whose id is not yet known, a statement whose words do not
// prove that it only reads (sqllex.ReadsOnly) goes with probeSQL in the
// same write, and its reply brings the id once the statement made the
// server assign one. Nothing forces an id (pg_current_xact_id would make
// a transaction that only reads write a commit record): one that never
// wrote has none, and needs none, since its COMMIT leaves what a rollback
// would.
//
// Statements asked: ExecContext and QueryContext on the direct path (with
// arguments: the probe goes behind the statement, before its Sync, written
// by hand (execProbed) or in a pipeline (queryProbed, and prepareRun where
// the statement is prepared in the same write; a query's probe is read
// once its rows are closed: readProbe); an Exec without arguments over the
// simple protocol: a second Query message in the same write); a prepared
// statement's run, which then goes the connection's way (namedStmt). A
// statement through pgx's stdlib (another exec mode, a tracer) or the raw
// connection is not: the id it assigns is learnt by the next statement
// asked, and until then the transaction is not known to be clean (see
// OpenTxRef).

// probeSQL reads the open transaction's id, NULL while it has none; it
// assigns none.
const probeSQL = "SELECT pg_catalog.pg_current_xact_id_if_assigned(), " + timelineSQL

// probeName is the name execProbed prepares probeSQL under, in the write
// of a statement it goes with, where nothing can have touched the
// session's prepared statements (probeNamed): the server then parses and
// plans the probe once per connection, not with every transaction. It is
// a name of the direct path's (driverName): a session reset keeps it, and
// its tamper check (reconcile) knows it.
const probeName = "pooldriver_probe"

// timelineSQL is the server's timeline, 0 on a standby (where
// pg_walfile_name fails): what a promotion changes.
const timelineSQL = "CASE WHEN pg_catalog.pg_is_in_recovery() THEN 0 " +
	"ELSE ('x' || pg_catalog.substr(pg_catalog.pg_walfile_name(pg_catalog.pg_current_wal_flush_lsn()), 1, 8))::pg_catalog.bit(32)::pg_catalog.int4 END"

// xact is what the connection learnt of its open transaction's id.
type xact struct {
	id uint64 // the id, 0 while none is known
	// looked: the id was asked (or the transaction began) when the watch
	// had counted at bytes written: none has been written since, if the
	// count is still at, and the transaction is then known to have no id
	// unless id says it has.
	looked bool
	at     uint64
	tli    uint32 // the server's timeline with the id; 0: not known
}

// probes reports whether query, about to run, is to carry probeSQL; it
// forgets the id of a transaction that ended.
func (c *conn) probes(pc *pgconn.PgConn, query string) bool {
	switch pc.TxStatus() {
	case 'T':
		return c.xact.id == 0 && c.canProbe(pc) && !sqllex.ReadsOnly(query)
	case 'I':
		if c.xact != (xact{}) {
			c.xact = xact{}
		}
	}
	return false
}

// began records a transaction just begun: it has no id.
func (c *conn) began() {
	c.xact = xact{looked: c.watch != nil}
	if c.watch != nil {
		c.xact.at = c.watch.written.Load()
	}
}

// learnt records probeSQL's answer: the id v (nil: none yet) and the
// timeline tli.
func (c *conn) learnt(v, tli []byte) {
	if v != nil {
		if id, ok := decimal(v, 64); ok {
			c.xact.id = id
			if n, ok := decimal(tli, 32); ok {
				c.xact.tli = uint32(n)
			}
		}
	}
	if c.watch != nil {
		c.xact.looked, c.xact.at = true, c.watch.written.Load()
	}
}

// decimal parses b, digits only, as an unsigned number of bits bits
// (strconv.ParseUint's answer for such text, without the string it
// needs: it runs with every transaction's first writing statement).
func decimal(b []byte, bits uint) (uint64, bool) {
	if len(b) == 0 || len(b) > 20 {
		return 0, false
	}
	var n uint64
	for _, d := range b {
		if d < '0' || d > '9' {
			return 0, false
		}
		next := n*10 + uint64(d-'0')
		if next/10 != n || bits < 64 && next >= 1<<bits {
			return 0, false // overflow
		}
		n = next
	}
	return n, true
}

// OpenTxRef reports the open transaction's id, its server process, and
// whether it is known to have no id: asked after the last statement that
// ran in it, or none ran (see xact).
func (c *conn) OpenTxRef() dialects.TxRef {
	pc := c.pgx().PgConn()
	r := dialects.TxRef{ID: c.xact.id, Backend: pc.PID(), Timeline: c.xact.tli}
	r.Clean = r.ID == 0 && c.xact.looked && pc.TxStatus() == 'T' &&
		c.watch != nil && c.watch.written.Load() == c.xact.at
	return r
}

// canProbe reports whether the server has probeSQL's function (13 and
// later): a probe the server refuses would fail the caller's transaction.
func (c *conn) canProbe(pc *pgconn.PgConn) bool {
	if c.probing == 0 {
		c.probing = -1
		v := pc.ParameterStatus("server_version") // "15.19 (Debian 15.19-0+deb12u1)"
		i := 0
		for i < len(v) && v[i] >= '0' && v[i] <= '9' {
			i++
		}
		if major, err := strconv.Atoi(v[:i]); err == nil && major >= 13 {
			c.probing = 1
		}
	}
	return c.probing > 0
}

// probeNamed reports whether execProbed sends the probe with query under
// probeName, and whether it is prepared there (ready) or to be prepared
// in the same write. Only where nothing can have dropped it since it was
// prepared, nor will the statement it goes with, for a probe whose
// Bind fails aborts the caller's transaction: the session is as its last
// reset left it (no statement changed it, none may have prepared or
// deallocated: a DO block, a function that EXECUTEs DEALLOCATE ALL; no
// user had the raw connection since the probe was prepared), no
// reset goes first, the connection is the server's own, not a pooler's
// (unnamed), and query was judged, with a reading that still vouches
// (vouching), to change nothing and run no code its text does not show.
// A user who vouches for their functions (trust) reads no catalog, and
// gets the unnamed probe.
func (c *conn) probeNamed(query string) (named, ready bool) {
	if c.unnamed || c.carry.due || c.dirtySeq != 0 || c.sqlPrepared || c.probeDoubt {
		return false, false
	}
	snap := c.lexedSnap
	if c.vouching(snap) == nil {
		return false, false
	}
	e := c.lexedFor(query, snap)
	if e == nil || e.prepares {
		return false, false
	}
	if f := e.facts; f.Text || f.Unread || f.Runs || f.Calls && !f.Vouched {
		return false, false
	}
	return true, c.probeAt == c.dropGen+1
}

// probeHow is how a probe follows a statement in a pipeline (readProbe).
type probeHow uint8

const (
	probeNone    probeHow = iota
	probeUnnamed          // parsed and planned with the statement
	probePrepare          // prepared under probeName, then bound there
	probeBound            // bound to probeName, prepared before
)

// sendProbe queues the probe behind query's statement in pl, under
// probeName where probeNamed says so, and returns how.
func (c *conn) sendProbe(pl *pgconn.Pipeline, query string) probeHow {
	switch named, ready := c.probeNamed(query); {
	case ready:
		pl.SendQueryPrepared(probeName, nil, nil, nil)
		return probeBound
	case named:
		pl.SendPrepare(probeName, probeSQL, nil)
		pl.SendQueryPrepared(probeName, nil, nil, nil)
		return probePrepare
	}
	pl.SendQueryParams(probeSQL, nil, nil, nil, nil)
	return probeUnnamed
}

// queryProbed runs st (its arguments built), query's, a statement that
// returns rows, with the probe behind it in the same write and before the
// same Sync (sendProbe): its result, the pipeline to read the probe from
// once the result is closed (readProbe) and to close after, and how the
// probe was sent.
func (c *conn) queryProbed(ctx context.Context, st *directStmt, query string) (*pgconn.ResultReader, *pgconn.Pipeline, probeHow, error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, probeNone, err // nothing sent
	}
	d := &c.direct
	pl := c.pgx().PgConn().StartPipeline(ctx)
	pl.SendQueryStatement(st.sd, d.eqb.ParamValues, d.eqb.ParamFormats, st.formats)
	how := c.sendProbe(pl, query)
	pl.SendPipelineSync()
	if err := pl.Flush(); err != nil {
		_ = pl.Close()
		return nil, nil, probeNone, err
	}
	res, err := pl.GetResults()
	if err == nil {
		if rr, ok := res.(*pgconn.ResultReader); ok {
			return rr, pl, how, nil
		}
		err = fmt.Errorf("pooldriver: postgres: an unexpected reply %T to a statement", res)
	}
	return nil, nil, probeNone, c.closeCarried(pl, err)
}

// readProbe reads the probe's answer that follows a statement's result
// in pl (prepareRun, queryProbed), sent as how says, the statement's
// result closed without an error. A probe the server refused is the
// statement's error: it aborted the transaction. Otherwise a probe that
// fails teaches nothing; the pipeline's Close reports what broke.
func (c *conn) readProbe(pl *pgconn.Pipeline, how probeHow) error {
	if how == probePrepare {
		res, err := pl.GetResults()
		if err != nil {
			return probeRefused(err)
		}
		if _, ok := res.(*pgconn.StatementDescription); !ok {
			return nil
		}
		c.probeAt = c.dropGen + 1
	}
	res, err := pl.GetResults()
	if err != nil {
		return probeRefused(err)
	}
	rr, ok := res.(*pgconn.ResultReader)
	if !ok {
		return nil
	}
	m := &c.probe
	m.v, m.tli = m.v[:0], m.tli[:0]
	answered := false
	for rr.NextRow() {
		if v := rr.Values(); len(v) == 2 {
			answered = true
			if v[0] != nil {
				m.v = append(m.v, v[0]...)
			}
			m.tli = append(m.tli[:0], v[1]...)
		}
	}
	if _, err := rr.Close(); err != nil || !answered {
		return probeRefused(err)
	}
	var v []byte
	if len(m.v) > 0 {
		v = m.v
	}
	c.learnt(v, m.tli)
	return nil
}

// probeRefused is the statement's error for a probe that failed with err
// after the statement ran: a refusal of the server's aborted the
// transaction. Anything else, nil included, the pipeline's Close reports.
func probeRefused(err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return fmt.Errorf("pooldriver: postgres: the statement ran, but the server refused to say its transaction's id, which aborted the transaction: %w", err)
	}
	return nil
}

// probeMsgs are the messages execProbed writes, kept on the connection so
// that a probed statement allocates none.
type probeMsgs struct {
	bind, probeBind pgproto3.Bind
	parse           pgproto3.Parse
	exec            pgproto3.Execute
	sync            pgproto3.Sync
	v, tli          []byte // the probe's answer
}

// execProbed is execDirect's run of st (its arguments built), query's,
// with the probe behind it, in the same write and before the same Sync,
// written and read on pgx's connection directly (as pgconn's
// ExecStatement reads a statement's replies) so that it allocates what
// ExecStatement does. The probe is prepared under probeName where
// probeNamed says so. A failure to write or read closes the connection:
// what ran is not known. A probe the server refused, after the statement
// ran, is the statement's error: it aborted the transaction.
func (c *conn) execProbed(ctx context.Context, st *directStmt, query string) (pgconn.CommandTag, error) {
	if err := ctx.Err(); err != nil {
		return pgconn.CommandTag{}, err // nothing sent
	}
	pc := c.pgx().PgConn()
	if pc.IsClosed() {
		return pgconn.CommandTag{}, driver.ErrBadConn
	}
	d, m := &c.direct, &c.probe
	m.bind = pgproto3.Bind{PreparedStatement: st.sd.Name, ParameterFormatCodes: d.eqb.ParamFormats, Parameters: d.eqb.ParamValues, ResultFormatCodes: st.formats}
	named, ready := c.probeNamed(query)
	m.parse.Query, m.parse.Name, m.probeBind.PreparedStatement = probeSQL, "", ""
	if named {
		m.parse.Name, m.probeBind.PreparedStatement = probeName, probeName
	}
	fe := pc.Frontend()
	fe.SendBind(&m.bind)
	fe.SendExecute(&m.exec)
	if !ready {
		fe.SendParse(&m.parse)
	}
	fe.SendBind(&m.probeBind)
	fe.SendExecute(&m.exec)
	fe.SendSync(&m.sync)
	m.bind = pgproto3.Bind{} // the arguments are the statement's, not the connection's
	if err := fe.Flush(); err != nil {
		return pgconn.CommandTag{}, c.probeLost(err)
	}
	var tag pgconn.CommandTag
	var stmtErr, probeErr error
	completed, answered := 0, false
	m.v, m.tli = m.v[:0], m.tli[:0]
	for {
		msg, err := pc.ReceiveMessage(ctx)
		if err != nil {
			return pgconn.CommandTag{}, c.probeLost(err)
		}
		switch r := msg.(type) {
		case *pgproto3.ParseComplete: // the probe's: st was prepared before
			if named {
				c.probeAt = c.dropGen + 1
			}
		case *pgproto3.CommandComplete:
			if completed++; completed == 1 {
				tag = pgconn.NewCommandTag(string(r.CommandTag))
			} else {
				answered = true
			}
		case *pgproto3.DataRow:
			if completed == 1 && len(r.Values) == 2 && r.Values[0] != nil {
				m.v = append(m.v, r.Values[0]...)
				m.tli = append(m.tli[:0], r.Values[1]...)
			}
		case *pgproto3.ErrorResponse:
			if completed == 0 {
				stmtErr = pgconn.ErrorResponseToPgError(r)
			} else {
				probeErr = pgconn.ErrorResponseToPgError(r)
			}
		case *pgproto3.ReadyForQuery:
			if stmtErr != nil {
				return pgconn.CommandTag{}, stmtErr
			}
			if probeErr != nil {
				return pgconn.CommandTag{}, probeRefused(probeErr)
			}
			if answered {
				var v []byte
				if len(m.v) > 0 {
					v = m.v
				}
				c.learnt(v, m.tli)
			}
			return tag, nil
		}
	}
}

// execSimpleProbed runs query (no arguments) over the simple protocol, as
// pgx's stdlib would, with the probe as a second Query message in the
// same write. It returns the last command's rows affected, or the first
// error the server sent, the probe's where it aborted the transaction. A
// failure to write or read closes the connection: what ran is not known.
func (c *conn) execSimpleProbed(ctx context.Context, query string) (driver.Result, error) {
	if err := ctx.Err(); err != nil {
		return nil, err // nothing sent
	}
	pc := c.pgx().PgConn()
	if pc.IsClosed() {
		return nil, driver.ErrBadConn
	}
	fe := pc.Frontend()
	fe.Send(&pgproto3.Query{String: query})
	fe.Send(&pgproto3.Query{String: probeSQL})
	if err := fe.Flush(); err != nil {
		return nil, c.probeLost(err)
	}
	_, stmtErr, tag, err := c.readSimple(ctx)
	if err != nil {
		return nil, c.probeLost(err)
	}
	var v, tli []byte
	var probeErr error
	for done := false; !done; {
		msg, err := pc.ReceiveMessage(ctx)
		if err != nil {
			return nil, c.probeLost(err)
		}
		switch m := msg.(type) {
		case *pgproto3.DataRow:
			if len(m.Values) == 2 && m.Values[0] != nil {
				v = append([]byte(nil), m.Values[0]...)
				tli = append([]byte(nil), m.Values[1]...)
			}
		case *pgproto3.ErrorResponse:
			probeErr = pgconn.ErrorResponseToPgError(m)
		case *pgproto3.ReadyForQuery:
			done = true
		}
	}
	if stmtErr != nil {
		return nil, stmtErr
	}
	if probeErr != nil {
		if pc.TxStatus() == 'E' { // the text's transaction was still open
			return nil, probeRefused(probeErr)
		}
		return driver.RowsAffected(tag.RowsAffected()), nil
	}
	c.learnt(v, tli)
	return driver.RowsAffected(tag.RowsAffected()), nil
}

// probeLost closes the connection after a failure to write a probed
// statement or read its replies. The error is not driver.ErrBadConn: the
// statement may have run.
func (c *conn) probeLost(err error) error {
	_ = c.pgx().PgConn().Close(context.Background())
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return err
	}
	return fmt.Errorf("pooldriver: postgres: the connection broke (the statement may have run): %w", errors.Unwrap(err))
}

// xactStatusSQL asks what became of a transaction by its id: 'committed',
// 'aborted', 'in progress', or NULL where the id is older than the server
// keeps; the server refuses an id it never assigned (22023, "in the
// future": a promoted standby that never received it). And the server's
// timeline.
const xactStatusSQL = "SELECT pg_catalog.pg_xact_status($1::pg_catalog.xid8), " + timelineSQL

// endXactSQL ends the server process $2 if it still runs transaction $1.
const endXactSQL = "SELECT pg_catalog.pg_terminate_backend(a.pid) FROM pg_catalog.pg_stat_activity a " +
	"WHERE a.pid = $2 AND a.backend_xid = pg_catalog.xid($1::pg_catalog.xid8)"

// invalidParameterValue is the SQLSTATE of pg_xact_status for an id in
// the future.
const invalidParameterValue = "22023"

// TxOutcome asks, on c, what became of ref (see dialects.CommitResolver):
// in progress, it also ends ref's server process where that still runs
// ref (an error doing so, a role not allowed to, leaves it to end by
// itself).
//
// A server on another timeline than ref's was promoted since: where the
// transaction's first write never reached it before that, it gave the id
// again to one of its own. Its answer is then ref's only where it cannot
// be the other's: aborted, or in progress (ref ended with the old
// primary: a transaction still running is the other one, and ref's never
// reached this server) say that ref did not commit here; committed may be
// the other's (TxOtherHistory).
func (c *conn) TxOutcome(ctx context.Context, ref dialects.TxRef) (dialects.TxOutcome, error) {
	pc := c.pgx().PgConn()
	id := []byte(strconv.FormatUint(ref.ID, 10))
	res := pc.ExecParams(ctx, xactStatusSQL, [][]byte{id}, nil, nil, nil).Read()
	if res.Err != nil {
		var pe *pgconn.PgError
		if errors.As(res.Err, &pe) && pe.Code == invalidParameterValue {
			return dialects.TxAborted, nil // never assigned here: it did not commit here
		}
		return dialects.TxOutcomeUnknown, res.Err
	}
	if len(res.Rows) != 1 || len(res.Rows[0]) != 2 {
		return dialects.TxOutcomeUnknown, fmt.Errorf("pooldriver: postgres: pg_xact_status: want one row of two columns")
	}
	tli, err := strconv.ParseUint(string(res.Rows[0][1]), 10, 32)
	same := err == nil && ref.Timeline != 0 && uint32(tli) == ref.Timeline
	switch string(res.Rows[0][0]) {
	case "committed":
		if !same {
			return dialects.TxOtherHistory, nil
		}
		return dialects.TxCommitted, nil
	case "aborted":
		return dialects.TxAborted, nil
	case "in progress":
		if !same {
			return dialects.TxAborted, nil // another's: see above
		}
		if ref.Backend != 0 {
			pid := []byte(strconv.FormatUint(uint64(ref.Backend), 10))
			ectx, cancel := context.WithTimeout(ctx, time.Second)
			_ = pc.ExecParams(ectx, endXactSQL, [][]byte{id, pid}, nil, nil, nil).Read()
			cancel()
		}
		return dialects.TxInProgress, nil
	}
	return dialects.TxOutcomeUnknown, nil // NULL: older than the server keeps
}
