package otelpool_test

import (
	"context"
	"database/sql"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/pooldriver/pooldriver"
	"github.com/pooldriver/pooldriver/internal/fakedb"
	"github.com/pooldriver/pooldriver/otelpool"
)

// overheadConns is the pool size, as in the root package's benchmarks;
// overheadGoroutines, more than it, makes the parallel run wait for
// connections, which is what the acquire spans record.
const (
	overheadConns      = 4
	overheadGoroutines = 8
	overheadChunk      = 4000 // operations of one subject before the next one's turn
)

// BenchmarkOverhead measures what otelpool costs a statement, as ratios to
// the same pool without it: "metrics" is Register on an SDK meter provider
// with a manual reader; "traced" adds WithTracing on an SDK tracer provider
// that samples every span and batches them to an exporter that drops them.
// The three run the same db.Exec loop on the in-memory fake server, in
// alternating chunks of overheadChunk operations (as the root package's
// BenchmarkInterleaved does), so that all meet the same machine states; each
// reports its ns/op and allocs/op, and the ratios to "none". In "serial"
// and "parallel8" (overheadGoroutines on overheadConns connections, on a
// machine with few cores) nearly every statement's hold takes back the
// connection its logical conn parked, which is not traced; in
// "serial-acquire" database/sql keeps no idle logical conn, so that every
// statement takes one from the pool and is traced: the cost of a traced
// acquire.
func BenchmarkOverhead(b *testing.B) {
	for _, w := range []struct {
		name     string
		parallel bool
		idle     int // database/sql's idle logical conns
	}{
		{"serial", false, overheadGoroutines},
		{fmt.Sprintf("parallel%d", overheadGoroutines), true, overheadGoroutines},
		// database/sql keeps no logical conn: each statement's takes its
		// physical connection from the pool, one traced acquire each.
		{"serial-acquire", false, 0},
	} {
		parallel := w.parallel
		b.Run(w.name, func(b *testing.B) {
			subjects := []*sql.DB{
				overheadDB(b, "none", false, false, w.idle),
				overheadDB(b, "metrics", true, false, w.idle),
				overheadDB(b, "traced", true, true, w.idle),
			}
			run := func(db *sql.DB, n int) {
				if !parallel {
					for range n {
						if _, err := db.Exec("ECHO ?", int64(42)); err != nil {
							b.Fatal(err)
						}
					}
					return
				}
				var wg sync.WaitGroup
				for g := range overheadGoroutines {
					wg.Go(func() {
						for i := g; i < n; i += overheadGoroutines {
							if _, err := db.Exec("ECHO ?", int64(42)); err != nil {
								b.Error(err)
								return
							}
						}
					})
				}
				wg.Wait()
			}
			for _, db := range subjects {
				run(db, overheadChunk) // warm: pools, caches
			}
			var took [3]time.Duration
			var allocs [3]uint64
			var ms runtime.MemStats
			b.ReportAllocs()
			b.ResetTimer()
			for done, turn := 0, 0; done < b.N; done, turn = done+overheadChunk, turn+1 {
				n := min(overheadChunk, b.N-done)
				for k := range subjects {
					i := (turn + k) % len(subjects) // rotate which goes first
					runtime.ReadMemStats(&ms)
					before := ms.Mallocs
					start := time.Now()
					run(subjects[i], n)
					took[i] += time.Since(start)
					runtime.ReadMemStats(&ms)
					allocs[i] += ms.Mallocs - before
				}
			}
			b.StopTimer()
			for i, s := range []string{"none", "metrics", "traced"} {
				b.ReportMetric(float64(took[i])/float64(b.N), s+"-ns/op")
				b.ReportMetric(float64(allocs[i])/float64(b.N), s+"-allocs/op")
			}
			b.ReportMetric(float64(took[1])/float64(took[0]), "metrics-ratio")
			b.ReportMetric(float64(took[2])/float64(took[0]), "traced-ratio")
		})
	}
}

// overheadDB opens a pool of overheadConns connections on a fake server of
// its own, with otelpool's metrics and tracing as asked.
func overheadDB(b *testing.B, name string, metrics, traced bool, idle int) *sql.DB {
	srv := fakedb.NewServer("otelpool_overhead_" + name + "_" + b.Name())
	b.Cleanup(srv.Close)
	opts := []pooldriver.Option{pooldriver.WithMaxConns(overheadConns)}
	if traced {
		tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()))
		b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
		opts = append(opts, otelpool.WithTracing(tp))
	}
	c := pooldriver.Wrap(srv.Connector(), opts...)
	if err := c.Err(); err != nil {
		b.Fatal(err)
	}
	if metrics {
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
		b.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
		reg, err := otelpool.Register(c, mp, name)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = reg.Unregister() })
	}
	db := sql.OpenDB(c)
	db.SetMaxIdleConns(idle)
	b.Cleanup(func() { _ = db.Close() })
	return db
}
