package pooldriver_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/pooldriver/pooldriver"
)

// TestShutdownServesWorkUnderWay: once Shutdown begins, a statement
// outside a task and one of a task begun after fail with ErrShuttingDown,
// while the work under way goes on to its end: a task that ran statements
// before (its next one comes while nothing is in use), a task begun before
// that had run nothing, a *sql.Tx open across it. Shutdown returns nil
// when the last of them ends, with every server connection closed.
func TestShutdownServesWorkUnderWay(t *testing.T) {
	checkNoGoroutineLeak(t)
	srv := newServer(t)
	db, c := newDB(t, srv, "pool_max_conns=4")
	ctx := context.Background()
	exec := func(ctx context.Context, q string) {
		t.Helper()
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}

	exec(ctx, "INSERT t 0") // outside a task: its logical connection parks
	busy, endBusy := pooldriver.WithTask(ctx)
	defer endBusy()
	exec(busy, "INSERT t 1")
	late, endLate := pooldriver.WithTask(ctx)
	defer endLate()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec("INSERT t 2"); err != nil {
		t.Fatal(err)
	}

	done := make(chan error, 1)
	sctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	go func() { done <- c.Shutdown(sctx) }()
	refused := func(ctx context.Context) error {
		var id int64
		return db.QueryRowContext(ctx, "CONNID").Scan(&id)
	}
	waitFor(t, "Shutdown to refuse new work", func() bool { return refused(ctx) != nil })
	if err := refused(ctx); !errors.Is(err, pooldriver.ErrShuttingDown) || !errors.Is(err, pooldriver.ErrClosed) {
		t.Fatalf("a statement outside a task: %v, want ErrShuttingDown (and ErrClosed)", err)
	}
	after, endAfter := pooldriver.WithTask(ctx)
	if err := refused(after); !errors.Is(err, pooldriver.ErrShuttingDown) {
		t.Fatalf("a task begun after Shutdown: %v, want ErrShuttingDown", err)
	}
	endAfter()
	if _, err := db.BeginTx(ctx, nil); !errors.Is(err, pooldriver.ErrShuttingDown) {
		t.Fatalf("a new *sql.Tx outside a task: %v, want ErrShuttingDown", err)
	}

	stillWaiting := func(what string) {
		t.Helper()
		select {
		case err := <-done:
			t.Fatalf("Shutdown returned (%v) with %s under way", err, what)
		default:
		}
	}
	exec(busy, "INSERT t 3")
	exec(late, "INSERT t 4")
	if _, err := tx.Exec("INSERT t 5"); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	stillWaiting("two tasks")
	endBusy()
	stillWaiting("a task")
	endLate()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Shutdown: %v, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Shutdown did not return 10s after the last task ended")
	}
	if got := len(srv.Table("t")); got != 6 {
		t.Fatalf("%d rows, want 6: %v", got, srv.Table("t"))
	}
	if n := srv.Stats().Open; n != 0 {
		t.Fatalf("%d server connections open after Shutdown", n)
	}
	if err := refused(ctx); !errors.Is(err, pooldriver.ErrClosed) {
		t.Fatalf("after Shutdown: %v, want ErrClosed", err)
	}
}

// TestShutdownDeadline: when its context ends with a connection still in
// use, Shutdown closes the connector and says how many connections it cut
// and how many close when released (a fake connection cannot be cut: the
// latter); the statement's connection closes when it comes back.
func TestShutdownDeadline(t *testing.T) {
	checkNoGoroutineLeak(t)
	srv := newServer(t)
	db, c := newDB(t, srv, "pool_max_conns=2")
	ctx := context.Background()
	sleepCtx, stopSleep := context.WithCancel(ctx)
	defer stopSleep()
	slept := make(chan error, 1)
	go func() {
		_, err := db.ExecContext(sleepCtx, "SLEEP 1h")
		slept <- err
	}()
	waitFor(t, "the SLEEP to run", func() bool { return srv.Running() == 1 })
	sctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	err := c.Shutdown(sctx)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "0 connections in use at the end of the wait were cut, 1 left to close when released") {
		t.Fatalf("Shutdown: %v, want the deadline and the counts", err)
	}
	if _, err := db.Exec("INSERT t 1"); !errors.Is(err, pooldriver.ErrClosed) {
		t.Fatalf("after Shutdown: %v, want ErrClosed", err)
	}
	stopSleep()
	if err := <-slept; !errors.Is(err, context.Canceled) {
		t.Fatalf("SLEEP: %v, want context.Canceled", err)
	}
	waitFor(t, "the busy connection closed", func() bool { return srv.Stats().Open == 0 })
}

// TestShutdownInvalid: Shutdown of a Connector whose configuration failed
// returns that error, as Connect does.
func TestShutdownInvalid(t *testing.T) {
	c := pooldriver.New("fake://?pool_max_conns=-1")
	if err := c.Shutdown(context.Background()); err == nil || err != c.Err() {
		t.Fatalf("Shutdown: %v, want Err() %v", err, c.Err())
	}
	_ = sql.OpenDB(c).Close()
}
