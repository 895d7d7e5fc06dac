package integration

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pooldriver/pooldriver"
)

// Operating a pool against the real servers: leak detection, Reset,
// pgxpool's parameters, the pool's state in an acquire timeout.

// logLines is a slog.Handler that keeps every line's message and
// attributes as text, after the seconds since t0 where it is set.
type logLines struct {
	mu    *sync.Mutex
	lines *[]string
	attrs string
	t0    time.Time
}

func newLogLines() (*logLines, *slog.Logger) {
	h := &logLines{mu: new(sync.Mutex), lines: new([]string)}
	return h, slog.New(h)
}

func (h *logLines) Enabled(context.Context, slog.Level) bool { return true }

func (h *logLines) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	if !h.t0.IsZero() {
		fmt.Fprintf(&b, "%6.2fs ", r.Time.Sub(h.t0).Seconds())
	}
	fmt.Fprintf(&b, "%s %s%s", r.Level, r.Message, h.attrs)
	r.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		return true
	})
	h.mu.Lock()
	*h.lines = append(*h.lines, b.String())
	h.mu.Unlock()
	return nil
}

func (h *logLines) WithAttrs(as []slog.Attr) slog.Handler {
	attrs := h.attrs
	for _, a := range as {
		attrs += fmt.Sprintf(" %s=%v", a.Key, a.Value)
	}
	return &logLines{mu: h.mu, lines: h.lines, attrs: attrs, t0: h.t0}
}

func (h *logLines) WithGroup(string) slog.Handler { return h }

// text returns every line.
func (h *logLines) text() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return strings.Join(*h.lines, "\n")
}

// with returns the lines that contain s.
func (h *logLines) with(s string) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, l := range *h.lines {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return out
}

// TestLeakDetection: a *sql.Conn that keeps its server connection past
// pool_leak_detection_threshold is reported once, at WARN, with the stack
// of this test's line that took it, and counted; quick statements are not.
func TestLeakDetection(t *testing.T) {
	t.Parallel()
	forEachServer(t, func(t *testing.T, s server) {
		t.Parallel()
		tn := newTenant(t, s)
		h, logger := newLogLines()
		// The threshold is seconds: on a loaded machine one of the quick
		// statements below can hold its connection for a few hundred
		// milliseconds, and must not count as a leak.
		db, c := tn.open(t, "pool_leak_detection_threshold=2s&pool_name=leaky", pooldriver.WithLogger(logger))
		for range 10 {
			_, err := db.ExecContext(ctx(t), "SELECT 1")
			require.NoError(t, err)
		}
		sc, err := db.Conn(ctx(t))
		require.NoError(t, err)
		_, err = sc.ExecContext(ctx(t), "SELECT 1") // this line takes the connection
		require.NoError(t, err)
		// Counted, then logged: the line is waited for too.
		waitFor(t, "the leak counted and logged", func() bool {
			return c.Stats().Leaks == 1 && len(h.with("leak detection threshold")) > 0
		})
		time.Sleep(500 * time.Millisecond)
		assert.EqualValues(t, 1, c.Stats().Leaks, "reported more than once")
		lines := h.with("leak detection threshold")
		require.Len(t, lines, 1)
		assert.True(t, strings.HasPrefix(lines[0], "WARN "), lines[0])
		assert.Contains(t, lines[0], "pool=leaky")
		assert.Contains(t, lines[0], "stack=github.com/pooldriver/pooldriver/integration.TestLeakDetection")
		assert.Contains(t, lines[0], "operations_test.go:")
		require.NoError(t, sc.Close())
		// Logged as the connection goes back to the pool, which a loaded
		// machine may do after Close returned.
		waitFor(t, "the leaked connection's return logged", func() bool {
			return len(h.with("reported as leaked came back")) > 0
		})
		assert.Len(t, h.with("reported as leaked came back"), 1)
	})
}

// TestConnectorReset: Reset closes the idle server connections at once and
// the busy one when its *sql.Tx ends, without interrupting it: the
// transaction and a statement running meanwhile finish normally; then
// every statement runs on a server connection opened after Reset.
func TestConnectorReset(t *testing.T) {
	t.Parallel()
	forEachServer(t, func(t *testing.T, s server) {
		t.Parallel()
		tn := newTenant(t, s)
		h, logger := newLogLines()
		db, c := tn.open(t, "pool_max_conns=4&pool_min_conns=3", pooldriver.WithLogger(logger))
		tn.waitConns(t, 3)
		table := s.table(t, "reset", "id int")

		// The transaction's context outlives the waits below, each of
		// which may take seconds on a loaded machine (database/sql rolls
		// back a transaction whose context ends).
		txCtx, cancel := context.WithTimeout(context.Background(), 3*waitLimit)
		defer cancel()
		tx, err := db.BeginTx(txCtx, nil)
		require.NoError(t, err)
		_, err = tx.ExecContext(ctx(t), "INSERT INTO "+table+" VALUES (1)")
		require.NoError(t, err)
		var txID int64
		require.NoError(t, tx.QueryRowContext(ctx(t), s.backendID).Scan(&txID))
		// A statement running through Reset: it waits for a lock the test
		// holds, and ends when the test lets it (a sleep of fixed length
		// could end, and its connection be replaced too, before the idle
		// one is seen replaced on a loaded machine).
		blocking, key, release := lockHeld(t, s)
		sleeping := make(chan error, 1)
		go func() {
			_, err := db.ExecContext(context.Background(), blocking)
			sleeping <- err
		}()
		var blockID int64
		waitFor(t, "the statement waiting for the lock", func() bool {
			// By the lock's key: a catalog reading running beside it
			// names lock functions too.
			blockID = tn.running(t, key)
			return blockID != 0
		})
		old := tn.backends(t) // the two busy ones, and one or two idle

		c.Reset()
		// The idle ones closed (and those being opened as Reset ran,
		// as soon as they are open), beside the two busy ones, and new
		// ones opened to refill pool_min_conns.
		var ids []int64
		waitForSaying(t, "the idle connections replaced", func() bool {
			ids = tn.backends(t)
			return len(ids) >= 3 && countIn(ids, []int64{txID, blockID}) == 2 && countIn(ids, old) == 2
		}, func() string {
			return fmt.Sprintf("server connections %v, before Reset %v (transaction %d, statement %d); %+v; log: %s", ids, old, txID, blockID, c.Stats(),
				strings.Join(append(h.with("closed"), h.with("WARN")...), " | "))
		})
		_, err = tx.ExecContext(ctx(t), "INSERT INTO "+table+" VALUES (2)")
		require.NoError(t, err, "the transaction was interrupted")
		require.NoError(t, tx.Commit())
		release()
		require.NoError(t, <-sleeping, "the running statement was interrupted")
		assert.EqualValues(t, 2, s.adminInt(t, "SELECT count(*) FROM "+table))

		waitFor(t, "every connection from before Reset closed", func() bool { return countIn(tn.backends(t), old) == 0 })
		for range 20 {
			assert.NotContains(t, old, backendID(t, db, ctx(t), s))
		}
		// The server may list a session as gone before the pool has
		// counted its close: on a loaded machine, by a time slice. A
		// pre-warm connection still being opened when Reset ran (the
		// server lists it before the pool has it) is closed as soon as it
		// is open, and another opened: counted too, so Destroyed is at
		// least the 3 or 4 from before Reset, and every connection opened
		// is open or counted closed.
		settle(t, func() bool { return c.Stats().Destroyed >= int64(len(old)) })
		st := c.Stats()
		assert.GreaterOrEqual(t, st.Destroyed, int64(len(old)), "server connections closed by the pool, of the %d from before Reset: %+v", len(old), st)
		settle(t, func() bool { st = c.Stats(); return st.Opening == 0 })
		assert.EqualValues(t, st.Created-st.Destroyed, st.Total, "connections opened and not closed, against those open: %+v", st)
	})
}

// lockHeld takes a lock on a session of the admin's and returns a
// statement that waits for it (PostgreSQL: an advisory lock the statement's
// transaction takes; MySQL: GET_LOCK), the lock's key, which the
// statement's text holds, and release, which lets the statement go (once:
// it also runs at the test's end).
func lockHeld(t *testing.T, s server) (blocking, key string, release func()) {
	t.Helper()
	conn, err := s.admin(t).Conn(ctx(t))
	require.NoError(t, err)
	key = unique("pdlock")
	take, free := "SELECT pg_advisory_lock(hashtext($1))", "SELECT pg_advisory_unlock(hashtext($1))"
	blocking = fmt.Sprintf("SELECT pg_advisory_xact_lock(hashtext('%s'))", key)
	if s.name == "mysql" {
		take, free = "SELECT GET_LOCK(?, 120)", "SELECT RELEASE_LOCK(?)"
		blocking = fmt.Sprintf("DO GET_LOCK('%s', 120)", key)
	}
	_, err = conn.ExecContext(ctx(t), take, key)
	require.NoError(t, err)
	var once sync.Once
	release = func() {
		once.Do(func() {
			_, err := conn.ExecContext(context.Background(), free, key)
			assert.NoError(t, err)
			assert.NoError(t, conn.Close())
		})
	}
	t.Cleanup(release)
	return blocking, key, release
}

// countIn returns how many of ids are in set.
func countIn(ids, set []int64) int {
	n := 0
	for _, id := range ids {
		if contains(set, id) {
			n++
		}
	}
	return n
}

// TestPgxpoolParameters: a DSN with pgxpool's pool_min_idle_conns and
// pool_max_conn_lifetime_jitter works: the pool keeps that many server
// connections idle, opening more while some are in use.
func TestPgxpoolParameters(t *testing.T) {
	t.Parallel()
	forEachServer(t, func(t *testing.T, s server) {
		t.Parallel()
		tn := newTenant(t, s)
		db, _ := tn.open(t, "pool_max_conns=4&pool_min_idle_conns=2&pool_max_conn_lifetime_jitter=1m&pool_health_check_period=20ms")
		tn.waitConns(t, 2)
		sc, err := db.Conn(ctx(t))
		require.NoError(t, err)
		require.NoError(t, sc.PingContext(ctx(t)))
		tn.waitConns(t, 3) // one in use, two idle
		require.NoError(t, sc.Close())
		time.Sleep(100 * time.Millisecond)
		assert.Equal(t, 3, tn.conns(t), "more than pool_min_idle_conns opened")
	})
}
