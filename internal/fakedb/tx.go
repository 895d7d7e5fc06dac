package fakedb

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"strconv"
	"strings"
)

// BeginTx implements driver.ConnBeginTx. It honours opts.ReadOnly (INSERT
// fails with [ErrReadOnly]) and accepts the default, read committed and
// serializable isolation levels only. A transaction opened by a raw BEGIN
// makes it fail with [ErrInTx].
func (c *Conn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	c.enter()
	defer c.exit()
	if err := c.admit(ctx, false); err != nil {
		return nil, err
	}
	switch sql.IsolationLevel(opts.Isolation) {
	case sql.LevelDefault, sql.LevelReadCommitted, sql.LevelSerializable:
	default:
		return nil, errString("fakedb: unsupported isolation level " + strconv.Itoa(int(opts.Isolation)))
	}
	gen, err := c.begin(txDriver, opts.ReadOnly)
	if err != nil {
		c.failTx()
		return nil, err
	}
	c.srv.stats.begins.Add(1)
	return &tx{c: c, gen: gen}, nil
}

// begin opens a transaction and returns its generation.
func (c *Conn) begin(kind txKind, readOnly bool) (uint64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.tx != txNone {
		return 0, ErrInTx
	}
	c.tx, c.readOnly, c.failed = kind, readOnly, false
	c.txGen++
	c.srv.stats.openTx.Add(1)
	return c.txGen, nil
}

// endTxLocked ends the open transaction, if any, applying its rows on
// commit. c.mu must be held.
func (c *Conn) endTxLocked(how txEnd) {
	if c.tx == txNone {
		return
	}
	st := &c.srv.stats
	switch how {
	case endCommit:
		s := c.srv
		s.mu.Lock()
		for _, p := range c.pending {
			s.tables[p.table] = append(s.tables[p.table], p.v)
		}
		s.mu.Unlock()
		st.commits.Add(1)
	case endRollback:
		st.rollbacks.Add(1)
	case endDisconnect:
		st.disconnectRollbacks.Add(1)
	}
	clear(c.pending) // drop the table names, which pin query strings
	c.pending = c.pending[:0]
	c.savepoints = c.savepoints[:0]
	c.tx, c.readOnly, c.failed = txNone, false, false
	st.openTx.Add(-1)
}

// tx is the driver.Tx of a transaction begun with BeginTx.
type tx struct {
	c   *Conn
	gen uint64 // the conn's txGen when it began
}

var _ driver.Tx = (*tx)(nil)

// Commit commits; a failed transaction is rolled back instead and Commit
// returns [ErrTxRolledBack].
func (t *tx) Commit() error { return t.end(endCommit) }

// Rollback rolls back.
func (t *tx) Rollback() error { return t.end(endRollback) }

func (t *tx) end(how txEnd) error {
	c := t.c
	c.enter()
	defer c.exit()
	if err := c.check(true); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.rows != nil:
		return ErrBusy
	case c.tx == txNone || c.txGen != t.gen:
		return ErrTxDone
	case how == endCommit && c.failed:
		c.endTxLocked(endRollback)
		return ErrTxRolledBack
	}
	c.endTxLocked(how)
	return nil
}

// savepoint runs SAVEPOINT, RELEASE SAVEPOINT or ROLLBACK TO SAVEPOINT
// name, as PostgreSQL does: only inside a transaction (in a failed one,
// only ROLLBACK TO, as exec admits); a name used again
// hides the older savepoint; RELEASE drops the newest of that name and
// those after it; ROLLBACK TO drops the rows inserted since and the
// savepoints after it, keeps the savepoint, and ends a failure.
func (c *Conn) savepoint(o op, name string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.tx == txNone {
		return ErrNoTx
	}
	if o == opSavepoint {
		c.savepoints = append(c.savepoints, savepoint{name: name, rows: len(c.pending)})
		return nil
	}
	i := len(c.savepoints) - 1
	for i >= 0 && !strings.EqualFold(c.savepoints[i].name, name) {
		i--
	}
	if i < 0 {
		c.failed = true
		return errString("fakedb: savepoint " + strconv.Quote(name) + " does not exist")
	}
	if o == opRelease {
		c.savepoints = c.savepoints[:i]
		return nil
	}
	sp := c.savepoints[i]
	clear(c.pending[sp.rows:])
	c.pending = c.pending[:sp.rows]
	c.savepoints = c.savepoints[:i+1]
	c.failed = false
	return nil
}
