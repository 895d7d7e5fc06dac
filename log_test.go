package pooldriver_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/pooldriver/pooldriver"
)

// record is one captured log line: its level, message and attributes
// (values as the handler would print them; an error attribute keeps its
// value, to tell a nil one).
type record struct {
	level slog.Level
	msg   string
	attrs map[string]slog.Value
}

// capture is a slog.Handler that keeps every record, at every level.
type capture struct {
	records *[]record // guarded by captureMu: derived handlers share it
	attrs   []slog.Attr
}

func newCapture() (*capture, *slog.Logger) {
	h := &capture{records: new([]record)}
	return h, slog.New(h)
}

func (h *capture) Enabled(context.Context, slog.Level) bool { return true }

// requestKey carries a request's ID in a context, as a service's slog
// handler would read it (capture records it as the attribute "request").
type requestKey struct{}

func (h *capture) Handle(ctx context.Context, r slog.Record) error {
	rec := record{level: r.Level, msg: r.Message, attrs: map[string]slog.Value{}}
	if id, ok := ctx.Value(requestKey{}).(string); ok {
		rec.attrs["request"] = slog.StringValue(id)
	}
	for _, a := range h.attrs {
		rec.attrs[a.Key] = a.Value
	}
	r.Attrs(func(a slog.Attr) bool {
		rec.attrs[a.Key] = a.Value
		return true
	})
	captureMu.Lock()
	*h.records = append(*h.records, rec)
	captureMu.Unlock()
	return nil
}

func (h *capture) WithAttrs(as []slog.Attr) slog.Handler {
	return &capture{records: h.records, attrs: append(append([]slog.Attr(nil), h.attrs...), as...)}
}

func (h *capture) WithGroup(string) slog.Handler { return h }

// all returns a copy of the records so far.
func (h *capture) all() []record {
	captureMu.Lock()
	defer captureMu.Unlock()
	return append([]record(nil), *h.records...)
}

var captureMu sync.Mutex

// with returns the records whose message contains msg.
func (h *capture) with(msg string) []record {
	var out []record
	for _, r := range h.all() {
		if strings.Contains(r.msg, msg) {
			out = append(out, r)
		}
	}
	return out
}

// checkLines checks what every line must have: the pool attribute, no
// error attribute without an error, no password.
func checkLines(t *testing.T, h *capture, pool string) {
	t.Helper()
	for _, r := range h.all() {
		if got := r.attrs["pool"].String(); got != pool {
			t.Errorf("%q: pool=%q, want %q", r.msg, got, pool)
		}
		if v, ok := r.attrs["error"]; ok && (v.Any() == nil || fmt.Sprint(v.Any()) == "<nil>") {
			t.Errorf("%q: error=<nil>", r.msg)
		}
		if r.level >= slog.LevelWarn && r.attrs["site"].String() == "" {
			t.Errorf("%q: a WARN line without site=", r.msg)
		}
		line := fmt.Sprint(r.msg, r.attrs)
		assertNoSecret(t, "log line", line)
	}
}

// TestWarnLinesCarrySite: a WARN line written on a goroutine of
// pooldriver's own, where no caller's code is on the stack, carries site=
// too, naming what pooldriver runs there: the leak detector, and the
// pool's own connects (pool_min_conns) failing.
func TestWarnLinesCarrySite(t *testing.T) {
	srv := newServer(t)
	h, logger := newCapture()
	db, c := newDB(t, srv, "pool_leak_detection_threshold=1s&pool_min_conns=2", pooldriver.WithLogger(logger))
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(ctx, "INSERT t 1"); err != nil { // takes a connection, and keeps it
		t.Fatal(err)
	}
	srv.FailConnects(1000, errors.New("connection refused"))
	c.Reset() // the pool reopens pool_min_conns by itself, and fails
	defer func() {
		if t.Failed() {
			t.Logf("leak lines %d, repeated connect failures %d, stats %+v",
				len(h.with("leak detection threshold")), len(h.with("connect failed repeatedly")), c.Stats())
		}
	}()
	waitFor(t, "the leak and the failed connects reported", func() bool {
		return len(h.with("leak detection threshold")) == 1 && len(h.with("connect failed repeatedly")) > 0
	})
	srv.FailConnects(0, nil)
	_ = conn.Close()
	for _, msg := range []string{"leak detection threshold", "connect failed repeatedly"} {
		r := h.with(msg)[0]
		site := r.attrs["site"].String()
		if !strings.HasPrefix(site, "pooldriver's own goroutine: ") {
			t.Errorf("%q: site=%q, want pooldriver's own goroutine named", r.msg, site)
		}
		t.Logf("%s: site=%s", r.msg, site)
	}
	checkLines(t, h, "fake://"+srv.Name())
}

// TestLogging: what the Connector logs, at which level, with the pool's
// name on every line and never error=<nil>: connections opened and closed
// (with the reason), sessions reset, automatic rollbacks, acquire
// timeouts, repeated connect failures.
func TestLogging(t *testing.T) {
	srv := newServer(t)
	srv.SetPassword("u", secret)
	h, logger := newCapture()
	// The acquire timeout is waited out once, below; the first statement's
	// connect must fit in it on a loaded machine too.
	c := pooldriver.New("fake://u:"+secret+"@"+srv.Name()+"?pool_max_conns=1&pool_acquire_timeout=250ms&pool_name=orders",
		pooldriver.WithLogger(logger))
	if err := c.Err(); err != nil {
		t.Fatal(err)
	}
	db := sql.OpenDB(c)
	defer db.Close()
	ctx := context.Background()

	// Opened; a raw transaction left open by a *sql.Conn is rolled back
	// (WARN), a changed session reset (DEBUG).
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"SET x 1", "BEGIN"} {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	// Meanwhile a statement times out waiting (WARN, with the pool's state).
	if _, err := db.Exec("INSERT t 1"); !errors.Is(err, pooldriver.ErrAcquireTimeout) {
		t.Fatalf("got %v, want an acquire timeout", err)
	}
	conn.Close()

	opened := h.with("connection opened")
	if len(opened) != 1 || opened[0].level != slog.LevelDebug || opened[0].attrs["user"].String() != "u" {
		t.Fatalf("opened: %+v", opened)
	}
	if r := h.with("rolled back a transaction left open"); len(r) != 1 || r[0].level != slog.LevelWarn {
		t.Fatalf("auto-rollback: %+v", r)
	}
	if r := h.with("session reset"); len(r) != 1 || r[0].level != slog.LevelDebug {
		t.Fatalf("reset: %+v", r)
	}
	to := h.with("timed out waiting for a connection")
	if len(to) != 1 || to[0].level != slog.LevelWarn || to[0].attrs["in_use"].Int64() != 1 || to[0].attrs["max"].Int64() != 1 {
		t.Fatalf("acquire timeout: %+v", to)
	}

	// Closed by Reset, then connect failures: the first at DEBUG, the 2nd
	// and 4th at WARN, then one INFO when a connect works again.
	c.Reset()
	if r := h.with("connection closed"); len(r) != 1 || r[0].attrs["reason"].String() != "Connector.Reset" || r[0].level != slog.LevelDebug {
		t.Fatalf("closed: %+v", r)
	}
	srv.FailConnects(4, errors.New("connection refused"))
	waitFor(t, "4 failed connects", func() bool {
		_, _ = db.Exec("INSERT t 1") // fails: at once while the pool backs off
		return srv.Stats().ConnectFailures == 4
	})
	// The pool logs a failed connect after the server has counted it.
	waitFor(t, "the 4th failed connect logged", func() bool {
		failed := h.with("connect failed")
		if len(failed) == 0 {
			return false
		}
		v, ok := failed[len(failed)-1].attrs["failures_in_a_row"]
		return ok && v.Kind() == slog.KindInt64 && v.Int64() == 4
	})
	failed := h.with("connect failed")
	if len(failed) != 3 || failed[0].level != slog.LevelDebug || failed[1].level != slog.LevelWarn || failed[2].attrs["failures_in_a_row"].Int64() != 4 {
		t.Fatalf("connect failures: %+v", failed)
	}
	waitFor(t, "a connect that works", func() bool { _, err := db.Exec("INSERT t 1"); return err == nil })
	if r := h.with("connected again"); len(r) != 1 || r[0].attrs["failures_before"].Int64() != 4 {
		t.Fatalf("connected again: %+v", r)
	}

	db.Close()
	closed := h.with("connection closed")
	if len(closed) != 2 || closed[1].attrs["reason"].String() != "connector closed" {
		t.Fatalf("closed: %+v", closed)
	}
	checkLines(t, h, "orders")
	if n := len(h.all()); n < 10 {
		t.Fatalf("only %d lines", n)
	}
}

// TestLogPoolNameDefault: without a name, the pool is named by its DSN,
// password hidden.
func TestLogPoolNameDefault(t *testing.T) {
	srv := newServer(t)
	h, logger := newCapture()
	db, _ := newDB(t, srv, "", pooldriver.WithLogger(logger))
	if _, err := db.Exec("INSERT t 1"); err != nil {
		t.Fatal(err)
	}
	checkLines(t, h, "fake://"+srv.Name())
	if len(h.all()) == 0 {
		t.Fatal("nothing logged")
	}
}

func (r record) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %q", r.level, r.msg)
	for k, v := range r.attrs {
		fmt.Fprintf(&b, " %s=%v", k, v)
	}
	return b.String()
}

// TestTaskEndRollbackLoggedAtDebug: the rollback of a transaction a task's
// end finds open is the README's own idiom (defer end()), so it is logged
// at DEBUG, not WARN, with the task's context for the handler (a request's
// attributes), and counted apart in Stats.TaskEndRollbacks; a transaction
// a hold left open still needs attention (WARN).
func TestTaskEndRollbackLoggedAtDebug(t *testing.T) {
	srv := newServer(t)
	h, logger := newCapture()
	db, c := newDB(t, srv, "", pooldriver.WithLogger(logger))
	for i, id := range []string{"r1", "r2"} {
		ctx, end := pooldriver.WithTask(context.WithValue(context.Background(), requestKey{}, id))
		if i == 1 {
			// A *sql.Tx of the task, left open too; begun before the raw
			// BEGIN, it is a transaction of its own (after, it would nest
			// in the raw one).
			if _, err := db.BeginTx(ctx, nil); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := db.ExecContext(ctx, "BEGIN"); err != nil {
			t.Fatal(err)
		}
		end()
	}
	waitFor(t, "the rollbacks", func() bool { return c.Stats().TaskEndRollbacks == 3 })
	r := h.with("rolled back a transaction still open when its task ended")
	if len(r) != 3 {
		t.Fatalf("%d lines, want 3: %v", len(r), r)
	}
	for i, rec := range r {
		want := map[bool]string{true: "r1", false: "r2"}[i == 0]
		if rec.level != slog.LevelDebug || rec.attrs["request"].String() != want {
			t.Errorf("line %d: %v, want DEBUG with request=%s", i, rec, want)
		}
	}
	if st := c.Stats(); st.AutoRollbacks != 3 {
		t.Fatalf("stats: %+v", st)
	}
	checkLines(t, h, "fake://"+srv.Name())
}

// TestTaskEndOnClosedConnIsDebug: a task whose connection the driver closed
// by itself (as pgx does when a cancel interrupts a statement) ends with
// its transaction gone with the connection: the rollback that fails there
// is logged at DEBUG, with the task's context, and no WARN line is written.
func TestTaskEndOnClosedConnIsDebug(t *testing.T) {
	for _, raw := range []bool{true, false} {
		srv := newServer(t)
		h, logger := newCapture()
		db, c := newDB(t, srv, "", pooldriver.WithLogger(logger))
		ctx, end := pooldriver.WithTask(context.WithValue(context.Background(), requestKey{}, "r1"))
		var err error
		if raw {
			_, err = db.ExecContext(ctx, "BEGIN")
		} else {
			_, err = db.BeginTx(ctx, nil)
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, dc := range srv.Conns() {
			_ = dc.Close() // the driver closes it, behind pooldriver's back
		}
		end()
		waitFor(t, "the connection closed", func() bool { return c.Stats().Total == 0 })
		for _, r := range h.all() {
			if r.level >= slog.LevelWarn {
				t.Errorf("raw %v: %v: a WARN line for a transaction gone with its connection", raw, r)
			}
		}
		gone := h.with("went with its connection")
		if len(gone) != 1 || gone[0].level != slog.LevelDebug || gone[0].attrs["request"].String() != "r1" {
			t.Errorf("raw %v: %v, want one DEBUG line with the task's request", raw, gone)
		}
		_ = db.Close()
	}
}
