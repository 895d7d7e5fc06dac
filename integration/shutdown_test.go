package integration

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pooldriver/pooldriver"
	"github.com/pooldriver/pooldriver/internal/faultproxy"
)

// shutdownRequests is how many requests are in flight when Shutdown
// begins: twice the pool, so that half of them wait for a connection.
const shutdownRequests = 20

// TestShutdownDrains: 20 requests in flight (tasks, as Middleware makes
// them, of three statements each: a sleep, an insert, a sleep), half of
// them waiting for a connection, and Shutdown with 5s: every request
// finishes, every request begun after Shutdown is refused with
// ErrShuttingDown and writes nothing, Shutdown returns nil, and the server
// has no connection of the pool left.
func TestShutdownDrains(t *testing.T) {
	forEachServer(t, func(t *testing.T, s server) {
		tn := newTenant(t, s)
		table := s.table(t, "pd_shutdown", "id int")
		db, c := tn.open(t, fmt.Sprintf("pool_max_conns=%d", shutdownRequests/2))
		insert := fmt.Sprintf("INSERT INTO %s (id) VALUES (%s)", table, s.placeholder(1))
		sleep := strings.Replace(s.sleep, "%d", "0.2", 1)

		var started sync.WaitGroup
		started.Add(shutdownRequests)
		errs := make(chan error, shutdownRequests)
		for i := range shutdownRequests {
			go func() {
				ctx, end := pooldriver.WithTask(context.Background())
				defer end()
				started.Done()
				errs <- func() error {
					for _, q := range []string{sleep, insert, sleep} {
						if _, err := db.ExecContext(ctx, q, argsFor(q, insert, i)...); err != nil {
							return fmt.Errorf("request %d: %s: %w", i, q, err)
						}
					}
					return nil
				}()
			}()
		}
		started.Wait()
		waitFor(t, "the first statements to run", func() bool { return c.Stats().Active == shutdownRequests/2 })

		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		done := make(chan error, 1)
		go func() { done <- c.Shutdown(sctx) }()
		waitFor(t, "Shutdown to refuse new work", func() bool {
			_, err := db.ExecContext(context.Background(), "SELECT 1")
			return err != nil
		})
		for i := range 5 {
			ctx, end := pooldriver.WithTask(context.Background())
			_, err := db.ExecContext(ctx, insert, shutdownRequests+i)
			end()
			require.ErrorIs(t, err, pooldriver.ErrShuttingDown, "a request begun after Shutdown")
		}

		require.NoError(t, <-done, "Shutdown")
		for range shutdownRequests {
			require.NoError(t, <-errs)
		}
		require.Equal(t, int64(shutdownRequests), count(t, s.admin(t), context.Background(), table),
			"rows: one per request in flight, none of those begun after")
		tn.waitConns(t, 0)
	})
}

// argsFor returns the arguments of q: the request's number for the insert.
func argsFor(q, insert string, i int) []any {
	if q == insert {
		return []any{i}
	}
	return nil
}

// TestShutdownCuts: 20 requests in flight, each a 20s sleep, and Shutdown
// with 100ms: it returns the deadline's error counting the 10 connections
// in use it cut; the 10 requests waiting for a connection fail with
// ErrClosed and the 10 it cut fail at once, not after their sleep; and the
// server has none of the pool's connections left once its statements end
// (PostgreSQL cancels them; MariaDB finishes a SLEEP before it sees its
// client gone, so there the sleep is shorter).
func TestShutdownCuts(t *testing.T) {
	forEachServer(t, func(t *testing.T, s server) {
		tn := newTenant(t, s)
		db, c := tn.open(t, fmt.Sprintf("pool_max_conns=%d", shutdownRequests/2))
		secs := 20
		if s.name == "mysql" {
			secs = 3
		}
		sleep := fmt.Sprintf(s.sleep, secs)
		errs := startSleeps(t, db, c, sleep)
		sctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		start := time.Now()
		err := c.Shutdown(sctx)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.Contains(t, err.Error(), fmt.Sprintf("%d connections in use at the end of the wait were cut, 0 left", shutdownRequests/2))
		var closed, cut int
		for range shutdownRequests {
			err := <-errs
			switch {
			case errors.Is(err, pooldriver.ErrClosed):
				closed++
			case err != nil:
				t.Logf("cut: %v", err)
				cut++
			}
		}
		require.Less(t, time.Since(start), time.Duration(secs)*time.Second*3/4, "the cut requests failed at once")
		require.Equal(t, shutdownRequests/2, closed, "requests waiting for a connection: ErrClosed")
		require.Equal(t, shutdownRequests/2, cut, "requests cut mid-statement")
		tn.waitConns(t, 0)
	})
}

// TestShutdownKeepsDeadlineBlackHole: 20 requests in flight through a
// proxy, 10 of them running a 3s sleep, when the network to the server
// turns into a black hole; Shutdown with 100ms returns by its deadline
// (within a second of it, a bound that holds on a loaded machine; the
// lateness measured is logged), cutting the 10 connections in use without
// waiting for the server, which answers nothing (PostgreSQL's cancel
// request, on a connection of its own, goes into the black hole). Every
// request then fails, and the goroutines of the cuts end (the leak check).
func TestShutdownKeepsDeadlineBlackHole(t *testing.T) {
	checkNoGoroutineLeak(t)
	forEachServer(t, func(t *testing.T, s server) {
		tn := newTenant(t, s)
		px, err := faultproxy.New(serverAddr(t, s))
		require.NoError(t, err)
		t.Cleanup(px.Close) // the server's side too, so that tn.open's cleanup sees none left
		c := pooldriver.New(throughProxy(t, tn.dsn(fmt.Sprintf("pool_max_conns=%d", shutdownRequests/2)), px.Addr()))
		require.NoError(t, c.Err())
		db := sql.OpenDB(c)
		t.Cleanup(func() {
			_ = db.Close()
			px.Close()
			tn.waitConns(t, 0)
		})
		sleep := fmt.Sprintf(s.sleep, 3)
		errs := startSleeps(t, db, c, sleep)
		px.Set(faultproxy.BlackHole, 0)
		sctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		deadline, _ := sctx.Deadline()
		err = c.Shutdown(sctx)
		late := time.Since(deadline)
		t.Logf("%s: Shutdown returned %v after its deadline: %v", s.name, late.Round(time.Millisecond), err)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.LessOrEqual(t, late, time.Second, "Shutdown returned past its deadline")
		for range shutdownRequests {
			require.Error(t, <-errs)
		}
	})
}

// startSleeps starts shutdownRequests requests, each a task running sleep
// on db, and returns once all of them run, half of them on a connection
// of c's (the pool's size); each request's error comes on the channel.
func startSleeps(t *testing.T, db *sql.DB, c *pooldriver.Connector, sleep string) <-chan error {
	errs := make(chan error, shutdownRequests)
	var running atomic.Int64
	for range shutdownRequests {
		go func() {
			ctx, end := pooldriver.WithTask(context.Background())
			defer end()
			running.Add(1)
			_, err := db.ExecContext(ctx, sleep)
			errs <- err
		}()
	}
	waitFor(t, "the sleeps to run", func() bool {
		return running.Load() == shutdownRequests && c.Stats().Active == shutdownRequests/2
	})
	return errs
}
