package pooldriver_test

import (
	"context"
	"database/sql"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/pooldriver/pooldriver"
)

// TestLeakDetection: a *sql.Conn, then a session task, that keep their
// physical connection past the threshold are each reported once, at WARN,
// with the stack of the code that took it, and counted; when they let go,
// one INFO line says so. Quick holds are not reported. The threshold is a
// second: a quick hold that a busy machine's scheduler stalls is still
// quick (at 40ms, one stalled hold was a leak).
func TestLeakDetection(t *testing.T) {
	checkNoGoroutineLeak(t)
	srv := newServer(t)
	h, logger := newCapture()
	const threshold = time.Second
	db, c := newDB(t, srv, "pool_leak_detection_threshold="+threshold.String(), pooldriver.WithLogger(logger))
	ctx := context.Background()

	for range 20 { // quick holds
		if _, err := db.Exec("INSERT t 1"); err != nil {
			t.Fatal(err)
		}
	}

	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(ctx, "INSERT t 2"); err != nil { // takes the physical connection
		t.Fatal(err)
	}
	// The count comes before the log line: wait for both.
	waitFor(t, "the leak reported", func() bool {
		return c.Stats().Leaks == 1 && len(h.with("leak detection threshold")) == 1
	})
	leaks := h.with("leak detection threshold")
	if len(leaks) != 1 || leaks[0].level != slog.LevelWarn {
		t.Fatalf("leak lines: %v", leaks)
	}
	stack := leaks[0].attrs["stack"].String()
	if first, _, _ := strings.Cut(stack, "\n"); !strings.HasSuffix(first, ".TestLeakDetection") {
		t.Fatalf("the stack does not start at the code that took the connection:\n%s", stack)
	}
	if !strings.Contains(stack, "leak_test.go:") {
		t.Fatalf("the stack has no file and line:\n%s", stack)
	}
	if held := loggedDuration(t, leaks[0], "held"); held < threshold {
		t.Fatalf("held %v, below the threshold", held)
	}

	// Once only, however long it stays out (8 more rounds of the
	// detector, which looks every quarter threshold).
	time.Sleep(2 * threshold)
	if n := c.Stats().Leaks; n != 1 || len(h.with("leak detection threshold")) != 1 {
		t.Fatalf("reported %d times", n)
	}
	conn.Close()
	if back := h.with("reported as leaked came back"); len(back) != 1 || loggedDuration(t, back[0], "held") < 3*threshold {
		t.Fatalf("return lines: %v", back)
	}

	// A task keeps its connection: reported too, from its first statement.
	tctx, end := pooldriver.WithTask(ctx, pooldriver.SessionMode)
	if _, err := db.ExecContext(tctx, "SET x 1"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the task's leak reported", func() bool { return c.Stats().Leaks == 2 })
	end()
	if _, err := db.Exec("INSERT t 3"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * threshold)
	if n := c.Stats().Leaks; n != 2 {
		t.Fatalf("%d leaks, want 2", n)
	}
	checkLines(t, h, "fake://"+srv.Name())
}

// TestLeakDetectionOff: nothing is reported without a threshold.
func TestLeakDetectionOff(t *testing.T) {
	srv := newServer(t)
	h, logger := newCapture()
	db, c := newDB(t, srv, "", pooldriver.WithLogger(logger), pooldriver.WithLeakDetection(0))
	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(context.Background(), "INSERT t 1"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	if c.Stats().Leaks != 0 || len(h.with("leak")) != 0 {
		t.Fatal("a leak reported with leak detection off")
	}
}

// BenchmarkLeakDetection is BenchmarkExec's pooldriver loop with leak
// detection off and on: on, each acquire records the time and the
// caller's program counters.
func BenchmarkLeakDetection(b *testing.B) {
	for _, threshold := range []time.Duration{0, time.Minute} {
		b.Run("threshold="+threshold.String(), func(b *testing.B) {
			c := pooldriver.Wrap(newServer(b).Connector(), pooldriver.WithMaxConns(benchConns), pooldriver.WithLeakDetection(threshold))
			if err := c.Err(); err != nil {
				b.Fatal(err)
			}
			db := sql.OpenDB(c)
			defer db.Close()
			ctx := context.Background()
			if _, err := db.ExecContext(ctx, "ECHO ?", int64(42)); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := db.ExecContext(ctx, "ECHO ?", int64(42)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// loggedDuration reads the duration attribute key of r, written as a DSN
// writes one ("1.5s") whatever the handler.
func loggedDuration(t *testing.T, r record, key string) time.Duration {
	t.Helper()
	d, err := time.ParseDuration(r.attrs[key].String())
	if err != nil {
		t.Fatalf("%s=%v: %v", key, r.attrs[key], err)
	}
	return d
}
