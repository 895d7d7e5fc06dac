package odbc

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/alexbrainman/odbc"
)

// drvConn is the driver.Conn pooldriver runs statements on: the
// alexbrainman/odbc connection, plus what that driver lacks. It begins
// transactions with options (see server.beginSQL), keeps the transaction
// it began, returns driver.ErrBadConn only when the statement cannot have
// run, and reports a lost connection through IsValid.
//
// Like the odbc connection, it is not safe for concurrent use; pooldriver
// serializes all calls.
type drvConn struct {
	oc     *odbc.Conn
	server server
	tx     *drvTx // the transaction begun with BeginTx, or nil
	bad    bool   // the connection is lost or in an unknown state

	// beginFailed: the last call was a BeginTx that failed. pooldriver
	// then reports "BEGIN" to TxStatus, which must not count as a raw
	// BEGIN: no transaction was opened.
	beginFailed bool
}

var (
	_ driver.Conn               = (*drvConn)(nil)
	_ driver.ConnBeginTx        = (*drvConn)(nil)
	_ driver.ConnPrepareContext = (*drvConn)(nil)
	_ driver.ExecerContext      = (*drvConn)(nil)
	_ driver.QueryerContext     = (*drvConn)(nil)
	_ driver.Validator          = (*drvConn)(nil)
)

// errLost replaces the odbc driver's driver.ErrBadConn when the statement
// may have reached the server: database/sql must not run it again.
var errLost = errors.New("pooldriver: odbc: the connection was lost; the statement may have run")

// check turns err into what pooldriver and database/sql must see. It marks
// the connection bad when err says it is lost, and returns
// driver.ErrBadConn only if the statement cannot have run (ran is false).
func (c *drvConn) check(err error, ran bool) error {
	if err == nil {
		return nil
	}
	badConn := errors.Is(err, driver.ErrBadConn)
	if badConn || c.connectionLost(err) {
		c.bad = true
	}
	if badConn && ran {
		return errLost
	}
	return err
}

// connectionLost reports whether an ODBC error says the connection is
// gone: SQLSTATE class 08; PostgreSQL's 57P01-57P03 (the server terminated
// the session: pg_terminate_backend, a shutdown, a crash), which psqlODBC
// passes on as they are; or MariaDB/MySQL's "server has gone away" (2006),
// "lost connection" (2013) and "connection was killed" (1927).
func (c *drvConn) connectionLost(err error) bool {
	var oe *odbc.Error
	if !errors.As(err, &oe) {
		return false
	}
	for _, d := range oe.Diag {
		if strings.HasPrefix(d.State, "08") || strings.HasPrefix(d.State, "57P0") {
			return true
		}
		if c.server == mysql && (d.NativeError == 2006 || d.NativeError == 2013 || d.NativeError == 1927) {
			return true
		}
	}
	return false
}

// sqlState returns the SQLSTATE of the first diagnostic record of err.
func sqlState(err error) string {
	var oe *odbc.Error
	if errors.As(err, &oe) && len(oe.Diag) > 0 {
		return oe.Diag[0].State
	}
	return ""
}

// IsValid reports whether the connection may be used again.
func (c *drvConn) IsValid() bool { return !c.bad }

// Prepare prepares query. The statement has not run if this fails.
func (c *drvConn) Prepare(query string) (driver.Stmt, error) {
	return c.PrepareContext(context.Background(), query)
}

// PrepareContext prepares query; the driver cannot be interrupted, so ctx
// is only checked first.
func (c *drvConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	c.beginFailed = false
	if c.bad {
		return nil, driver.ErrBadConn
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s, err := c.oc.Prepare(query)
	if err != nil {
		return nil, c.check(err, false)
	}
	return &drvStmt{c: c, s: s}, nil
}

// ExecContext prepares and runs query, then frees the statement. The odbc
// driver cannot interrupt a running statement that returns no rows, so ctx
// is only checked first.
func (c *drvConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	st, err := c.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	defer func() { _ = st.Close() }()
	return st.(*drvStmt).exec(args)
}

// QueryContext runs query through the odbc driver, which cancels it
// (SQLCancel) when ctx is done.
func (c *drvConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	c.beginFailed = false
	if c.bad {
		return nil, driver.ErrBadConn
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	rows, err := c.oc.QueryContext(ctx, query, args)
	if err != nil {
		// It prepares and runs in one call: count a lost connection as
		// one that may have run the statement.
		return nil, c.check(err, true)
	}
	return rows, nil
}

// Begin begins a transaction with default options.
func (c *drvConn) Begin() (driver.Tx, error) {
	return c.BeginTx(context.Background(), driver.TxOptions{})
}

// BeginTx begins a transaction. With PostgreSQL and MariaDB/MySQL it runs
// BEGIN (START TRANSACTION) with the isolation level and read-only mode
// asked for; with other servers it turns autocommit off through the odbc
// driver, and refuses options. Nothing of the caller's has run if it fails,
// so a lost connection is reported as driver.ErrBadConn.
func (c *drvConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	tx, err := c.beginTx(ctx, opts)
	c.beginFailed = err != nil
	return tx, err
}

func (c *drvConn) beginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	if c.bad {
		return nil, driver.ErrBadConn
	}
	if c.tx != nil {
		return nil, errors.New("pooldriver: odbc: a transaction is already open on this connection")
	}
	stmts, err := c.server.beginSQL(opts)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if stmts == nil {
		dt, err := c.oc.Begin()
		if err != nil {
			c.bad = true // the odbc driver gives up on the connection, too
			return nil, err
		}
		c.tx = &drvTx{c: c, odbcTx: dt}
		return c.tx, nil
	}
	for i, q := range stmts {
		if err := c.execRaw(ctx, q); err != nil {
			if i > 0 {
				c.bad = true // SET TRANSACTION applies to the next transaction
			}
			if err == errLost {
				err = driver.ErrBadConn
			}
			return nil, fmt.Errorf("pooldriver: odbc: %s: %w", q, err)
		}
	}
	c.tx = &drvTx{c: c}
	return c.tx, nil
}

// execRaw runs a statement of the dialect's own.
func (c *drvConn) execRaw(ctx context.Context, query string) error {
	_, err := c.ExecContext(ctx, query, nil)
	return err
}

// queryRow runs a statement of the dialect's own and returns its first row
// with every column as a string ("" for NULL).
func (c *drvConn) queryRow(ctx context.Context, query string, args ...driver.Value) ([]string, error) {
	var all [][]string
	err := c.queryRows(ctx, query, func(row []string) { all = append(all, row) }, args...)
	if err != nil {
		return nil, err
	}
	if len(all) == 0 {
		return nil, fmt.Errorf("%s: no row", query)
	}
	return all[0], nil
}

func (c *drvConn) queryRows(ctx context.Context, query string, f func([]string), args ...driver.Value) error {
	nv := make([]driver.NamedValue, len(args))
	for i, a := range args {
		nv[i] = driver.NamedValue{Ordinal: i + 1, Value: a}
	}
	rows, err := c.QueryContext(ctx, query, nv)
	if err != nil {
		return err
	}
	defer func() { _ = rows.Close() }()
	dest := make([]driver.Value, len(rows.Columns()))
	for {
		if err := rows.Next(dest); err == io.EOF {
			return nil
		} else if err != nil {
			return c.check(err, true)
		}
		row := make([]string, len(dest))
		for i, v := range dest {
			switch v := v.(type) {
			case nil:
			case []byte:
				row[i] = string(v)
			default:
				row[i] = fmt.Sprint(v)
			}
		}
		f(row)
	}
}

// Close closes the connection; the odbc driver rolls back a transaction it
// began itself.
func (c *drvConn) Close() error { return c.oc.Close() }

// drvStmt is a prepared statement whose errors go through drvConn.check.
type drvStmt struct {
	c *drvConn
	s driver.Stmt
}

var _ driver.Stmt = (*drvStmt)(nil)

func (s *drvStmt) Close() error  { return s.s.Close() }
func (s *drvStmt) NumInput() int { return s.s.NumInput() }

// Exec runs the statement; the odbc driver cannot interrupt it.
func (s *drvStmt) Exec(args []driver.Value) (driver.Result, error) {
	if s.c.bad {
		return nil, driver.ErrBadConn
	}
	res, err := s.s.Exec(args) //nolint:staticcheck // the odbc driver has nothing newer
	return res, s.c.check(err, true)
}

func (s *drvStmt) exec(args []driver.NamedValue) (driver.Result, error) {
	vals, err := values(args)
	if err != nil {
		return nil, err
	}
	return s.Exec(vals)
}

// Query runs the statement; the odbc driver cannot interrupt it.
func (s *drvStmt) Query(args []driver.Value) (driver.Rows, error) {
	if s.c.bad {
		return nil, driver.ErrBadConn
	}
	rows, err := s.s.Query(args) //nolint:staticcheck // the odbc driver has nothing newer
	return rows, s.c.check(err, true)
}

func values(args []driver.NamedValue) ([]driver.Value, error) {
	vals := make([]driver.Value, len(args))
	for i, a := range args {
		if a.Name != "" {
			return nil, fmt.Errorf("pooldriver: odbc: named parameters are not supported ($%s)", a.Name)
		}
		vals[i] = a.Value
	}
	return vals, nil
}

// drvTx is a transaction begun with drvConn.BeginTx: by SQL (odbcTx nil),
// or by the odbc driver turning autocommit off.
type drvTx struct {
	c      *drvConn
	odbcTx driver.Tx
}

var _ driver.Tx = (*drvTx)(nil)

var errTxDone = errors.New("pooldriver: odbc: the transaction has already been committed or rolled back")

// Commit commits. A lost connection is never driver.ErrBadConn here: the
// commit may have happened.
func (t *drvTx) Commit() error { return t.end(true) }

// Rollback rolls back.
func (t *drvTx) Rollback() error { return t.end(false) }

func (t *drvTx) end(commit bool) error {
	c := t.c
	if c.tx != t {
		return errTxDone
	}
	c.tx = nil
	var err error
	switch {
	case c.bad:
		return errLost
	case t.odbcTx != nil && commit:
		err = t.odbcTx.Commit()
	case t.odbcTx != nil:
		err = t.odbcTx.Rollback()
	case commit:
		err = c.execRaw(context.Background(), "COMMIT")
	default:
		err = c.execRaw(context.Background(), "ROLLBACK")
	}
	if t.odbcTx != nil && err != nil {
		c.bad = true // the odbc driver left autocommit in an unknown state
	}
	err = c.check(err, true)
	if errors.Is(err, driver.ErrBadConn) {
		err = errLost
	}
	return err
}
