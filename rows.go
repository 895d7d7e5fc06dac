package pooldriver

import (
	"context"
	"database/sql/driver"
	"io"
	"reflect"
)

// rows wraps the real driver's rows. It pins its physical connection (and
// holds its lock) until closed. It implements every optional Rows interface;
// where the real rows lack one it answers what database/sql assumes when the
// interface is missing, so wrapping changes nothing.
type rows struct {
	l      *conn
	pc     *physConn
	drv    driver.Rows
	query  string
	closed bool
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

// newRows wraps drv, reusing the logical conn's spare wrapper if it has one:
// database/sql never touches a driver's rows after closing them.
func newRows(l *conn, pc *physConn, drv driver.Rows, query string) *rows {
	r := l.spare
	if r == nil {
		r = new(rows)
	}
	l.spare = nil
	*r = rows{l: l, pc: pc, drv: drv, query: query}
	return r
}

func (r *rows) Columns() []string { return r.drv.Columns() }

func (r *rows) Next(dest []driver.Value) error {
	err := r.drv.Next(dest)
	if err != nil && err != io.EOF {
		r.pc.checkErr(err)
	}
	return err
}

// Close closes the real rows and lets the physical connection go if nothing
// else pins it.
func (r *rows) Close() error {
	if r.closed {
		return nil
	}
	r.closed = true
	err := r.drv.Close()
	pc, l := r.pc, r.l
	pc.checkErr(err)
	pc.mu.Lock()
	pc.rows--
	pc.mu.Unlock()
	l.rows--
	if l.rows == 0 {
		l.rowsPC = nil
	}
	// The statement is over only now: ask about the transaction state. No
	// deadline of ours: the dialects ask the server only after statements
	// that can change it, which a query returning rows seldom is, and a
	// timer here would cost more than the rest of the query's overhead.
	pc.observe(context.Background(), r.query)
	l.spareRows(r)
	if ferr := l.finish(lease{pc: pc, locked: true}); err == nil {
		err = ferr
	}
	return err
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
