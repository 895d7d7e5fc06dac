package pooldriver_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pooldriver/pooldriver"
)

// recorder is a Tracer that records what it is told, and marks the context
// it returns so that End can check it gets it back.
type recorder struct {
	mu     sync.Mutex
	events []string
	acq    []pooldriver.TraceAcquireEndData
	conn   []pooldriver.TraceConnectEndData
	// parents of the connects: the acquire (its number) whose context
	// they ran with, or -1 for none.
	connParent []int
	seq        int
}

type traceKey struct{}

func (r *recorder) TraceAcquireStart(ctx context.Context, d pooldriver.TraceAcquireStartData) context.Context {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seq++
	r.events = append(r.events, "acquire start "+d.PoolName)
	return context.WithValue(ctx, traceKey{}, r.seq)
}

func (r *recorder) TraceAcquireEnd(ctx context.Context, d pooldriver.TraceAcquireEndData) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := ctx.Value(traceKey{}).(int); !ok {
		r.events = append(r.events, "acquire end without its start's context")
	}
	r.events = append(r.events, "acquire end "+d.PoolName)
	r.acq = append(r.acq, d)
}

func (r *recorder) TraceConnectStart(ctx context.Context, d pooldriver.TraceConnectStartData) context.Context {
	r.mu.Lock()
	defer r.mu.Unlock()
	parent, ok := ctx.Value(traceKey{}).(int)
	if !ok {
		parent = -1
	}
	r.connParent = append(r.connParent, parent)
	r.events = append(r.events, "connect start "+d.PoolName)
	return ctx
}

func (r *recorder) TraceConnectEnd(_ context.Context, d pooldriver.TraceConnectEndData) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, "connect end "+d.PoolName)
	r.conn = append(r.conn, d)
}

func (r *recorder) snapshot() (events []string, acq []pooldriver.TraceAcquireEndData, conn []pooldriver.TraceConnectEndData, parents []int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.events...), append(acq, r.acq...), append(conn, r.conn...), append(parents, r.connParent...)
}

func TestTracerAcquireAndConnect(t *testing.T) {
	srv := newServer(t)
	rec := &recorder{}
	db, c := newDB(t, srv, "pool_name=orders", pooldriver.WithTracer(rec), pooldriver.WithMaxConns(1))
	if _, err := db.Exec("INSERT t 1"); err != nil {
		t.Fatal(err)
	}
	events, acq, conn, parents := rec.snapshot()
	want := []string{"acquire start orders", "connect start orders", "connect end orders", "acquire end orders"}
	if strings.Join(events, "; ") != strings.Join(want, "; ") {
		t.Fatalf("events %q, want %q", events, want)
	}
	if acq[0].Err != nil || acq[0].Wait <= 0 || conn[0].Err != nil || conn[0].Duration <= 0 {
		t.Errorf("acquire %+v, connect %+v", acq[0], conn[0])
	}
	if parents[0] != 1 {
		t.Errorf("the connect ran with the context of acquire %d, want 1 (the one that caused it)", parents[0])
	}
	if !strings.Contains(c.Config().String(), "set=Tracer") {
		t.Errorf("Config.String() = %q: does not name the Tracer", c.Config().String())
	}
}

func TestTracerConnectFails(t *testing.T) {
	srv := newServer(t)
	rec := &recorder{}
	db, _ := newDB(t, srv, "", pooldriver.WithTracer(rec), pooldriver.WithMaxConns(1))
	boom := errors.New("connection refused")
	// Every connect fails: a busy machine may let database/sql's retry
	// of the statement come after the first failure's back-off.
	srv.FailConnects(1000, boom)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if _, err := db.ExecContext(ctx, "INSERT t 1"); err == nil {
		t.Fatal("Exec succeeded; want the connect's error")
	}
	waitFor(t, "the failed connect traced", func() bool {
		_, _, conn, _ := rec.snapshot()
		return len(conn) > 0
	})
	_, acq, conn, _ := rec.snapshot()
	if !errors.Is(conn[0].Err, boom) {
		t.Errorf("connect error %v, want %v", conn[0].Err, boom)
	}
	if len(acq) == 0 || acq[0].Err == nil {
		t.Errorf("acquires %+v: want the first to have failed", acq)
	}
}

func TestTracerAcquireTimeout(t *testing.T) {
	srv := newServer(t)
	rec := &recorder{}
	// The timeout bounds the Begin's acquire (and connect) as well as the
	// Exec's wait: a second, not less, so that a busy machine connects in
	// time.
	db, _ := newDB(t, srv, "pool_acquire_timeout=1s", pooldriver.WithTracer(rec), pooldriver.WithMaxConns(1))
	tx, err := db.Begin() // holds the only connection
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	_, err = db.Exec("INSERT t 1")
	var te *pooldriver.AcquireTimeoutError
	if !errors.As(err, &te) {
		t.Fatalf("Exec: %v, want an *AcquireTimeoutError", err)
	}
	_, acq, _, _ := rec.snapshot()
	last := acq[len(acq)-1]
	if !errors.As(last.Err, &te) || last.Wait < time.Second {
		t.Errorf("last acquire %+v: want the timeout, after at least 1s", last)
	}
}

// The pool's own connects (pool_min_conns) run with no acquire's context.
func TestTracerBackgroundConnect(t *testing.T) {
	srv := newServer(t)
	rec := &recorder{}
	newDB(t, srv, "pool_min_conns=1", pooldriver.WithTracer(rec))
	waitFor(t, "the pre-warm connect traced", func() bool {
		_, _, conn, _ := rec.snapshot()
		return len(conn) > 0
	})
	if _, _, _, parents := rec.snapshot(); parents[0] != -1 {
		t.Errorf("pre-warm connect ran with acquire %d's context", parents[0])
	}
}

func TestWithTracerNil(t *testing.T) {
	srv := newServer(t)
	err := pooldriver.New("fake://"+srv.Name(), pooldriver.WithTracer(nil)).Err()
	if err == nil || !strings.Contains(err.Error(), "WithTracer(nil)") {
		t.Fatalf("WithTracer(nil): %v", err)
	}
	err = pooldriver.New("fake://"+srv.Name(), pooldriver.WithTracer((*recorder)(nil))).Err()
	if err == nil || !strings.Contains(err.Error(), "nil *pooldriver_test.recorder") {
		t.Fatalf("WithTracer((*recorder)(nil)): %v", err)
	}
}

// releaseRecorder is a recorder that hears of releases too.
type releaseRecorder struct {
	recorder
	rel []pooldriver.TraceReleaseData
}

func (r *releaseRecorder) TraceRelease(d pooldriver.TraceReleaseData) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rel = append(r.rel, d)
}

func (r *releaseRecorder) releases() (acquired int, rel []pooldriver.TraceReleaseData) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, a := range r.acq {
		if a.Err == nil {
			acquired++
		}
	}
	return acquired, append(rel, r.rel...)
}

// contextReleaseRecorder is a ReleaseContextTracer that keeps the value of
// requestKey (log_test.go) in each release's context.
type contextReleaseRecorder struct {
	recorder
	requests []any
}

func (r *contextReleaseRecorder) TraceReleaseContext(ctx context.Context, _ pooldriver.TraceReleaseData) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.requests = append(r.requests, ctx.Value(requestKey{}))
}

// TestTracerReleaseContext: a ReleaseContextTracer is told each release
// with its acquire's context, the request's: a statement's, which parks
// its connection, and a *sql.Conn's.
func TestTracerReleaseContext(t *testing.T) {
	srv := newServer(t)
	rec := &contextReleaseRecorder{}
	db, _ := newDB(t, srv, "", pooldriver.WithTracer(rec), pooldriver.WithMaxConns(1))
	ctx := context.WithValue(context.Background(), requestKey{}, "req-1")
	if _, err := db.ExecContext(ctx, "INSERT t 1"); err != nil {
		t.Fatal(err)
	}
	db.SetMaxIdleConns(0) // the next logical conn is another, which goes to the pool
	ctx2 := context.WithValue(context.Background(), requestKey{}, "req-2")
	conn, err := db.Conn(ctx2)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(ctx2, "INSERT t 2"); err != nil {
		t.Fatal(err)
	}
	if err := conn.Close(); err != nil {
		t.Fatal(err)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.requests) != 2 || rec.requests[0] != "req-1" || rec.requests[1] != "req-2" {
		t.Fatalf("releases told with the requests %v, want [req-1 req-2]", rec.requests)
	}
}

// TestTracerRelease: a Tracer that is a ReleaseTracer hears of one release
// per acquire it heard of, with how long the hold had the connection and
// what was done with it: parked for the next statement of a serial
// caller, reset after a session change, closed after a break.
func TestTracerRelease(t *testing.T) {
	srv := newServer(t)
	rec := &releaseRecorder{}
	db, c := newDB(t, srv, "pool_name=orders", pooldriver.WithTracer(rec), pooldriver.WithMaxConns(1))
	ctx := context.Background()
	for i := range 3 { // serial: the first acquire is traced, the others take back the parked connection
		if _, err := db.ExecContext(ctx, "INSERT t 1"); err != nil {
			t.Fatal(err)
		}
		if acquired, rel := rec.releases(); i == 0 && (acquired != 1 || len(rel) != 1) {
			t.Fatalf("after the first statement, which parked its connection: %d acquires, releases %+v, want its release told as it parked", acquired, rel)
		}
	}
	db.SetMaxIdleConns(0)   // the next logical conn is another
	sc, err := db.Conn(ctx) // a hold of its own, which takes its connection from the pool
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sc.ExecContext(ctx, "SET a 1"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * time.Millisecond)
	if err := sc.Close(); err != nil {
		t.Fatal(err)
	}
	pooldriver.WaitCleanups(c)
	acquired, rel := rec.releases()
	if acquired != len(rel) {
		t.Fatalf("%d acquires traced, %d releases: %+v", acquired, len(rel), rel)
	}
	last := rel[len(rel)-1]
	if !last.Reset || last.Closed || last.PoolName != "orders" || last.Held < 10*time.Millisecond {
		t.Fatalf("the *sql.Conn that changed its session: %+v, want reset, not closed, held 10ms or more", last)
	}
	for _, r := range rel[:len(rel)-1] {
		if r.Reset || r.Closed {
			t.Fatalf("a clean statement's release: %+v", r)
		}
	}

	sc, err = db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	srv.BreakAll()
	_, _ = sc.ExecContext(ctx, "INSERT t 2") // fails: the connection broke
	_ = sc.Close()
	acquired, rel = rec.releases()
	if acquired != len(rel) || !rel[len(rel)-1].Closed {
		t.Fatalf("after a break: %d acquires, releases %+v, want the last closed", acquired, rel)
	}
}
