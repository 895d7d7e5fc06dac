package pool

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// backend is a fake resource backend: it counts live resources and their
// high-water mark, and fails or blocks on demand.
type backend struct {
	live, maxLive atomic.Int64
	made          atomic.Int64
	destroyed     atomic.Int64
	failNext      atomic.Int64  // factory calls to fail
	fullNext      atomic.Int64  // factory calls to fail with errFull, after failNext
	calls         atomic.Int64  // factory calls
	block         chan struct{} // non-nil: the factory waits for it
	mu            sync.Mutex
	destroyedIDs  []int64
}

type item struct {
	id      int64
	broken  atomic.Bool
	inUse   atomic.Bool
	checked atomic.Int64
}

var (
	errFactory = errors.New("backend down")
	errFull    = errors.New("backend full") // what atLimit recognizes
)

func atLimit(err error) bool { return errors.Is(err, errFull) }

func (b *backend) factory(ctx context.Context) (*item, error) {
	b.calls.Add(1)
	if b.block != nil {
		select {
		case <-b.block:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if b.failNext.Add(-1) >= 0 {
		return nil, errFactory
	}
	b.failNext.Store(0)
	if b.fullNext.Add(-1) >= 0 {
		return nil, errFull
	}
	b.fullNext.Store(0)
	n := b.live.Add(1)
	for {
		m := b.maxLive.Load()
		if n <= m || b.maxLive.CompareAndSwap(m, n) {
			break
		}
	}
	return &item{id: b.made.Add(1)}, nil
}

func (b *backend) destructor(it *item) {
	b.live.Add(-1)
	b.destroyed.Add(1)
	b.mu.Lock()
	b.destroyedIDs = append(b.destroyedIDs, it.id)
	b.mu.Unlock()
}

func (b *backend) config() Config[*item] {
	return Config[*item]{Factory: b.factory, Destructor: b.destructor}
}

func newPool(t *testing.T, cfg Config[*item]) *Pool[*item] {
	t.Helper()
	p, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(p.Close)
	return p
}

func mustAcquire(t *testing.T, p *Pool[*item]) *Resource[*item] {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := p.Acquire(ctx)
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	return r
}

// waitFor polls cond until it is true or the deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// checkNoGoroutineLeak fails the test if, after cleanup, more goroutines run
// than before it started.
func checkNoGoroutineLeak(t *testing.T) {
	before := runtime.NumGoroutine()
	t.Cleanup(func() {
		deadline := time.Now().Add(10 * time.Second)
		for runtime.NumGoroutine() > before {
			if time.Now().After(deadline) {
				buf := make([]byte, 1<<16)
				buf = buf[:runtime.Stack(buf, true)]
				t.Fatalf("goroutines leaked: %d before, %d after\n%s", before, runtime.NumGoroutine(), buf)
			}
			time.Sleep(time.Millisecond)
		}
	})
}
