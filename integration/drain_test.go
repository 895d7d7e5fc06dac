package integration

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pooldriver/pooldriver"
)

// drainRequests requests are in flight when the drain begins, each a task
// of drainSteps statements, through a pool of drainPool connections.
const (
	drainRequests = 200
	drainPool     = 10
	drainSteps    = 3
)

// drainOutcome is what a drain left: requests whose every statement ran,
// requests of which some but not all of the rows are written (half), and
// how long after its deadline the shutdown returned (negative: before):
// the HTTP server's (srvLate), then the pool's, which began after it.
type drainOutcome struct {
	finished, half int
	srvLate, late  time.Duration
}

func (o drainOutcome) String() string {
	return fmt.Sprintf("%d finished, %d half-written, shutdown returned %v after its deadline (the HTTP server's: %v)",
		o.finished, o.half, o.late.Round(time.Millisecond), o.srvLate.Round(time.Millisecond))
}

// TestDrainFinishesTasks: 200 requests through an HTTP server, each a task
// of three 20 ms inserts, a pool of 10, then the server's Shutdown and the
// pool's with one context of 700 ms, 1 s and 5 s; beside plain
// database/sql (the server's Shutdown, then db.Close) in the same test.
// Every request in flight when the drain begins queues for a connection
// at once, so with FIFO waits every task advances a statement at a time
// and none ends; pooldriver serves the statements of tasks begun first,
// and must finish at least as many requests as plain and leave fewer
// half-written (plain leaves some at the short contexts). Shutdown
// returns by its deadline: within a second of it here, a bound that holds
// on a loaded machine (the lateness measured is logged).
func TestDrainFinishesTasks(t *testing.T) {
	checkNoGoroutineLeak(t)
	forEachServer(t, func(t *testing.T, s server) {
		for _, d := range []time.Duration{700 * time.Millisecond, time.Second, 5 * time.Second} {
			t.Run(d.String(), func(t *testing.T) {
				tn := newTenant(t, s)
				plain := runDrain(t, s, tn, false, d)
				pooled := runDrain(t, s, tn, true, d)
				t.Logf("%s, %v: database/sql: %v; pooldriver: %v", s.name, d, plain, pooled)
				require.GreaterOrEqual(t, pooled.finished, plain.finished, "requests finished: pooldriver against plain database/sql")
				if plain.half > 0 {
					require.Less(t, pooled.half, plain.half, "requests half-written: pooldriver against plain database/sql")
				} else {
					require.Zero(t, pooled.half, "requests half-written by pooldriver, none by plain database/sql")
				}
				require.LessOrEqual(t, pooled.late, time.Second, "pooldriver's Shutdown returned past its deadline")
			})
		}
	})
}

// runDrain serves drainRequests requests through pooldriver (pooled) or
// the plain driver, waits until every one is in its handler, and drains
// with a context of d: the HTTP server's Shutdown, then the pool's
// (Connector.Shutdown, or db.Close for the plain driver). Then it waits
// for every handler to return and counts the rows each request wrote.
func runDrain(t *testing.T, s server, tn *tenant, pooled bool, d time.Duration) drainOutcome {
	table := s.table(t, "dr55_drain", "req int, step int")
	ph := func(n int) string {
		if s.name == "postgres" {
			return s.placeholder(n) + "::int"
		}
		return s.placeholder(n)
	}
	insert := fmt.Sprintf("INSERT INTO %s (req, step) SELECT %s, %s FROM (%s) s",
		table, ph(1), ph(2), strings.Replace(s.sleep, "%d", "0.02", 1))

	var db *sql.DB
	var c *pooldriver.Connector
	if pooled {
		db, c = tn.open(t, fmt.Sprintf("pool_max_conns=%d", drainPool))
	} else {
		db = sql.OpenDB(plainConnector(t, s, tn.dsn()))
		db.SetMaxOpenConns(drainPool)
		db.SetMaxIdleConns(drainPool)
		t.Cleanup(func() { _ = db.Close() })
	}

	var entered, finished atomic.Int64
	var h http.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		entered.Add(1)
		var req int
		if _, err := fmt.Sscan(r.URL.Query().Get("req"), &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		for step := range drainSteps {
			if _, err := db.ExecContext(r.Context(), insert, req, step); err != nil {
				http.Error(w, err.Error(), http.StatusServiceUnavailable)
				return
			}
		}
		finished.Add(1)
	})
	if pooled {
		h = pooldriver.Middleware(h)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := &http.Server{Handler: h}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: drainRequests}}

	var requests sync.WaitGroup
	for i := range drainRequests {
		requests.Go(func() {
			resp, err := client.Get(fmt.Sprintf("http://%s/?req=%d", ln.Addr(), i))
			if err == nil {
				resp.Body.Close()
			}
		})
	}
	waitFor(t, "every request in its handler", func() bool { return entered.Load() == drainRequests })

	sctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	deadline, _ := sctx.Deadline()
	_ = srv.Shutdown(sctx)
	srvLate := time.Since(deadline)
	if pooled {
		_ = c.Shutdown(sctx)
	} else {
		_ = db.Close()
	}
	late := time.Since(deadline)

	requests.Wait()
	_ = srv.Close()
	require.True(t, errors.Is(<-served, http.ErrServerClosed))
	client.CloseIdleConnections()

	rows, err := s.admin(t).QueryContext(ctx(t), fmt.Sprintf("SELECT count(*) FROM %s GROUP BY req", table))
	require.NoError(t, err)
	defer rows.Close()
	half := 0
	for rows.Next() {
		var n int
		require.NoError(t, rows.Scan(&n))
		if n > 0 && n < drainSteps {
			half++
		}
	}
	require.NoError(t, rows.Err())
	return drainOutcome{finished: int(finished.Load()), half: half, srvLate: srvLate, late: late}
}
