package fakedb

import (
	"context"
	"database/sql/driver"
	"sync"
	"sync/atomic"

	"github.com/pooldriver/pooldriver/dialects"
)

// Conn states, in Conn.state.
const (
	stateOK     int32 = iota
	stateBroken       // BreakAll: the next call finds out
	stateKilled       // KillAll: the next statement finds out
	stateDead         // broken or killed, and found out
	stateClosed       // Close was called
)

// txKind says how the open transaction was begun.
type txKind uint8

const (
	txNone   txKind = iota
	txDriver        // BeginTx
	txRaw           // a BEGIN statement
)

// txEnd says how a transaction ended, for the counters.
type txEnd uint8

const (
	endCommit txEnd = iota
	endRollback
	endDisconnect
)

// savepoint marks how many rows a transaction had buffered when it took
// the savepoint called name.
type savepoint struct {
	name string
	rows int
}

// pendingRow is an INSERT buffered in a transaction.
type pendingRow struct {
	table string
	v     int64
}

// Conn is one session on a [Server]: the driver.Conn that Connect, the
// connector and [Dialect] connections return. Besides the driver
// interfaces it offers inspection methods for tests, which are safe to call
// from any goroutine at any time.
type Conn struct {
	srv  *Server
	id   int64
	user string
	app  string

	busy  atomic.Int32 // methods running now; more than 1 is an overlap
	state atomic.Int32 // stateOK...stateClosed
	sent  atomic.Int64 // statements that reached the server, for Written

	// mu is held only briefly, never while a statement waits; taken
	// before Server.mu.
	mu       sync.Mutex // protects the following fields
	rows     *rows      // the open result set, if any
	tx       txKind
	txGen    uint64 // incremented at each begin; identifies a driver.Tx
	readOnly bool   // the transaction refuses INSERT
	failed   bool   // the transaction failed; only ROLLBACK/COMMIT run
	pending  []pendingRow
	// savepoints are the transaction's, oldest first.
	savepoints []savepoint
	vars       map[string]string
	temps      map[string]struct{}
}

var (
	_ driver.Conn               = (*Conn)(nil)
	_ driver.ConnBeginTx        = (*Conn)(nil)
	_ driver.ConnPrepareContext = (*Conn)(nil)
	_ driver.ExecerContext      = (*Conn)(nil)
	_ driver.QueryerContext     = (*Conn)(nil)
	_ driver.Pinger             = (*Conn)(nil)
	_ driver.SessionResetter    = (*Conn)(nil)
	_ driver.Validator          = (*Conn)(nil)
	_ driver.NamedValueChecker  = (*Conn)(nil)
)

// enter marks the conn busy for one method call, counting an overlap if
// another call is running; exit ends the call.
func (c *Conn) enter() {
	if c.busy.Add(1) > 1 {
		c.srv.stats.overlaps.Add(1)
	}
}

func (c *Conn) exit() { c.busy.Add(-1) }

// check reports whether the conn can talk to the server. A broken or killed
// conn finds out here: it dies, and the server rolls its transaction back.
// A killed conn fails a statement with ErrKilled; anything else that finds
// the conn dead gets driver.ErrBadConn.
func (c *Conn) check(statement bool) error {
	switch st := c.state.Load(); st {
	case stateOK:
		return nil
	case stateClosed:
		return ErrClosed
	case stateBroken, stateKilled:
		if c.state.CompareAndSwap(st, stateDead) {
			c.abandon()
			if st == stateKilled && statement {
				return ErrKilled
			}
		}
	}
	return driver.ErrBadConn
}

// abandon drops the session's server-side state after the connection is
// gone.
func (c *Conn) abandon() {
	c.mu.Lock()
	c.endTxLocked(endDisconnect)
	c.rows = nil
	c.mu.Unlock()
}

// Close closes the conn. The server rolls back its open transaction.
// Closing twice is a no-op.
func (c *Conn) Close() error {
	c.enter()
	defer c.exit()
	if c.state.Swap(stateClosed) == stateClosed {
		return nil
	}
	c.abandon()
	s := c.srv
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
	s.stats.closes.Add(1)
	s.stats.open.Add(-1)
	return nil
}

// IsValid implements driver.Validator: false once the conn is closed or
// has found out that it is broken or killed.
func (c *Conn) IsValid() bool {
	st := c.state.Load()
	return st != stateDead && st != stateClosed
}

// Ping implements driver.Pinger.
func (c *Conn) Ping(ctx context.Context) error {
	if f := c.srv.onPing.Load(); f != nil {
		(*f)()
	}
	c.enter()
	defer c.exit()
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := c.check(false); err != nil {
		return err
	}
	c.mu.Lock()
	busy := c.rows != nil
	c.mu.Unlock()
	if busy {
		return ErrBusy
	}
	c.srv.stats.pings.Add(1)
	return nil
}

// ResetSession implements driver.SessionResetter: it clears session
// variables and temporary tables. It refuses to run inside a transaction
// (it never rolls back) and returns driver.ErrBadConn on a dead conn.
func (c *Conn) ResetSession(ctx context.Context) error {
	c.enter()
	defer c.exit()
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := c.check(false); err != nil {
		return driver.ErrBadConn
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.rows != nil:
		return ErrBusy
	case c.tx != txNone:
		return ErrResetInTx
	}
	clear(c.vars)
	clear(c.temps)
	c.srv.stats.resets.Add(1)
	return nil
}

// CheckNamedValue implements driver.NamedValueChecker: it accepts nil,
// int64, float64, bool, []byte, string, time.Time and [Point], and returns
// driver.ErrSkip for anything else so that database/sql's default
// converter applies.
func (c *Conn) CheckNamedValue(nv *driver.NamedValue) error { return checkNamedValue(nv) }

// ExecContext implements driver.ExecerContext.
func (c *Conn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	c.enter()
	defer c.exit()
	cmd, perr := parse(query)
	res, _, err := c.run(ctx, cmd, perr, args, false)
	return res, err
}

// QueryContext implements driver.QueryerContext. A statement that returns
// rows leaves the conn busy until the rows are closed or read to the end.
func (c *Conn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	c.enter()
	defer c.exit()
	cmd, perr := parse(query)
	_, r, err := c.run(ctx, cmd, perr, args, true)
	return r, err
}

// PrepareContext implements driver.ConnPrepareContext. The statement is
// parsed now and run by the returned driver.Stmt.
func (c *Conn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	c.enter()
	defer c.exit()
	if err := c.admit(ctx, false); err != nil {
		return nil, err
	}
	cmd, err := parse(query)
	if err != nil {
		c.failTx()
		return nil, err
	}
	c.srv.stats.prepares.Add(1)
	return &stmt{c: c, cmd: cmd}, nil
}

// Prepare implements driver.Conn.
func (c *Conn) Prepare(query string) (driver.Stmt, error) {
	return c.PrepareContext(context.Background(), query)
}

// Begin implements driver.Conn.
func (c *Conn) Begin() (driver.Tx, error) {
	return c.BeginTx(context.Background(), driver.TxOptions{})
}

// admit runs the checks every statement passes before the server sees it:
// context, liveness, no open result set, no failed transaction (unless the
// statement ends the transaction).
func (c *Conn) admit(ctx context.Context, endsTx bool) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := c.check(true); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.rows != nil:
		return ErrBusy
	case c.failed && !endsTx:
		return ErrTxAborted
	}
	return nil
}

// failTx marks the open transaction, if any, failed.
func (c *Conn) failTx() {
	c.mu.Lock()
	if c.tx != txNone {
		c.failed = true
	}
	c.mu.Unlock()
}

// ID returns the conn's ID, unique on its server, as CONNID reports it.
func (c *Conn) ID() int64 { return c.id }

// User returns the user the conn logged in as ("" through the connector).
func (c *Conn) User() string { return c.user }

// App returns the DSN's app parameter ("" if none).
func (c *Conn) App() string { return c.app }

// Server returns the conn's server.
func (c *Conn) Server() *Server { return c.srv }

// Session returns the session variable name and whether it is set.
func (c *Conn) Session(name string) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.vars[name]
	return v, ok
}

// HasTempTable reports whether the session has the temporary table name.
func (c *Conn) HasTempTable(name string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.temps[name]
	return ok
}

// InResultSet reports whether a result set is open on the conn.
func (c *Conn) InResultSet() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.rows != nil
}

// TxStatus reports the conn's transaction state, as the server knows it.
func (c *Conn) TxStatus() dialects.TxStatus {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.tx == txNone:
		return dialects.TxIdle
	case c.failed:
		return dialects.TxFailed
	}
	return dialects.TxActive
}
