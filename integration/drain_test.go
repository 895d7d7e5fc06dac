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
// database/sql (the server's Shutdown, then db.Close), both at once, so
// that both drain under the same load. Every request in flight when the
// drain begins queues for a connection at once, so with FIFO waits every
// task advances a statement at a time and none ends; pooldriver serves the
// statements of tasks begun first, and must finish at least as many
// requests as plain and leave fewer half-written (plain leaves some at the
// short contexts). Shutdown returns by its deadline: within a second of
// it here, a bound that holds on a loaded machine (the lateness measured
// is logged).
func TestDrainFinishesTasks(t *testing.T) {
	checkNoGoroutineLeak(t)
	forEachServer(t, func(t *testing.T, s server) {
		for _, d := range []time.Duration{700 * time.Millisecond, time.Second, 5 * time.Second} {
			t.Run(d.String(), func(t *testing.T) {
				tn := newTenant(t, s)
				plainRun, pooledRun := startDrainRun(t, s, tn, false), startDrainRun(t, s, tn, true)
				waitFor(t, "every request in its handler", func() bool {
					return plainRun.entered.Load() == drainRequests && pooledRun.entered.Load() == drainRequests
				})
				sctx, cancel := context.WithTimeout(context.Background(), d)
				defer cancel()
				var drains sync.WaitGroup
				drains.Go(func() { plainRun.drain(sctx) })
				drains.Go(func() { pooledRun.drain(sctx) })
				drains.Wait()
				plain, pooled := plainRun.outcome(t), pooledRun.outcome(t)
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

// drainRun is one subject of TestDrainFinishesTasks: its HTTP server, its
// requests and its table.
type drainRun struct {
	s        server
	table    string
	db       *sql.DB
	c        *pooldriver.Connector // nil: the plain driver
	srv      *http.Server
	served   chan error
	requests sync.WaitGroup
	// entered and finished count the handlers begun, and those whose
	// every statement ran.
	entered, finished atomic.Int64
	srvLate, late     time.Duration
}

// startDrainRun serves drainRequests requests through pooldriver (pooled)
// or the plain driver, each inserting drainSteps rows of its number into a
// table of its own.
func startDrainRun(t *testing.T, s server, tn *tenant, pooled bool) *drainRun {
	r := &drainRun{s: s, table: s.table(t, "dr55_drain", "req int, step int"), served: make(chan error, 1)}
	ph := func(n int) string {
		if s.name == "postgres" {
			return s.placeholder(n) + "::int"
		}
		return s.placeholder(n)
	}
	insert := fmt.Sprintf("INSERT INTO %s (req, step) SELECT %s, %s FROM (%s) s",
		r.table, ph(1), ph(2), strings.Replace(s.sleep, "%d", "0.02", 1))
	if pooled {
		r.db, r.c = tn.open(t, fmt.Sprintf("pool_max_conns=%d", drainPool))
	} else {
		r.db = sql.OpenDB(plainConnector(t, s, tn.dsn()))
		r.db.SetMaxOpenConns(drainPool)
		r.db.SetMaxIdleConns(drainPool)
		t.Cleanup(func() { _ = r.db.Close() })
	}
	var h http.Handler = http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.entered.Add(1)
		var n int
		if _, err := fmt.Sscan(req.URL.Query().Get("req"), &n); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		for step := range drainSteps {
			if _, err := r.db.ExecContext(req.Context(), insert, n, step); err != nil {
				http.Error(w, err.Error(), http.StatusServiceUnavailable)
				return
			}
		}
		r.finished.Add(1)
	})
	if pooled {
		h = pooldriver.Middleware(h)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	r.srv = &http.Server{Handler: h}
	go func() { r.served <- r.srv.Serve(ln) }()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: drainRequests}}
	t.Cleanup(client.CloseIdleConnections)
	for i := range drainRequests {
		r.requests.Go(func() {
			resp, err := client.Get(fmt.Sprintf("http://%s/?req=%d", ln.Addr(), i))
			if err == nil {
				resp.Body.Close()
			}
		})
	}
	return r
}

// drain shuts the HTTP server down with ctx, then the pool (Connector.Shutdown,
// or db.Close for the plain driver), and records how late each returned.
func (r *drainRun) drain(ctx context.Context) {
	deadline, _ := ctx.Deadline()
	_ = r.srv.Shutdown(ctx)
	r.srvLate = time.Since(deadline)
	if r.c != nil {
		_ = r.c.Shutdown(ctx)
	} else {
		_ = r.db.Close()
	}
	r.late = time.Since(deadline)
}

// outcome waits for every request to end and counts the rows each wrote.
func (r *drainRun) outcome(t *testing.T) drainOutcome {
	r.requests.Wait()
	_ = r.srv.Close()
	require.True(t, errors.Is(<-r.served, http.ErrServerClosed))
	rows, err := r.s.admin(t).QueryContext(ctx(t), fmt.Sprintf("SELECT count(*) FROM %s GROUP BY req", r.table))
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
	return drainOutcome{finished: int(r.finished.Load()), half: half, srvLate: r.srvLate, late: r.late}
}
