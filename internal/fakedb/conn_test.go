package fakedb

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"io"
	"strings"
	"testing"
	"time"
)

func TestOverlapDetected(t *testing.T) {
	s := newServer(t)
	c := connect(t, s)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := c.ExecContext(ctx, "SLEEP 1h", nil)
		done <- err
	}()
	waitFor(t, "the SLEEP to start", func() bool { return c.busy.Load() == 1 && s.Stats().Execs == 1 })
	exec(t, c, "SELECT 1") // runs anyway: the fake counts, it does not block
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("SLEEP: %v", err)
	}
	if got := s.Stats().Overlaps; got != 1 {
		t.Fatalf("Overlaps = %d, want 1", got)
	}
}

func TestNoOverlapInSequentialUse(t *testing.T) {
	s := newServer(t)
	c := connect(t, s)
	exec(t, c, "INSERT t 1")
	queryAll(t, c, "MULTI")
	tx, err := c.BeginTx(context.Background(), driver.TxOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := c.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := c.ResetSession(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := s.Stats().Overlaps; got != 0 {
		t.Fatalf("Overlaps = %d", got)
	}
}

func TestRowsStreamAndBusy(t *testing.T) {
	s := newServer(t)
	c := connect(t, s)
	r, err := c.QueryContext(context.Background(), "SELECT ?", nv(int64(3)))
	if err != nil {
		t.Fatal(err)
	}
	if cols := r.Columns(); strings.Join(cols, ",") != "n,s" {
		t.Fatalf("columns %v", cols)
	}
	tn := r.(driver.RowsColumnTypeDatabaseTypeName)
	if tn.ColumnTypeDatabaseTypeName(0) != "INT8" || tn.ColumnTypeDatabaseTypeName(1) != "TEXT" {
		t.Fatal("bad column types")
	}
	dest := make([]driver.Value, 2)
	if err := r.Next(dest); err != nil || dest[0] != int64(1) || dest[1] != "1" {
		t.Fatalf("row 1: %v %v", dest, err)
	}
	if !c.InResultSet() {
		t.Fatal("result set not open")
	}
	wantErr(t, execErr(c, "SELECT 1"), ErrBusy)
	_, err = c.PrepareContext(context.Background(), "SELECT 1")
	wantErr(t, err, ErrBusy)
	_, err = c.BeginTx(context.Background(), driver.TxOptions{})
	wantErr(t, err, ErrBusy)
	wantErr(t, c.Ping(context.Background()), ErrBusy)
	wantErr(t, c.ResetSession(context.Background()), ErrBusy)

	for range 2 {
		if err := r.Next(dest); err != nil {
			t.Fatal(err)
		}
	}
	if !c.InResultSet() {
		t.Fatal("result set released before the end was read")
	}
	if err := r.Next(dest); err != io.EOF {
		t.Fatalf("after last row: %v", err)
	}
	if c.InResultSet() {
		t.Fatal("result set still open after EOF")
	}
	exec(t, c, "SELECT 1")
	r.Close()

	// Close releases too.
	r, _ = c.QueryContext(context.Background(), "SELECT 1000000", nil)
	r.Close()
	exec(t, c, "SELECT 1")
	if st := s.Stats(); st.Overlaps != 0 || st.Queries != 2 || st.Execs != 2 {
		t.Fatalf("stats %+v", st)
	}
}

func TestMulti(t *testing.T) {
	c := connect(t, newServer(t))
	r, err := c.QueryContext(context.Background(), "multi", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	nrs := r.(driver.RowsNextResultSet)
	dest := make([]driver.Value, 2)
	for r.Next(dest) == nil {
	}
	if !nrs.HasNextResultSet() || !c.InResultSet() {
		t.Fatal("no second result set, or released early")
	}
	if err := nrs.NextResultSet(); err != nil {
		t.Fatal(err)
	}
	if r.Columns()[0] != "x" {
		t.Fatalf("columns %v", r.Columns())
	}
	if err := r.Next(dest); err != nil || dest[0] != "second" {
		t.Fatalf("second set: %v %v", dest, err)
	}
	if r.Next(dest) != io.EOF || nrs.HasNextResultSet() || c.InResultSet() {
		t.Fatal("second set did not end cleanly")
	}
	if nrs.NextResultSet() != io.EOF {
		t.Fatal("a third result set")
	}
}

func TestSessionAndReset(t *testing.T) {
	s := newServer(t)
	c := connect(t, s)
	if v := queryOne(t, c, "GET a"); v != nil {
		t.Fatalf("unset variable: %v", v)
	}
	exec(t, c, "SET a hello world")
	exec(t, c, "SET b ?", int64(7))
	exec(t, c, "TEMP tmp")
	if v := queryOne(t, c, "GET a"); v != "hello world" {
		t.Fatalf("GET a = %v", v)
	}
	if v, ok := c.Session("b"); !ok || v != "7" {
		t.Fatalf("Session(b) = %q, %v", v, ok)
	}
	if queryOne(t, c, "HASTEMP tmp") != int64(1) || !c.HasTempTable("tmp") {
		t.Fatal("temp table missing")
	}

	exec(t, c, "BEGIN")
	wantErr(t, c.ResetSession(context.Background()), ErrResetInTx)
	if _, ok := c.Session("a"); !ok {
		t.Fatal("failed reset cleared the session")
	}
	exec(t, c, "ROLLBACK")
	if err := c.ResetSession(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, ok := c.Session("a"); ok || c.HasTempTable("tmp") {
		t.Fatal("reset left session state")
	}
	if queryOne(t, c, "HASTEMP tmp") != int64(0) {
		t.Fatal("temp table survived reset")
	}
	if s.Stats().Resets != 1 {
		t.Fatalf("Resets = %d", s.Stats().Resets)
	}
}

func TestStatements(t *testing.T) {
	s := newServer(t)
	c := connect(t, s)
	if v := queryOne(t, c, "CONNID"); v != c.ID() {
		t.Fatalf("CONNID = %v, want %d", v, c.ID())
	}
	if v := queryOne(t, c, "ECHO word"); v != "word" {
		t.Fatalf("ECHO literal = %v", v)
	}
	p := Point{1, 2}
	if v := queryOne(t, c, "ECHO ?", p); v != p {
		t.Fatalf("ECHO ? = %v", v)
	}
	exec(t, c, "PING")
	exec(t, c, "START TRANSACTION")
	exec(t, c, "COMMIT;")
	exec(t, c, "SLEEP 1ns")
	exec(t, c, "SLEEP ?", int64(1))
	res, err := c.ExecContext(context.Background(), "SELECT 5", nil)
	if n, _ := res.RowsAffected(); err != nil || n != 5 {
		t.Fatalf("Exec SELECT 5: %d, %v", n, err)
	}
	// Query of a statement without rows: an empty result, conn not held.
	r, err := c.QueryContext(context.Background(), "INSERT t 1", nil)
	if err != nil || r.Next(nil) != io.EOF || c.InResultSet() {
		t.Fatalf("Query INSERT: %v", err)
	}
	r.Close()
	wantErr(t, execErr(c, "FAIL"), ErrFail)
	if st := s.Stats(); st.Pings != 1 || st.RawBegins != 1 || st.Commits != 1 {
		t.Fatalf("stats %+v", st)
	}
}

func TestStatementErrors(t *testing.T) {
	c := connect(t, newServer(t))
	for _, tc := range []struct {
		query string
		args  []any
		want  string
	}{
		{"FROB x", nil, `fakedb: syntax error at "FROB"`},
		{"", nil, "fakedb: syntax error at end of input"},
		{"SELECT", nil, "fakedb: syntax error at end of input"},
		{"SELECT 1 2", nil, `fakedb: syntax error at "2"`},
		{"SELECT x", nil, `fakedb: syntax error at "x"`},
		{"START WORK", nil, `fakedb: syntax error at "WORK"`},
		{"SLEEP soon", nil, `fakedb: syntax error at "soon"`},
		{"SELECT ?", nil, "fakedb: statement has more placeholders than the 0 arguments given"},
		{"SELECT 1", []any{int64(1)}, "fakedb: statement uses 0 arguments, 1 given"},
		{"SELECT ?", []any{"x"}, "fakedb: argument 1: want int64, got string"},
		{"SLEEP ?", []any{true}, "fakedb: argument 1: want duration, got bool"},
	} {
		err := execErr(c, tc.query, tc.args...)
		if err == nil || err.Error() != tc.want {
			t.Errorf("%q: error %v, want %q", tc.query, err, tc.want)
		}
	}
}

func TestSleepHonoursContext(t *testing.T) {
	c := connect(t, newServer(t))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
	defer cancel()
	_, err := c.ExecContext(ctx, "SLEEP 1h", nil)
	wantErr(t, err, context.DeadlineExceeded)
	_, err = c.ExecContext(ctx, "SELECT 1", nil) // context already over
	wantErr(t, err, context.DeadlineExceeded)
	exec(t, c, "SELECT 1")
}

func TestPreparedStatements(t *testing.T) {
	s := newServer(t)
	c := connect(t, s)
	_, err := c.PrepareContext(context.Background(), "NOPE")
	if err == nil || err.Error() != `fakedb: syntax error at "NOPE"` {
		t.Fatalf("prepare error %v", err)
	}
	st, err := c.PrepareContext(context.Background(), "INSERT t ?")
	if err != nil {
		t.Fatal(err)
	}
	if st.NumInput() != -1 {
		t.Fatal("NumInput")
	}
	for i := range 3 {
		if _, err := st.(driver.StmtExecContext).ExecContext(context.Background(), nv(int64(i))); err != nil {
			t.Fatal(err)
		}
	}
	q, _ := c.PrepareContext(context.Background(), "COUNT t")
	r, err := q.(driver.StmtQueryContext).QueryContext(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	dest := make([]driver.Value, 1)
	if err := r.Next(dest); err != nil || dest[0] != int64(3) {
		t.Fatalf("COUNT = %v, %v", dest[0], err)
	}
	r.Close()
	st.Close()
	st.Close()
	_, err = st.(driver.StmtExecContext).ExecContext(context.Background(), nv(int64(1)))
	if err == nil {
		t.Fatal("closed statement ran")
	}
	c.Close()
	_, err = q.(driver.StmtQueryContext).QueryContext(context.Background(), nil)
	wantErr(t, err, ErrClosed)
	q.Close()
	if got := s.Stats(); got.Prepares != 2 || got.StmtCloses != 2 {
		t.Fatalf("stats %+v", got)
	}
}

func TestCheckNamedValue(t *testing.T) {
	c := connect(t, newServer(t))
	for _, v := range []any{nil, int64(1), 1.5, true, []byte("x"), "x", time.Now(), Point{1, 2}} {
		if err := c.CheckNamedValue(&driver.NamedValue{Value: v}); err != nil {
			t.Errorf("%T: %v", v, err)
		}
	}
	for _, v := range []any{1, uint8(1), struct{}{}} {
		if err := c.CheckNamedValue(&driver.NamedValue{Value: v}); err != driver.ErrSkip {
			t.Errorf("%T: %v, want ErrSkip", v, err)
		}
	}
}

// TestDatabaseSQL runs the fake under plain database/sql.
func TestDatabaseSQL(t *testing.T) {
	s := newServer(t)
	db := sql.OpenDB(s.Connector())
	defer db.Close()
	var p Point
	if err := db.QueryRow("ECHO ?", Point{3, 4}).Scan(&p); err != nil || p != (Point{3, 4}) {
		t.Fatalf("ECHO Point: %v %v", p, err)
	}
	var n int
	if err := db.QueryRow("ECHO ?", 42).Scan(&n); err != nil || n != 42 {
		t.Fatalf("ECHO int: %v %v", n, err)
	}
	if _, err := db.Exec("ECHO ?", struct{}{}); err == nil {
		t.Fatal("database/sql accepted an unsupported type")
	}
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec("INSERT t ?", 1); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	rows, err := db.Query("SELECT 3")
	if err != nil {
		t.Fatal(err)
	}
	var sum int64
	for rows.Next() {
		var i int64
		var s string
		if err := rows.Scan(&i, &s); err != nil {
			t.Fatal(err)
		}
		sum += i
	}
	if rows.Err() != nil || sum != 6 {
		t.Fatalf("sum %d, %v", sum, rows.Err())
	}
	if got := s.Table("t"); len(got) != 1 || got[0] != 1 {
		t.Fatalf("table %v", got)
	}
	if st := s.Stats(); st.Overlaps != 0 || st.Begins != 1 || st.Commits != 1 {
		t.Fatalf("stats %+v", st)
	}
}
