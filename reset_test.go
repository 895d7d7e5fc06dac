package pooldriver_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/pooldriver/pooldriver"
)

// TestReset: idle connections are closed at once, one in use (a *sql.Tx
// mid-transaction) keeps working and is closed when it comes back, and
// every later statement runs on a connection opened after Reset.
func TestReset(t *testing.T) {
	checkNoGoroutineLeak(t)
	srv := newServer(t)
	db, c := newDB(t, srv, "pool_max_conns=4&pool_min_conns=3")
	waitFor(t, "pre-warm", func() bool { return c.Stats().Idle == 3 })
	ctx := context.Background()
	old := map[int64]bool{}
	for _, cn := range srv.Conns() {
		old[cn.ID()] = true
	}

	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec("INSERT t 1"); err != nil {
		t.Fatal(err)
	}
	c.Reset()
	// The two idle ones are closed now, and pool_min_conns refilled.
	waitFor(t, "idle connections replaced", func() bool {
		return srv.Stats().Closes == 2 && c.Stats().Idle == 2
	})
	// The transaction goes on, undisturbed, and commits.
	if _, err := tx.Exec("INSERT t 2"); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if got := len(srv.Table("t")); got != 2 {
		t.Fatalf("%d rows committed, want 2", got)
	}
	waitFor(t, "the busy connection closed when it came back", func() bool { return srv.Stats().Closes == 3 })
	for range 10 {
		var id int64
		if err := db.QueryRow("CONNID").Scan(&id); err != nil {
			t.Fatal(err)
		}
		if old[id] {
			t.Fatalf("connection %d, opened before Reset, still used", id)
		}
	}
	if st := srv.Stats(); st.DisconnectRollbacks != 0 {
		t.Fatalf("a transaction was cut: %+v", st)
	}
}

// TestResetDuringConnect: a connection whose opening began before Reset is
// closed as soon as it is open and another is opened in its place; Stats
// counts both, so that Created - Destroyed is what is open.
func TestResetDuringConnect(t *testing.T) {
	checkNoGoroutineLeak(t)
	srv := newServer(t)
	entered, resume := make(chan struct{}), make(chan struct{})
	var calls atomic.Int64
	creds := func(context.Context) (string, string, error) {
		if calls.Add(1) == 1 {
			close(entered)
			<-resume
		}
		return "app", "secret", nil
	}
	db, c := newDB(t, srv, "pool_max_conns=2", pooldriver.WithCredentials(creds))
	done := make(chan error, 1)
	go func() {
		_, err := db.Exec("INSERT t 1")
		done <- err
	}()
	<-entered // the first connect is under way
	c.Reset()
	close(resume)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if st := srv.Stats(); st.Connects != 2 || st.Closes != 1 {
		t.Fatalf("want the first connection closed and a second opened: %+v", st)
	}
	st := c.Stats()
	if st.Created != 2 || st.Destroyed != 1 || st.Total != 1 {
		t.Fatalf("want 2 created, 1 destroyed, 1 open: %+v", st)
	}
}

// TestResetDuringHealthCheck: a connection the health check has out of the
// idle list while Reset runs (Reset's close of the idle ones passes over
// it) is closed when the check ends, not put back to linger until the next
// check: in CI a MySQL catalog reading in the check made that window
// seconds wide.
func TestResetDuringHealthCheck(t *testing.T) {
	checkNoGoroutineLeak(t)
	srv := newServer(t)
	entered, resume := make(chan struct{}), make(chan struct{})
	var once atomic.Bool
	srv.OnPing(func() {
		if once.CompareAndSwap(false, true) {
			close(entered)
			<-resume
		}
	})
	// No periodic check: the test runs the only one, and nothing else
	// would close the connection it passed over.
	_, c := newDB(t, srv, "pool_max_conns=2&pool_min_conns=1&pool_health_check_period=0")
	waitFor(t, "pre-warm", func() bool { return c.Stats().Idle == 1 })
	checked := make(chan struct{})
	go func() { defer close(checked); pooldriver.CheckNow(c) }()
	<-entered // the health check holds the one connection
	c.Reset()
	close(resume)
	<-checked
	waitFor(t, "the checked connection closed and replaced", func() bool {
		return srv.Stats().Closes == 1 && srv.Stats().Connects == 2 && c.Stats().Idle == 1
	})
}
