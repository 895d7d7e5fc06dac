package pooldriver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pooldriver/pooldriver"
)

// TestJitterFollowsFinalLifetime: the lifetime jitter, unless given, is a
// tenth of the lifetime the Connector ends up with (0 for 0), whichever
// way the lifetime was set: the DSN, an option, or the field of a Config
// from ParseConfig; a jitter given (DSN, option, field) is kept.
func TestJitterFollowsFinalLifetime(t *testing.T) {
	srv := newServer(t)
	dsn := "fake://" + srv.Name()
	for _, tc := range []struct {
		name     string
		query    string
		set      func(*pooldriver.Config)
		opts     []pooldriver.Option
		lifetime time.Duration
		jitter   time.Duration
	}{
		{name: "default", lifetime: time.Hour, jitter: 6 * time.Minute},
		{name: "dsn", query: "?pool_max_conn_lifetime=10m", lifetime: 10 * time.Minute, jitter: time.Minute},
		{name: "option", opts: []pooldriver.Option{pooldriver.WithMaxConnLifetime(20 * time.Minute)}, lifetime: 20 * time.Minute, jitter: 2 * time.Minute},
		{name: "field", set: func(c *pooldriver.Config) { c.MaxConnLifetime = 2 * time.Minute }, lifetime: 2 * time.Minute, jitter: 12 * time.Second},
		{name: "field 0", set: func(c *pooldriver.Config) { c.MaxConnLifetime = 0 }, lifetime: 0, jitter: 0},
		{name: "field over dsn", query: "?pool_max_conn_lifetime=10m", set: func(c *pooldriver.Config) { c.MaxConnLifetime = 30 * time.Minute }, lifetime: 30 * time.Minute, jitter: 3 * time.Minute},
		{name: "jitter field kept", set: func(c *pooldriver.Config) { c.MaxConnLifetime, c.MaxConnLifetimeJitter = 2*time.Minute, 5*time.Second }, lifetime: 2 * time.Minute, jitter: 5 * time.Second},
		{name: "jitter dsn kept", query: "?pool_max_conn_lifetime_jitter=1s", set: func(c *pooldriver.Config) { c.MaxConnLifetime = 2 * time.Minute }, lifetime: 2 * time.Minute, jitter: time.Second},
		{name: "jitter option kept", opts: []pooldriver.Option{pooldriver.WithMaxConnLifetimeJitter(0), pooldriver.WithMaxConnLifetime(time.Minute)}, lifetime: time.Minute, jitter: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var c *pooldriver.Connector
			var err error
			if tc.set != nil {
				cfg, perr := pooldriver.ParseConfig(dsn + tc.query)
				if perr != nil {
					t.Fatal(perr)
				}
				tc.set(cfg)
				c, err = pooldriver.NewConnectorWithConfig(cfg)
			} else {
				c = pooldriver.New(dsn+tc.query, tc.opts...)
				err = c.Err()
			}
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if got := c.Config(); got.MaxConnLifetime != tc.lifetime || got.MaxConnLifetimeJitter != tc.jitter {
				t.Fatalf("lifetime %v jitter %v, want %v and %v", got.MaxConnLifetime, got.MaxConnLifetimeJitter, tc.lifetime, tc.jitter)
			}
		})
	}
}

// TestIdleTimeKeepsMinConns: with pool_min_conns=2 and a 2 s idle time, a
// pool at rest keeps its two connections: at most 3 are created in 6 idle
// seconds (pgxpool creates none beyond its minimum; idle trimming that
// went below the minimum reopened both every 2 s).
func TestIdleTimeKeepsMinConns(t *testing.T) {
	t.Parallel()
	srv := newServer(t)
	_, c := newDB(t, srv, "pool_min_conns=2&pool_max_conn_idle_time=2s&pool_health_check_period=100ms")
	waitFor(t, "the minimum opened", func() bool { return c.Stats().Idle == 2 })
	deadline := time.Now().Add(6 * time.Second)
	for time.Now().Before(deadline) {
		if s := c.Stats(); s.Created > 3 {
			t.Fatalf("%d connections created within 6 idle seconds with pool_min_conns=2 (destroyed %d, expired %d)", s.Created, s.Destroyed, s.Expired)
		}
		time.Sleep(10 * time.Millisecond) // polling, with the deadline above
	}
}

// TestLoggedDurationsReadAlike: every duration in a log line reads as the
// DSN writes it ("5s"), with a JSON handler too (which writes a
// time.Duration in nanoseconds): the Config's cleanup_timeout as its other
// durations, an acquire timeout's timeout.
func TestLoggedDurationsReadAlike(t *testing.T) {
	srv := newServer(t)
	var buf syncBuffer
	logger := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	db, _ := newDB(t, srv, "pool_max_conns=1&pool_acquire_timeout=1s", pooldriver.WithLogger(logger))
	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.PingContext(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("SELECT 1"); !errors.Is(err, pooldriver.ErrAcquireTimeout) {
		t.Fatalf("with the only connection held: %v, want ErrAcquireTimeout", err)
	}
	var opened, timedOut map[string]any
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("%v: %s", err, line)
		}
		switch msg, _ := m["msg"].(string); {
		case strings.Contains(msg, "pool opened"):
			opened, _ = m["config"].(map[string]any)
		case strings.Contains(msg, "timed out waiting"):
			timedOut = m
		}
	}
	for key, want := range map[string]string{"cleanup_timeout": "5s", "pool_acquire_timeout": "1s", "pool_max_conn_lifetime": "1h"} {
		if got := opened[key]; got != want {
			t.Errorf("pool opened: %s=%v (%T), want %q\n%s", key, got, got, want, buf.String())
		}
	}
	if got := timedOut["timeout"]; got != "1s" {
		t.Errorf("acquire timeout: timeout=%v (%T), want \"1s\"\n%s", got, got, buf.String())
	}
}

// syncBuffer is a bytes.Buffer safe for a handler's concurrent writes.
type syncBuffer struct {
	mu  sync.Mutex // guards buf
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
