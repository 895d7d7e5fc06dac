package pooldriver_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pooldriver/pooldriver"
)

// nestedScenario runs BEGIN; INSERT 1; BeginTx; INSERT 2; the *sql.Tx's
// end (commit or not); INSERT 3; the task's end of its transaction
// (outer), in a task of mode, all on one connection, and returns how many
// rows are durable.
func nestedScenario(t *testing.T, mode pooldriver.Mode, commitInner bool, outer string) int {
	t.Helper()
	srv := newServer(t)
	db, c := newDB(t, srv, "pool_max_conns=2")
	ctx, end := pooldriver.WithTask(context.Background(), mode)
	defer end()
	for _, q := range []string{"BEGIN", "INSERT n 1"} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatal(q, err)
		}
	}
	id := connID(t, ctx, db)
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := connID(t, ctx, tx); got != id {
		t.Fatalf("the *sql.Tx runs on conn %d, the task's transaction on %d", got, id)
	}
	if _, err := tx.ExecContext(ctx, "INSERT n 2"); err != nil {
		t.Fatal(err)
	}
	if commitInner {
		err = tx.Commit()
	} else {
		err = tx.Rollback()
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"INSERT n 3", outer} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatal(q, err)
		}
	}
	end()
	waitFor(t, "the connection back", func() bool { return c.Stats().Active == 0 })
	return len(srv.Table("n"))
}

// TestNestedTx: a *sql.Tx begun in a task whose connection has a raw
// transaction open nests in it, in both modes: its Rollback undoes only its
// own work, its Commit leaves the decision to the outer COMMIT or ROLLBACK.
func TestNestedTx(t *testing.T) {
	for _, mode := range []pooldriver.Mode{pooldriver.TransactionMode, pooldriver.SessionMode} {
		t.Run(mode.String(), func(t *testing.T) {
			if n := nestedScenario(t, mode, false, "COMMIT"); n != 2 {
				t.Errorf("inner rolled back, outer committed: %d rows durable, want 2", n)
			}
			if n := nestedScenario(t, mode, true, "ROLLBACK"); n != 0 {
				t.Errorf("inner committed, outer rolled back: %d rows durable, want 0", n)
			}
			if n := nestedScenario(t, mode, true, "COMMIT"); n != 3 {
				t.Errorf("both committed: %d rows durable, want 3", n)
			}
		})
	}
}

// TestNestedTxOptionsUncheckable: options that a savepoint might not
// honour are refused where the dialect cannot tell the open transaction's,
// naming what was asked; the task's transaction goes on.
func TestNestedTxOptionsUncheckable(t *testing.T) {
	srv := newServer(t)
	db, _ := newDB(t, srv, "")
	ctx, end := pooldriver.WithTask(context.Background())
	defer end()
	if _, err := db.ExecContext(ctx, "BEGIN"); err != nil {
		t.Fatal(err)
	}
	_, err := db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelSerializable, ReadOnly: true})
	if err == nil || !strings.Contains(err.Error(), "cannot be Serializable, read-only") {
		t.Fatalf("BeginTx with options inside the task's transaction: %v", err)
	}
	if _, err := db.ExecContext(ctx, "INSERT n 1"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, "COMMIT"); err != nil {
		t.Fatal(err)
	}
	if n := len(srv.Table("n")); n != 1 {
		t.Fatalf("%d rows, want 1", n)
	}
}

// TestNestedTxWaitsForTheFirst: a second *sql.Tx of the task waits for the
// nested one to end, then nests; the task's other statements fail at once
// meanwhile; a BeginTx whose context ends first says what it waited for.
func TestNestedTxWaitsForTheFirst(t *testing.T) {
	checkNoGoroutineLeak(t)
	srv := newServer(t)
	db, _ := newDB(t, srv, "")
	ctx, end := pooldriver.WithTask(context.Background())
	defer end()
	if _, err := db.ExecContext(ctx, "BEGIN"); err != nil {
		t.Fatal(err)
	}
	first, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, "INSERT n 1"); !errors.Is(err, pooldriver.ErrSessionBusy) {
		t.Fatalf("a statement of the task beside the nested *sql.Tx: %v, want ErrSessionBusy", err)
	}
	short, cancel := context.WithTimeout(ctx, time.Second)
	_, err = db.BeginTx(short, nil)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "nested") {
		t.Fatalf("BeginTx past its deadline: %v", err)
	}
	var wg sync.WaitGroup
	var second *sql.Tx
	var secondErr error
	began := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		second, secondErr = db.BeginTx(ctx, nil)
		close(began)
	}()
	select {
	case <-began:
		t.Fatalf("the second BeginTx did not wait for the nested *sql.Tx: %v", secondErr)
	case <-time.After(time.Second): // it waits: a window, not a bound on success
	}
	if _, err := first.ExecContext(ctx, "INSERT n 1"); err != nil {
		t.Fatal(err)
	}
	if err := first.Commit(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if secondErr != nil {
		t.Fatal(secondErr)
	}
	if _, err := second.ExecContext(ctx, "INSERT n 2"); err != nil {
		t.Fatal(err)
	}
	if err := second.Rollback(); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, "COMMIT"); err != nil {
		t.Fatal(err)
	}
	if got := srv.Table("n"); len(got) != 1 || got[0] != 1 {
		t.Fatalf("committed %v, want [1]", got)
	}
}

// TestNestedTxTaskEnds: the task's end with a nested *sql.Tx open rolls
// back all of it, once, and the *sql.Tx's Commit fails.
func TestNestedTxTaskEnds(t *testing.T) {
	srv := newServer(t)
	db, c := newDB(t, srv, "")
	ctx, end := pooldriver.WithTask(context.Background())
	if _, err := db.ExecContext(ctx, "BEGIN"); err != nil {
		t.Fatal(err)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.ExecContext(ctx, "INSERT n 1"); err != nil {
		t.Fatal(err)
	}
	end()
	if err := tx.Commit(); err == nil {
		t.Fatal("Commit after the task's end succeeded")
	}
	waitFor(t, "the connection back", func() bool { return c.Stats().Active == 0 })
	if n := len(srv.Table("n")); n != 0 {
		t.Fatalf("%d rows durable, want 0", n)
	}
	if st := c.Stats(); st.TaskEndRollbacks != 1 {
		t.Fatalf("TaskEndRollbacks = %d, want 1: %+v", st.TaskEndRollbacks, st)
	}
}

// TestNestedTxNotOutsideATask: a raw BEGIN on a *sql.Conn outside any task
// then BeginTx is what it is with the plain driver: the driver's BeginTx on
// the same connection (fakedb refuses it, as some servers do).
func TestNestedTxNotOutsideATask(t *testing.T) {
	srv := newServer(t)
	db, _ := newDB(t, srv, "")
	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(context.Background(), "BEGIN"); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.BeginTx(context.Background(), nil); err == nil || strings.Contains(err.Error(), "nested") {
		t.Fatalf("BeginTx on a *sql.Conn with a raw transaction, outside a task: %v, want the driver's own error", err)
	}
}
