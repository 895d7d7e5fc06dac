package pool

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// errDenied is what permanent recognizes: a backend that refuses for good.
var errDenied = errors.New("password authentication failed")

func permanent(err error) bool { return errors.Is(err, errDenied) }

// refusingBackend fails every factory call with errDenied while deny is
// set, counting the calls and the most in flight at once.
type refusingBackend struct {
	backend
	deny             atomic.Bool
	inFlight, maxFly atomic.Int64
	hold             time.Duration // each call takes this long
}

func (b *refusingBackend) factory(ctx context.Context) (*item, error) {
	n := b.inFlight.Add(1)
	defer b.inFlight.Add(-1)
	for m := b.maxFly.Load(); n > m && !b.maxFly.CompareAndSwap(m, n); m = b.maxFly.Load() {
	}
	time.Sleep(b.hold)
	if b.deny.Load() {
		b.calls.Add(1)
		return nil, fmt.Errorf("connect: %w", errDenied)
	}
	return b.backend.factory(ctx)
}

// TestPermanentFailsFast: a pool that never created a resource meets a
// permanent refusal. 10 callers at a time, 200 calls with 2 s contexts:
// every one fails in well under its deadline with ErrPermanent wrapping the
// factory's error, the factory runs one call at a time and far fewer
// times than there are calls; once the backend accepts, the next attempt
// serves. On the bubble's clock: a call's time is what the pool made it
// wait, not what a busy machine's scheduler added.
func TestPermanentFailsFast(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := &refusingBackend{hold: 2 * time.Millisecond}
		b.deny.Store(true)
		cfg := Config[*item]{Factory: b.factory, Destructor: b.destructor, Permanent: permanent}
		p := newPool(t, cfg)
		var calls, slow atomic.Int64
		var wg sync.WaitGroup
		start := time.Now()
		errs := make(chan error, 200)
		for range 10 {
			wg.Go(func() {
				for calls.Add(1) <= 200 {
					ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
					t0 := time.Now()
					r, err := p.Acquire(ctx)
					cancel()
					if time.Since(t0) > time.Second {
						slow.Add(1)
					}
					if err == nil {
						r.Release()
						errs <- errors.New("served while the backend refuses")
						continue
					}
					errs <- err
				}
			})
		}
		wg.Wait()
		close(errs)
		wall := time.Since(start)
		for err := range errs {
			if !errors.Is(err, ErrPermanent) || !errors.Is(err, errDenied) {
				t.Fatalf("error %v: want ErrPermanent wrapping the factory's error", err)
			}
		}
		t.Logf("200 calls in %v, %d factory calls, at most %d at once", wall, b.calls.Load(), b.maxFly.Load())
		if slow.Load() > 0 {
			t.Errorf("%d calls took over 1s", slow.Load())
		}
		if n := b.calls.Load(); n > 100 {
			t.Errorf("%d factory calls for 200 refused calls", n)
		}
		if m := b.maxFly.Load(); m > growthStart {
			t.Errorf("%d factory calls at once", m)
		}
		b.deny.Store(false)
		waitFor(t, "a call served once the backend accepts", func() bool {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			r, err := p.Acquire(ctx)
			if err == nil {
				r.Release()
			}
			return err == nil
		})
		if st := p.Stats(); st.FailFastRejects == 0 {
			t.Errorf("FailFastRejects = 0")
		}
	})
}

// TestPermanentWaitsForInUse: while refusing, a caller that a resource in
// use can serve waits for it and is served.
func TestPermanentWaitsForInUse(t *testing.T) {
	b := &refusingBackend{}
	cfg := Config[*item]{Factory: b.factory, Destructor: b.destructor, Permanent: permanent, Max: 2}
	p := newPool(t, cfg)
	held := mustAcquire(t, p)
	b.deny.Store(true)
	// A pool that created one waits PermanentGrace first: this one is a
	// fresh pool's view, so make the grace pass at once.
	p.mu.Lock()
	p.connected = false
	p.mu.Unlock()
	got := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		r, err := p.Acquire(ctx)
		if err == nil {
			r.Release()
		}
		got <- err
	}()
	waitFor(t, "a failed factory call", func() bool { return b.calls.Load() > 0 })
	select {
	case err := <-got:
		t.Fatalf("the caller did not wait for the resource in use: %v", err)
	default:
	}
	held.Release()
	if err := <-got; err != nil {
		t.Fatalf("Acquire: %v", err)
	}
}

// TestPermanentGraceAfterSuccess: a pool that created a resource treats a
// permanent failure as any other for PermanentGrace: its caller gets the
// factory's own error, not ErrPermanent, and a caller arriving meanwhile
// is not refused at once.
func TestPermanentGraceAfterSuccess(t *testing.T) {
	b := &refusingBackend{}
	cfg := Config[*item]{Factory: b.factory, Destructor: b.destructor, Permanent: permanent, PermanentGrace: time.Hour}
	p := newPool(t, cfg)
	mustAcquire(t, p).Destroy()
	b.deny.Store(true)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := p.Acquire(ctx)
	if !errors.Is(err, errDenied) || errors.Is(err, ErrPermanent) {
		t.Fatalf("Acquire: %v, want the factory's error itself", err)
	}
}

// timeoutErr is a factory error that says Timeout, as net.Error's do.
type timeoutErr struct{}

func (timeoutErr) Error() string { return "i/o timeout" }
func (timeoutErr) Timeout() bool { return true }

// TestSilentBackendFailsWaitersWithoutCall: factory calls that time out
// after 1 s, 10 callers with 20 s contexts on a pool that makes at most
// growthStart at once: each caller fails with the timeout well before two
// such timeouts, whether a call of its own was under way or it waited
// for those of others. On the bubble's clock, where scheduling adds
// nothing: it held at load 20 in real time only with 2 s of slack.
func TestSilentBackendFailsWaitersWithoutCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const silence = time.Second
		factory := func(ctx context.Context) (*item, error) {
			time.Sleep(silence)
			return nil, fmt.Errorf("dial: %w", timeoutErr{})
		}
		p := newPool(t, Config[*item]{Factory: factory})
		var wg sync.WaitGroup
		var worst atomic.Int64
		for range 10 {
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				t0 := time.Now()
				_, err := p.Acquire(ctx)
				d := time.Since(t0)
				for w := worst.Load(); int64(d) > w && !worst.CompareAndSwap(w, int64(d)); w = worst.Load() {
				}
				var te timeoutErr
				if !errors.As(err, &te) {
					t.Errorf("Acquire: %v, want the timeout", err)
				}
			})
		}
		wg.Wait()
		// One silence; before, callers waited out their whole context.
		if w := time.Duration(worst.Load()); w >= 2*silence {
			t.Errorf("the slowest caller waited %v", w)
		}
	})
}

// TestHandOffIsChecked: a resource released straight to a waiter goes
// through BeforeAcquire as an idle one does; one that fails it is
// destroyed and the waiter gets another.
func TestHandOffIsChecked(t *testing.T) {
	var b backend
	cfg := b.config()
	cfg.Max = 1
	cfg.BeforeAcquire = func(_ context.Context, r *Resource[*item]) bool {
		r.Value().checked.Add(1)
		return !r.Value().broken.Load()
	}
	p := newPool(t, cfg)
	r := mustAcquire(t, p)
	got := make(chan *Resource[*item], 1)
	go func() { got <- mustAcquire(t, p) }()
	waitFor(t, "a waiter", func() bool { return p.Stats().Waiting == 1 })
	r.Value().broken.Store(true) // the server closed it right after its reply
	r.Release()
	r2 := <-got
	defer r2.Release()
	if r2.Value().id == r.Value().id {
		t.Fatalf("the waiter got the resource that failed its check")
	}
	if r.Value().checked.Load() != 1 {
		t.Fatalf("the released resource was checked %d times, want 1", r.Value().checked.Load())
	}
}
