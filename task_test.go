package pooldriver_test

import (
	"context"
	"database/sql"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/pooldriver/pooldriver"
)

func TestTransactionModeRawBeginPins(t *testing.T) {
	srv := newServer(t)
	db, c := newDB(t, srv, "pool_max_conns=3")
	ctx, end := pooldriver.WithTask(context.Background())
	defer end()

	if _, err := db.ExecContext(ctx, "BEGIN"); err != nil {
		t.Fatal(err)
	}
	id := connID(t, ctx, db)
	if _, err := db.ExecContext(ctx, "INSERT rb 1"); err != nil {
		t.Fatal(err)
	}
	// Through another logical conn (a sql.Conn) and a prepared statement:
	// still the task's connection.
	sc, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := connID(t, ctx, sc); got != id {
		t.Fatalf("sql.Conn ran on conn %d, task is pinned to %d", got, id)
	}
	sc.Close()
	stmt, err := db.PrepareContext(ctx, "CONNID")
	if err != nil {
		t.Fatal(err)
	}
	var got int64
	if err := stmt.QueryRowContext(ctx).Scan(&got); err != nil || got != id {
		t.Fatalf("prepared statement ran on conn %d (%v), task is pinned to %d", got, err, id)
	}
	stmt.Close()
	if n := count(t, ctx, db, "rb"); n != 1 {
		t.Fatalf("the task does not see its own insert: %d", n)
	}
	if n := count(t, context.Background(), db, "rb"); n != 0 {
		t.Fatalf("another caller sees the uncommitted insert: %d", n)
	}
	if s := c.Stats(); s.Active != 1 {
		t.Fatalf("pinned conn not counted active: %+v", s)
	}
	if _, err := db.ExecContext(ctx, "COMMIT"); err != nil {
		t.Fatal(err)
	}
	// Committed: visible, and the conn went back while the task goes on.
	if s := c.Stats(); s.Active != 0 {
		t.Fatalf("after COMMIT the conn is still held: %+v", s)
	}
	if n := count(t, context.Background(), db, "rb"); n != 1 {
		t.Fatalf("committed insert not visible: %d", n)
	}
	if _, err := db.ExecContext(ctx, "INSERT rb 2"); err != nil {
		t.Fatal("the task cannot go on after COMMIT:", err)
	}
	if s := c.Stats(); s.AutoRollbacks != 0 {
		t.Fatalf("stats: %+v", s)
	}
}

func TestTransactionModeOpenRowsPin(t *testing.T) {
	srv := newServer(t)
	db, c := newDB(t, srv, "pool_max_conns=2")
	ctx, end := pooldriver.WithTask(context.Background())
	defer end()
	rows, err := db.QueryContext(ctx, "SELECT 3")
	if err != nil {
		t.Fatal(err)
	}
	rows.Next()
	if s := c.Stats(); s.Active != 1 {
		t.Fatalf("open rows do not pin: %+v", s)
	}
	// The task's conn is busy outside a transaction: another conn serves
	// this statement instead of a deadlock.
	done := make(chan int64, 1)
	go func() { done <- connID(t, ctx, db) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("a statement of the task deadlocked behind its open rows")
	}
	rows.Close()
	if s := c.Stats(); s.Active != 0 {
		t.Fatalf("closed rows still pin: %+v", s)
	}
}

func TestSessionMode(t *testing.T) {
	srv := newServer(t)
	db, c := newDB(t, srv, "pool_max_conns=1")
	ctx, end := pooldriver.WithTask(context.Background(), pooldriver.SessionMode)
	for _, q := range []string{"SET role admin", "TEMP scratch"} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	id := connID(t, ctx, db)
	var role string
	if err := db.QueryRowContext(ctx, "GET role").Scan(&role); err != nil || role != "admin" {
		t.Fatalf("session variable lost across calls: %q %v", role, err)
	}
	if got := connID(t, ctx, db); got != id {
		t.Fatal("session task changed connection")
	}
	if s := c.Stats(); s.Active != 1 {
		t.Fatalf("session task does not hold its conn between calls: %+v", s)
	}
	end()
	// Pool of one: the next task gets the same physical conn, reset.
	ctx2, end2 := pooldriver.WithTask(context.Background(), pooldriver.SessionMode)
	defer end2()
	if got := connID(t, ctx2, db); got != id {
		t.Fatalf("pool of 1 handed out conn %d, want %d", got, id)
	}
	var v sql.NullString
	if err := db.QueryRowContext(ctx2, "GET role").Scan(&v); err != nil || v.Valid {
		t.Fatalf("the next task sees the old session: %v %v", v, err)
	}
	var temp int64
	if err := db.QueryRowContext(ctx2, "HASTEMP scratch").Scan(&temp); err != nil || temp != 0 {
		t.Fatalf("temp table survived the reset: %d %v", temp, err)
	}
	if s := c.Stats(); s.SessionResets != 1 {
		t.Fatalf("stats: %+v", s)
	}
}

func TestDefaultModeFromDSN(t *testing.T) {
	srv := newServer(t)
	db, c := newDB(t, srv, "pool_max_conns=2&pool_mode=session")
	ctx, end := pooldriver.WithTask(context.Background())
	connID(t, ctx, db)
	if c.Stats().Active != 1 {
		t.Fatal("pool_mode=session not applied to a task without a mode")
	}
	end()
	pooldriver.WaitCleanups(c) // the session task's end resets in the background
	ctx, end = pooldriver.WithTask(context.Background(), pooldriver.TransactionMode)
	defer end()
	connID(t, ctx, db)
	if c.Stats().Active != 0 {
		t.Fatal("a task's own mode does not override pool_mode")
	}
}

// taskEnders are the ways a task can end.
var taskEnders = []struct {
	name string
	run  func(t *testing.T, db *sql.DB, body func(ctx context.Context))
}{
	{"end func", func(t *testing.T, db *sql.DB, body func(context.Context)) {
		ctx, end := pooldriver.WithTask(context.Background())
		body(ctx)
		end()
		end() // twice: harmless
	}},
	{"parent cancelled", func(t *testing.T, db *sql.DB, body func(context.Context)) {
		parent, cancel := context.WithCancel(context.Background())
		ctx, end := pooldriver.WithTask(parent)
		defer end()
		body(ctx)
		cancel()
	}},
	{"handler returned", func(t *testing.T, db *sql.DB, body func(context.Context)) {
		h := pooldriver.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body(r.Context())
		}))
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil))
	}},
	{"handler panicked", func(t *testing.T, db *sql.DB, body func(context.Context)) {
		h := pooldriver.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body(r.Context())
			panic("boom")
		}))
		func() {
			defer func() {
				if recover() == nil {
					t.Error("the panic did not propagate")
				}
			}()
			h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil))
		}()
	}},
}

func TestTaskEndRollsBack(t *testing.T) {
	for _, ender := range taskEnders {
		for _, kind := range []string{"BeginTx", "raw BEGIN"} {
			t.Run(ender.name+"/"+kind, func(t *testing.T) {
				checkNoGoroutineLeak(t)
				srv := newServer(t)
				db, c := newDB(t, srv, "pool_max_conns=2")
				var tx *sql.Tx
				ender.run(t, db, func(ctx context.Context) {
					var err error
					if kind == "BeginTx" {
						tx, err = db.BeginTx(ctx, nil)
						if err == nil {
							_, err = tx.Exec("INSERT e 1")
						}
					} else {
						_, err = db.ExecContext(ctx, "BEGIN")
						if err == nil {
							_, err = db.ExecContext(ctx, "INSERT e 1")
						}
					}
					if err != nil {
						t.Error(err)
					}
				})
				waitFor(t, "rollback", func() bool { return c.Stats().Active == 0 && srv.OpenTxCount() == 0 })
				if tx != nil {
					if err := tx.Commit(); err == nil {
						t.Fatal("Commit after the task ended succeeded")
					}
				}
				if n := len(srv.Table("e")); n != 0 {
					t.Fatalf("%d rows committed by an ended task", n)
				}
				if s := c.Stats(); s.AutoRollbacks != 1 {
					t.Fatalf("stats: %+v", s)
				}
				if s := srv.Stats(); s.Rollbacks != 1 {
					t.Fatalf("%d rollbacks reached the server, want exactly 1", s.Rollbacks)
				}
				// The conn is reused afterwards.
				if _, err := db.Exec("INSERT e 2"); err != nil {
					t.Fatal(err)
				}
				if s := c.Stats(); s.Created != 1 {
					t.Fatalf("the conn was not reused: %+v", s)
				}
			})
		}
	}
}

// TestCommitAfterTaskEnd: the end of the task and a Commit race; exactly one
// wins, and what it did is consistent.
func TestCommitRacesTaskEnd(t *testing.T) {
	srv := newServer(t)
	db, c := newDB(t, srv, "pool_max_conns=2")
	var committed int
	for i := 0; i < 200; i++ {
		ctx, end := pooldriver.WithTask(context.Background())
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec("INSERT r ?", int64(i)); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { defer wg.Done(); end() }()
		if tx.Commit() == nil {
			committed++
		}
		wg.Wait()
	}
	if got := len(srv.Table("r")); got != committed {
		t.Fatalf("%d commits reported, %d rows committed", committed, got)
	}
	if s := srv.Stats(); s.Commits+s.Rollbacks != 200 || s.OpenTx != 0 {
		t.Fatalf("server saw %d commits + %d rollbacks for 200 transactions", s.Commits, s.Rollbacks)
	}
	waitFor(t, "all released", func() bool { return c.Stats().Active == 0 })
}

func TestTasksAreIsolated(t *testing.T) {
	srv := newServer(t)
	db, _ := newDB(t, srv, "pool_max_conns=4")
	const n = 4
	ids := make([]int64, n)
	var wg sync.WaitGroup
	var barrier sync.WaitGroup
	barrier.Add(n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, end := pooldriver.WithTask(context.Background())
			defer end()
			if _, err := db.ExecContext(ctx, "BEGIN"); err != nil {
				t.Error(err)
				return
			}
			if _, err := db.ExecContext(ctx, "INSERT iso ?", int64(i)); err != nil {
				t.Error(err)
			}
			var id int64
			if err := db.QueryRowContext(ctx, "CONNID").Scan(&id); err != nil {
				t.Error(err)
			}
			ids[i] = id
			var cnt int64
			if err := db.QueryRowContext(ctx, "COUNT iso").Scan(&cnt); err != nil {
				t.Error(err)
			}
			if cnt != 1 {
				t.Errorf("task %d sees %d rows of the others' transactions", i, cnt)
			}
			barrier.Done()
			barrier.Wait() // all pinned at once
			if _, err := db.ExecContext(ctx, "ROLLBACK"); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	seen := map[int64]bool{}
	for _, id := range ids {
		if seen[id] {
			t.Fatalf("two live tasks shared conn %d", id)
		}
		seen[id] = true
	}
}

func TestOneTaskManyGoroutines(t *testing.T) {
	srv := newServer(t)
	db, _ := newDB(t, srv, "pool_max_conns=4")
	ctx, end := pooldriver.WithTask(context.Background())
	defer end()
	if _, err := db.ExecContext(ctx, "BEGIN"); err != nil {
		t.Fatal(err)
	}
	var id int64
	if err := db.QueryRowContext(ctx, "CONNID").Scan(&id); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 20; i++ {
				// Inside the task's raw transaction: every goroutine's
				// statement waits its turn on the one conn.
				if _, err := db.ExecContext(ctx, "INSERT many ?", int64(i)); err != nil {
					t.Errorf("insert: %v", err)
					return
				}
				var got int64
				if err := db.QueryRowContext(ctx, "CONNID").Scan(&got); err != nil || got != id {
					t.Errorf("statement ran on %d (%v), the transaction is on %d", got, err, id)
					return
				}
			}
		}()
	}
	wg.Wait()
	if _, err := db.ExecContext(ctx, "COMMIT"); err != nil {
		t.Fatal(err)
	}
	if n := len(srv.Table("many")); n != 160 {
		t.Fatalf("%d rows committed, want 160", n)
	}
	if srv.Stats().Overlaps != 0 {
		t.Fatal("two statements ran on one conn at once")
	}
}

func TestTaskMisuse(t *testing.T) {
	srv := newServer(t)
	db, _ := newDB(t, srv, "")
	ctx, end := pooldriver.WithTask(context.Background(), pooldriver.SessionMode, pooldriver.TransactionMode)
	defer end()
	if _, err := db.ExecContext(ctx, "INSERT t 1"); err == nil {
		t.Fatal("a task with two modes was accepted")
	}
	ctx, end2 := pooldriver.WithTask(context.Background(), pooldriver.Mode(9))
	defer end2()
	if _, err := db.ExecContext(ctx, "INSERT t 1"); err == nil {
		t.Fatal("a task with an unknown mode was accepted")
	}
	ctx, end3 := pooldriver.WithTask(context.Background())
	end3()
	if _, err := db.ExecContext(ctx, "INSERT t 1"); !errors.Is(err, context.Canceled) {
		t.Fatalf("statement on an ended task: %v", err)
	}
}
