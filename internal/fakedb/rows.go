package fakedb

import (
	"database/sql/driver"
	"io"
	"strconv"
	"time"
)

// Column names and database type names, shared by every result set.
var (
	colsSelect = []string{"n", "s"}
	colsCount  = []string{"count"}
	colsValue  = []string{"value"}
	colsExists = []string{"exists"}
	colsConnID = []string{"connid"}
	colsEcho   = []string{"echo"}
	colsX      = []string{"x"}

	typesSelect = []string{"INT8", "TEXT"}
	typesInt    = []string{"INT8"}
	typesText   = []string{"TEXT"}
	typesFloat  = []string{"FLOAT8"}
	typesBool   = []string{"BOOL"}
	typesBytes  = []string{"BYTEA"}
	typesTime   = []string{"TIMESTAMPTZ"}
	typesAny    = []string{"ANY"}
)

// typeOf returns the database type name of an ECHOed value.
func typeOf(v driver.Value) []string {
	switch v.(type) {
	case int64:
		return typesInt
	case string:
		return typesText
	case float64:
		return typesFloat
	case bool:
		return typesBool
	case []byte:
		return typesBytes
	case time.Time:
		return typesTime
	}
	return typesAny
}

// rows is an open result set. It produces its rows lazily and keeps its
// conn busy until it is closed or read to the end.
type rows struct {
	c      *Conn
	cols   []string
	types  []string
	n, i   int64        // rows in the set, rows returned so far
	single bool         // one row holding val; else SELECT rows (i, "i")
	val    driver.Value // the single row's value
	multi  bool         // a second result set follows
	closed bool
}

var (
	_ driver.Rows                           = (*rows)(nil)
	_ driver.RowsNextResultSet              = (*rows)(nil)
	_ driver.RowsColumnTypeDatabaseTypeName = (*rows)(nil)
)

func (r *rows) Columns() []string { return r.cols }

func (r *rows) ColumnTypeDatabaseTypeName(i int) string { return r.types[i] }

func (r *rows) Next(dest []driver.Value) error {
	r.c.enter()
	defer r.c.exit()
	if r.closed {
		return io.EOF
	}
	if err := r.c.check(true); err != nil {
		r.closed = true
		return err
	}
	if r.i >= r.n {
		if !r.multi {
			r.release()
		}
		return io.EOF
	}
	r.i++
	if r.single {
		dest[0] = r.val
	} else {
		dest[0] = r.i
		dest[1] = text(r.i)
	}
	return nil
}

func (r *rows) HasNextResultSet() bool { return r.multi }

// NextResultSet moves to MULTI's second result set: one row, x = "second".
func (r *rows) NextResultSet() error {
	r.c.enter()
	defer r.c.exit()
	if !r.multi || r.closed {
		return io.EOF
	}
	r.multi = false
	r.cols, r.types = colsX, typesText
	r.n, r.i, r.single, r.val = 1, 0, true, "second"
	return nil
}

func (r *rows) Close() error {
	r.c.enter()
	defer r.c.exit()
	if !r.closed {
		r.closed = true
		r.release()
	}
	return nil
}

// release frees the conn for other statements.
func (r *rows) release() {
	c := r.c
	c.mu.Lock()
	if c.rows == r {
		c.rows = nil
	}
	c.mu.Unlock()
}

// smallTexts holds the s column of the first SELECT rows already boxed:
// putting a string in an interface allocates, and SELECT 1 must not.
var smallTexts [256]driver.Value

func init() {
	for i := range smallTexts {
		smallTexts[i] = strconv.Itoa(i)
	}
}

// text returns the s column of row i.
func text(i int64) driver.Value {
	if i >= 0 && i < int64(len(smallTexts)) {
		return smallTexts[i]
	}
	return strconv.FormatInt(i, 10)
}

// noRows is the result of a Query whose statement returns no rows; it never
// holds the conn.
type noRows struct{}

func (noRows) Columns() []string              { return nil }
func (noRows) Close() error                   { return nil }
func (noRows) Next(dest []driver.Value) error { return io.EOF }
