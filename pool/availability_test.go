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

// The availability rules, each on the bubble's fake clock: a caller is
// refused only when nothing can serve it within its deadline; the back-off
// spaces the factory calls, not the callers; the first success ends it for
// everyone; a pool with nothing at a full backend keeps trying; Min is
// refilled at once; the factory's context carries the caller's values but
// not its cancellation; errors keep the factory's error and say why.

const down = 1 << 40 // failNext: every factory call fails until reset

// TestNoCallerFailsWhileInUseCanServe: the factory fails for good while
// one resource is in use; 50 callers, each with a second to live, need a
// resource, and the one in use comes back after 100ms and then goes from
// caller to caller (5ms each, 350ms in all). Every caller is served,
// none is refused, and the factory is called far fewer times than there
// are callers, spaced by the back-off.
func TestNoCallerFailsWhileInUseCanServe(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var b backend
		cfg := b.config()
		cfg.Max = 4
		p := newPool(t, cfg)
		held := mustAcquire(t, p)
		b.failNext.Store(down)
		calls := b.calls.Load()
		var wg sync.WaitGroup
		for range 50 {
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				defer cancel()
				r, err := p.Acquire(ctx)
				if err != nil {
					t.Errorf("a caller a resource in use could serve failed: %v", err)
					return
				}
				time.Sleep(5 * time.Millisecond)
				r.Release()
			})
		}
		time.Sleep(100 * time.Millisecond)
		synctest.Wait()
		if s := p.Stats(); s.Waiting != 50 || s.BackoffRejects != 0 {
			t.Fatalf("while the factory fails: %+v, want all 50 waiting", s)
		}
		held.Release()
		wg.Wait()
		// 350ms of failing calls: at least DefaultBackoffMin/2 apart (the
		// first ones), at most DefaultBackoffMax apart.
		n := b.calls.Load() - calls
		if n < int64(350*time.Millisecond/DefaultBackoffMax) || n > int64(350*time.Millisecond/(DefaultBackoffMin/2)) {
			t.Fatalf("%d factory calls in 350ms of failures for 50 callers", n)
		}
		if s := p.Stats(); s.BackoffRejects != 0 || s.Timeouts != 0 || s.CanceledAcquires != 0 {
			t.Fatalf("stats: %+v", s)
		}
	})
}

// TestFirstSuccessEndsBackoff: five callers wait while the factory fails
// (one resource in use keeps them waiting); when the backend is back, the
// next factory call succeeds within DefaultBackoffMax, and at that instant
// each other caller gets its own factory call: all five are served at
// once, with five calls.
func TestFirstSuccessEndsBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var b backend
		p := newPool(t, b.config())
		held := mustAcquire(t, p)
		defer held.Release()
		b.failNext.Store(down)
		served := make(chan time.Time, 5)
		var wg sync.WaitGroup
		defer wg.Wait()
		for range 5 {
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				r, err := p.Acquire(ctx)
				if err != nil {
					t.Errorf("a waiting caller: %v", err)
					served <- time.Time{}
					return
				}
				served <- time.Now()
				defer r.Release()
				time.Sleep(time.Second) // held: the others cannot be served by it
			})
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if s := p.Stats(); s.Waiting != 5 || s.CreateFailures < 20 || s.LastCreateError != errFactory {
			t.Fatalf("after a second of failures: %+v", s)
		}
		back := time.Now()
		calls := b.calls.Load()
		b.failNext.Store(0)
		var first, last time.Time
		for range 5 {
			at := <-served
			if first.IsZero() || at.Before(first) {
				first = at
			}
			if at.After(last) {
				last = at
			}
		}
		if d := first.Sub(back); d > DefaultBackoffMax {
			t.Errorf("first served %v after the backend was back, more than the back-off's cap", d)
		}
		if !last.Equal(first) {
			t.Errorf("the last caller was served %v after the first: the back-off went on", last.Sub(first))
		}
		if n := b.calls.Load() - calls; n != 5 {
			t.Errorf("%d factory calls after the backend was back, want 5", n)
		}
		if s := p.Stats(); s.CreateFailures != 0 || s.LastCreateError != nil {
			t.Errorf("after the success: %+v", s)
		}
	})
}

// TestRefusalsNameTheirCause: with nothing in use, a caller whose own
// factory call failed gets the factory's error itself, at once; one that
// arrives during the back-off with too little time is refused at once
// with ErrBackoff; one with time waits for its turn and gets its own
// call's error. With a resource in use, a caller waits for it through the
// failures, and gets ErrTimeout at AcquireTimeout, or its context's error
// at its deadline. Each refusal of the pool's is an *AcquireError with the
// counts and the last factory error.
func TestRefusalsNameTheirCause(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var b backend
		b.failNext.Store(down)
		cfg := b.config()
		cfg.AcquireTimeout = 500 * time.Millisecond
		p := newPool(t, cfg)
		acquire := func(d time.Duration) (time.Duration, error) {
			ctx, cancel := context.WithTimeout(context.Background(), d)
			defer cancel()
			start := time.Now()
			r, err := p.Acquire(ctx)
			if r != nil {
				t.Fatal("served by a failing factory")
			}
			return time.Since(start), err
		}

		took, err := acquire(time.Hour)
		if err != errFactory || took != 0 {
			t.Fatalf("own factory call failed: %v after %v, want the factory's error itself at once", err, took)
		}
		took, err = acquire(DefaultBackoffMin / 4)
		var ae *AcquireError
		if !errors.Is(err, ErrBackoff) || !errors.Is(err, errFactory) || !errors.As(err, &ae) || took != 0 {
			t.Fatalf("during the back-off: %v after %v, want ErrBackoff wrapping the factory's error, at once", err, took)
		}
		if ae.Failures != 1 || ae.InUse != 0 || ae.Total != 0 || ae.State != Active || ae.Cause != errFactory {
			t.Fatalf("the refusal's counts: %+v", ae)
		}
		took, err = acquire(time.Hour)
		if err != errFactory || took == 0 || took > DefaultBackoffMax {
			t.Fatalf("during the back-off, with time: %v after %v, want its own call's error after one back-off step", err, took)
		}

		b.failNext.Store(0)
		time.Sleep(DefaultBackoffMax)
		held := mustAcquire(t, p)
		defer held.Release()
		b.failNext.Store(down)
		took, err = acquire(time.Hour)
		if !errors.Is(err, ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, errFactory) || took != cfg.AcquireTimeout {
			t.Fatalf("with one in use, past AcquireTimeout: %v after %v", err, took)
		}
		took, err = acquire(200 * time.Millisecond)
		if !errors.As(err, &ae) || ae.Reason != context.DeadlineExceeded || ae.InUse != 1 || !errors.Is(err, errFactory) || took != 200*time.Millisecond {
			t.Fatalf("with one in use, past the deadline: %v after %v", err, took)
		}
		s := p.Stats()
		if s.BackoffRejects != 1 || s.Timeouts != 1 || s.CreateFailures < 10 || s.LastCreateError != errFactory {
			t.Fatalf("stats: %+v", s)
		}
	})
}

// TestBackoffSpacesHangingDials: after failures, factory calls that hang
// start one per back-off step, not all at once for the callers that wait;
// past the growth limit too (see failingFastLocked: the failures were no
// timeouts), but never more than one per waiting caller; once the backend
// answers, the callers are served.
func TestBackoffSpacesHangingDials(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mode atomic.Int32 // 0: works, 1: fails, 2: hangs for a second, then fails
		var mu sync.Mutex
		var starts []time.Time
		factory := modalFactory(&mode, time.Second)
		p, err := New(Config[int]{Max: 10, Factory: func(ctx context.Context) (int, error) {
			mu.Lock()
			starts = append(starts, time.Now())
			mu.Unlock()
			return factory(ctx)
		}})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		held := mustAcquireInt(t, p) // in use: the callers wait through the failures
		mode.Store(1)
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
				defer cancel()
				r, err := p.Acquire(ctx)
				if err != nil {
					t.Errorf("a waiting caller: %v", err)
					return
				}
				time.Sleep(10 * time.Millisecond)
				r.Release()
			})
		}
		synctest.Wait() // the first calls, one per caller, failed
		mu.Lock()
		starts = nil
		mu.Unlock()
		mode.Store(2)
		time.Sleep(500 * time.Millisecond)
		synctest.Wait()
		mu.Lock()
		if len(starts) > 8 || len(starts) <= growthStart {
			t.Errorf("%d calls hanging after 500ms, want more than %d (the growth limit) and at most 8 (one per waiting caller)", len(starts), growthStart)
		}
		for i := 1; i < len(starts); i++ {
			if d := starts[i].Sub(starts[i-1]); d < DefaultBackoffMin/2 {
				t.Errorf("factory calls %d and %d started %v apart while failing", i-1, i, d)
			}
		}
		mu.Unlock()
		mode.Store(0)
		wg.Wait()
		held.Release()
	})
}

// TestLimitedWithNoResourceProbes: at a full backend, a pool that holds
// nothing keeps trying, one trial per cool-down, for a caller that waits
// (and, with Min set, with no caller at all); the caller, with time left,
// is not refused by a trial that finds the backend full: once the backend
// has room, the trial serves it.
func TestLimitedWithNoResourceProbes(t *testing.T) {
	for _, min := range []int{0, 1} {
		synctest.Test(t, func(t *testing.T) {
			const coolDown = 250 * time.Millisecond
			var b backend
			b.fullNext.Store(down)
			cfg := b.config()
			cfg.AtLimit = atLimit
			cfg.Min = min
			p := newStrategyPool(t, cfg, 0, coolDown)
			var refused atomic.Int64
			done := make(chan struct{})
			if min == 0 {
				go func() {
					defer close(done)
					for {
						ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
						r, err := p.Acquire(ctx)
						cancel()
						if err == nil {
							r.Release()
							return
						}
						if !errors.Is(err, errFull) {
							t.Errorf("a caller at the limit: %v", err)
							return
						}
						refused.Add(1) // its wait ended with the backend full
					}
				}()
			} else {
				close(done)
			}
			time.Sleep(5 * time.Second)
			synctest.Wait()
			// One trial per cool-down, drawn between half and all of it.
			if n := b.calls.Load(); n < int64(5*time.Second/coolDown) || n > int64(5*time.Second/(coolDown/2))+1 {
				t.Fatalf("min %d: %d factory calls in 5s at a full backend, want one per cool-down", min, n)
			}
			if refused.Load() != 0 {
				t.Fatalf("%d refusals in %d trials: a caller with time left waits for the next", refused.Load(), b.calls.Load())
			}
			if st := p.State(); st != Limited && st != Recovering {
				t.Fatalf("min %d: %v", min, st)
			}
			b.fullNext.Store(0)
			time.Sleep(coolDown)
			synctest.Wait()
			<-done
			if s := p.Stats(); s.Total != max(min, 1) || s.State != Active {
				t.Fatalf("min %d: %+v", min, s)
			}
		})
	}
}

// TestMinRefillsPromptly: Min is made again as soon as resources are
// destroyed or expire, with no healthcheck; while the factory fails, the
// refill tries again at the end of each back-off step (for nobody waiting,
// up to 2s apart), and succeeds once the backend is back.
func TestMinRefillsPromptly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var b backend
		cfg := b.config()
		cfg.Min = 3
		cfg.MaxLifetime = time.Minute
		p := newPool(t, cfg)
		synctest.Wait()
		if n := p.Count(); n != 3 {
			t.Fatalf("pre-warmed %d", n)
		}
		r1, r2 := mustAcquire(t, p), mustAcquire(t, p)
		r1.Destroy()
		r2.Destroy()
		synctest.Wait()
		if s := p.Stats(); s.Total != 3 || s.Created != 5 {
			t.Fatalf("after two were destroyed: %+v", s)
		}
		// Expired at release: replaced at once.
		r := mustAcquire(t, p)
		time.Sleep(time.Minute)
		r.Release()
		synctest.Wait()
		if s := p.Stats(); s.Total != 3 || s.Expired != 1 {
			t.Fatalf("after one expired: %+v", s)
		}

		b.failNext.Store(down)
		calls := b.calls.Load()
		mustAcquire(t, p).Destroy()
		time.Sleep(10 * time.Second)
		synctest.Wait()
		// 10, 20, 40 … 1280ms, then 2s: about a dozen tries in 10s.
		if n := b.calls.Load() - calls; n < 6 || n > 30 {
			t.Fatalf("%d refill tries in 10s of failures", n)
		}
		b.failNext.Store(0)
		time.Sleep(refillBackoffMax)
		synctest.Wait()
		if n := p.Count(); n != 3 {
			t.Fatalf("%d resources once the backend was back, want Min", n)
		}
	})
}

type ctxKey struct{}

// TestFactoryContext: the factory's context carries the values of the
// context of the caller that needed the resource, is not cancelled when
// that caller gives up (the resource serves the next caller), and is
// cancelled when the pool closes. The pool's own refill gets no values.
func TestFactoryContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		type seen struct {
			v   any
			ctx context.Context
		}
		calls := make(chan seen, 4)
		release := make(chan struct{})
		cfg := Config[int]{Max: 2, Min: 1, Factory: func(ctx context.Context) (int, error) {
			calls <- seen{ctx.Value(ctxKey{}), ctx}
			select {
			case <-release:
				return 1, nil
			case <-ctx.Done():
				return 0, ctx.Err()
			}
		}}
		p, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		if c := <-calls; c.v != nil {
			t.Fatalf("the refill's factory call saw %v", c.v)
		}
		ctx, cancel := context.WithCancel(context.WithValue(context.Background(), ctxKey{}, "caller's"))
		done := make(chan error, 1)
		go func() {
			_, err := p.Acquire(ctx)
			done <- err
		}()
		c := <-calls
		if c.v != "caller's" {
			t.Fatalf("the factory saw %v, want the caller's value", c.v)
		}
		if _, ok := c.ctx.Deadline(); ok {
			t.Fatal("the factory's context has a deadline")
		}
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("the caller: %v", err)
		}
		synctest.Wait()
		if c.ctx.Err() != nil {
			t.Fatal("the caller's cancellation reached its factory call")
		}
		next := make(chan *Resource[int], 1)
		go func() {
			r, err := p.Acquire(context.Background())
			if err != nil {
				t.Error(err)
			}
			next <- r
		}()
		synctest.Wait()
		release <- struct{}{} // the first call: the refill's, or the cancelled caller's
		release <- struct{}{}
		(<-next).Release()
		// A caller's call in flight when the pool closes is cancelled.
		r1, r2 := mustAcquireInt(t, p), mustAcquireInt(t, p)
		r1.Destroy()
		r2.Destroy()
		<-calls // the refill's
		go func() {
			_, err := p.Acquire(context.WithValue(context.Background(), ctxKey{}, "last"))
			done <- err
		}()
		c = <-calls
		p.Close()
		if err := <-done; !errors.Is(err, ErrClosed) {
			t.Fatalf("a caller when the pool closed: %v", err)
		}
		if c.v != "last" || c.ctx.Err() == nil {
			t.Fatalf("Close did not cancel the caller's factory call in flight (%v)", c.v)
		}
	})
}

func mustAcquireInt(t *testing.T, p *Pool[int]) *Resource[int] {
	t.Helper()
	r, err := p.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestFullBackendTrimsIdle: a pool keeps its idle resources while nothing
// says the backend is full; once one of its factory calls found the
// backend at its limit, it gives back what sits idle longer than
// IdleTimeUnderPressure (parked ones included), keeping what it uses and
// Min, for as long as the pressure lasts; meanwhile Park refuses.
func TestFullBackendTrimsIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var b backend
		cfg := b.config()
		cfg.Max = 10
		cfg.Min = 1
		cfg.AtLimit = atLimit
		p := newStrategyPool(t, cfg, 0, 250*time.Millisecond)
		synctest.Wait() // the pre-warm to Min
		take := func(n int) []*Resource[*item] {
			var rs []*Resource[*item]
			for range n {
				rs = append(rs, mustAcquire(t, p))
			}
			return rs
		}
		for _, r := range take(6) {
			r.Release()
		}
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if s := p.Stats(); s.Idle != 6 || s.IdleTrimmed != 0 {
			t.Fatalf("with no sign of a full backend: %+v", s)
		}

		// All six in use, and a seventh caller's factory call finds the
		// backend full: it waits, and gets one of the six.
		held := take(6)
		b.fullNext.Store(1)
		got := acquireAsync(p)
		synctest.Wait()
		for _, r := range held {
			r.Release()
		}
		res := <-got
		if res.err != nil {
			t.Fatal(res.err)
		}
		res.r.Release()
		// Holders no longer park: each release goes through the pool,
		// which hands out the most recently released first.
		if r := mustAcquire(t, p); r.Park() {
			t.Fatal("Park accepted while the backend is full")
		} else {
			r.Release()
		}
		// One caller goes on using one resource; the rest sits idle.
		stop := make(chan struct{})
		done := make(chan struct{})
		go func() {
			defer close(done)
			for {
				select {
				case <-stop:
					return
				case <-time.After(100 * time.Millisecond):
				}
				mustAcquire(t, p).Release()
			}
		}()
		time.Sleep(3 * time.Second)
		synctest.Wait()
		if s := p.Stats(); s.Total != 1 || s.IdleTrimmed != 5 {
			t.Fatalf("3s after the backend was found full: %+v, want the 5 unused given back", s)
		}

		// A minute later the pressure is over: idle resources are kept.
		time.Sleep(time.Minute)
		close(stop)
		<-done
		for _, r := range take(4) {
			r.Release()
		}
		parked := mustAcquire(t, p)
		if !parked.Park() {
			t.Fatal("Park refused after the pressure")
		}
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if s := p.Stats(); s.Idle != 4 || s.IdleTrimmed != 5 {
			t.Fatalf("after the pressure: %+v", s)
		}
		// A parked resource is idle too: given back when the backend is
		// found full again.
		p.Pressure() // as a factory call at the limit does, or pooldriver's look
		time.Sleep(time.Second)
		synctest.Wait()
		if s := p.Stats(); s.Total != 1 || s.IdleTrimmed != 8 {
			t.Fatalf("the backend full again: %+v", s)
		}
		if parked.Unpark() {
			t.Fatal("the parked resource was not given back")
		}
	})
}

// TestGrowthDoublesPerRound: a cold pool with 20 callers makes growthStart
// factory calls at once, then at most as many as it has resources: 4, 4,
// 8, 4 (Max 20).
func TestGrowthDoublesPerRound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := backend{block: make(chan struct{})}
		cfg := b.config()
		cfg.Max = 20
		p := newPool(t, cfg)
		var wg sync.WaitGroup
		for range 20 {
			wg.Go(func() {
				r := mustAcquire(t, p)
				time.Sleep(time.Second)
				r.Release()
			})
		}
		var rounds []int64
		for b.made.Load() < 20 {
			synctest.Wait()
			n := b.calls.Load() - b.made.Load() // in flight
			rounds = append(rounds, n)
			for range n {
				b.block <- struct{}{}
			}
			synctest.Wait()
		}
		wg.Wait()
		if fmt.Sprint(rounds) != "[4 4 8 4]" {
			t.Fatalf("factory calls in flight per round: %v, want [4 4 8 4]", rounds)
		}
	})
}

// TestStaleCallDoesNotHoldBackNext: while factory calls fail, calls that
// hang (the old primary of a failover, silent until its connect timeout)
// do not hold back a new call for a caller that waits: past the growth
// limit, another starts at the back-off's next step, and the backend that
// answers now serves the callers long before the hanging calls end.
func TestStaleCallDoesNotHoldBackNext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mode atomic.Int32 // 0: works, 1: fails at once, 2: hangs for 10s, then fails
		p, err := New(Config[int]{Max: 8, Factory: modalFactory(&mode, 10*time.Second)})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		held := mustAcquireInt(t, p)
		mode.Store(1)
		start := time.Now()
		var wg sync.WaitGroup
		var served sync.Mutex
		var slowest time.Duration
		for range 8 {
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				r, err := p.Acquire(ctx)
				if err != nil {
					t.Errorf("a waiting caller: %v", err)
					return
				}
				served.Lock()
				slowest = max(slowest, time.Since(start))
				served.Unlock()
				time.Sleep(10 * time.Millisecond)
				r.Release()
			})
		}
		synctest.Wait()
		mode.Store(2) // the next calls hang, as many as the growth limit lets start
		time.Sleep(50 * time.Millisecond)
		synctest.Wait()
		mode.Store(0) // the backend answers again: a new call finds it
		wg.Wait()
		held.Release()
		if slowest > time.Second {
			t.Fatalf("the last caller was served after %v: calls hanging for 10s held back new ones", slowest)
		}
	})
}

// modalFactory is a factory that does what mode says: 0 works, 1 fails at
// once, 2 hangs for hang (or until its context ends), then fails.
func modalFactory(mode *atomic.Int32, hang time.Duration) func(context.Context) (int, error) {
	return func(ctx context.Context) (int, error) {
		switch mode.Load() {
		case 1:
			return 0, errFactory
		case 2:
			select {
			case <-time.After(hang):
			case <-ctx.Done():
			}
			return 0, errFactory
		}
		return 1, nil
	}
}

// TestSlowRefusalsRedialAtOnce: while each factory call fails with an
// answer that takes a while (a standby refusing a primary's callers
// during a failover), each waiting caller's next call starts as its last
// fails, as a plain driver's caller would dial again: the calls in flight
// stay one per waiting caller, not the back-off's pace. Calls that fail at
// once are still spaced (TestBackoffSpacesHangingDials).
func TestSlowRefusalsRedialAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const answer = 40 * time.Millisecond
		var mode atomic.Int32
		var mu sync.Mutex
		var starts, inFlight, most int
		factory := modalFactory(&mode, answer)
		p, err := New(Config[int]{Max: 10, Factory: func(ctx context.Context) (int, error) {
			mu.Lock()
			starts++
			inFlight++
			most = max(most, inFlight)
			mu.Unlock()
			defer func() {
				mu.Lock()
				inFlight--
				mu.Unlock()
			}()
			return factory(ctx)
		}})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		held := mustAcquireInt(t, p) // in use: the callers wait through the failures
		mode.Store(2)
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
				defer cancel()
				r, err := p.Acquire(ctx)
				if err != nil {
					t.Errorf("a waiting caller: %v", err)
					return
				}
				r.Release()
			})
		}
		time.Sleep(400 * time.Millisecond)
		synctest.Wait()
		mu.Lock()
		n, m := starts, most
		mu.Unlock()
		// One per caller in flight, back to back: 8 × 400ms / 40ms.
		if n < 60 {
			t.Errorf("%d calls in 400ms of refusals taking %v each, want about 80 (each caller's next as its last fails)", n, answer)
		}
		if m > 8 {
			t.Errorf("%d calls in flight at once, want at most 8 (one per waiting caller)", m)
		}
		mode.Store(0)
		wg.Wait()
		held.Release()
	})
}

// TestAcceptedErrorNotRedialled: a factory call that fails after a while
// is called again at once for the caller it was made for (a standby
// refusing a primary's callers answers so during a failover), within the
// caller's deadline; one whose error is marked Accepted (the backend took
// the resource, the factory's own set-up of it failed) is not: the caller
// gets that error after the one call, and errors.Is still reaches it.
func TestAcceptedErrorNotRedialled(t *testing.T) {
	errSetUp := errors.New("set-up failed")
	for _, accepted := range []bool{false, true} {
		synctest.Test(t, func(t *testing.T) {
			var calls atomic.Int32
			p := newPool(t, Config[*item]{Factory: func(context.Context) (*item, error) {
				calls.Add(1)
				time.Sleep(2 * DefaultBackoffMin) // answered, after a while
				if accepted {
					return nil, Accepted(errSetUp)
				}
				return nil, errSetUp
			}})
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			_, err := p.Acquire(ctx)
			if !errors.Is(err, errSetUp) {
				t.Fatalf("accepted %v: Acquire: %v, want the factory's error", accepted, err)
			}
			switch n := calls.Load(); {
			case accepted && n != 1:
				t.Errorf("an accepted failure: %d factory calls for one caller, want 1", n)
			case !accepted && n < 10:
				t.Errorf("a slow refusal: %d factory calls within the caller's second, want it called again at once", n)
			}
		})
	}
}

// TestSilentBackendCallEndsWithCaller: while the backend is silent (the
// last factory call timed out), a caller that gives up ends the factory
// call made for it, so that calls hung in a black hole do not hold every
// slot after it: a caller that comes when the backend answers again dials
// it at once. With the backend answering, a caller's giving up leaves its
// call to go on (TestFactoryContext); so does the first call into the
// silence, before a timeout says the backend is silent.
func TestSilentBackendCallEndsWithCaller(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const connectTimeout = time.Second
		var silent atomic.Bool
		var mu sync.Mutex
		var ended []bool // per call: its context ended before its timeout
		p, err := New(Config[int]{Max: 2, Factory: func(ctx context.Context) (int, error) {
			if !silent.Load() {
				return 1, nil
			}
			mu.Lock()
			i := len(ended)
			ended = append(ended, false)
			mu.Unlock()
			select {
			case <-time.After(connectTimeout):
				return 0, fmt.Errorf("connecting: %w", context.DeadlineExceeded)
			case <-ctx.Done():
				mu.Lock()
				ended[i] = true
				mu.Unlock()
				return 0, ctx.Err()
			}
		}})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		acquire := func(timeout time.Duration) error { return acquireFor(p, timeout) }
		silent.Store(true)
		// The first call into the silence: its caller gives up, the call
		// goes on to its timeout.
		if err := acquire(300 * time.Millisecond); err == nil {
			t.Fatal("a caller was served by a silent backend")
		}
		time.Sleep(connectTimeout)
		synctest.Wait()
		// Now the backend is known silent: two callers, one call each,
		// both give up after 200ms; one call ends with its caller, the
		// other, the last in flight, runs to its end (abandonLocked).
		var wg sync.WaitGroup
		for range 2 {
			wg.Go(func() {
				if err := acquire(200 * time.Millisecond); err == nil {
					t.Error("a caller was served by a silent backend")
				}
			})
		}
		wg.Wait()
		synctest.Wait()
		silent.Store(false)
		if err := acquire(100 * time.Millisecond); err != nil {
			t.Fatalf("the first caller after the silence: %v, want the backend dialled at once", err)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(ended) != 3 || ended[0] || ended[1] == ended[2] {
			t.Fatalf("calls ended with their callers: %v, want the first and one of the others to run to their end", ended)
		}
	})
}

// TestSilentBackendStormRecovers: once the backend looked silent (a connect
// timed out), callers that each give up sooner than a connect takes must
// not end every call: the last one in flight runs to its end, its resource
// serves, and the pool leaves the silence (before, a storm of 5ms
// deadlines against 10ms connects created nothing, for good: in CI a
// cancellation storm behind Docker's proxy served 1 call of 17,790).
func TestSilentBackendStormRecovers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var silent atomic.Bool
		p, err := New(Config[int]{Max: 4, Factory: func(ctx context.Context) (int, error) {
			if silent.Load() {
				select {
				case <-time.After(100 * time.Millisecond): // its connect timeout
				case <-ctx.Done():
				}
				return 0, fmt.Errorf("connecting: %w", context.DeadlineExceeded)
			}
			select {
			case <-time.After(10 * time.Millisecond):
				return 1, nil
			case <-ctx.Done():
				return 0, ctx.Err()
			}
		}})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		acquire := func(timeout time.Duration) error { return acquireFor(p, timeout) }
		silent.Store(true)
		if err := acquire(50 * time.Millisecond); err == nil {
			t.Fatal("a caller was served by a silent backend")
		}
		time.Sleep(100 * time.Millisecond)
		synctest.Wait()
		if p.Stats().CreateErrors == 0 {
			t.Fatal("the silent call did not fail")
		}
		silent.Store(false)
		var wg sync.WaitGroup
		for range 16 {
			wg.Go(func() {
				for range 20 {
					_ = acquire(5 * time.Millisecond)
				}
			})
		}
		wg.Wait()
		synctest.Wait()
		if st := p.Stats(); st.Created == 0 {
			t.Fatalf("no resource created in a storm of 5ms callers against 10ms connects: %+v", st)
		}
		if err := acquire(5 * time.Millisecond); err != nil {
			t.Fatalf("after the storm: %v, want an idle resource", err)
		}
	})
}

// acquireFor acquires from p within timeout and releases what it got at
// once: the error is the acquire's.
func acquireFor(p *Pool[int], timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	r, err := p.Acquire(ctx)
	if err == nil {
		r.Release()
	}
	return err
}
