package pooldriver_test

import (
	"bytes"
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pooldriver/pooldriver"
	"github.com/pooldriver/pooldriver/internal/fakedb"
	"github.com/pooldriver/pooldriver/pool"
)

func connID(t testing.TB, ctx context.Context, q interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}) int64 {
	t.Helper()
	var id int64
	if err := q.QueryRowContext(ctx, "CONNID").Scan(&id); err != nil {
		t.Fatalf("CONNID: %v", err)
	}
	return id
}

func count(t testing.TB, ctx context.Context, db *sql.DB, table string) int64 {
	t.Helper()
	var n int64
	if err := db.QueryRowContext(ctx, "COUNT "+table).Scan(&n); err != nil {
		t.Fatalf("COUNT %s: %v", table, err)
	}
	return n
}

func TestLazyAndBounded(t *testing.T) {
	checkNoGoroutineLeak(t)
	srv := newServer(t)
	db, c := newDB(t, srv, "pool_max_conns=3")
	if s := srv.Stats(); s.Connects != 0 {
		t.Fatalf("New + sql.OpenDB opened %d connections", s.Connects)
	}
	if err := db.Ping(); err != nil {
		t.Fatal(err)
	}
	if s := srv.Stats(); s.Connects != 1 {
		t.Fatalf("first use opened %d connections, want 1", s.Connects)
	}
	db.SetMaxOpenConns(0) // database/sql unbounded: pooldriver's bound must hold anyway
	var wg sync.WaitGroup
	for g := 0; g < 64; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 30; i++ {
				rows, err := db.Query("SELECT 3")
				if err != nil {
					t.Errorf("query: %v", err)
					return
				}
				for rows.Next() {
				}
				rows.Close()
				if _, err := db.Exec("INSERT lazy 1"); err != nil {
					t.Errorf("exec: %v", err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if s := srv.Stats(); s.MaxOpen > 3 || s.Connects > 3 {
		t.Fatalf("server saw %d connections at once (%d opened); pool_max_conns=3", s.MaxOpen, s.Connects)
	}
	if s := c.Stats(); s.Active != 0 || s.Total > 3 {
		t.Fatalf("stats after the load: %+v", s)
	}
}

func TestNoTaskEachOperationReleases(t *testing.T) {
	srv := newServer(t)
	db, c := newDB(t, srv, "pool_max_conns=1")
	if _, err := db.Exec("INSERT t 1"); err != nil {
		t.Fatal(err)
	}
	if s := c.Stats(); s.Active != 0 || s.Idle != 1 {
		t.Fatalf("after Exec: %+v", s)
	}
	rows, err := db.Query("SELECT 2")
	if err != nil {
		t.Fatal(err)
	}
	if s := c.Stats(); s.Active != 1 {
		t.Fatalf("open rows do not hold their connection: %+v", s)
	}
	rows.Close()
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if s := c.Stats(); s.Active != 1 {
		t.Fatalf("open tx does not hold its connection: %+v", s)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if s := c.Stats(); s.Active != 0 {
		t.Fatalf("after Commit: %+v", s)
	}

	// A raw BEGIN outside a task: nothing keeps it; the connection is rolled
	// back before anyone else gets it, and that is counted.
	if _, err := db.Exec("BEGIN"); err != nil {
		t.Fatal(err)
	}
	if s := c.Stats(); s.AutoRollbacks != 1 || s.Active != 0 || srv.OpenTxCount() != 0 {
		t.Fatalf("raw BEGIN outside a task: %+v", s)
	}
	if _, err := db.Exec("INSERT raw 1"); err != nil {
		t.Fatal(err)
	}
	if n := len(srv.Table("raw")); n != 1 {
		t.Fatalf("a statement after a task-less raw BEGIN was caught in its transaction: %d rows committed", n)
	}
	if srv.OpenTxCount() != 0 {
		t.Fatal("a transaction is left open on the server")
	}
}

func TestArgumentsReachTheRealDriversChecker(t *testing.T) {
	srv := newServer(t)
	db, _ := newDB(t, srv, "")
	// database/sql's default converter rejects fakedb.Point; fakedb's own
	// CheckNamedValue accepts it: pooldriver must use the latter.
	var point any
	if err := db.QueryRow("ECHO ?", fakedb.Point{X: 1, Y: 2}).Scan(&point); err != nil {
		t.Fatalf("custom argument type: %v", err)
	}
	if point != (fakedb.Point{X: 1, Y: 2}) {
		t.Fatalf("ECHO Point = %#v", point)
	}
	var got string
	// A driver.Valuer still goes through the default conversion.
	if err := db.QueryRow("ECHO ?", valuer{"v"}).Scan(&got); err != nil || got != "v" {
		t.Fatalf("Valuer argument: %q, %v", got, err)
	}
	if _, err := db.Exec("INSERT t ?", struct{}{}); err == nil {
		t.Fatal("an unsupported argument type was accepted")
	}
}

type valuer struct{ s string }

func (v valuer) Value() (driver.Value, error) { return v.s, nil }

func TestRowsKeepOptionalInterfaces(t *testing.T) {
	srv := newServer(t)
	db, _ := newDB(t, srv, "")
	rows, err := db.Query("MULTI")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	types, err := rows.ColumnTypes()
	if err != nil {
		t.Fatal(err)
	}
	if types[0].DatabaseTypeName() != "INT8" || types[1].DatabaseTypeName() != "TEXT" {
		t.Fatalf("column types lost: %s %s", types[0].DatabaseTypeName(), types[1].DatabaseTypeName())
	}
	n := 0
	for rows.Next() {
		n++
	}
	if !rows.NextResultSet() {
		t.Fatalf("second result set lost (err %v)", rows.Err())
	}
	for rows.Next() {
		n++
	}
	if n != 3 || rows.Err() != nil {
		t.Fatalf("read %d rows, err %v", n, rows.Err())
	}
}

func TestPreparedStatementFollowsPhysicalConns(t *testing.T) {
	srv := newServer(t)
	db, _ := newDB(t, srv, "pool_max_conns=2&pool_mode=session")
	db.SetMaxOpenConns(1) // one logical conn, so the statement is prepared once by database/sql
	stmt, err := db.Prepare("CONNID")
	if err != nil {
		t.Fatal(err)
	}
	defer stmt.Close()
	ctx1, end1 := pooldriver.WithTask(context.Background())
	defer end1()
	ctx2, end2 := pooldriver.WithTask(context.Background())
	defer end2()
	var a, b int64
	if err := stmt.QueryRowContext(ctx1).Scan(&a); err != nil {
		t.Fatal(err)
	}
	if err := stmt.QueryRowContext(ctx2).Scan(&b); err != nil {
		t.Fatal(err)
	}
	if a == b {
		t.Fatal("two session tasks shared a physical connection")
	}
	for i := 0; i < 3; i++ {
		var x int64
		if err := stmt.QueryRowContext(ctx1).Scan(&x); err != nil || x != a {
			t.Fatalf("statement on task 1: %d, %v", x, err)
		}
	}
	if s := srv.Stats(); s.Prepares != 2 {
		t.Fatalf("prepared %d times; want once per physical connection (2)", s.Prepares)
	}
	end1()
	end2()
	_, err = db.Prepare("NO SUCH STATEMENT")
	if err == nil || !strings.Contains(err.Error(), "syntax error") {
		t.Fatalf("Prepare did not report the syntax error: %v", err)
	}
}

func TestBadConnIsRetriedOnlyWhenSafe(t *testing.T) {
	srv := newServer(t)
	db, c := newDB(t, srv, "pool_max_conns=2")
	var wg sync.WaitGroup
	for i := 0; i < 2; i++ { // two physical conns, both idle afterwards
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = db.Exec("SLEEP 20ms")
		}()
	}
	wg.Wait()
	srv.BreakAll() // the statement cannot have run: database/sql retries
	if _, err := db.Exec("INSERT t 1"); err != nil {
		t.Fatalf("broken idle conns were surfaced: %v", err)
	}
	srv.KillAll() // killed mid-statement: the error must surface
	var sawKill bool
	for i := 0; i < 3; i++ {
		_, err := db.Exec("INSERT t 2")
		if errors.Is(err, fakedb.ErrKilled) {
			sawKill = true
		} else if err != nil {
			t.Fatalf("unexpected error: %v", err)
		}
	}
	if !sawKill {
		t.Fatal("a statement killed mid-way was silently retried")
	}
	if _, err := db.Exec("INSERT t 3"); err != nil {
		t.Fatalf("pool did not recover: %v", err)
	}
	waitFor(t, "dead conns replaced", func() bool { return c.Stats().Destroyed >= 2 })
}

func TestRawConn(t *testing.T) {
	srv := newServer(t)
	db, _ := newDB(t, srv, "")
	sc, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	var id int64
	err = sc.Raw(func(dc any) error {
		return pooldriver.RawConn(context.Background(), dc, func(raw any) error {
			fc, ok := raw.(*fakedb.Conn)
			if !ok {
				t.Fatalf("raw conn is %T", raw)
			}
			id = fc.ID()
			return nil
		})
	})
	if err != nil || id == 0 {
		t.Fatalf("RawConn: id %d, %v", id, err)
	}
	if err := pooldriver.RawConn(context.Background(), 42, func(any) error { return nil }); err == nil {
		t.Fatal("RawConn accepted a foreign value")
	}
}

// TestRawConnPanics: a RawConn function that panics passes the panic on,
// and its connection, whose state nobody knows, is destroyed rather than
// parked or reset while it is still claimed: with one connection in the
// pool, the next statement runs on a new one, within its deadline.
func TestRawConnPanics(t *testing.T) {
	srv := newServer(t)
	db, c := newDB(t, srv, "pool_max_conns=1")
	sc, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan any, 1)
	go func() {
		defer func() { done <- recover() }()
		_ = sc.Raw(func(dc any) error {
			return pooldriver.RawConn(context.Background(), dc, func(any) error { panic("boom") })
		})
	}()
	select {
	case p := <-done:
		if p != "boom" {
			t.Fatalf("recovered %v, want the function's panic", p)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the panic did not come back within 10 s: the connection's release waits for the claim the panicking RawConn still has")
	}
	_ = sc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := db.ExecContext(ctx, "INSERT t 1"); err != nil {
		t.Fatalf("the statement after the panic: %v", err)
	}
	if st := c.Stats(); st.Destroyed != 1 {
		t.Fatalf("%d connections destroyed, want the one RawConn's function panicked on", st.Destroyed)
	}
}

func TestCredentialsNeverShow(t *testing.T) {
	const secret = "s3cr3t-Pa55"
	srv := newServer(t)
	srv.SetPassword("bob", secret)
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	dsn := "fake://bob:" + secret + "@" + srv.Name() + "?pool_max_conns=2"
	c := pooldriver.New(dsn, pooldriver.WithLogger(logger))
	if err := c.Err(); err != nil {
		t.Fatal(err)
	}
	db := sql.OpenDB(c)
	defer db.Close()
	if _, err := db.Exec("BEGIN"); err != nil { // auto-rollback: a warning is logged
		t.Fatal(err)
	}
	bad := pooldriver.New("fake://bob:wrong-" + secret + "@" + srv.Name())
	if err := bad.Err(); err != nil {
		t.Fatal(err)
	}
	badDB := sql.OpenDB(bad)
	defer badDB.Close()
	_, loginErr := badDB.Exec("INSERT t 1")
	if loginErr == nil || !strings.Contains(loginErr.Error(), "authentication failed") {
		t.Fatalf("wrong password: %v", loginErr)
	}
	for what, s := range map[string]string{
		"String":      c.String(),
		"Stats":       fmtAny(c.Stats()),
		"login error": loginErr.Error(),
		"bad String":  bad.String(),
		"logs":        logs.String(),
	} {
		if strings.Contains(s, secret) {
			t.Errorf("%s shows the password: %s", what, s)
		}
	}
	if !strings.Contains(c.String(), "bob") || !strings.Contains(logs.String(), "rolled back") {
		t.Fatalf("String %q, logs %q", c.String(), logs.String())
	}
}

func TestWithCredentialsIsAskedPerConnection(t *testing.T) {
	srv := newServer(t)
	srv.SetPassword("alice", "one")
	var calls atomic.Int64
	var password atomic.Value
	password.Store("one")
	db, c := newDB(t, srv, "pool_max_conns=2", pooldriver.WithCredentials(func(context.Context) (string, string, error) {
		calls.Add(1)
		return "alice", password.Load().(string), nil
	}))
	ctx, end := pooldriver.WithTask(context.Background(), pooldriver.SessionMode)
	defer end()
	connID(t, ctx, db) // first conn, held by the session task
	srv.SetPassword("alice", "two")
	password.Store("two") // rotated: the next conn uses the new one
	connID(t, context.Background(), db)
	connID(t, ctx, db) // the old conn keeps working
	if calls.Load() != 2 {
		t.Fatalf("credentials function called %d times for 2 connections", calls.Load())
	}
	if s := c.Stats(); s.Created != 2 {
		t.Fatalf("stats: %+v", s)
	}
}

func TestBadOptions(t *testing.T) {
	srv := newServer(t)
	dsn := "fake://" + srv.Name()
	cases := []struct {
		opt  pooldriver.Option
		want string
	}{
		{pooldriver.WithMaxConns(0), "WithMaxConns(0)"},
		{pooldriver.WithMinConns(-1), "WithMinConns(-1)"},
		{pooldriver.WithAcquireTimeout(-time.Second), "WithAcquireTimeout(-1s)"},
		{pooldriver.WithHealthCheckPeriod(-time.Second), "WithHealthCheckPeriod(-1s)"},
		{pooldriver.WithMaxConnLifetime(-time.Second), "WithMaxConnLifetime(-1s)"},
		{pooldriver.WithMaxConnIdleTime(-time.Second), "WithMaxConnIdleTime(-1s)"},
		{pooldriver.WithCleanupTimeout(0), "WithCleanupTimeout(0s)"},
		{pooldriver.WithMode(7), "WithMode(7)"},
		{pooldriver.WithCredentials(nil), "WithCredentials(nil)"},
		{pooldriver.WithMinConns(11), "pool_min_conns/WithMinConns (11) is greater than pool_max_conns/WithMaxConns (10)"},
		{pooldriver.WithMinIdleConns(-1), "WithMinIdleConns(-1)"},
		{pooldriver.WithMinIdleConns(11), "pool_min_idle_conns/WithMinIdleConns (11) is greater than pool_max_conns/WithMaxConns (10)"},
		{pooldriver.WithMaxConnLifetimeJitter(-time.Second), "WithMaxConnLifetimeJitter(-1s)"},
		{pooldriver.WithLeakDetection(-time.Second), "WithLeakDetection(-1s)"},
		{pooldriver.WithPoolName(""), "WithPoolName"},
		{pooldriver.WithAfterConnect(nil), "WithAfterConnect(nil)"},
		{pooldriver.WithBeforeAcquire(nil), "WithBeforeAcquire(nil)"},
		{pooldriver.WithAfterRelease(nil), "WithAfterRelease(nil)"},
		{pooldriver.WithBeforeClose(nil), "WithBeforeClose(nil)"},
		{pooldriver.WithBeforeConnect(nil), "WithBeforeConnect(nil)"},
		{pooldriver.WithBeforeConnect(func(context.Context, any) error { return nil }), "WithBeforeConnect: this connector has no driver configuration"},
	}
	for _, tc := range cases {
		err := pooldriver.New(dsn, tc.opt).Err()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("option %s: error %v", tc.want, err)
		}
		// New defers the same error to the first use.
		db := sql.OpenDB(pooldriver.New(dsn, tc.opt))
		if err := db.Ping(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New with option %s: first use gave %v", tc.want, err)
		}
		db.Close()
	}
	// An option overrides the DSN.
	c := pooldriver.New(dsn+"?pool_max_conns=2", pooldriver.WithMaxConns(5))
	if err := c.Err(); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.Stats().MaxConns != 5 {
		t.Fatalf("option did not override the DSN: max %d", c.Stats().MaxConns)
	}
}

func TestAcquireTimeoutThroughDatabaseSQL(t *testing.T) {
	srv := newServer(t)
	// The one connection is opened by the pool, not for the first
	// acquire, which would wait for it only 50 ms (a busy machine).
	db, c := newDB(t, srv, "pool_max_conns=1&pool_min_conns=1&pool_acquire_timeout=50ms")
	waitFor(t, "the pool's one connection", func() bool { return c.Stats().Idle == 1 })
	ctx, end := pooldriver.WithTask(context.Background())
	defer end()
	if _, err := db.ExecContext(ctx, "BEGIN"); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err := db.Exec("INSERT t 1")
	if !errors.Is(err, pooldriver.ErrAcquireTimeout) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want ErrAcquireTimeout", err)
	}
	// The error tells the pool's state, as HikariCP's does.
	var te *pooldriver.AcquireTimeoutError
	if !errors.As(err, &te) {
		t.Fatalf("%v (%T) is no *AcquireTimeoutError", err, err)
	}
	want := pooldriver.AcquireTimeoutError{Timeout: 50 * time.Millisecond, Total: 1, InUse: 1, Idle: 0, Waiting: 0, Max: 1, LeakDetectionOff: true}
	if *te != want {
		t.Fatalf("pool state %+v, want %+v", *te, want)
	}
	if msg := err.Error(); !strings.Contains(msg, "total=1, in use=1, idle=0, waiting=0, max=1") {
		t.Fatalf("message %q does not tell the pool's state", msg)
	}
	if msg := err.Error(); !strings.Contains(msg, "pool_leak_detection_threshold") {
		t.Fatalf("message %q, of an exhausted pool without leak detection, does not suggest it", msg)
	}
	if d := time.Since(start); d < 50*time.Millisecond {
		t.Fatalf("timed out after %v, before pool_acquire_timeout", d)
	}
	if c.Stats().AcquireTimeouts != 1 {
		t.Fatalf("stats: %+v", c.Stats())
	}
}

func TestCircuitOpenThroughDatabaseSQL(t *testing.T) {
	srv := newServer(t)
	db, c := newDB(t, srv, "")
	c.Breaker().Deactivate()
	if _, err := db.Exec("INSERT t 1"); !errors.Is(err, pooldriver.ErrCircuitOpen) {
		t.Fatalf("got %v, want ErrCircuitOpen", err)
	}
	c.Breaker().Activate()
	if _, err := db.Exec("INSERT t 1"); err != nil {
		t.Fatal(err)
	}
}

func TestCircuitBreakerStrategy(t *testing.T) {
	srv := newServer(t)
	st, err := pool.NewThresholdStrategy(2, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	db, c := newDB(t, srv, "pool_max_conns=2", pooldriver.WithCircuitBreaker(st))
	srv.FailConnects(2, errors.New("server down"))
	for i := 0; i < 2; i++ {
		if _, err := db.Exec("INSERT t 1"); err == nil || errors.Is(err, pooldriver.ErrCircuitOpen) || errors.Is(err, pool.ErrBackoff) {
			t.Fatalf("attempt %d: %v, want the connect error", i, err)
		}
		time.Sleep(150 * time.Millisecond) // past the back-off: the next statement dials
	}
	if _, err := db.Exec("INSERT t 1"); !errors.Is(err, pooldriver.ErrCircuitOpen) {
		t.Fatalf("after 2 failed connects: %v, want ErrCircuitOpen", err)
	}
	if c.Breaker().State() != pool.Inactive {
		t.Fatalf("breaker: %v", c.Breaker().State())
	}
	c.Breaker().Recover() // as the cool-down would
	if _, err := db.Exec("INSERT t 1"); err != nil {
		t.Fatalf("trial after recovery: %v", err)
	}
	if c.Breaker().State() != pool.Active {
		t.Fatalf("breaker after a good trial: %v", c.Breaker().State())
	}
	if err := pooldriver.New("fake://x", pooldriver.WithCircuitBreaker(nil)).Err(); err == nil {
		t.Fatal("WithCircuitBreaker(nil) accepted")
	}
	// A nil pointer of a strategy type is refused when the Connector is
	// made, not found by the first event it would be told of.
	var nilStrategy *pool.ThresholdStrategy
	err = pooldriver.New("fake://"+srv.Name(), pooldriver.WithCircuitBreaker(nilStrategy)).Err()
	if err == nil || !strings.Contains(err.Error(), "CircuitBreaker (WithCircuitBreaker) is a nil *pool.ThresholdStrategy") {
		t.Fatalf("WithCircuitBreaker((*pool.ThresholdStrategy)(nil)): %v", err)
	}
}

// TestDefaultBreakerLogsAndCounts: without WithCircuitBreaker the default
// strategy opens the circuit after 5 failed connects in a row, and its state
// changes are logged through WithLogger and counted in Stats; a statement
// then waits for a connection in use, is handed an idle one, and with
// neither fails at once with ErrCircuitOpen wrapping the last connect
// error.
func TestThresholdBreakerLogsAndCounts(t *testing.T) {
	srv := newServer(t)
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	st, err := pool.NewThresholdStrategy(5, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	db, c := newDB(t, srv, "pool_max_conns=2", pooldriver.WithLogger(log), pooldriver.WithCircuitBreaker(st))
	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := conn.PingContext(context.Background()); err != nil { // one physical connection, kept
		t.Fatal(err)
	}
	down := errors.New("server down")
	srv.FailConnects(5, down)
	// Each statement dials (or is told of the back-off) and fails with
	// the connect error, until the fifth failed dial opens the circuit.
	waitFor(t, "the circuit open", func() bool {
		if _, err := db.Exec("INSERT t 1"); !errors.Is(err, down) {
			t.Fatalf("got %v, want the connect error", err)
		}
		return c.Breaker().State() == pool.Inactive
	})
	if s := c.Stats(); s.ConnectErrors != 5 {
		t.Fatalf("the circuit opened after %d failed connects, want 5", s.ConnectErrors)
	}
	// A statement that can wait for the connection in use waits for it
	// within its context (the open circuit refuses new connections, not
	// the ones there are), and its error says why it could get none. A
	// second, for it to reach the wait however busy the machine.
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	_, err = db.ExecContext(ctx, "INSERT t 1")
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, down) || !strings.Contains(err.Error(), "breaker open") {
		t.Fatalf("while open, one in use: %v, want the deadline wrapping the connect error", err)
	}
	if err := conn.Close(); err != nil { // its physical connection goes idle
		t.Fatal(err)
	}
	if _, err := db.Exec("INSERT t 1"); err != nil {
		t.Fatalf("an idle connection was refused while open: %v", err)
	}
	// With none left, in use or idle, a statement fails at once.
	srv.KillAll()
	_, _ = db.Exec("INSERT t 1") // finds the connection killed, which then goes
	waitFor(t, "the killed connection gone", func() bool { return c.Stats().Total == 0 })
	start := time.Now()
	_, err = db.Exec("INSERT t 1")
	if !errors.Is(err, pooldriver.ErrCircuitOpen) || !errors.Is(err, down) {
		t.Fatalf("while open, none left: %v, want ErrCircuitOpen wrapping the connect error", err)
	}
	if d := time.Since(start); d > 100*time.Millisecond {
		t.Logf("failing at once took %v", d)
	}
	s := c.Stats()
	if s.BreakerState != pool.Inactive || s.BreakerChanges != 1 || s.CircuitRejects < 1 {
		t.Fatalf("stats: %+v", s)
	}
	if !strings.Contains(logs.String(), "level=WARN msg=\"pooldriver: circuit breaker open: not dialing new connections") || !strings.Contains(logs.String(), "from=closed to=open") ||
		!strings.Contains(logs.String(), "server down") {
		t.Fatalf("log: %s", logs.String())
	}
}

// TestDefaultBreakerNeverOpens: by default failed dials never open the
// circuit: each statement that needs a connection dials (or is told of the
// back-off), and the first one after the server is back succeeds.
func TestDefaultBreakerNeverOpens(t *testing.T) {
	srv := newServer(t)
	db, c := newDB(t, srv, "pool_max_conns=2")
	down := errors.New("server down")
	srv.FailConnects(8, down) // more than the threshold a strategy that opens would use
	for c.Stats().ConnectErrors < 8 {
		if _, err := db.Exec("INSERT t 1"); !errors.Is(err, down) {
			t.Fatalf("got %v, want the connect error", err)
		}
		if s := c.Breaker().State(); s != pool.Active {
			t.Fatalf("after %d failed connects the breaker is %v", c.Stats().ConnectErrors, s)
		}
	}
	waitFor(t, "a statement once the server is back", func() bool {
		_, err := db.Exec("INSERT t 1")
		if err != nil && !errors.Is(err, pooldriver.ErrBackoff) {
			t.Fatalf("after the server is back: %v", err)
		}
		return err == nil
	})
	if s := c.Stats(); s.BreakerChanges != 0 || s.CircuitRejects != 0 {
		t.Fatalf("stats: %+v", s)
	}
}

func TestOpenAndRegisteredDriver(t *testing.T) {
	srv := newServer(t)
	dsn := "fake://" + srv.Name() + "?pool_max_conns=2"
	db1, err := sql.Open("pooldriver", dsn)
	if err != nil {
		t.Fatal(err)
	}
	db2, err := pooldriver.Open(dsn)
	if err != nil {
		t.Fatal(err)
	}
	for _, db := range []*sql.DB{db1, db2} {
		if _, err := db.Exec("INSERT t 1"); err != nil {
			t.Fatal(err)
		}
	}
	if srv.Stats().Open != 2 {
		t.Fatalf("open conns: %d", srv.Stats().Open)
	}
	db1.Close()
	db2.Close()
	if srv.Stats().Open != 0 {
		t.Fatalf("db.Close left %d server connections open", srv.Stats().Open)
	}
	if _, err := db1.Exec("INSERT t 1"); err == nil {
		t.Fatal("statement after Close succeeded")
	}
	if _, err := sql.Open("pooldriver", "nosuch://x"); err == nil {
		t.Fatal("sql.Open accepted an unknown scheme")
	}
}

func TestCloseWithConnectionsInUse(t *testing.T) {
	srv := newServer(t)
	c := pooldriver.New("fake://" + srv.Name())
	if err := c.Err(); err != nil {
		t.Fatal(err)
	}
	db := sql.OpenDB(c)
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("INSERT t 1"); err != nil {
		t.Fatal(err)
	}
	c.Close() // the idle one closes now, the one in use when it comes back
	if srv.Stats().Open != 1 {
		t.Fatalf("after Close: %d open", srv.Stats().Open)
	}
	tx.Rollback()
	if srv.Stats().Open != 0 {
		t.Fatalf("the connection in use was not closed when released")
	}
	if _, err := db.Exec("INSERT t 1"); !errors.Is(err, pooldriver.ErrClosed) {
		t.Fatalf("after Close: %v", err)
	}
	db.Close()
}

// TestWrapJitterFollowsLifetime: a wrapped connector's lifetime jitter is
// a tenth of its final lifetime, the default's or an option's, unless
// given.
func TestWrapJitterFollowsLifetime(t *testing.T) {
	srv := newServer(t)
	for _, c := range []struct {
		opts []pooldriver.Option
		want time.Duration
	}{
		{nil, time.Hour / 10},
		{[]pooldriver.Option{pooldriver.WithMaxConnLifetime(20 * time.Minute)}, 2 * time.Minute},
		{[]pooldriver.Option{pooldriver.WithMaxConnLifetime(0)}, 0},
		{[]pooldriver.Option{pooldriver.WithMaxConnLifetimeJitter(time.Second), pooldriver.WithMaxConnLifetime(20 * time.Minute)}, time.Second},
	} {
		w := pooldriver.Wrap(srv.Connector(), c.opts...)
		if err := w.Err(); err != nil {
			t.Fatal(err)
		}
		if got := w.Config().MaxConnLifetimeJitter; got != c.want {
			t.Errorf("%d options: jitter %v, want %v", len(c.opts), got, c.want)
		}
		_ = w.Close()
	}
}

func TestWrapGenericDialect(t *testing.T) {
	srv := newServer(t)
	c := pooldriver.Wrap(srv.Connector(), pooldriver.WithMaxConns(1))
	db := sql.OpenDB(c)
	defer db.Close()
	// BeginTx is tracked: the task's statements join the transaction.
	ctx, end := pooldriver.WithTask(context.Background())
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec("INSERT w 1"); err != nil {
		t.Fatal(err)
	}
	end()
	if err := tx.Commit(); err == nil {
		t.Fatal("Commit after the task ended succeeded")
	}
	if len(srv.Table("w")) != 0 {
		t.Fatal("the ended task's transaction was committed")
	}
	// Session mode: an unknown driver's session cannot be reset (its
	// ResetSession promises nothing), so the connection is replaced.
	destroyed := c.Stats().Destroyed
	ctx, end = pooldriver.WithTask(context.Background(), pooldriver.SessionMode)
	if _, err := db.ExecContext(ctx, "SET x 1"); err != nil {
		t.Fatal(err)
	}
	end()
	var v sql.NullString
	if err := db.QueryRow("GET x").Scan(&v); err != nil || v.Valid {
		t.Fatalf("session survived its task: %v %v", v, err)
	}
	pooldriver.WaitCleanups(c) // the end's settling runs in the background
	if s := c.Stats(); s.SessionResets != 0 || s.Destroyed != destroyed+1 {
		t.Fatalf("stats: %+v, want the dirty connection replaced", s)
	}
	if err := pooldriver.Wrap(srv.Connector(), pooldriver.WithCredentials(
		func(context.Context) (string, string, error) { return "", "", nil })).Err(); err == nil {
		t.Fatal("Wrap accepted WithCredentials")
	}
	if err := pooldriver.Wrap(nil).Err(); err == nil {
		t.Fatal("Wrap(nil) accepted")
	}
}

func fmtAny(v any) string { return strings.TrimSpace(strings.ReplaceAll(sprint(v), "\n", " ")) }

// TestConnectTimeout: pool_connect_timeout bounds a connection attempt to a
// server that does not answer, so the caller gets an error in bounded time
// and the pool's slot is free again; WithConnectTimeout overrides it.
func TestConnectTimeout(t *testing.T) {
	srv := newServer(t)
	srv.SetConnectDelay(time.Minute)
	db, c := newDB(t, srv, "pool_max_conns=1&pool_connect_timeout=50ms")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	_, err := db.ExecContext(ctx, "PING")
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("statement against a server that does not answer: %v, want a deadline error", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("it took %v", d)
	}
	if s := c.Stats(); s.ConnectErrors == 0 || s.Total != 0 {
		t.Fatalf("stats %+v: want the failed attempt counted and its slot free", s)
	}
	srv.SetConnectDelay(0)
	// Right after the failed attempt the caller waits for its turn of
	// attempt (within pool.DefaultBackoffMax), which succeeds now.
	if _, err := db.ExecContext(ctx, "PING"); err != nil {
		t.Fatalf("after the server answers again: %v", err)
	}

	bad := []string{"pool_connect_timeout=-1s", "pool_connect_timeout=soon"}
	for _, p := range bad {
		if err := pooldriver.New("fake://" + srv.Name() + "?" + p).Err(); err == nil || !strings.Contains(err.Error(), "pool_connect_timeout") {
			t.Errorf("%s: %v, want an error naming pool_connect_timeout", p, err)
		}
	}
	if err := pooldriver.New("fake://"+srv.Name(), pooldriver.WithConnectTimeout(-time.Second)).Err(); err == nil || !strings.Contains(err.Error(), "WithConnectTimeout") {
		t.Errorf("WithConnectTimeout(-1s): %v", err)
	}
}
