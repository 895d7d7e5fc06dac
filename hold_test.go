package pooldriver_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/pooldriver/pooldriver"
	"github.com/pooldriver/pooldriver/internal/fakedb"
)

// busy keeps db's pool in use from another goroutine until the test ends,
// so that a statement that let go of its connection would get another one.
func busy(t *testing.T, db *sql.DB) {
	t.Helper()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			_, _ = db.Exec("SLEEP 100us")
		}
	}()
	t.Cleanup(func() { close(stop); wg.Wait() })
}

// TestSQLConnIsOneSession: outside any task, in either mode, every
// statement of a *sql.Conn runs on one physical connection, its session
// state lasts while it is held, and Close rolls back a raw transaction.
func TestSQLConnIsOneSession(t *testing.T) {
	for _, mode := range []string{"transaction", "session"} {
		t.Run(mode, func(t *testing.T) {
			srv := newServer(t)
			db, c := newDB(t, srv, "pool_max_conns=3&pool_mode="+mode)
			busy(t, db)
			ctx := context.Background()
			sc, err := db.Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			id := connID(t, ctx, sc)
			if _, err := sc.ExecContext(ctx, "SET sv kept"); err != nil {
				t.Fatal(err)
			}
			if _, err := sc.ExecContext(ctx, "BEGIN"); err != nil {
				t.Fatal(err)
			}
			for i := range 20 {
				if got := connID(t, ctx, sc); got != id {
					t.Fatalf("statement %d ran on %d, the *sql.Conn is on %d", i, got, id)
				}
				if _, err := sc.ExecContext(ctx, "INSERT conn ?", int64(i)); err != nil {
					t.Fatal(err)
				}
				time.Sleep(50 * time.Microsecond)
			}
			var v sql.NullString
			if err := sc.QueryRowContext(ctx, "GET sv").Scan(&v); err != nil || v.String != "kept" {
				t.Fatalf("the session variable: %v, %v", v, err)
			}
			rollbacks := c.Stats().AutoRollbacks
			if err := sc.Close(); err != nil {
				t.Fatal(err)
			}
			if n := len(srv.Table("conn")); n != 0 {
				t.Fatalf("closing the *sql.Conn committed %d rows; the plain driver rolls them back", n)
			}
			if got := c.Stats().AutoRollbacks; got != rollbacks+1 {
				t.Fatalf("auto rollbacks %d, want %d", got, rollbacks+1)
			}
			// Nobody else sees the session state it left.
			for range 10 {
				var v sql.NullString
				if err := db.QueryRow("GET sv").Scan(&v); err != nil || v.Valid {
					t.Fatalf("another user found sv=%v (%v)", v, err)
				}
			}
		})
	}
}

// TestTwoTxOfOneTaskAreIsolated: two *sql.Tx of one task never share a
// physical connection: rolling one back leaves the other's work, which its
// Commit then commits. In session mode the second one is refused.
func TestTwoTxOfOneTaskAreIsolated(t *testing.T) {
	t.Run("transaction", func(t *testing.T) {
		srv := newServer(t)
		db, _ := newDB(t, srv, "pool_max_conns=4")
		ctx, end := pooldriver.WithTask(context.Background())
		defer end()
		tx0, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		tx1, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if a, b := connID(t, ctx, tx0), connID(t, ctx, tx1); a == b {
			t.Fatalf("both transactions run on connection %d", a)
		}
		mustExec(t, tx0, "INSERT iso 0")
		mustExec(t, tx1, "INSERT iso 1")
		// Another statement of the task runs in neither.
		if n := count(t, ctx, db, "iso"); n != 0 {
			t.Fatalf("a task statement outside the transactions sees %d of their rows", n)
		}
		if err := tx0.Rollback(); err != nil {
			t.Fatal(err)
		}
		if err := tx1.Commit(); err != nil {
			t.Fatal(err)
		}
		if got := srv.Table("iso"); len(got) != 1 || got[0] != 1 {
			t.Fatalf("committed %v, want [1]", got)
		}
	})
	t.Run("session", func(t *testing.T) {
		srv := newServer(t)
		db, _ := newDB(t, srv, "pool_max_conns=4")
		ctx, end := pooldriver.WithTask(context.Background(), pooldriver.SessionMode)
		defer end()
		mustExec(t, db, "SET sv x") // outside the task: nothing to see
		if _, err := db.ExecContext(ctx, "SET sv mine"); err != nil {
			t.Fatal(err)
		}
		tx0, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		var v string
		if err := tx0.QueryRowContext(ctx, "GET sv").Scan(&v); err != nil || v != "mine" {
			t.Fatalf("the transaction does not run in the session: %q, %v", v, err)
		}
		if _, err := db.BeginTx(ctx, nil); !errors.Is(err, pooldriver.ErrSessionBusy) {
			t.Fatalf("second BeginTx: %v, want ErrSessionBusy", err)
		}
		if _, err := db.ExecContext(ctx, "INSERT iso 2"); !errors.Is(err, pooldriver.ErrSessionBusy) {
			t.Fatalf("a task statement outside the open transaction: %v, want ErrSessionBusy", err)
		}
		mustExec(t, tx0, "INSERT iso 1")
		if err := tx0.Commit(); err != nil {
			t.Fatal(err)
		}
		if _, err := db.ExecContext(ctx, "INSERT iso 3"); err != nil {
			t.Fatal(err)
		}
		if got := srv.Table("iso"); len(got) != 2 {
			t.Fatalf("committed %v, want [1 3]", got)
		}
	})
}

func mustExec(t *testing.T, db interface {
	ExecContext(context.Context, string, ...any) (sql.Result, error)
}, query string, args ...any) {
	t.Helper()
	if _, err := db.ExecContext(context.Background(), query, args...); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

// TestDirtySessionNeverHandedOn: a session change made outside any task,
// or in a transaction-mode task, never reaches another user; in the task it
// stays for the task's later statements.
func TestDirtySessionNeverHandedOn(t *testing.T) {
	srv := newServer(t)
	db, c := newDB(t, srv, "pool_max_conns=1")
	check := func(who string) {
		t.Helper()
		var v sql.NullString
		if err := db.QueryRow("GET sv").Scan(&v); err != nil || v.Valid {
			t.Fatalf("after %s: the next user found sv=%v (%v)", who, v, err)
		}
	}
	mustExec(t, db, "SET sv leaked")
	check("a SET outside any task")

	ctx, end := pooldriver.WithTask(context.Background())
	if _, err := db.ExecContext(ctx, "SET sv task"); err != nil {
		t.Fatal(err)
	}
	var v string
	if err := db.QueryRowContext(ctx, "GET sv").Scan(&v); err != nil || v != "task" {
		t.Fatalf("the task lost its own SET: %q, %v", v, err)
	}
	if got := c.Stats().Active; got != 1 {
		t.Fatalf("the task holds %d connections after its SET, want 1", got)
	}
	end()
	check("a transaction-mode task's SET")

	_, err := db.Exec("TEMP tt")
	if err != nil {
		t.Fatal(err)
	}
	var has int64
	if err := db.QueryRow("HASTEMP tt").Scan(&has); err != nil || has != 0 {
		t.Fatalf("a temporary table outlived its statement's hold: %d, %v", has, err)
	}
}

// TestLostConnectionFailsTheRest: once a task's connection carrying its raw
// transaction is lost, every later statement of the task fails with
// ErrConnLost (not driver.ErrBadConn: database/sql must not retry it on a
// fresh connection, where it would autocommit), until the task ends.
func TestLostConnectionFailsTheRest(t *testing.T) {
	srv := newServer(t)
	db, _ := newDB(t, srv, "pool_max_conns=2")
	ctx, end := pooldriver.WithTask(context.Background())
	if _, err := db.ExecContext(ctx, "BEGIN"); err != nil {
		t.Fatal(err)
	}
	mustExecCtx(t, ctx, db, "INSERT lost 1")
	srv.KillAll()
	_, err := db.ExecContext(ctx, "INSERT lost 2")
	if !errors.Is(err, pooldriver.ErrConnLost) || !errors.Is(err, fakedb.ErrKilled) || errors.Is(err, driver.ErrBadConn) {
		t.Fatalf("statement on the killed connection: %v", err)
	}
	for _, q := range []string{"INSERT lost 3", "COMMIT"} {
		if _, err := db.ExecContext(ctx, q); !errors.Is(err, pooldriver.ErrConnLost) {
			t.Fatalf("%s after the loss: %v, want ErrConnLost", q, err)
		}
	}
	end()
	if n := len(srv.Table("lost")); n != 0 {
		t.Fatalf("%d rows committed", n)
	}
	// A new task starts afresh.
	ctx2, end2 := pooldriver.WithTask(context.Background())
	defer end2()
	mustExecCtx(t, ctx2, db, "INSERT lost 4")
}

func mustExecCtx(t *testing.T, ctx context.Context, db *sql.DB, query string) {
	t.Helper()
	if _, err := db.ExecContext(ctx, query); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

// TestUnknownTxStateFailsTheStatement: when the transaction state after a
// raw BEGIN cannot be read, BEGIN itself succeeded and says so (as with the
// plain driver: a COMMIT whose reply arrived committed), but the
// connection is closed (which rolls back on the server), and the task's
// next statements fail instead of autocommitting on another connection.
func TestUnknownTxStateFailsTheStatement(t *testing.T) {
	srv := newServer(t)
	db, c := newDB(t, srv, "pool_max_conns=2")
	ctx, end := pooldriver.WithTask(context.Background())
	defer end()
	srv.FailTxStatus(1)
	if _, err := db.ExecContext(ctx, "BEGIN"); err != nil {
		t.Fatalf("BEGIN whose state cannot be read: %v, want its own outcome (nil)", err)
	}
	if _, err := db.ExecContext(ctx, "INSERT stray 1"); !errors.Is(err, pooldriver.ErrConnLost) {
		t.Fatalf("the next statement of the task: %v, want ErrConnLost", err)
	}
	waitFor(t, "the connection closed", func() bool { return c.Stats().Destroyed == 1 })
	if n := len(srv.Table("stray")); n != 0 {
		t.Fatalf("%d stray rows autocommitted", n)
	}
}

// TestWriteInsideRowsLoopDoesNotHang: in a transaction-mode task with a raw
// transaction open, a statement issued while the same goroutine reads rows
// of the task fails within the busy wait instead of blocking until its
// context ends.
func TestWriteInsideRowsLoopDoesNotHang(t *testing.T) {
	srv := newServer(t)
	db, _ := newDB(t, srv, "pool_max_conns=2")
	ctx, end := pooldriver.WithTask(context.Background())
	defer end()
	mustExecCtx(t, ctx, db, "BEGIN")
	rows, err := db.QueryContext(ctx, "SELECT 3")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	rows.Next()
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	start := time.Now()
	_, err = db.ExecContext(wctx, "INSERT loop 1")
	if !errors.Is(err, pooldriver.ErrConnBusy) {
		t.Fatalf("write inside the rows loop: %v, want ErrConnBusy", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("it took %v", d)
	}
}

// TestPrewarmedConnectionsAreChecked: connections made by the pre-warm are
// checked before their first hand-out: killed ones are replaced, not handed
// to a statement.
func TestPrewarmedConnectionsAreChecked(t *testing.T) {
	srv := newServer(t)
	db, c := newDB(t, srv, "pool_min_conns=2&pool_max_conns=2")
	waitFor(t, "the pre-warm", func() bool { return c.Stats().Idle == 2 })
	srv.BreakAll()
	time.Sleep(1100 * time.Millisecond) // idle long enough to be pinged
	for i := range 4 {
		if _, err := db.Exec("INSERT warm ?", int64(i)); err != nil {
			t.Fatalf("statement %d: %v", i, err)
		}
	}
}

// TestStmtCloseEvictsTheCachedStatement: closing a prepared statement drops
// it from the physical connection's cache, so preparing the same text again
// prepares it afresh on the server.
func TestStmtCloseEvictsTheCachedStatement(t *testing.T) {
	srv := newServer(t)
	db, _ := newDB(t, srv, "pool_max_conns=1")
	for i := range 3 {
		st, err := db.Prepare("ECHO ?")
		if err != nil {
			t.Fatal(err)
		}
		var v int64
		if err := st.QueryRow(int64(i)).Scan(&v); err != nil || v != int64(i) {
			t.Fatalf("ECHO: %d, %v", v, err)
		}
		st.Close()
	}
	mustExec(t, db, "PING") // the next statement on the connection drops it, before it runs
	s := srv.Stats()
	if s.Prepares != 3 || s.StmtCloses != 3 {
		t.Fatalf("prepares %d, closes %d: a closed statement stayed cached", s.Prepares, s.StmtCloses)
	}
}

// TestTaskEndedThroughDatabaseSQL documents what a task's use after its end
// returns through database/sql.
func TestTaskEndedThroughDatabaseSQL(t *testing.T) {
	srv := newServer(t)
	db, _ := newDB(t, srv, "pool_max_conns=2")
	ctx, end := pooldriver.WithTask(context.Background())
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	mustExec(t, tx, "INSERT ended 1")
	end()
	if cause := context.Cause(ctx); !errors.Is(cause, pooldriver.ErrTaskEnded) {
		t.Fatalf("context.Cause: %v", cause)
	}
	if err := tx.Commit(); err == nil || !(errors.Is(err, context.Canceled) || errors.Is(err, sql.ErrTxDone) || errors.Is(err, pooldriver.ErrTaskEnded)) {
		t.Fatalf("Commit after the task ended: %v", err)
	}
	if _, err := db.ExecContext(ctx, "INSERT ended 2"); err == nil {
		t.Fatal("a statement after the task ended succeeded")
	}
	if n := len(srv.Table("ended")); n != 0 {
		t.Fatalf("%d rows committed", n)
	}
}

// TestTaskEndUndoesRawTxUnderHeldConn: a *sql.Conn whose raw transaction
// was the task's (begun with the task's context) must not go on, after
// the task's end rolled that transaction back, running statements that
// would autocommit.
func TestTaskEndUndoesRawTxUnderHeldConn(t *testing.T) {
	srv := newServer(t)
	db, _ := newDB(t, srv, "pool_max_conns=2")
	bg := context.Background()
	sc, err := db.Conn(bg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, end := pooldriver.WithTask(bg)
	for _, q := range []string{"BEGIN", "INSERT v 1"} {
		if _, err := sc.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	end()
	for _, q := range []string{"INSERT v 2", "COMMIT"} {
		if _, err := sc.ExecContext(bg, q); !errors.Is(err, pooldriver.ErrConnLost) {
			t.Fatalf("%s after the task's end: %v, want ErrConnLost", q, err)
		}
	}
	sc.Close()
	if got := srv.Table("v"); len(got) != 0 {
		t.Fatalf("committed %v", got)
	}
}

// TestSQLConnKeepsItsOwnTxUnderATaskContext: a *sql.Conn with its own raw
// transaction, used with the context of a task that has another
// connection, stays its own session: nothing rolls its transaction back.
func TestSQLConnKeepsItsOwnTxUnderATaskContext(t *testing.T) {
	srv := newServer(t)
	db, _ := newDB(t, srv, "pool_max_conns=3")
	bg := context.Background()
	ctx, end := pooldriver.WithTask(bg)
	defer end()
	mustExecCtx(t, ctx, db, "SET a b") // the task now has a connection
	sc, err := db.Conn(bg)
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	for _, q := range []string{"BEGIN", "INSERT q 1"} {
		if _, err := sc.ExecContext(bg, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if _, err := sc.ExecContext(ctx, "INSERT q 2"); err != nil {
		t.Fatalf("a statement with the task's context on the *sql.Conn: %v", err)
	}
	if _, err := sc.ExecContext(bg, "COMMIT"); err != nil {
		t.Fatal(err)
	}
	if got := srv.Table("q"); len(got) != 2 {
		t.Fatalf("committed %v, want [1 2]", got)
	}
}

// TestSessionChangeInsideTxDoesNotBindIt: a SET inside a transaction-mode
// task's *sql.Tx does not make the task's other statements wait for the
// transaction (they run elsewhere, as with plain database/sql).
func TestSessionChangeInsideTxDoesNotBindIt(t *testing.T) {
	srv := newServer(t)
	db, _ := newDB(t, srv, "pool_max_conns=3")
	ctx, end := pooldriver.WithTask(context.Background())
	defer end()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.ExecContext(ctx, "SET a b"); err != nil {
		t.Fatalf("SET in the transaction: %v", err)
	}
	if _, err := db.ExecContext(ctx, "INSERT z 1"); err != nil {
		t.Fatalf("a task statement beside the transaction: %v", err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}

// TestDirtyTaskSessionNotBypassed: in a transaction-mode task whose session
// changed, a statement that finds the task's connection busy with rows
// does not run silently on a connection without that session.
func TestDirtyTaskSessionNotBypassed(t *testing.T) {
	srv := newServer(t)
	db, _ := newDB(t, srv, "pool_max_conns=3")
	ctx, end := pooldriver.WithTask(context.Background())
	defer end()
	mustExecCtx(t, ctx, db, "SET sv mine")
	rows, err := db.QueryContext(ctx, "SELECT 3")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var v sql.NullString
	err = db.QueryRowContext(ctx, "GET sv").Scan(&v)
	if !errors.Is(err, pooldriver.ErrSessionBusy) {
		t.Fatalf("GET with the task's session busy: %v (%v), want ErrSessionBusy", v, err)
	}
}

// TestFirstQueryRowsThenMore: the rows of a hold's first query outside any
// task run without the connection's lock (see solo_test.go); whatever the
// hold does while they are open, with or without a task, they leave the
// connection free and clean when they close: the only connection of the
// pool serves the next statements.
func TestFirstQueryRowsThenMore(t *testing.T) {
	srv := newServer(t)
	db, _ := newDB(t, srv, "pool_max_conns=1")
	bg := context.Background()
	ctx, end := pooldriver.WithTask(bg)
	defer end()
	for _, c := range []struct {
		name string
		op   func(*sql.Conn) error
	}{
		{"exec", func(sc *sql.Conn) error { _, err := sc.ExecContext(ctx, "INSERT r 1"); return err }},
		{"begin", func(sc *sql.Conn) error { _, err := sc.BeginTx(ctx, nil); return err }},
		{"query", func(sc *sql.Conn) error { _, err := sc.QueryContext(bg, "SELECT 1"); return err }},
		{"ping", func(sc *sql.Conn) error { return sc.PingContext(ctx) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			sc, err := db.Conn(bg)
			if err != nil {
				t.Fatal(err)
			}
			rows, err := sc.QueryContext(bg, "SELECT 3")
			if err != nil {
				t.Fatal(err)
			}
			// The fake, like pgx, refuses anything while a result set
			// is open; database/sql returns that error.
			if err := c.op(sc); !errors.Is(err, fakedb.ErrBusy) {
				t.Fatalf("%s beside the open rows: %v, want fakedb.ErrBusy", c.name, err)
			}
			n := 0
			for rows.Next() {
				n++
			}
			if err := rows.Close(); err != nil || n != 3 {
				t.Fatalf("read %d rows, Close: %v; want 3, nil", n, err)
			}
			// A lock the rows left held would make these wait: bounded.
			bctx, cancel := context.WithTimeout(bg, 5*time.Second)
			defer cancel()
			wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			if _, err := sc.ExecContext(bctx, "INSERT r 2"); err != nil {
				t.Fatalf("the *sql.Conn after its rows closed: %v", err)
			}
			sc.Close()
			var id int64 // a task's statement, which takes the lock
			if err := db.QueryRowContext(wctx, "CONNID").Scan(&id); err != nil {
				t.Fatalf("the pool's only connection after the rows: %v", err)
			}
		})
	}
	if got := srv.Table("r"); len(got) != 4 {
		t.Fatalf("table r: %v, want four rows of 2", got)
	}
}
