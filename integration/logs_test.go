package integration

import (
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pooldriver/pooldriver"
)

// logCount is a slog.Handler that counts lines by level and message, and
// the events they stand for (each line plus the "suppressed" it says it
// held back), and keeps the first line of each message's attributes.
type logCount struct {
	mu     sync.Mutex // guards the maps
	lines  map[string]int
	events map[string]int
	first  map[string]map[string]string
}

func newLogCount() *logCount {
	return &logCount{lines: map[string]int{}, events: map[string]int{}, first: map[string]map[string]string{}}
}

func (h *logCount) Enabled(context.Context, slog.Level) bool { return true }
func (h *logCount) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *logCount) WithGroup(string) slog.Handler            { return h }

func (h *logCount) Handle(_ context.Context, r slog.Record) error {
	if r.Level < slog.LevelInfo {
		return nil
	}
	key := r.Level.String() + " " + r.Message
	attrs := map[string]string{}
	n := 1
	r.Attrs(func(a slog.Attr) bool {
		attrs[a.Key] = a.Value.String()
		if a.Key == "suppressed" {
			n += int(a.Value.Int64())
		}
		return true
	})
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.lines[key] == 0 {
		h.first[key] = attrs
	}
	h.lines[key]++
	h.events[key] += n
	return nil
}

// count returns the lines and events of the level and messages starting
// with prefix, and the attributes of the first such line.
func (h *logCount) count(level slog.Level, prefix string) (lines, events int, first map[string]string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for k, n := range h.lines {
		if strings.HasPrefix(k, level.String()+" pooldriver: "+prefix) {
			if lines == 0 {
				first = h.first[k]
			}
			lines += n
			events += h.events[k]
		}
	}
	return lines, events, first
}

// TestLogsDoNotFlood: against the real server, 300 acquire timeouts and 500
// raw BEGINs left open outside a task write at most 20 WARN lines each,
// which account for every event; the BEGIN's line names this test as the
// caller's site and says what to do instead.
func TestLogsDoNotFlood(t *testing.T) {
	forEachServer(t, func(t *testing.T, s server) {
		t.Parallel()
		tn := newTenant(t, s)
		h := newLogCount()
		// The one connection opened ahead: the acquire timeout then bounds
		// only the waits, not a dial on a busy machine.
		c := pooldriver.New(withParams(tn.base, "pool_max_conns=1", "pool_min_conns=1", "pool_acquire_timeout=50ms"), pooldriver.WithLogger(slog.New(h)))
		require.NoError(t, c.Err())
		db := sql.OpenDB(c)
		defer db.Close()
		require.Eventually(t, func() bool { return c.Stats().Idle == 1 }, waitLimit, 5*time.Millisecond)

		conn, err := db.Conn(ctx(t))
		require.NoError(t, err)
		require.NoError(t, conn.PingContext(ctx(t))) // holds the one connection
		const timeouts, workers = 300, 10
		var wg sync.WaitGroup
		var unexpected sync.Map
		for range workers {
			wg.Go(func() {
				for range timeouts / workers {
					if _, err := db.ExecContext(context.Background(), "SELECT 1"); !errors.Is(err, pooldriver.ErrAcquireTimeout) {
						unexpected.Store(err, true)
					}
				}
			})
		}
		wg.Wait()
		unexpected.Range(func(k, _ any) bool { t.Errorf("got %v, want an acquire timeout", k); return true })
		require.NoError(t, conn.Close())

		require.NoError(t, db.Close()) // writes what is held back

		// The raw BEGINs through a connector of their own, with the same
		// logger: each rollback may keep the one connection busy past the
		// acquire timeout above on a loaded machine.
		rb := pooldriver.New(withParams(tn.base, "pool_max_conns=1"), pooldriver.WithLogger(slog.New(h)))
		require.NoError(t, rb.Err())
		rdb := sql.OpenDB(rb)
		defer rdb.Close()
		const begins = 500
		for range begins {
			_, err := rdb.ExecContext(ctx(t), "BEGIN")
			require.NoError(t, err)
		}
		assert.Equal(t, int64(begins), rb.Stats().AutoRollbacks)
		require.NoError(t, rdb.Close()) // writes what is held back

		lines, events, _ := h.count(slog.LevelWarn, "timed out waiting for a connection")
		assert.True(t, lines >= 1 && lines <= 20 && events == timeouts, "acquire timeouts: %d WARN lines for %d events, want 1-20 for %d", lines, events, timeouts)
		lines, events, first := h.count(slog.LevelWarn, "rolled back a transaction left open")
		assert.True(t, lines >= 1 && lines <= 20 && events == begins, "raw BEGINs: %d WARN lines for %d events, want 1-20 for %d", lines, events, begins)
		assert.Contains(t, first["site"], "logs_test.go:", "the caller's site")
		assert.Contains(t, first["remedy"], "BeginTx")
	})
}

// TestLogsBreakerAtLimitDoNotFlood: at the server's connection limit (3
// for the identity, a pool of 10, 10 goroutines for 3 s) the breaker's
// changes between closed, limited and half-open write a few lines, not one
// per change (390 for 1,000 requests before).
func TestLogsBreakerAtLimitDoNotFlood(t *testing.T) {
	longTest(t)
	forEachServer(t, func(t *testing.T, s server) {
		t.Parallel()
		tn := limitedTenant(t, s, 3)
		h := newLogCount()
		c := pooldriver.New(withParams(tn.base, "pool_max_conns=10"), pooldriver.WithLogger(slog.New(h)))
		require.NoError(t, c.Err())
		db := sql.OpenDB(c)
		db.SetMaxIdleConns(10)
		t.Cleanup(func() { closeAndDrain(t, db, tn.backends, tn.kill) })
		r := &loadResult{}
		runLoad(r, 3*time.Second, 10, fixedTO(faultCallTO), sleepOp(s, db, 2))
		st := c.Stats()
		t.Logf("at the limit: %v; breaker changes %d", r, st.BreakerChanges)
		require.NoError(t, c.Close()) // writes what is held back
		// A connection attempt in flight when the load ended may change the
		// breaker once more before Close: the lines account for every
		// change up to then, counted between the two reads.
		after := c.Stats().BreakerChanges
		lines, events, _ := h.count(slog.LevelWarn, "circuit breaker")
		info, infoEvents, _ := h.count(slog.LevelInfo, "circuit breaker")
		assert.NotZero(t, st.BreakerChanges, "the breaker never saw the limit")
		assert.LessOrEqual(t, lines+info, 20, "breaker lines: %d WARN for %d changes, %d INFO for %d", lines, events, info, infoEvents)
		assert.GreaterOrEqual(t, int64(events+infoEvents), st.BreakerChanges, "the lines account for every change before the load ended")
		assert.LessOrEqual(t, int64(events+infoEvents), after, "the lines count no change that did not happen")
	})
}
