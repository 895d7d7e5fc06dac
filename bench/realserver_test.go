package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
	"time"
)

// benchPoolSize is the pool size N of every contender that has one.
const benchPoolSize = 10

// realServers returns the servers the real-server benchmarks run against;
// $POOLDRIVER_POSTGRES_DSN and $POOLDRIVER_MYSQL_DSN override the local
// defaults.
func realServers() []Server {
	return []Server{Postgres(PostgresDSN()), MySQL(MySQLDSN())}
}

var (
	prepareMu  sync.Mutex
	prepareErr = map[string]error{}
)

// requireServer skips tb unless s answers; the table is created and filled
// once per test binary.
func requireServer(tb testing.TB, s Server) {
	tb.Helper()
	prepareMu.Lock()
	err, done := prepareErr[s.Name]
	if !done {
		err = s.Prepare(context.Background(), 5*time.Second)
		prepareErr[s.Name] = err
	}
	prepareMu.Unlock()
	if err != nil {
		tb.Skipf("skipping: %v (set POOLDRIVER_%s_DSN to point at a server)", err, envName(s))
	}
}

func envName(s Server) string {
	if s.Name == "postgres" {
		return "POSTGRES"
	}
	return "MYSQL"
}

// benchContenders are the contenders of the Go benchmarks: the issue's
// three on PostgreSQL, two on MySQL. The loadtest harness runs all of them.
func benchContenders(s Server) []Spec {
	want := map[string]bool{Pooldriver: true, SQLTuned: true, PgxPool: true}
	var out []Spec
	for _, sp := range Contenders(s) {
		if want[sp.Name] {
			out = append(out, sp)
		}
	}
	return out
}

// BenchmarkRealServerPointSelect reads one row by primary key from a real
// server at 1, 16 and 64 goroutines, with every contender side by side in
// one run, each with a pool of benchPoolSize server connections:
// pooldriver (database/sql at its defaults), database/sql tuned to the same
// size, and pgxpool. Pools are filled before the timer starts. The metric
// conns-opened counts server connections opened while timed (0 expected).
func BenchmarkRealServerPointSelect(b *testing.B) {
	procs := runtime.GOMAXPROCS(0)
	for _, s := range realServers() {
		b.Run(s.Name, func(b *testing.B) {
			requireServer(b, s)
			for _, g := range []int{1, 16, 64} {
				// RunParallel starts parallelism × GOMAXPROCS goroutines.
				par := (g + procs - 1) / procs
				name := fmt.Sprintf("goroutines=%d", g)
				if g > 1 {
					name = fmt.Sprintf("goroutines=%d", par*procs)
				}
				b.Run(name, func(b *testing.B) {
					for _, sp := range benchContenders(s) {
						benchPointSelect(b, s, sp, g, par, context.Background())
					}
				})
			}
		})
	}
}

// BenchmarkRealServerPointSelectCancelCtx is BenchmarkRealServerPointSelect
// at 1 and 64 goroutines with a cancellable context, as the loadtest's
// workers and a service's request handlers have: a waiter for a connection
// then selects on its context too (context.Background's Done is nil).
func BenchmarkRealServerPointSelectCancelCtx(b *testing.B) {
	procs := runtime.GOMAXPROCS(0)
	for _, s := range realServers() {
		b.Run(s.Name, func(b *testing.B) {
			requireServer(b, s)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			for _, g := range []int{1, 64} {
				par, n := (g+procs-1)/procs, 1
				if g > 1 {
					n = par * procs // RunParallel starts parallelism × GOMAXPROCS goroutines
				}
				b.Run(fmt.Sprintf("goroutines=%d", n), func(b *testing.B) {
					for _, sp := range benchContenders(s) {
						benchPointSelect(b, s, sp, g, par, ctx)
					}
				})
			}
		})
	}
}

func benchPointSelect(b *testing.B, s Server, sp Spec, g, par int, ctx context.Context) {
	c, err := sp.Open(s, benchPoolSize)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	if err := warm(ctx, c, benchPoolSize); err != nil {
		b.Fatal(err)
	}
	b.Run(sp.Name, func(b *testing.B) {
		opened := c.Opened()
		b.ReportAllocs()
		if g == 1 {
			for b.Loop() {
				if err := c.PointSelect(ctx, rand.IntN(Rows)+1); err != nil {
					b.Fatal(err)
				}
			}
		} else {
			b.SetParallelism(par)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := c.PointSelect(ctx, rand.IntN(Rows)+1); err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		b.StopTimer()
		b.ReportMetric(float64(c.Opened()-opened), "conns-opened")
	})
}

// warm runs n point selects at once, so that a pool of n is full.
func warm(ctx context.Context, c *Contender, n int) error {
	errs := make(chan error, n)
	for range n {
		go func() {
			// Hold the connection briefly so that all n are in use at once.
			_, err := c.Hold(ctx, 5*time.Millisecond)
			errs <- err
		}()
	}
	var first error
	for range n {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// TestRealServerContenders checks that every contender of the benchmarks
// and of cmd/loadtest runs every workload operation against the real
// servers.
func TestRealServerContenders(t *testing.T) {
	for _, s := range realServers() {
		t.Run(s.Name, func(t *testing.T) {
			requireServer(t, s)
			for _, sp := range Contenders(s) {
				t.Run(sp.Name, func(t *testing.T) {
					c, err := sp.Open(s, 4)
					if err != nil {
						t.Fatal(err)
					}
					defer c.Close()
					ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
					defer cancel()
					if err := c.PointSelect(ctx, 1); err != nil {
						t.Fatalf("PointSelect: %v", err)
					}
					if err := c.ShortTx(ctx, 2); err != nil {
						t.Fatalf("ShortTx: %v", err)
					}
					if err := c.Request(ctx, [3]int{3, 4, 5}); err != nil {
						t.Fatalf("Request: %v", err)
					}
					if _, err := c.Hold(ctx, time.Millisecond); err != nil {
						t.Fatalf("Hold: %v", err)
					}
					if err := warm(ctx, c, 4); err != nil {
						t.Fatalf("warm: %v", err)
					}
					if got := c.Opened(); got < 1 || sp.Bounded && got > 4 {
						t.Errorf("Opened() = %d after warm-up of a pool of 4", got)
					}
					if sp.Bounded && c.Peak() > 4 {
						t.Errorf("Peak() = %d, want at most 4", c.Peak())
					}
				})
			}
		})
	}
}
