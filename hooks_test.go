package pooldriver_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/pooldriver/pooldriver"
	"github.com/pooldriver/pooldriver/internal/fakedb"
)

// tagSession is an AfterConnect hook for the fake server: it sets the
// session variable tag, through the raw driver connection, and counts its
// calls.
func tagSession(calls *atomic.Int64) func(ctx context.Context, raw any) error {
	return func(ctx context.Context, raw any) error {
		calls.Add(1)
		_, err := raw.(*fakedb.Conn).ExecContext(ctx, "SET tag hooked", nil)
		return err
	}
}

func getVar(t *testing.T, q interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}, name string) string {
	t.Helper()
	var v sql.NullString
	if err := q.QueryRowContext(context.Background(), "GET "+name).Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v.String
}

// dirtySession changes the session of a connection in a *sql.Conn, which
// closes: the connection's session is reset.
func dirtySession(t *testing.T, db *sql.DB) {
	t.Helper()
	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(context.Background(), "SET x 1"); err != nil {
		t.Fatal(err)
	}
	if err := conn.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestAfterConnectOnNewAndResetConns: the hook prepares every new
// connection before its first statement, and again after a session reset,
// which would otherwise have undone what it set; what it set is not a
// change of the session (no reset after each use).
func TestAfterConnectOnNewAndResetConns(t *testing.T) {
	srv := newServer(t)
	var calls atomic.Int64
	db, c := newDB(t, srv, "pool_max_conns=1", pooldriver.WithAfterConnect(tagSession(&calls)))

	if got := getVar(t, db, "tag"); got != "hooked" {
		t.Fatalf("tag = %q on a new connection", got)
	}
	if calls.Load() != 1 || c.Stats().SessionResets != 0 {
		t.Fatalf("after a clean use: %d hook calls, %d resets", calls.Load(), c.Stats().SessionResets)
	}

	// A *sql.Conn dirties the session; its end resets it, off the
	// caller's path.
	dirtySession(t, db)
	pooldriver.WaitCleanups(c)
	if c.Stats().SessionResets != 1 || calls.Load() != 2 {
		t.Fatalf("after a reset: %d resets, %d hook calls, want 1 and 2", c.Stats().SessionResets, calls.Load())
	}
	if got := getVar(t, db, "tag"); got != "hooked" {
		t.Fatalf("tag = %q after the reset", got)
	}
	if got := getVar(t, db, "x"); got != "" {
		t.Fatalf("x = %q survived the reset", got)
	}
	if st := c.Stats(); st.Created != 1 || srv.Stats().Connects != 1 {
		t.Fatalf("the connection was replaced: %+v", st)
	}
}

// TestAfterConnectErrorFailsConnect: a hook error (or panic) fails the
// statement that needed the connection, with the hook's error, and the
// connection is closed, never used.
func TestAfterConnectErrorFailsConnect(t *testing.T) {
	errHook := errors.New("no such type: mood")
	for _, tc := range []struct {
		name string
		hook func(ctx context.Context, raw any) error
		want string
	}{
		{"error", func(context.Context, any) error { return errHook }, "AfterConnect hook: no such type: mood"},
		{"panic", func(context.Context, any) error { panic("boom") }, "AfterConnect hook: panicked: boom"},
		{"open transaction", func(ctx context.Context, raw any) error {
			_, err := raw.(*fakedb.Conn).ExecContext(ctx, "BEGIN", nil)
			return err
		}, "the AfterConnect hook left a transaction open"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newServer(t)
			db, c := newDB(t, srv, "", pooldriver.WithAfterConnect(tc.hook))
			_, err := db.Exec("INSERT t 1")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error saying %q", err, tc.want)
			}
			if tc.name == "error" && !errors.Is(err, errHook) {
				t.Fatalf("%v does not match the hook's error", err)
			}
			// Only the hook's own statements ran.
			if st := srv.Stats(); st.Open != 0 || st.Statements > 1 || len(srv.Table("t")) != 0 {
				t.Fatalf("the connection was used or left open: %+v", st)
			}
			if st := c.Stats(); st.ConnectErrors == 0 || st.Total != 0 {
				t.Fatalf("stats: %+v", st)
			}
		})
	}
}

// TestAfterConnectErrorAfterReset: a hook failing after a reset closes the
// connection instead of handing it out unprepared.
func TestAfterConnectErrorAfterReset(t *testing.T) {
	srv := newServer(t)
	var calls atomic.Int64
	hook := func(ctx context.Context, raw any) error {
		if calls.Add(1) == 2 {
			return errors.New("not now")
		}
		return tagSession(new(atomic.Int64))(ctx, raw)
	}
	db, c := newDB(t, srv, "pool_max_conns=1", pooldriver.WithAfterConnect(hook))
	dirtySession(t, db)
	waitFor(t, "the connection closed", func() bool { return c.Stats().Destroyed == 1 })
	if got := getVar(t, db, "tag"); got != "hooked" || c.Stats().Created != 2 {
		t.Fatalf("tag %q, stats %+v: want a new, prepared connection", got, c.Stats())
	}
}

// TestBeforeAcquire: the hook runs on every acquire with the statement's
// context; its error fails the statement and closes the connection, and
// driver.ErrBadConn lets database/sql retry on another.
func TestBeforeAcquire(t *testing.T) {
	srv := newServer(t)
	var calls atomic.Int64
	errNotPrimary := errors.New("not the primary")
	type key struct{}
	hook := func(ctx context.Context, raw any) error {
		if ctx.Value(key{}) == nil {
			return errors.New("not the statement's context")
		}
		if _, ok := raw.(*fakedb.Conn); !ok {
			return errors.New("not the raw connection")
		}
		switch calls.Add(1) {
		case 2:
			return driver.ErrBadConn
		case 4:
			return errNotPrimary
		}
		return nil
	}
	db, c := newDB(t, srv, "pool_max_conns=2", pooldriver.WithBeforeAcquire(hook))
	ctx := context.WithValue(context.Background(), key{}, true)
	if _, err := db.ExecContext(ctx, "INSERT t 1"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, "INSERT t 2"); err != nil { // retried after ErrBadConn
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, "INSERT t 3"); !errors.Is(err, errNotPrimary) {
		t.Fatalf("got %v, want the hook's error", err)
	}
	if got := len(srv.Table("t")); got != 2 {
		t.Fatalf("%d rows, want 2", got)
	}
	if st := c.Stats(); st.Destroyed != 2 || calls.Load() != 4 {
		t.Fatalf("stats %+v, %d calls: want 2 connections closed by the hook", st, calls.Load())
	}
}

// TestAfterReleaseAndBeforeClose: AfterRelease sees every connection going
// back to the pool, settled; false closes it, and BeforeClose sees it
// closed.
func TestAfterReleaseAndBeforeClose(t *testing.T) {
	srv := newServer(t)
	var released, closed atomic.Int64
	afterRelease := func(raw any) bool {
		if raw.(*fakedb.Conn).TxStatus() != 0 {
			panic("released inside a transaction")
		}
		return released.Add(1) != 2
	}
	beforeClose := func(raw any) {
		if _, ok := raw.(*fakedb.Conn); ok {
			closed.Add(1)
		}
	}
	db, c := newDB(t, srv, "pool_max_conns=1", pooldriver.WithAfterRelease(afterRelease), pooldriver.WithBeforeClose(beforeClose))
	ctx, end := pooldriver.WithTask(context.Background())
	if _, err := db.ExecContext(ctx, "BEGIN"); err != nil {
		t.Fatal(err)
	}
	end() // rolled back, then released: the hook says yes
	if _, err := db.Exec("INSERT t 1"); err != nil {
		t.Fatal(err)
	}
	if st := c.Stats(); released.Load() != 2 || st.Destroyed != 1 || closed.Load() != 1 || st.AutoRollbacks != 1 {
		t.Fatalf("%d releases, %d closes, stats %+v", released.Load(), closed.Load(), st)
	}
	db.Close()
	if closed.Load() != 1 || c.Stats().Destroyed != 1 {
		t.Fatalf("%d closes after db.Close, want 1 (nothing idle)", closed.Load())
	}
}
