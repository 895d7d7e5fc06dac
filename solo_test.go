package pooldriver

import (
	"context"
	"database/sql/driver"
	"errors"
	"strings"
	"testing"

	"github.com/pooldriver/pooldriver/internal/fakedb"
)

// TestSoloRowsLock: the rows of a hold's first query outside any task hold
// no lock on the physical connection (nothing else can reach it), and the
// hold's next operation while they are open takes it for them, before it
// could let a task reach the connection; the rows' Close releases exactly
// what was taken. A first query in a task takes the lock at once.
func TestSoloRowsLock(t *testing.T) {
	name := strings.ReplaceAll(t.Name(), "/", "_")
	srv := fakedb.NewServer(name)
	defer srv.Close()
	c := New("fake://" + name + "?pool_max_conns=1")
	if err := c.Err(); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	bg := context.Background()
	tctx, end := WithTask(bg)
	defer end()
	dc, err := c.Connect(bg)
	if err != nil {
		t.Fatal(err)
	}
	l := dc.(*conn)
	defer l.Close()
	for _, tc := range []struct {
		name  string
		first context.Context // the query's
		next  func() error    // while the rows are open, or nil
		held  bool            // the lock is held while the rows are open, after next
	}{
		{"alone", bg, nil, false},
		{"exec in a task", bg, func() error { _, err := l.ExecContext(tctx, "SET a b", nil); return err }, true},
		{"exec", bg, func() error { _, err := l.ExecContext(bg, "INSERT s 1", nil); return err }, true},
		{"query", bg, func() error { _, err := l.QueryContext(bg, "SELECT 1", nil); return err }, true},
		{"begin in a task", bg, func() error { _, err := l.BeginTx(tctx, driver.TxOptions{}); return err }, true},
		{"ping", bg, func() error { return l.Ping(bg) }, true},
		{"first query in a task", tctx, nil, true},
	} {
		r, err := l.QueryContext(tc.first, "SELECT 3", nil)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		pc := l.pc
		if tc.next != nil {
			if pc.Claimed() || !(l.state == holdSoloRows) {
				t.Fatalf("%s: the first query's rows: locked %t, solo %t; want false, true", tc.name, pc.Claimed(), (l.state == holdSoloRows))
			}
			if err := tc.next(); !errors.Is(err, fakedb.ErrBusy) {
				t.Fatalf("%s beside the rows: %v, want fakedb.ErrBusy", tc.name, err)
			}
		}
		if got := pc.Claimed(); got != tc.held || (l.state == holdSoloRows) == tc.held {
			t.Fatalf("%s: rows open: locked %t, solo %t; want %t, %t", tc.name, got, (l.state == holdSoloRows), tc.held, !tc.held)
		}
		if err := r.Close(); err != nil {
			t.Fatalf("%s: Close: %v", tc.name, err)
		}
		if pc.Claimed() || (l.state == holdSoloRows) {
			t.Fatalf("%s: rows closed: locked %t, solo %t; want false, false", tc.name, pc.Claimed(), (l.state == holdSoloRows))
		}
		if !l.IsValid() {
			t.Fatalf("%s: the logical conn is no longer valid", tc.name)
		}
	}
}
