package fakedb

import (
	"context"
	"database/sql/driver"
)

// run runs one parsed statement (perr: the parse error, if any) for Exec
// (query false) or Query. The caller has entered the conn.
func (c *Conn) run(ctx context.Context, cmd command, perr error, args []driver.NamedValue, query bool) (driver.Result, driver.Rows, error) {
	if err := c.admit(ctx, cmd.op == opCommit || cmd.op == opRollback || cmd.op == opRollbackTo); err != nil {
		return nil, nil, err
	}
	c.sent.Add(1)
	st := &c.srv.stats
	st.statements.Add(1)
	st.running.Add(1)
	defer st.running.Add(-1)
	if query {
		st.queries.Add(1)
	} else {
		st.execs.Add(1)
	}
	if perr != nil {
		c.failTx()
		return nil, nil, perr
	}
	res, r, err := c.execute(ctx, cmd, args, query)
	if err != nil {
		c.failTx()
		return nil, nil, err
	}
	if c.srv.takeLostReply() {
		c.state.Store(stateBroken)
		return nil, nil, driver.ErrBadConn
	}
	if r == nil && query {
		r = noRows{}
	}
	return res, r, nil
}

// Results that need no allocation.
var (
	affected0 driver.Result = driver.RowsAffected(0)
	affected1 driver.Result = driver.RowsAffected(1)
)

// execute does what cmd says. A statement returning rows opens a result
// set only for Query; for Exec it returns the count of rows it would have.
func (c *Conn) execute(ctx context.Context, cmd command, args []driver.NamedValue, query bool) (driver.Result, driver.Rows, error) {
	b := binder{args: args}
	switch cmd.op {
	case opSelect:
		n, err := b.int(cmd.a)
		if err != nil {
			return nil, nil, err
		}
		if err := b.done(); err != nil {
			return nil, nil, err
		}
		if !query {
			return driver.RowsAffected(n), nil, nil
		}
		return nil, c.openRows(&rows{c: c, cols: colsSelect, types: typesSelect, n: n}), nil

	case opMulti:
		if err := b.done(); err != nil {
			return nil, nil, err
		}
		if !query {
			return affected0, nil, nil
		}
		return nil, c.openRows(&rows{c: c, cols: colsSelect, types: typesSelect, n: 2, multi: true}), nil

	case opInsert:
		v, err := b.int(cmd.b)
		if err != nil {
			return nil, nil, err
		}
		if err := b.done(); err != nil {
			return nil, nil, err
		}
		return affected1, nil, c.insert(cmd.a, v)

	case opSet:
		v, err := b.string(cmd.b)
		if err != nil {
			return nil, nil, err
		}
		if err := b.done(); err != nil {
			return nil, nil, err
		}
		c.mu.Lock()
		if c.vars == nil {
			c.vars = map[string]string{}
		}
		c.vars[cmd.a] = v
		c.mu.Unlock()
		return affected0, nil, nil

	case opTemp:
		if err := b.done(); err != nil {
			return nil, nil, err
		}
		c.mu.Lock()
		if c.temps == nil {
			c.temps = map[string]struct{}{}
		}
		c.temps[cmd.a] = struct{}{}
		c.mu.Unlock()
		return affected0, nil, nil

	case opBegin:
		if err := b.done(); err != nil {
			return nil, nil, err
		}
		if _, err := c.begin(txRaw, false); err != nil {
			return nil, nil, err
		}
		c.srv.stats.rawBegins.Add(1)
		return affected0, nil, nil

	case opCommit, opRollback:
		if err := b.done(); err != nil {
			return nil, nil, err
		}
		c.mu.Lock()
		switch {
		case c.tx == txNone: // no-op, as PostgreSQL (which only warns)
		case cmd.op == opCommit && !c.failed:
			c.endTxLocked(endCommit)
		default: // ROLLBACK, or COMMIT of a failed tx: PostgreSQL rolls back without error
			c.endTxLocked(endRollback)
		}
		c.mu.Unlock()
		return affected0, nil, nil

	case opSavepoint, opRelease, opRollbackTo:
		if err := b.done(); err != nil {
			return nil, nil, err
		}
		return affected0, nil, c.savepoint(cmd.op, cmd.a)

	case opSleep:
		d, err := b.duration(cmd.a)
		if err != nil {
			return nil, nil, err
		}
		if err := b.done(); err != nil {
			return nil, nil, err
		}
		return affected0, nil, sleep(ctx, d)

	case opFail:
		if err := b.done(); err != nil {
			return nil, nil, err
		}
		return nil, nil, ErrFail

	case opPing:
		if err := b.done(); err != nil {
			return nil, nil, err
		}
		c.srv.stats.pings.Add(1)
		return affected0, nil, nil
	}

	// The rest return one row.
	var (
		v     driver.Value
		cols  []string
		types []string
	)
	switch cmd.op {
	case opCount:
		v, cols, types = c.count(cmd.a), colsCount, typesInt
	case opGet:
		c.mu.Lock()
		if s, ok := c.vars[cmd.a]; ok {
			v = s
		}
		c.mu.Unlock()
		cols, types = colsValue, typesText
	case opHasTemp:
		c.mu.Lock()
		_, ok := c.temps[cmd.a]
		c.mu.Unlock()
		v, cols, types = int64(0), colsExists, typesInt
		if ok {
			v = int64(1)
		}
	case opConnID:
		v, cols, types = c.id, colsConnID, typesInt
	case opEcho:
		var err error
		if v, err = b.value(cmd.a); err != nil {
			return nil, nil, err
		}
		cols, types = colsEcho, typeOf(v)
	default:
		return nil, nil, errString("fakedb: internal error: unknown op")
	}
	if err := b.done(); err != nil {
		return nil, nil, err
	}
	if !query {
		return affected1, nil, nil
	}
	return nil, c.openRows(&rows{c: c, cols: cols, types: types, n: 1, single: true, val: v}), nil
}

// insert adds v to table: to the transaction's buffer inside one, to the
// committed table outside.
func (c *Conn) insert(table string, v int64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.tx != txNone {
		if c.readOnly {
			return ErrReadOnly
		}
		c.pending = append(c.pending, pendingRow{table, v})
		return nil
	}
	s := c.srv
	s.mu.Lock()
	s.tables[table] = append(s.tables[table], v)
	s.mu.Unlock()
	return nil
}

// count returns the rows of table this session sees: committed ones and
// its own uncommitted ones.
func (c *Conn) count(table string) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.srv
	s.mu.Lock()
	n := int64(len(s.tables[table]))
	s.mu.Unlock()
	for _, p := range c.pending {
		if p.table == table {
			n++
		}
	}
	return n
}

// openRows makes r the conn's open result set.
func (c *Conn) openRows(r *rows) driver.Rows {
	c.mu.Lock()
	c.rows = r
	c.mu.Unlock()
	return r
}
