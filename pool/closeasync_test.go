package pool

import (
	"context"
	"errors"
	"testing"
)

// TestCloseAsync: CloseAsync returns while the destructor of an idle
// resource is blocked, with the resource in use; the pool is closed by
// then (Acquire refused), a
// resource in use is destroyed when released, and Close waits for the
// idle one's destruction.
func TestCloseAsync(t *testing.T) {
	checkNoGoroutineLeak(t)
	var b backend
	cfg := b.config()
	cfg.Max = 2
	unblock := make(chan struct{})
	destroying := make(chan struct{}, 2)
	cfg.Destructor = func(v *item) {
		destroying <- struct{}{}
		<-unblock
		b.destructor(v)
	}
	p := newPool(t, cfg)
	idle := mustAcquire(t, p)
	held := mustAcquire(t, p)
	idle.Release()

	inUse := p.CloseAsync() // would block in the destructor, were it Close
	if len(inUse) != 1 || inUse[0] != held.Value() {
		t.Fatalf("CloseAsync returned %v in use, want the one held", inUse)
	}
	if again := p.CloseAsync(); again != nil {
		t.Fatalf("CloseAsync of a closed pool returned %v, want nil", again)
	}
	if _, err := p.Acquire(context.Background()); !errors.Is(err, ErrClosed) {
		t.Fatalf("Acquire after CloseAsync: %v, want ErrClosed", err)
	}
	<-destroying
	closed := make(chan struct{})
	go func() {
		p.Close()
		close(closed)
	}()
	select {
	case <-closed:
		t.Fatal("Close returned before the idle resource was destroyed")
	default:
	}
	close(unblock)
	<-closed
	if n := b.destroyed.Load(); n != 1 {
		t.Fatalf("destroyed %d, want the idle one", n)
	}
	held.Release() // destroyed on release: the pool is closed
	<-destroying
	if n := b.destroyed.Load(); n != 2 {
		t.Fatalf("destroyed %d, want both", n)
	}
}
