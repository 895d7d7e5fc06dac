package pooldriver_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/pooldriver/pooldriver"
	"github.com/pooldriver/pooldriver/pool"
)

// TestBreakerStatesInPlainWords: the breaker's states read the right way
// round, in the same words everywhere: an error in normal operation says
// the breaker is closed; once failed dials open it, the error says it is
// open and that no new connection is dialled, the log line says so, and
// Stats reads "open"; driven by hand through half-open back to closed, the
// log says each. Before, normal operation read "breaker active" and a
// refusal "breaker inactive".
func TestBreakerStatesInPlainWords(t *testing.T) {
	srv := newServer(t)
	h, logger := newCapture()
	st, err := pool.NewThresholdStrategy(2, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	db, c := newDB(t, srv, "pool_max_conns=1", pooldriver.WithLogger(logger), pooldriver.WithCircuitBreaker(st))
	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := conn.PingContext(context.Background()); err != nil { // holds the one connection
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	_, err = db.ExecContext(ctx, "PING")
	cancel()
	if err == nil || !strings.Contains(err.Error(), "(1 of 1 connections open, 1 in use)") || strings.Contains(err.Error(), "breaker") || strings.Contains(err.Error(), "active") {
		t.Fatalf("in normal operation: %v, want the pool's state, and no word of the breaker, closed as usual", err)
	}
	if err := conn.Close(); err != nil {
		t.Fatal(err)
	}
	c.Breaker().(interface{ CloseIdle() int }).CloseIdle()

	down := errors.New("server down")
	srv.FailConnects(2, down)
	waitFor(t, "the circuit open", func() bool {
		_, _ = db.Exec("PING")
		return c.Breaker().State() == pool.Inactive
	})
	_, err = db.Exec("PING")
	if !errors.Is(err, pooldriver.ErrCircuitOpen) || !strings.Contains(err.Error(), "breaker open") || strings.Contains(err.Error(), "inactive") {
		t.Fatalf("while open: %v, want it to say the breaker is open", err)
	}
	if s := c.Stats().BreakerState.String(); s != "open" {
		t.Fatalf("Stats().BreakerState = %q, want open", s)
	}
	c.Breaker().Recover()
	waitFor(t, "closed again", func() bool {
		_, err := db.Exec("PING")
		return err == nil && c.Breaker().State() == pool.Active
	})
	for _, want := range []struct {
		level slog.Level
		msg   string
		from  string
		to    string
	}{
		{slog.LevelWarn, "pooldriver: circuit breaker open: not dialing new connections", "closed", "open"},
		{slog.LevelInfo, "pooldriver: circuit breaker half-open: trying one new connection", "open", "half-open"},
		{slog.LevelInfo, "pooldriver: circuit breaker closed: connecting normally again", "half-open", "closed"},
	} {
		found := false
		for _, r := range h.all() {
			if strings.HasPrefix(r.msg, want.msg) && r.level == want.level && r.attrs["from"].String() == want.from && r.attrs["to"].String() == want.to {
				found = true
			}
		}
		if !found {
			t.Errorf("no %v line %q from=%s to=%s in:\n%v", want.level, want.msg, want.from, want.to, h.all())
		}
	}
}
