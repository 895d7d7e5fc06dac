// Package servertest runs a test against each real database server named by
// the environment, as the integration tests do: POOLDRIVER_POSTGRES_DSN and
// POOLDRIVER_MYSQL_DSN. It is for the tests of the modules that live beside
// the root one (otelpool, promcollector), which should not depend on the
// integration module.
package servertest

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/pooldriver/pooldriver"

	_ "github.com/pooldriver/pooldriver/dialects/mysql"    // mysql://
	_ "github.com/pooldriver/pooldriver/dialects/postgres" // postgres://
)

var servers = []struct{ name, env string }{
	{"postgres", "POOLDRIVER_POSTGRES_DSN"},
	{"mysql", "POOLDRIVER_MYSQL_DSN"},
}

// Run runs f as a subtest for each server, with a DB opened by
// pooldriver.Open with Params, its pre-warmed connection idle, closed when f
// returns. A server whose variable is unset is skipped, except under
// CI=true, where it is a failure.
func Run(t *testing.T, f func(t *testing.T, db *sql.DB, c *pooldriver.Connector)) {
	for _, s := range servers {
		t.Run(s.name, func(t *testing.T) {
			dsn := os.Getenv(s.env)
			if dsn == "" {
				msg := s.env + " is unset: no " + s.name + " server to test against"
				if os.Getenv("CI") == "true" {
					t.Fatal(msg)
				}
				t.Skip(msg)
			}
			sep := "?"
			if strings.Contains(dsn, "?") {
				sep = "&"
			}
			db, err := pooldriver.Open(dsn + sep + Params)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = db.Close() }()
			c, _ := pooldriver.ConnectorOf(db)
			WaitFor(t, "the pre-warmed connection", func() bool { return c.Stats().Idle == 1 })
			f(t, db, c)
		})
	}
}

// AcquireTimeout is the pool_acquire_timeout of Params: it ends the wait of
// Exercise's statement that times out, and bounds every other wait of the
// scenario (a connection made on demand, a statement served while during
// runs). Two seconds: at 100ms, a connect on a busy machine (load 12) timed
// out.
const AcquireTimeout = 2 * time.Second

// Params are the pool settings of the DB Run opens, which Exercise expects.
var Params = "pool_max_conns=2&pool_min_conns=1&pool_min_idle_conns=1&pool_acquire_timeout=" + AcquireTimeout.String()

// Exercise runs a fixed scenario on a DB of Run: two *sql.Conn take both physical
// connections (one idle, one made for the waiting statement), a statement
// times out after AcquireTimeout, another waits. Then it calls during, lets
// go of the first *sql.Conn (the waiting statement gets its connection),
// then of the second, and returns when every connection is idle.
func Exercise(t *testing.T, db *sql.DB, during func()) {
	t.Helper()
	c, ok := pooldriver.ConnectorOf(db)
	if !ok {
		t.Fatal("not a pooldriver DB")
	}
	ctx := context.Background()
	// The scenario's first acquire takes the pre-warmed connection at once:
	// it must be there (pool_min_idle_conns opens it off the caller's path).
	WaitFor(t, "the pre-warmed connection", func() bool { return c.Stats().Idle >= 1 })
	var held []*sql.Conn
	for range 2 {
		conn, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := conn.ExecContext(ctx, "SELECT 1"); err != nil {
			t.Fatal(err)
		}
		held = append(held, conn)
	}
	if _, err := db.ExecContext(ctx, "SELECT 1"); !errors.Is(err, pooldriver.ErrAcquireTimeout) {
		t.Fatalf("want ErrAcquireTimeout, got %v", err)
	}
	done := make(chan error)
	go func() {
		_, err := db.ExecContext(ctx, "SELECT 1")
		done <- err
	}()
	WaitFor(t, "a waiting statement", func() bool { return c.Stats().Waiting == 1 })
	during()
	_ = held[0].Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	_ = held[1].Close()
	WaitFor(t, "every connection idle", func() bool { s := c.Stats(); return s.Idle == 2 && s.Active == 0 })
}

// WaitFor polls cond until it is true, failing the test after 10s.
func WaitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}
