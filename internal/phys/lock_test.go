package phys

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestConnLockExcludes hammers the lock from goroutines that lock with and
// without deadlines and try-lock: never two holders, no lost wake-up (every
// goroutine finishes), and a waiter whose context ends gives up.
func TestConnLockExcludes(t *testing.T) {
	l := newConnLock()
	var holders atomic.Int32
	var got atomic.Int64
	var wg sync.WaitGroup
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 2000; i++ {
				var ok bool
				switch i % 3 {
				case 0:
					ok = l.TryLock()
				case 1:
					ctx, cancel := context.WithTimeout(context.Background(), 50*time.Microsecond)
					ok = l.Lock(ctx) == nil
					cancel()
				default:
					ok = l.Lock(context.Background()) == nil
				}
				if !ok {
					continue
				}
				if holders.Add(1) != 1 {
					t.Error("two holders at once")
				}
				got.Add(1)
				holders.Add(-1)
				l.Unlock()
			}
		}()
	}
	wg.Wait()
	if got.Load() == 0 || l.waiters.Load() != 0 || !l.TryLock() {
		t.Fatalf("after the load: %d acquisitions, %d waiters, lock free: false", got.Load(), l.waiters.Load())
	}
}

func TestConnLockWaitEndsWithContext(t *testing.T) {
	l := newConnLock()
	_ = l.Lock(context.Background())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Lock(ctx) }()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("lock with a cancelled context: %v", err)
	}
	acquired := make(chan struct{})
	go func() {
		_ = l.Lock(context.Background())
		close(acquired)
	}()
	l.Unlock()
	select {
	case <-acquired:
	case <-time.After(5 * time.Second):
		t.Fatal("a waiter was not woken by unlock")
	}
}
