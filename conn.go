package pooldriver

import (
	"context"
	"database/sql/driver"
	"errors"
)

// conn is the logical connection pooldriver hands to database/sql. It costs
// no I/O and holds no physical connection while idle: each operation finds
// one (see acquire) and lets it go when nothing pins it (see finish).
//
// database/sql serializes every call on a conn, including those of its rows,
// statements and transaction, so its fields need no lock.
type conn struct {
	c      *Connector
	tx     *tx       // open transaction begun with BeginTx
	rows   int       // open result sets
	rowsPC *physConn // the connection they are on
	spare  *rows     // a closed rows wrapper, for the next query
	closed bool
}

// spareRows keeps a closed rows wrapper for reuse.
func (l *conn) spareRows(r *rows) {
	if l.spare == nil {
		r.drv = nil
		l.spare = r
	}
}

var (
	_ driver.Conn               = (*conn)(nil)
	_ driver.ConnBeginTx        = (*conn)(nil)
	_ driver.ConnPrepareContext = (*conn)(nil)
	_ driver.ExecerContext      = (*conn)(nil)
	_ driver.QueryerContext     = (*conn)(nil)
	_ driver.Pinger             = (*conn)(nil)
	_ driver.SessionResetter    = (*conn)(nil)
	_ driver.Validator          = (*conn)(nil)
	_ driver.NamedValueChecker  = (*conn)(nil)
)

// ExecContext runs query on the physical connection the context and the
// conn's state choose.
func (l *conn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	le, err := l.acquire(ctx)
	if err != nil {
		return nil, err
	}
	res, err := le.pc.exec(ctx, query, args)
	le.pc.checkErr(err)
	le.pc.observe(ctx, query)
	if ferr := l.finish(le); err == nil {
		err = ferr
	}
	return res, lostSession(le, err)
}

// QueryContext runs query; the physical connection stays pinned to this conn
// (and bound to the task, if any) until the rows are closed.
func (l *conn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	le, err := l.acquire(ctx)
	if err != nil {
		return nil, err
	}
	rows, err := le.pc.query(ctx, query, args)
	return l.openRows(ctx, le, rows, query, err)
}

// openRows wraps the rows a query returned, or cleans up after its error.
func (l *conn) openRows(ctx context.Context, le lease, rows driver.Rows, query string, err error) (driver.Rows, error) {
	pc := le.pc
	if err != nil {
		pc.checkErr(err)
		pc.observe(ctx, query)
		l.finish(le)
		return nil, lostSession(le, err)
	}
	pc.mu.Lock()
	pc.rows++
	pc.mu.Unlock()
	l.rows++
	l.rowsPC = pc
	r := newRows(l, pc, rows, query)
	l.finish(le)
	return r, nil
}

// BeginTx begins a transaction; its physical connection stays pinned to this
// conn, and bound to the task if any, until Commit or Rollback.
func (l *conn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	le, err := l.acquire(ctx)
	if err != nil {
		return nil, err
	}
	pc := le.pc
	var dtx driver.Tx
	if pc.beginner != nil {
		dtx, err = pc.beginner.BeginTx(ctx, opts)
	} else if opts.Isolation != 0 || opts.ReadOnly {
		err = errors.New("pooldriver: the driver supports neither isolation levels nor read-only transactions")
	} else {
		dtx, err = pc.drv.Begin() //nolint:staticcheck // the driver offers nothing newer
	}
	if err != nil {
		pc.checkErr(err)
		pc.observe(ctx, "BEGIN")
		l.finish(le)
		return nil, lostSession(le, err)
	}
	x := &tx{l: l, pc: pc, drv: dtx, task: le.t}
	pc.mu.Lock()
	pc.tx = x
	pc.mu.Unlock()
	l.tx = x
	l.finish(le)
	return x, nil
}

// PrepareContext prepares query on a physical connection, which reports
// syntax errors and the number of parameters now, as database/sql users
// expect. The statement is prepared again on every other physical
// connection it later runs on (and cached there).
func (l *conn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	le, err := l.acquire(ctx)
	if err != nil {
		return nil, err
	}
	s, err := le.pc.prepared(ctx, query)
	n := -1
	if err == nil {
		n = s.NumInput()
	}
	le.pc.checkErr(err)
	l.finish(le)
	if err != nil {
		return nil, lostSession(le, err)
	}
	return &stmt{l: l, query: query, numInput: n}, nil
}

// Ping checks a physical connection: the task's, or one from the pool
// (opening one if none is idle).
func (l *conn) Ping(ctx context.Context) error {
	le, err := l.acquire(ctx)
	if err != nil {
		return err
	}
	err = le.pc.dc.Ping(ctx)
	le.pc.checkErr(err)
	l.finish(le)
	return lostSession(le, err)
}

// CheckNamedValue accepts every argument as it is: no physical connection is
// chosen yet when database/sql asks, so the real driver's own checker runs
// on the chosen connection just before the statement (see
// physConn.convert), and every type the real driver accepts still works.
func (l *conn) CheckNamedValue(*driver.NamedValue) error { return nil }

// ResetSession is database/sql's hook before it reuses this conn. A logical
// conn has no session of its own to reset.
func (l *conn) ResetSession(context.Context) error {
	if l.closed {
		return driver.ErrBadConn
	}
	return nil
}

// IsValid reports whether database/sql may keep this conn.
func (l *conn) IsValid() bool { return !l.closed }

// Close closes the logical conn. A transaction it still has is rolled back.
func (l *conn) Close() error {
	if l.closed {
		return nil
	}
	if x := l.tx; x != nil {
		x.Rollback()
	}
	l.closed = true
	return nil
}

// Prepare is PrepareContext without a context.
func (l *conn) Prepare(query string) (driver.Stmt, error) {
	return l.PrepareContext(context.Background(), query)
}

// Begin is BeginTx without a context or options.
func (l *conn) Begin() (driver.Tx, error) {
	return l.BeginTx(context.Background(), driver.TxOptions{})
}
