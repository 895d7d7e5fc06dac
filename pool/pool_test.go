package pool

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

func TestNewRejectsBadConfig(t *testing.T) {
	f := func(context.Context) (int, error) { return 0, nil }
	cases := []struct {
		name string
		cfg  Config[int]
		want string
	}{
		{"no factory", Config[int]{}, "Factory is required"},
		{"negative max", Config[int]{Factory: f, Max: -1}, "Config.Max = -1"},
		{"negative min", Config[int]{Factory: f, Min: -2}, "Config.Min = -2"},
		{"min above max", Config[int]{Factory: f, Min: 5, Max: 4}, "Config.Min = 5 is greater than Config.Max = 4"},
		{"min above default max", Config[int]{Factory: f, Min: 11}, "Config.Min = 11 is greater than Config.Max = 10"},
		{"negative timeout", Config[int]{Factory: f, AcquireTimeout: -time.Second}, "Config.AcquireTimeout = -1s"},
		{"negative interval", Config[int]{Factory: f, HealthcheckInterval: -1}, "Config.HealthcheckInterval"},
		{"negative lifetime", Config[int]{Factory: f, MaxLifetime: -1}, "Config.MaxLifetime"},
		{"negative idle", Config[int]{Factory: f, MaxIdleTime: -1}, "Config.MaxIdleTime"},
		{"nil strategy pointer", Config[int]{Factory: f, Strategy: (*ThresholdStrategy)(nil)}, "Config.Strategy is a nil *pool.ThresholdStrategy"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, err := New(c.cfg)
			if err == nil {
				p.Close()
				t.Fatal("New accepted the config")
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %q does not name %q", err, c.want)
			}
		})
	}
	p, err := New(Config[int]{Factory: f})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if s := p.Stats(); s.Max != DefaultMax {
		t.Fatalf("default Max = %d, want %d", s.Max, DefaultMax)
	}
}

func TestLazyAndPrewarm(t *testing.T) {
	checkNoGoroutineLeak(t)
	var b backend
	p := newPool(t, b.config())
	if b.made.Load() != 0 || p.Count() != 0 {
		t.Fatalf("New created %d resources; the pool must be lazy", b.made.Load())
	}
	r := mustAcquire(t, p)
	if b.made.Load() != 1 {
		t.Fatalf("first Acquire made %d resources, want 1", b.made.Load())
	}
	r.Release()
	r = mustAcquire(t, p)
	if b.made.Load() != 1 {
		t.Fatal("second Acquire did not reuse the idle resource")
	}
	r.Release()

	var b2 backend
	cfg := b2.config()
	cfg.Min, cfg.Max = 3, 5
	p2 := newPool(t, cfg)
	waitFor(t, "Min resources pre-warmed", func() bool { return p2.IdleCount() == 3 })
	if b2.made.Load() != 3 {
		t.Fatalf("pre-warm made %d, want 3", b2.made.Load())
	}
}

func TestNeverMoreThanMax(t *testing.T) {
	checkNoGoroutineLeak(t)
	var b backend
	cfg := b.config()
	cfg.Max = 4
	p := newPool(t, cfg)
	var wg sync.WaitGroup
	var overlap sync.Map
	for g := 0; g < 64; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				r, err := p.Acquire(context.Background())
				if err != nil {
					t.Errorf("Acquire: %v", err)
					return
				}
				if !r.Value().inUse.CompareAndSwap(false, true) {
					overlap.Store(r.Value().id, true)
				}
				if n := p.Count(); n > 4 {
					t.Errorf("Count = %d > Max", n)
				}
				r.Value().inUse.Store(false)
				if i%17 == 0 {
					r.Destroy()
				} else {
					r.Release()
				}
			}
		}()
	}
	wg.Wait()
	if m := b.maxLive.Load(); m > 4 {
		t.Fatalf("%d resources existed at once, Max is 4", m)
	}
	overlap.Range(func(k, _ any) bool { t.Errorf("resource %v handed to two holders", k); return true })
	// A factory call started for a waiter that a release served first may
	// still be under way: its resource goes idle when it ends.
	waitFor(t, "factory calls in flight", func() bool { return p.Stats().Creating == 0 })
	s := p.Stats()
	if s.Active != 0 || s.Total != s.Idle {
		t.Fatalf("after the load: %+v", s)
	}
}

// TestWaitersAreServedFIFO queues waiters one by one and releases resources:
// each release must go to the oldest waiter, and a newcomer must not take a
// resource released while others wait.
func TestWaitersAreServedFIFO(t *testing.T) {
	checkNoGoroutineLeak(t)
	var b backend
	cfg := b.config()
	cfg.Max = 1
	p := newPool(t, cfg)
	held := mustAcquire(t, p)

	const n = 20
	order := make(chan int, n)
	gate := make(chan struct{}) // holds the first served waiter until TryAcquire was tried
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := p.Acquire(context.Background())
			if err != nil {
				t.Errorf("Acquire %d: %v", i, err)
				return
			}
			order <- i
			<-gate
			r.Release()
		}()
		waitFor(t, "waiter queued", func() bool { return p.Stats().Waiting == i+1 })
	}
	// A newcomer with TryAcquire must not overtake the queue.
	held.Release()
	waitFor(t, "first waiter served", func() bool { return len(order) == 1 })
	if r, ok := p.TryAcquire(); ok {
		r.Release()
		t.Fatal("TryAcquire overtook waiting goroutines")
	}
	close(gate)
	wg.Wait()
	close(order)
	want := 0
	for got := range order {
		if got != want {
			t.Fatalf("waiter %d served in place of %d", got, want)
		}
		want++
	}
}

func TestReleaseHandsStraightToWaiter(t *testing.T) {
	var b backend
	cfg := b.config()
	cfg.Max = 1
	p := newPool(t, cfg)
	r := mustAcquire(t, p)
	got := make(chan *Resource[*item])
	go func() {
		r2, err := p.Acquire(context.Background())
		if err != nil {
			t.Error(err)
		}
		got <- r2
	}()
	waitFor(t, "waiter", func() bool { return p.Stats().Waiting == 1 })
	r.Release()
	r2 := <-got
	if r2.Value().id != 1 || p.IdleCount() != 0 || p.ActiveCount() != 1 {
		t.Fatalf("handoff: id %d idle %d active %d", r2.Value().id, p.IdleCount(), p.ActiveCount())
	}
	r2.Release()
}

// TestAcquireTimeoutAndCancel: a wait past AcquireTimeout fails with
// ErrTimeout, a wait whose context is cancelled first with the context's
// error. On the bubble's clock: the cancel comes once the caller waits,
// well within its AcquireTimeout, however busy the machine.
func TestAcquireTimeoutAndCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var b backend
		cfg := b.config()
		cfg.Max = 1
		cfg.AcquireTimeout = 20 * time.Millisecond
		p := newPool(t, cfg)
		r := mustAcquire(t, p)
		defer r.Release()

		_, err := p.Acquire(context.Background())
		if !errors.Is(err, ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Acquire past AcquireTimeout: %v; want ErrTimeout wrapping DeadlineExceeded", err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			synctest.Wait() // the caller waits
			if n := p.Stats().Waiting; n != 1 {
				t.Errorf("%d waiting, want the caller", n)
			}
			cancel()
		}()
		_, err = p.Acquire(ctx)
		if !errors.Is(err, context.Canceled) || errors.Is(err, ErrTimeout) {
			t.Fatalf("cancelled Acquire: %v", err)
		}
		s := p.Stats()
		if s.Timeouts != 1 || s.CanceledAcquires != 1 || s.Waiting != 0 {
			t.Fatalf("stats after timeout and cancel: %+v", s)
		}
		if _, err := p.Acquire(ctx); !errors.Is(err, context.Canceled) {
			t.Fatalf("Acquire with a dead context: %v", err)
		}
	})
}

// TestGiveUpRaceLosesNothing has waiters give up at the very moment resources
// are released to them, many times: every resource must end idle or held,
// none lost.
func TestGiveUpRaceLosesNothing(t *testing.T) {
	checkNoGoroutineLeak(t)
	var b backend
	cfg := b.config()
	cfg.Max = 2
	p := newPool(t, cfg)
	for i := 0; i < 2000; i++ {
		r := mustAcquire(t, p)
		r2 := mustAcquire(t, p)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			got, err := p.Acquire(ctx)
			if err == nil {
				got.Release()
			}
		}()
		waitFor(t, "waiter", func() bool { return p.Stats().Waiting == 1 })
		go cancel()
		r.Release()
		<-done
		r2.Release()
		s := p.Stats()
		if s.Total != 2 || s.Idle != 2 || s.Active != 0 || s.Waiting != 0 {
			t.Fatalf("round %d: resource lost or leaked: %+v", i, s)
		}
	}
	if b.made.Load() != 2 {
		t.Fatalf("factory called %d times; resources were lost and remade", b.made.Load())
	}
}

// TestFactoryNotAbortedByCaller: the caller that triggered a factory call
// gives up; the call completes and its resource goes to the next waiter.
func TestFactoryNotAbortedByCaller(t *testing.T) {
	checkNoGoroutineLeak(t)
	b := backend{block: make(chan struct{})}
	cfg := b.config()
	cfg.Max = 1
	p := newPool(t, cfg)

	ctx, cancel := context.WithCancel(context.Background())
	first := make(chan error, 1)
	go func() {
		_, err := p.Acquire(ctx)
		first <- err
	}()
	waitFor(t, "factory call under way", func() bool { return p.Stats().Creating == 1 })
	second := make(chan *Resource[*item], 1)
	go func() {
		r, err := p.Acquire(context.Background())
		if err != nil {
			t.Error(err)
		}
		second <- r
	}()
	waitFor(t, "two waiters", func() bool { return p.Stats().Waiting == 2 })
	cancel()
	if err := <-first; !errors.Is(err, context.Canceled) {
		t.Fatalf("first Acquire: %v", err)
	}
	close(b.block) // the dial finishes after its caller left
	r := <-second
	if r.Value().id != 1 || b.made.Load() != 1 {
		t.Fatalf("second waiter got resource %d after %d factory calls", r.Value().id, b.made.Load())
	}
	r.Release()
}

// TestFactoryErrorReachesCaller: without a back-off, the caller whose
// factory call failed gets the factory's error itself, not a wrapper.
func TestFactoryErrorReachesCaller(t *testing.T) {
	var b backend
	b.failNext.Store(1)
	cfg := b.config()
	cfg.NoBackoff = true
	p := newPool(t, cfg)
	_, err := p.Acquire(context.Background())
	if err != errFactory {
		t.Fatalf("Acquire with a failing factory: %v", err)
	}
	if s := p.Stats(); s.Total != 0 || s.CreateErrors != 1 {
		t.Fatalf("failed factory left a slot taken: %+v", s)
	}
	r := mustAcquire(t, p)
	r.Release()
}

func TestTryAcquire(t *testing.T) {
	var b backend
	cfg := b.config()
	cfg.Max = 1
	p := newPool(t, cfg)
	if _, ok := p.TryAcquire(); ok {
		t.Fatal("TryAcquire on an empty pool succeeded")
	}
	// It started a factory call in the background.
	waitFor(t, "background creation", func() bool { return p.IdleCount() == 1 })
	r, ok := p.TryAcquire()
	if !ok {
		t.Fatal("TryAcquire with an idle resource failed")
	}
	if _, ok := p.TryAcquire(); ok {
		t.Fatal("TryAcquire beyond Max succeeded")
	}
	r.Release()
}

// TestTendNext: with nothing idle and room to grow, TendNext starts no
// factory call; at Max, beside a caller that waits too, it gets the
// resource in use when that comes back, ahead of the caller; what it
// holds is no hand-out (neither Acquires nor Active count it), and it
// goes to the waiting caller after.
func TestTendNext(t *testing.T) {
	var b backend
	cfg := b.config()
	cfg.Max = 4
	p := newPool(t, cfg)
	held := mustAcquire(t, p)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	ran := p.TendNext(ctx, func(*item) error { return nil })
	cancel()
	if ran {
		t.Fatal("TendNext ran with nothing idle and nothing released")
	}
	if got := b.calls.Load(); got != 1 {
		t.Fatalf("%d factory calls, want 1: TendNext grew the pool", got)
	}
	held.Release()

	// At Max, beside a caller that waits too.
	var b1 backend
	cfg = b1.config()
	cfg.Max = 1
	p = newPool(t, cfg)
	held = mustAcquire(t, p)
	tended := make(chan *item, 1)
	release := make(chan struct{})
	go func() {
		p.TendNext(context.Background(), func(it *item) error {
			tended <- it
			<-release
			return nil
		})
	}()
	waitFor(t, "TendNext waiting", func() bool { return p.tending.Load() })
	acquired := acquireWaiting(t, p)
	held.Release()
	if it := <-tended; it != held.Value() {
		t.Fatal("TendNext was not handed the resource that came back")
	}
	if st := p.Stats(); st.Acquires != 1 || st.Active != 0 || st.Total != 1 {
		t.Fatalf("while tended: %d acquires, %d active, %d in all; want 1, 0, 1", st.Acquires, st.Active, st.Total)
	}
	close(release)
	r := <-acquired
	if r == nil || r.Value() != held.Value() {
		t.Fatal("the waiting caller did not get the resource after TendNext")
	}
	r.Release()
}

// tendNextBeside makes a pool of at most 2 whose first resource is held
// and whose second is made only once gate is closed, with a TendNext
// waiting beside them that sends what it is handed to tended.
func tendNextBeside(t *testing.T) (p *Pool[*item], held *Resource[*item], gate chan struct{}, tended chan *item) {
	t.Helper()
	var b backend
	cfg := b.config()
	cfg.Max = 2
	gate = make(chan struct{})
	var calls atomic.Int32
	cfg.Factory = func(ctx context.Context) (*item, error) {
		if calls.Add(1) == 2 {
			<-gate
		}
		return b.factory(ctx)
	}
	p = newPool(t, cfg)
	held = mustAcquire(t, p)
	tended = make(chan *item, 1)
	go func() {
		p.TendNext(context.Background(), func(it *item) error {
			tended <- it
			return nil
		})
	}()
	waitFor(t, "TendNext waiting", func() bool { return p.tending.Load() })
	return p, held, gate, tended
}

// acquireWaiting starts a caller of p's Acquire, which must wait, and
// returns when it does: what it gets comes on the channel.
func acquireWaiting(t *testing.T, p *Pool[*item]) chan *Resource[*item] {
	t.Helper()
	acquired := make(chan *Resource[*item], 1)
	go func() {
		r, err := p.Acquire(context.Background())
		if err != nil {
			t.Error(err)
		}
		acquired <- r
	}()
	waitFor(t, "the caller waiting", func() bool { return p.Stats().Waiting == 1 })
	return acquired
}

// TestTendNextLeavesNewToWaiters: a resource made while a caller waits
// goes to the caller, even with a TendNext waiting; the TendNext gets the
// next one released.
func TestTendNextLeavesNewToWaiters(t *testing.T) {
	p, held, gate, tended := tendNextBeside(t)
	acquired := acquireWaiting(t, p)
	close(gate)
	r := <-acquired
	if r == nil || r.Value() == held.Value() {
		t.Fatal("the waiting caller did not get the new resource")
	}
	held.Release()
	if it := <-tended; it != held.Value() {
		t.Fatal("TendNext was not handed the resource released after")
	}
	r.Release()
}

// TestTendNextGetsNewWhenWaitersGaveUp: a resource made for callers who
// all gave up meanwhile goes to the TendNext waiting, not to the idle
// ring, which nothing hands a waiting TendNext.
func TestTendNextGetsNewWhenWaitersGaveUp(t *testing.T) {
	p, held, gate, tended := tendNextBeside(t)
	defer held.Release()
	gctx := &endedCtx{Context: context.Background()}
	acquired := make(chan error, 1)
	go func() {
		r, err := p.Acquire(gctx)
		if r != nil {
			r.Release()
		}
		acquired <- err
	}()
	waitFor(t, "the caller waiting", func() bool { return p.Stats().Waiting == 1 })
	gctx.ended.Store(true)
	close(gate)
	if err := <-acquired; !errors.Is(err, context.Canceled) {
		t.Fatalf("the caller that gave up got %v, want context.Canceled", err)
	}
	select {
	case it := <-tended:
		if it == held.Value() {
			t.Fatal("TendNext was handed the resource in use")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("TendNext still waits beside the new resource")
	}
}

func TestBeforeReleaseAndBeforeAcquire(t *testing.T) {
	var b backend
	cfg := b.config()
	cfg.BeforeRelease = func(it *item) bool { return !it.broken.Load() }
	cfg.BeforeAcquire = func(_ context.Context, r *Resource[*item]) bool { return r.Value().checked.Add(1) < 3 }
	p := newPool(t, cfg)

	r := mustAcquire(t, p)
	r.Value().broken.Store(true)
	r.Release()
	if b.destroyed.Load() != 1 || p.Count() != 0 {
		t.Fatalf("resource failing BeforeRelease was kept: destroyed %d count %d", b.destroyed.Load(), p.Count())
	}
	r = mustAcquire(t, p) // fresh: BeforeAcquire not called
	id := r.Value().id
	r.Release()
	for i := 0; i < 2; i++ { // checked 1, 2: accepted
		r = mustAcquire(t, p)
		if r.Value().id != id {
			t.Fatal("healthy idle resource not reused")
		}
		r.Release()
	}
	r = mustAcquire(t, p) // checked 3: rejected, a new one is made
	if r.Value().id == id {
		t.Fatal("resource rejected by BeforeAcquire was handed out")
	}
	r.Release()
	if s := p.Stats(); s.ReleaseRejects != 2 || s.Destroyed != 2 {
		t.Fatalf("stats: %+v", s)
	}
}

func TestDoubleReleaseIsDetected(t *testing.T) {
	var b backend
	cfg := b.config()
	cfg.Max = 2
	p := newPool(t, cfg)
	r := mustAcquire(t, p)
	r.Release()
	r.Release()
	r.Destroy()
	if s := p.Stats(); s.Misuses != 2 || s.Total != 1 || s.Idle != 1 || s.Destroyed != 0 {
		t.Fatalf("double release corrupted the pool: %+v", s)
	}
	r = mustAcquire(t, p)
	r.Destroy()
	r.Destroy()
	r.Release()
	if s := p.Stats(); s.Misuses != 4 || s.Total != 0 || s.Destroyed != 1 {
		t.Fatalf("double destroy freed a second slot: %+v", s)
	}
}

func TestPanickingCallbacksDoNotWedge(t *testing.T) {
	checkNoGoroutineLeak(t)
	var calls int
	cfg := Config[int]{
		Max:       1,
		NoBackoff: true,
		Factory: func(context.Context) (int, error) {
			calls++
			if calls == 1 {
				panic("factory boom")
			}
			return calls, nil
		},
		BeforeRelease: func(v int) bool {
			if v == 2 {
				panic("release boom")
			}
			return true
		},
		Destructor: func(int) { panic("destructor boom") },
	}
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	_, err = p.Acquire(context.Background())
	if err == nil || !strings.Contains(err.Error(), "Factory panicked: factory boom") {
		t.Fatalf("panicking factory: %v", err)
	}
	r, err := p.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	r.Release() // BeforeRelease panics: destroyed; the destructor panics too
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r, err = p.Acquire(ctx)
	if err != nil {
		t.Fatalf("pool wedged after panics: %v", err)
	}
	r.Release()
	if s := p.Stats(); s.CallbackPanics != 3 || s.Total != 1 {
		t.Fatalf("stats: %+v", s)
	}
}

func TestClose(t *testing.T) {
	checkNoGoroutineLeak(t)
	var b backend
	cfg := b.config()
	cfg.Max = 2
	cfg.HealthcheckInterval = time.Millisecond
	cfg.Healthcheck = func(context.Context, *item) error { return nil }
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// One resource in use, one idle, then a waiter on a full pool.
	held := mustAcquire(t, p)
	idle := mustAcquire(t, p)
	idle.Release()
	held2 := mustAcquire(t, p) // takes the idle one back
	waiterErr := make(chan error, 1)
	go func() {
		_, err := p.Acquire(context.Background())
		waiterErr <- err
	}()
	waitFor(t, "waiter", func() bool { return p.Stats().Waiting == 1 })
	p.Close()
	if err := <-waiterErr; !errors.Is(err, ErrClosed) {
		t.Fatalf("waiter woke with %v, want ErrClosed", err)
	}
	if b.live.Load() != 2 {
		t.Fatalf("after Close %d live resources, want the 2 in use", b.live.Load())
	}
	held.Release()
	held2.Destroy()
	if b.live.Load() != 0 {
		t.Fatal("resources coming back after Close were not destroyed")
	}
	var b2 backend
	cfg2 := b2.config()
	cfg2.Min = 2
	p2 := newPool(t, cfg2)
	waitFor(t, "pre-warm", func() bool { return p2.IdleCount() == 2 })
	p2.Close()
	if b2.live.Load() != 0 {
		t.Fatalf("Close left %d idle resources alive", b2.live.Load())
	}
	if _, err := p.Acquire(context.Background()); !errors.Is(err, ErrClosed) {
		t.Fatalf("Acquire after Close: %v", err)
	}
	if _, ok := p.TryAcquire(); ok {
		t.Fatal("TryAcquire after Close succeeded")
	}
	p.Close() // idempotent
}

func TestCloseCancelsFactoryInFlight(t *testing.T) {
	checkNoGoroutineLeak(t)
	b := backend{block: make(chan struct{})}
	p, err := New(b.config())
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() {
		_, err := p.Acquire(context.Background())
		errc <- err
	}()
	waitFor(t, "factory call", func() bool { return p.Stats().Creating == 1 })
	p.Close()
	if err := <-errc; !errors.Is(err, ErrClosed) {
		t.Fatalf("waiter: %v", err)
	}
	if s := p.Stats(); s.Total != 0 || s.Creating != 0 {
		t.Fatalf("after Close: %+v", s)
	}
}

func TestIdleFor(t *testing.T) {
	var b backend
	cfg := b.config()
	cfg.MaxIdleTime = time.Hour // the clock is read at acquire
	p := newPool(t, cfg)
	r := mustAcquire(t, p)
	if d := r.IdleFor(); d != 0 {
		t.Fatalf("a new resource was idle %v", d)
	}
	r.Release()
	time.Sleep(20 * time.Millisecond)
	r = mustAcquire(t, p)
	if d := r.IdleFor(); d < 20*time.Millisecond || d > time.Minute {
		t.Fatalf("IdleFor = %v after 20ms idle", d)
	}
	r.Release()
}

// A resource made by the pre-warm sat idle before anyone took it: the
// server may have closed it meanwhile, so it is checked like any other.
func TestBeforeAcquireChecksPrewarmed(t *testing.T) {
	var b backend
	cfg := b.config()
	cfg.Min = 1
	var checks atomic.Int32
	cfg.BeforeAcquire = func(ctx context.Context, r *Resource[*item]) bool {
		checks.Add(1)
		return ctx.Value(ctxMark{}) == "caller" // the caller's context reaches the check
	}
	p := newPool(t, cfg)
	waitFor(t, "the pre-warm", func() bool { return p.IdleCount() == 1 })
	ctx := context.WithValue(context.Background(), ctxMark{}, "caller")
	r, err := p.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Release()
	if checks.Load() != 1 {
		t.Fatalf("pre-warmed resource handed out with %d checks, want 1", checks.Load())
	}
}

type ctxMark struct{}

// endedCtx is a context whose Err reports an end that its Done channel
// never signals, so that the waiter using it is still queued when the pool
// next hands out a resource.
type endedCtx struct {
	context.Context
	ended atomic.Bool
}

func (c *endedCtx) Err() error {
	if c.ended.Load() {
		return context.Canceled
	}
	return nil
}

// TestReleasePassesOverEndedWaiters: a resource is handed to the oldest
// waiter that still waits; one whose context ended is told so at once
// instead of being woken with a resource it can only hand on.
func TestReleasePassesOverEndedWaiters(t *testing.T) {
	var b backend
	cfg := b.config()
	cfg.Max = 1
	p := newPool(t, cfg)
	r := mustAcquire(t, p)

	stale := &endedCtx{Context: context.Background()}
	staleErr := make(chan error, 1)
	go func() {
		_, err := p.Acquire(stale)
		staleErr <- err
	}()
	waitFor(t, "the first waiter queued", func() bool { return p.Stats().Waiting == 1 })
	live := make(chan *Resource[*item], 1)
	go func() {
		r, err := p.Acquire(context.Background())
		if err != nil {
			t.Error(err)
		}
		live <- r
	}()
	waitFor(t, "the second waiter queued", func() bool { return p.Stats().Waiting == 2 })

	stale.ended.Store(true)
	r.Release()
	if err := <-staleErr; !errors.Is(err, context.Canceled) {
		t.Fatalf("the ended waiter got %v, want context.Canceled", err)
	}
	got := <-live
	if got == nil {
		t.Fatal("the live waiter got nothing")
	}
	got.Release()
	if s := p.Stats(); s.Acquires != 2 {
		t.Fatalf("acquires %d, want 2 (the ended waiter's does not count)", s.Acquires)
	}
}
