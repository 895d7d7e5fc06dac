package pooldriver

import (
	"context"
	"database/sql/driver"
	"errors"

	"github.com/pooldriver/pooldriver/pool"
)

// conn is the logical connection pooldriver hands to database/sql. It costs
// no I/O and holds no physical connection between holds (see lease.go).
//
// database/sql serializes every call on a conn, including those of its rows,
// statements and transaction, and IsValid, so its fields need no lock.
type conn struct {
	c *Connector
	// The hold's physical connection, while held is set. Between holds pc
	// still points at the last hold's connection (which may be anyone's
	// by then) and must not be used: it is left in place because most
	// holds take the same connection back, and an unchanged pointer costs
	// no write barrier.
	pc     *physConn
	held   bool
	shared bool  // pc is (or was) bound to a task: other holds may use it too
	taskTx bool  // a *sql.Tx of a task was begun in this hold: the task's end may reach pc
	lost   error // the hold lost pc: every later operation fails with this
	tx     *tx   // open transaction begun with BeginTx
	rows   int   // open result sets
	// The open rows are those of the hold's first operation, a query
	// that took no lock (see start): the hold's next operation takes it.
	rowsSolo bool
	closed   bool
	// The handle of the physical connection a hold of l last parked (see
	// physConn.park): the next hold takes it back without the pool's lock,
	// unless anyone took it meanwhile. It is not cleared when the hold
	// takes it back, which spares a pointer write, and its write barrier,
	// per hold: a handle someone else took is refused by Unpark, unless
	// its new holder parked it again, when taking it is as good as taking
	// any parked connection. It is cleared when a hold ends without
	// parking, so that Close, right after the hold's end, Returns only a
	// connection this logical conn parked.
	parked *pool.Resource[*physConn]
	// The wrapper of the hold's result set, reused from one query to the
	// next (see newRows).
	rowsBuf rows
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

// ExecContext runs query on the hold's physical connection.
func (l *conn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	var le lease
	err := l.start(ctx, opExec, &le)
	if err != nil {
		return nil, err
	}
	res, err := le.pc.exec(ctx, query, args)
	return res, l.finish(ctx, &le, opExec, query, err)
}

// QueryContext runs query; the rows keep the physical connection's lock
// until they are closed (those of a hold's first query outside any task
// only from the hold's next operation on: see start).
func (l *conn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	var le lease
	err := l.start(ctx, opStmt, &le)
	if err != nil {
		return nil, err
	}
	rows, err := le.pc.query(ctx, query, args)
	return l.openRows(ctx, le, rows, query, err)
}

// openRows wraps the rows a query returned, or finishes the query that
// failed.
func (l *conn) openRows(ctx context.Context, le lease, rows driver.Rows, query string, err error) (driver.Rows, error) {
	if err != nil {
		return nil, l.finish(ctx, &le, opStmt, query, err)
	}
	r := newRows(l, le, rows, query)
	_ = l.finish(ctx, &le, opOpenRows, query, nil) // nil: rows change no state until they close
	return r, nil
}

// BeginTx begins a transaction on the hold's physical connection, which
// never has another transaction open (see pick).
func (l *conn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	var le lease
	err := l.start(ctx, opBegin, &le)
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
		return nil, l.finish(ctx, &le, opBegin, "", err)
	}
	x := &tx{l: l, pc: pc, drv: dtx, task: le.t, ctx: ctx}
	l.taskTx = l.taskTx || le.t != nil
	pc.setTx(txBegun, x)
	l.tx = x
	if le.t != nil && !le.t.addTx(x) {
		// The task ended meanwhile: its transaction must not outlive it.
		x.claim(txEndedByTask)
		if rerr := pc.rollback(x); rerr != nil {
			err = rerr
		} else {
			pc.c.stats.autoRollbacks.Add(1)
		}
		l.tx = nil
		if ferr := l.finish(ctx, &le, opBegin, "", err); ferr != nil {
			return nil, ferr
		}
		return nil, ErrTaskEnded
	}
	return x, l.finish(ctx, &le, opBegin, "", nil)
}

// PrepareContext prepares query on the hold's physical connection, which
// reports syntax errors and the number of parameters now, as database/sql
// users expect. The statement is prepared again on every other physical
// connection it later runs on (and cached there).
func (l *conn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	var le lease
	err := l.start(ctx, opPrepare, &le)
	if err != nil {
		return nil, err
	}
	s, err := le.pc.prepared(ctx, query)
	n := -1
	if err == nil {
		n = s.NumInput()
	}
	if err = l.finish(ctx, &le, opPrepare, query, err); err != nil {
		return nil, err
	}
	st := &stmt{l: l, query: query, numInput: n}
	st.ranOn(le.pc)
	return st, nil
}

// Ping checks the hold's physical connection.
func (l *conn) Ping(ctx context.Context) error {
	var le lease
	err := l.start(ctx, opPing, &le)
	if err != nil {
		return err
	}
	return l.finish(ctx, &le, opPing, "", le.pc.dc.Ping(ctx))
}

// CheckNamedValue accepts every argument as it is: no physical connection is
// chosen yet when database/sql asks, so the real driver's own checker runs
// on the chosen connection just before the statement (see
// physConn.convert), and every type the real driver accepts still works.
func (l *conn) CheckNamedValue(*driver.NamedValue) error { return nil }

// ResetSession is database/sql's hook before it reuses this conn. A logical
// conn has no session of its own: the hold that ended settled it.
func (l *conn) ResetSession(context.Context) error {
	if l.closed {
		return driver.ErrBadConn
	}
	return nil
}

// IsValid is called by database/sql exactly when it takes the conn back:
// the hold ends here.
func (l *conn) IsValid() bool {
	l.endHold()
	return !l.closed
}

// Close closes the logical conn, ending its hold. A transaction it still
// has is rolled back, never committed.
func (l *conn) Close() error {
	if l.closed {
		return nil
	}
	if x := l.tx; x != nil {
		_ = x.Rollback() // a connection it fails on is settled when the hold ends
	}
	l.closed = true
	l.endHold()
	if r := l.parked; r != nil {
		// database/sql closes a logical conn past its idle limit right
		// after the hold ended: the connection goes where everyone finds
		// it (and where it expires), not left parked for nobody.
		l.parked = nil
		r.Return() // nothing, unless it is still parked
	}
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
