package pooldriver_test

import (
	"context"
	"database/sql"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pooldriver/pooldriver"
)

// benchConns is the pool size of every benchmark: database/sql's own pool
// for plain, pooldriver's physical pool otherwise.
const benchConns = 4

// benchDB is one way of opening a *sql.DB over a fake server, side by side
// with the others.
type benchDB struct {
	name string
	open func(b *testing.B) *sql.DB
	mode int // 0: no task; -1: a cancellable context; else a task of mode-1 around the loop
}

func benchDBs() []benchDB {
	plain := func(b *testing.B) *sql.DB {
		db := sql.OpenDB(newServer(b).Connector())
		db.SetMaxOpenConns(benchConns)
		db.SetMaxIdleConns(benchConns)
		return db
	}
	wrapped := func(idle bool) func(b *testing.B) *sql.DB {
		return func(b *testing.B) *sql.DB {
			c := pooldriver.Wrap(newServer(b).Connector(), pooldriver.WithMaxConns(benchConns))
			if err := c.Err(); err != nil {
				b.Fatal(err)
			}
			db := sql.OpenDB(c)
			if idle {
				db.SetMaxIdleConns(benchConns)
			}
			return db
		}
	}
	return []benchDB{
		{name: "plain", open: plain},
		// A task's context is cancellable, and database/sql watches every
		// result set of a cancellable context with a goroutine of its own:
		// this is plain's cost on such a context, the fair baseline of a
		// task (an HTTP request's context is cancellable too).
		{name: "plain-cancelctx", open: plain, mode: -1},
		{name: "pooldriver", open: wrapped(false)},
		{name: "pooldriver-idle4", open: wrapped(true)},
		{name: "pooldriver-task", open: wrapped(false), mode: 1 + int(pooldriver.TransactionMode)},
		{name: "pooldriver-session", open: wrapped(false), mode: 1 + int(pooldriver.SessionMode)},
	}
}

// runBench runs op in a loop for every benchDB, serially and in parallel.
func runBench(b *testing.B, op func(ctx context.Context, db *sql.DB) error) {
	for _, parallel := range []bool{false, true} {
		for _, bd := range benchDBs() {
			name := bd.name
			if parallel {
				name += "-parallel"
			}
			b.Run(name, func(b *testing.B) {
				db := bd.open(b)
				defer db.Close()
				task := func() (context.Context, func()) {
					switch bd.mode {
					case 0:
						return context.Background(), func() {}
					case -1:
						return context.WithCancel(context.Background())
					}
					return pooldriver.WithTask(context.Background(), pooldriver.Mode(bd.mode-1))
				}
				// Warm both pools so that no benchmark pays for dialling.
				if err := op(context.Background(), db); err != nil {
					b.Fatal(err)
				}
				b.ReportAllocs()
				if !parallel {
					ctx, end := task()
					defer end()
					for b.Loop() {
						if err := op(ctx, db); err != nil {
							b.Fatal(err)
						}
					}
					return
				}
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					ctx, end := task()
					defer end()
					for pb.Next() {
						if err := op(ctx, db); err != nil {
							b.Error(err)
							return
						}
					}
				})
			})
		}
	}
}

// BenchmarkQuery runs a one-row query and reads it: the same loop through
// plain database/sql over the fake driver and through pooldriver.Wrap of it.
func BenchmarkQuery(b *testing.B) {
	runBench(b, func(ctx context.Context, db *sql.DB) error {
		var n int64
		var s string
		return db.QueryRowContext(ctx, "SELECT 1").Scan(&n, &s)
	})
}

// BenchmarkExec runs a statement with one argument that returns no rows.
func BenchmarkExec(b *testing.B) {
	runBench(b, func(ctx context.Context, db *sql.DB) error {
		_, err := db.ExecContext(ctx, "ECHO ?", int64(42))
		return err
	})
}

// BenchmarkInterleaved measures pooldriver's overhead over plain
// database/sql as one ratio, robust to the machine's changing speed: the
// two run the same loop in alternating chunks of interleaveChunk
// operations, each chunk timed, so that both meet the same machine states
// (on a shared VM the speed of a loop changes by ±20% from one tenth of a
// second to the next, more than the overhead being measured). It reports
// each one's ns/op and their ratio, pooldriver/plain; b.N counts the
// operations of each. The -parallel loops share each chunk among
// GOMAXPROCS goroutines, as RunParallel does, so that the parallel ratio
// is read under one machine state too rather than from two runs.
func BenchmarkInterleaved(b *testing.B) {
	ops := []struct {
		name string
		op   func(ctx context.Context, db *sql.DB) error
	}{
		{"Exec", func(ctx context.Context, db *sql.DB) error {
			_, err := db.ExecContext(ctx, "ECHO ?", int64(42))
			return err
		}},
		{"Query", func(ctx context.Context, db *sql.DB) error {
			var n int64
			var s string
			return db.QueryRowContext(ctx, "SELECT 1").Scan(&n, &s)
		}},
	}
	var openPlain, openPooled func(b *testing.B) *sql.DB
	for _, bd := range benchDBs() {
		switch bd.name {
		case "plain":
			openPlain = bd.open
		case "pooldriver":
			openPooled = bd.open
		}
	}
	for _, parallel := range []bool{false, true} {
		for _, o := range ops {
			name := o.name
			if parallel {
				name += "-parallel"
			}
			b.Run(name, func(b *testing.B) {
				plain, pooled := openPlain(b), openPooled(b)
				defer plain.Close()
				defer pooled.Close()
				subjects := []*sql.DB{plain, pooled}
				var took [2]time.Duration
				for _, db := range subjects {
					if err := runChunk(db, o.op, interleaveChunk, parallel); err != nil { // warm: pools, caches, statement facts
						b.Fatal(err)
					}
				}
				b.ReportAllocs()
				b.ResetTimer()
				for done, turn := 0, 0; done < b.N; done, turn = done+interleaveChunk, turn+1 {
					n := min(interleaveChunk, b.N-done)
					for k := range 2 {
						i := (turn + k) % 2 // alternate which goes first
						start := time.Now()
						if err := runChunk(subjects[i], o.op, n, parallel); err != nil {
							b.Fatal(err)
						}
						took[i] += time.Since(start)
					}
				}
				b.StopTimer()
				b.ReportMetric(float64(took[0])/float64(b.N), "plain-ns/op")
				b.ReportMetric(float64(took[1])/float64(b.N), "pooldriver-ns/op")
				b.ReportMetric(float64(took[1])/float64(took[0]), "ratio")
			})
		}
	}
}

// runChunk runs op n times on db: in a loop, or, parallel, shared among
// GOMAXPROCS goroutines, as RunParallel shares b.N (though it hands out
// batches, and each goroutine here takes one operation at a time until n are
// taken), each with a context of its own.
func runChunk(db *sql.DB, op func(context.Context, *sql.DB) error, n int, parallel bool) error {
	if !parallel {
		ctx := context.Background()
		for range n {
			if err := op(ctx, db); err != nil {
				return err
			}
		}
		return nil
	}
	var next atomic.Int64
	errs := make(chan error, runtime.GOMAXPROCS(0))
	for range cap(errs) {
		go func() {
			ctx := context.Background()
			for next.Add(1) <= int64(n) {
				if err := op(ctx, db); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	var first error
	for range cap(errs) {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// interleaveChunk is how many operations one subject of
// BenchmarkInterleaved runs before the other's turn: a few milliseconds.
const interleaveChunk = 5000
