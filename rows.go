package pooldriver

import (
	"context"
	"database/sql/driver"
	"io"
	"reflect"
	"time"
)

// rows wraps the real driver's rows. It pins its physical connection (and
// holds its lock, but see holdSoloRows) until closed. It implements every optional Rows interface;
// where the real rows lack one it answers what database/sql assumes when the
// interface is missing, so wrapping changes nothing.
type rows struct {
	l      *conn
	le     lease // the query's lease: the lock the rows hold is released by Close
	drv    driver.Rows
	query  string
	closed bool
	cctx   *lazyTimeout // the context of what Close asks the server; nil until the first Close
}

var (
	_ driver.Rows                           = (*rows)(nil)
	_ driver.RowsNextResultSet              = (*rows)(nil)
	_ driver.RowsColumnTypeDatabaseTypeName = (*rows)(nil)
	_ driver.RowsColumnTypeLength           = (*rows)(nil)
	_ driver.RowsColumnTypeNullable         = (*rows)(nil)
	_ driver.RowsColumnTypePrecisionScale   = (*rows)(nil)
	_ driver.RowsColumnTypeScanType         = (*rows)(nil)
)

// newRows wraps drv, in l's own wrapper unless another result set of the
// hold still has it: database/sql never touches a driver's rows after
// closing them.
//
// The wrapper is reused, and filled only where it changes, because every
// pointer word written to the heap costs a write barrier while the garbage
// collector marks, which in an allocating loop is much of the time. A
// closed wrapper keeps its driver rows until the next query, as a
// driver's own reused rows would.
func newRows(l *conn, le lease, drv driver.Rows, query string) *rows {
	r := &l.rowsBuf
	if !r.closed {
		r = &rows{l: l}
	}
	r.closed = false
	if r.le.pc != le.pc || r.le.t != le.t {
		r.le = le
	} else {
		r.le.leaseFacts = le.leaseFacts // no pointer: no write barrier
	}
	r.drv = drv
	if r.query != query {
		r.query = query
	}
	return r
}

func (r *rows) Columns() []string { return r.drv.Columns() }

func (r *rows) Next(dest []driver.Value) error { return r.drv.Next(dest) }

// Close closes the real rows and finishes the query: only now is the
// statement over, so only now is its effect on the transaction and the
// session recorded, under the cleanup timeout (the dialects seldom ask the
// server anything after a query that returns rows, so the timer is made
// only if one does).
func (r *rows) Close() error {
	if r.closed {
		return nil
	}
	r.closed = true
	err := r.drv.Close()
	l := r.l
	if r.cctx == nil {
		r.cctx = new(lazyTimeout) // once per wrapper: see release
	}
	r.cctx.d = l.cleanupTimeout() // the rest is zero: see release
	// The second half of the query's operation (conn.query), whose lease
	// the rows kept: start ran when the query did.
	err = l.finish(r.cctx, &r.le, opCloseRows, r.query, err)
	if !r.cctx.release() {
		r.cctx = nil
	}
	return err
}

// lazyTimeout is a context that ends d after its first use: its timer is
// made only if somebody asks for its Done channel, Err or Deadline. Not
// safe for concurrent first use from several goroutines; the statement
// path uses it from one. Once used it is not written again (release): a
// driver may still read it from a goroutine of its own (go-sql-driver's
// watcher picks a statement's context up after the statement returned
// where its connection died under it).
type lazyTimeout struct {
	d      time.Duration
	ctx    context.Context
	cancel context.CancelFunc
}

func (c *lazyTimeout) get() context.Context {
	if c.ctx == nil {
		c.ctx, c.cancel = context.WithTimeout(context.Background(), c.d)
	}
	return c.ctx
}

func (c *lazyTimeout) Deadline() (time.Time, bool) { return c.get().Deadline() }
func (c *lazyTimeout) Done() <-chan struct{}       { return c.get().Done() }
func (c *lazyTimeout) Err() error                  { return c.get().Err() }
func (c *lazyTimeout) Value(key any) any           { return nil }

// release stops the timer, if one was made, and reports whether c may be
// used again: zero, where nobody used it; where somebody did, c is left
// as it is, ended, to whoever still holds it, and the caller makes a new
// one.
func (c *lazyTimeout) release() bool {
	if c.cancel != nil {
		c.cancel()
		return false
	}
	c.d = 0
	return true
}

func (r *rows) HasNextResultSet() bool {
	if n, ok := r.drv.(driver.RowsNextResultSet); ok {
		return n.HasNextResultSet()
	}
	return false
}

func (r *rows) NextResultSet() error {
	if n, ok := r.drv.(driver.RowsNextResultSet); ok {
		return n.NextResultSet()
	}
	return io.EOF
}

func (r *rows) ColumnTypeDatabaseTypeName(i int) string {
	if t, ok := r.drv.(driver.RowsColumnTypeDatabaseTypeName); ok {
		return t.ColumnTypeDatabaseTypeName(i)
	}
	return ""
}

func (r *rows) ColumnTypeLength(i int) (int64, bool) {
	if t, ok := r.drv.(driver.RowsColumnTypeLength); ok {
		return t.ColumnTypeLength(i)
	}
	return 0, false
}

func (r *rows) ColumnTypeNullable(i int) (nullable, ok bool) {
	if t, ok := r.drv.(driver.RowsColumnTypeNullable); ok {
		return t.ColumnTypeNullable(i)
	}
	return false, false
}

func (r *rows) ColumnTypePrecisionScale(i int) (precision, scale int64, ok bool) {
	if t, ok := r.drv.(driver.RowsColumnTypePrecisionScale); ok {
		return t.ColumnTypePrecisionScale(i)
	}
	return 0, 0, false
}

var anyType = reflect.TypeOf(new(any)).Elem()

func (r *rows) ColumnTypeScanType(i int) reflect.Type {
	if t, ok := r.drv.(driver.RowsColumnTypeScanType); ok {
		return t.ColumnTypeScanType(i)
	}
	return anyType
}
