package bench

import (
	"context"
	"fmt"
	"runtime"
	"testing"

	"github.com/jackc/puddle/v2"
	"github.com/pooldriver/pooldriver/pool"
)

// conn stands in for a pooled connection. The benchmarks measure the pool,
// so making one is free and the only work done while holding it is one
// increment, identical for both pools.
type conn struct{ uses int }

func newConn(context.Context) (*conn, error) { return &conn{}, nil }

// contender is the part of a pool the benchmarks exercise, so that one body
// drives both pools and any difference is the pool's.
type contender interface {
	// acquireRelease acquires a resource, uses it and releases it.
	acquireRelease(ctx context.Context) error
	close()
}

type pooldriverPool struct{ p *pool.Pool[*conn] }

func (c pooldriverPool) acquireRelease(ctx context.Context) error {
	r, err := c.p.Acquire(ctx)
	if err != nil {
		return err
	}
	r.Value().uses++
	r.Release()
	return nil
}

func (c pooldriverPool) close() { c.p.Close() }

type puddlePool struct{ p *puddle.Pool[*conn] }

func (c puddlePool) acquireRelease(ctx context.Context) error {
	r, err := c.p.Acquire(ctx)
	if err != nil {
		return err
	}
	r.Value().uses++
	r.Release()
	return nil
}

func (c puddlePool) close() { c.p.Close() }

// contenders lists the pools in the order they run in each benchmark.
var contenders = []struct {
	name string
	new  func(tb testing.TB, max int) contender
}{
	{"pooldriver", newPooldriver},
	{"puddle", newPuddle},
}

// newPooldriver returns a pooldriver pool with max resources already made
// and idle.
func newPooldriver(tb testing.TB, max int) contender {
	tb.Helper()
	p, err := pool.New(pool.Config[*conn]{Factory: newConn, Max: max})
	if err != nil {
		tb.Fatal(err)
	}
	ctx := context.Background()
	held := make([]*pool.Resource[*conn], 0, max)
	for range max {
		r, err := p.Acquire(ctx)
		if err != nil {
			tb.Fatal(err)
		}
		held = append(held, r)
	}
	for _, r := range held {
		r.Release()
	}
	if n := p.IdleCount(); n != max {
		tb.Fatalf("pooldriver: %d idle resources after warm-up, want %d", n, max)
	}
	return pooldriverPool{p}
}

// newPuddle returns a puddle pool with max resources already made and idle.
func newPuddle(tb testing.TB, max int) contender {
	tb.Helper()
	p, err := puddle.NewPool(&puddle.Config[*conn]{
		Constructor: newConn,
		Destructor:  func(*conn) {},
		MaxSize:     int32(max),
	})
	if err != nil {
		tb.Fatal(err)
	}
	ctx := context.Background()
	held := make([]*puddle.Resource[*conn], 0, max)
	for range max {
		r, err := p.Acquire(ctx)
		if err != nil {
			tb.Fatal(err)
		}
		held = append(held, r)
	}
	for _, r := range held {
		r.Release()
	}
	if n := p.Stat().IdleResources(); int(n) != max {
		tb.Fatalf("puddle: %d idle resources after warm-up, want %d", n, max)
	}
	return puddlePool{p}
}

// BenchmarkPoolAcquireRelease measures one goroutine acquiring and releasing
// an idle resource: the uncontended fast path.
func BenchmarkPoolAcquireRelease(b *testing.B) {
	for _, c := range contenders {
		b.Run(c.name, func(b *testing.B) {
			p := c.new(b, 4)
			defer p.close()
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if err := p.acquireRelease(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkPoolParallel measures GOMAXPROCS goroutines acquiring and
// releasing at once. Max is at least the number of goroutines, so nobody
// waits for a resource: what is measured is contention on the pool's
// internal state.
func BenchmarkPoolParallel(b *testing.B) {
	for _, max := range []int{4, 64} {
		b.Run(fmt.Sprintf("max=%d", max), func(b *testing.B) {
			for _, c := range contenders {
				b.Run(c.name, func(b *testing.B) {
					benchParallel(b, c.new(b, max), 1)
				})
			}
		})
	}
}

// BenchmarkPoolOversubscribed measures 64 goroutines sharing Max=4
// resources, so that most acquires wait for a release: the hand-off path.
func BenchmarkPoolOversubscribed(b *testing.B) {
	const max, goroutines = 4, 64
	// RunParallel starts parallelism × GOMAXPROCS goroutines.
	parallelism := (goroutines + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0)
	b.Run(fmt.Sprintf("max=%d", max), func(b *testing.B) {
		b.Run(fmt.Sprintf("goroutines=%d", parallelism*runtime.GOMAXPROCS(0)), func(b *testing.B) {
			for _, c := range contenders {
				b.Run(c.name, func(b *testing.B) {
					benchParallel(b, c.new(b, max), parallelism)
				})
			}
		})
	})
}

func benchParallel(b *testing.B, p contender, parallelism int) {
	defer p.close()
	ctx := context.Background()
	b.ReportAllocs()
	b.SetParallelism(parallelism)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := p.acquireRelease(ctx); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// TestPooldriverAcquireReleaseAllocs guards the promise the benchmark
// reports: acquiring and releasing an idle resource allocates nothing.
func TestPooldriverAcquireReleaseAllocs(t *testing.T) {
	p := newPooldriver(t, 4)
	defer p.close()
	ctx := context.Background()
	allocs := testing.AllocsPerRun(1000, func() {
		if err := p.acquireRelease(ctx); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("Acquire+Release of an idle resource: %v allocs, want 0", allocs)
	}
}
