package pooldriver_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/pooldriver/pooldriver"
)

// warnCount is what the WARN lines of one message say: how many lines,
// and how many events they stand for (each line, plus the ones it says it
// held back).
func warnCount(h *capture, msg string) (lines, events int, first record) {
	for _, r := range h.with(msg) {
		if r.level != slog.LevelWarn {
			continue
		}
		if lines == 0 {
			first = r
		}
		lines++
		events++
		if n, ok := r.attrs["suppressed"]; ok {
			events += int(n.Int64())
		}
	}
	return lines, events, first
}

// TestLogsDoNotFlood: 300 acquire timeouts and 500 raw BEGINs left open
// outside a task write at most 20 WARN lines each (one per kind per 10 s,
// and the last one held back when the Connector closes), which still
// account for every event; the BEGIN's line names the caller's site (this
// file, not database/sql or pooldriver) and the remedy. Before, each
// event wrote its own line, naming no caller.
func TestLogsDoNotFlood(t *testing.T) {
	srv := newServer(t)
	h, logger := newCapture()
	// The one connection is opened by the pool, not for the first
	// acquire, which would wait for it only 5 ms and, on a busy machine,
	// count a timeout of its own.
	db, c := newDB(t, srv, "pool_max_conns=1&pool_min_conns=1&pool_acquire_timeout=5ms", pooldriver.WithLogger(logger))
	ctx := context.Background()
	waitFor(t, "the pool's one connection", func() bool { return c.Stats().Idle == 1 })

	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := conn.PingContext(ctx); err != nil { // holds the one connection
		t.Fatal(err)
	}
	const timeouts, workers = 300, 10
	var wg sync.WaitGroup
	errs := make(chan error, timeouts)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range timeouts / workers {
				_, err := db.ExecContext(ctx, "INSERT t 1")
				if !errors.Is(err, pooldriver.ErrAcquireTimeout) {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("got %v, want an acquire timeout", err)
	}
	if err := conn.Close(); err != nil {
		t.Fatal(err)
	}

	const begins = 500
	for range begins {
		if _, err := db.ExecContext(ctx, "BEGIN"); err != nil {
			t.Fatal(err)
		}
	}
	if got := c.Stats().AutoRollbacks; got != begins {
		t.Fatalf("%d rollbacks, want %d", got, begins)
	}
	if err := db.Close(); err != nil { // writes what is held back
		t.Fatal(err)
	}

	lines, events, _ := warnCount(h, "timed out waiting for a connection")
	if lines < 1 || lines > 20 || events != timeouts {
		t.Errorf("acquire timeouts: %d WARN lines for %d events, want 1-20 lines for %d", lines, events, timeouts)
	}
	lines, events, first := warnCount(h, "rolled back a transaction left open")
	if lines < 1 || lines > 20 || events != begins {
		t.Errorf("raw BEGINs left open: %d WARN lines for %d events, want 1-20 lines for %d", lines, events, begins)
	}
	if site := first.attrs["site"].String(); !strings.Contains(site, "TestLogsDoNotFlood") || !strings.Contains(site, "logflood_test.go:") {
		t.Errorf("site=%q, want this test's call", site)
	}
	if remedy := first.attrs["remedy"].String(); !strings.Contains(remedy, "BeginTx") || !strings.Contains(remedy, "WithTask") {
		t.Errorf("remedy=%q", remedy)
	}
	checkLines(t, h, "fake://"+srv.Name())
}
