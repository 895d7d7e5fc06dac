package pool

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

func TestParkUnpark(t *testing.T) {
	var b backend
	cfg := b.config()
	cfg.Max = 2
	p := newPool(t, cfg)
	r := mustAcquire(t, p)
	if !r.Park() {
		t.Fatal("Park refused on a quiet pool")
	}
	if s := p.Stats(); s.Idle != 1 || s.Active != 0 || s.Total != 1 {
		t.Fatalf("parked: Idle %d Active %d Total %d, want 1 0 1", s.Idle, s.Active, s.Total)
	}
	if p.IdleCount() != 1 || p.ActiveCount() != 0 {
		t.Fatalf("IdleCount %d ActiveCount %d", p.IdleCount(), p.ActiveCount())
	}
	if !r.Unpark() {
		t.Fatal("Unpark of an untouched parked resource failed")
	}
	if r.Unpark() {
		t.Fatal("second Unpark succeeded")
	}
	s := p.Stats()
	if s.Active != 1 || s.Idle != 0 || s.Acquires != 2 || s.WaitTime.Count != 2 || s.WaitTime.Buckets[0] < 1 {
		t.Fatalf("after Unpark: %+v", s)
	}
	r.Release()
	if s := p.Stats(); s.Idle != 1 || s.Active != 0 || s.Misuses != 0 {
		t.Fatalf("after Release: %+v", s)
	}
}

// A parked resource is free for anyone: an Acquire that finds no idle one
// takes it, and the holder that parked it cannot take it back.
func TestParkedIsStolen(t *testing.T) {
	var b backend
	cfg := b.config()
	cfg.Max = 1
	var checks []int64
	cfg.BeforeAcquire = func(_ context.Context, r *Resource[*item]) bool {
		checks = append(checks, r.Value().id)
		return true
	}
	p := newPool(t, cfg)
	r := mustAcquire(t, p)
	id := r.Value().id
	if !r.Park() {
		t.Fatal("Park refused")
	}
	other := mustAcquire(t, p)
	if other.Value().id != id {
		t.Fatalf("Acquire made a new resource (%d) instead of taking the parked one (%d)", other.Value().id, id)
	}
	if len(checks) != 1 {
		t.Fatalf("a stolen parked resource was handed out with %d BeforeAcquire checks, want 1", len(checks))
	}
	if r.Unpark() {
		t.Fatal("Unpark took back a resource someone else holds")
	}
	other.Release()
	if s := p.Stats(); s.Created != 1 || s.Acquires != 2 || s.Idle != 1 || s.Active != 0 {
		t.Fatalf("stats: %+v", s)
	}
}

// A waiter is never left waiting while a resource is parked: Park refuses
// while someone waits, and the resource is released to the waiter.
func TestParkRefusedWhileWaiting(t *testing.T) {
	var b backend
	cfg := b.config()
	cfg.Max = 1
	p := newPool(t, cfg)
	r := mustAcquire(t, p)
	if r.Contended() {
		t.Fatal("Contended with nobody waiting")
	}
	got := make(chan *Resource[*item])
	go func() {
		w, err := p.Acquire(context.Background())
		if err != nil {
			t.Error(err)
		}
		got <- w
	}()
	waitFor(t, "the waiter", func() bool { return p.Stats().Waiting == 1 })
	if !r.Contended() {
		t.Fatal("not Contended while a waiter waits")
	}
	if r.Park() {
		t.Fatal("Park succeeded while a waiter waits")
	}
	r.Release()
	w := <-got
	if w != r {
		t.Fatal("the waiter did not get the released resource")
	}
	w.Release()
}

func TestParkRefusedWhenReleasesAreWatched(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  func(*Config[*item])
	}{
		{"BeforeRelease", func(c *Config[*item]) { c.BeforeRelease = func(*item) bool { return true } }},
		{"strategy", func(c *Config[*item]) { c.Strategy = releaseCounter{} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b backend
			cfg := b.config()
			cfg.Max = 1
			tc.set(&cfg)
			p := newPool(t, cfg)
			r := mustAcquire(t, p)
			if r.Park() {
				t.Fatal("Park succeeded")
			}
			r.Release()
			if s := p.Stats(); s.Misuses != 0 || s.Idle != 1 {
				t.Fatalf("stats: %+v", s)
			}
		})
	}
}

// releaseCounter is a strategy that wants to hear of releases.
type releaseCounter struct{}

func (releaseCounter) Report(Breaker, Event, error) {}

// A parked resource past MaxLifetime is not taken back. On the bubble's
// clock: the coarse clock has ticked past the lifetime when Unpark looks,
// however busy the machine.
func TestParkedExpiresAtUnpark(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var b backend
		cfg := b.config()
		cfg.Max = 1
		cfg.MaxLifetime = 20 * time.Millisecond
		p := newPool(t, cfg)
		r := mustAcquire(t, p)
		if !r.Park() {
			t.Fatal("Park refused")
		}
		time.Sleep(20*time.Millisecond + 2*coarseTick) // the coarse clock has ticked past the lifetime
		if r.Unpark() {
			t.Fatal("Unpark returned a resource past MaxLifetime")
		}
		if s := p.Stats(); s.Expired != 1 || s.Destroyed != 1 || s.Total != 0 || b.live.Load() != 0 {
			t.Fatalf("stats: %+v", s)
		}
	})
}

func TestParkedClosedByCloseIdleAndClose(t *testing.T) {
	var b backend
	cfg := b.config()
	cfg.Max = 2
	p := newPool(t, cfg)
	r := mustAcquire(t, p)
	r.Park()
	if n := p.CloseIdle(); n != 1 {
		t.Fatalf("CloseIdle closed %d, want the parked one", n)
	}
	if r.Unpark() {
		t.Fatal("Unpark after CloseIdle succeeded")
	}
	r = mustAcquire(t, p)
	r.Park()
	p.Close()
	if r.Unpark() {
		t.Fatal("Unpark after Close succeeded")
	}
	if s := p.Stats(); s.Total != 0 || b.live.Load() != 0 {
		t.Fatalf("after Close: %+v, live %d", s, b.live.Load())
	}
	r = nil
	// Park on a closed pool refuses; the release destroys.
	var b2 backend
	p2 := newPool(t, b2.config())
	r2 := mustAcquire(t, p2)
	p2.Close()
	if r2.Park() {
		t.Fatal("Park on a closed pool succeeded")
	}
	r2.Release()
	if b2.live.Load() != 0 {
		t.Fatal("released into a closed pool and not destroyed")
	}
}

func TestParkedIsHealthchecked(t *testing.T) {
	var b backend
	cfg := b.config()
	cfg.Max = 1
	cfg.Healthcheck = func(_ context.Context, it *item) error {
		it.checked.Add(1)
		return errors.New("gone")
	}
	p := newPool(t, cfg)
	r := mustAcquire(t, p)
	it := r.Value()
	r.Park()
	p.CheckNow()
	if it.checked.Load() != 1 {
		t.Fatalf("the parked resource was checked %d times by CheckNow, want 1", it.checked.Load())
	}
	if r.Unpark() || b.live.Load() != 0 {
		t.Fatal("a resource that failed its healthcheck stayed")
	}
}

func TestParkMisuse(t *testing.T) {
	var b backend
	p := newPool(t, b.config())
	r := mustAcquire(t, p)
	r.Park()
	r.Release() // parked: not the caller's any more
	if s := p.Stats(); s.Misuses != 1 || s.Idle != 1 {
		t.Fatalf("stats: %+v", s)
	}
	if !r.Unpark() {
		t.Fatal("the misuse disturbed the parked resource")
	}
	r.Release()
}

// TestParkStress mixes holders that park and take back their resource with
// plain Acquire and Release, destroys, healthchecks and CloseIdle, and then
// holders that leave their resource parked and stop while others still
// wait without a deadline: a waiter left waiting beside a parked resource
// would hang the test. No resource is ever held twice, and the accounting
// adds up.
func TestParkStress(t *testing.T) {
	checkNoGoroutineLeak(t)
	var b backend
	cfg := b.config()
	cfg.Max = 4
	cfg.MaxLifetime = 30 * time.Millisecond
	cfg.HealthcheckInterval = 2 * time.Millisecond
	cfg.Healthcheck = func(_ context.Context, it *item) error {
		if it.inUse.Load() {
			t.Error("healthcheck of a resource in use")
		}
		return nil
	}
	cfg.BeforeAcquire = func(_ context.Context, r *Resource[*item]) bool {
		if r.Value().inUse.Load() {
			t.Error("BeforeAcquire of a resource in use")
		}
		return true
	}
	p := newPool(t, cfg)

	use := func(rng *rand.Rand, r *Resource[*item]) {
		it := r.Value()
		if !it.inUse.CompareAndSwap(false, true) {
			t.Error("resource handed to two holders")
		}
		if rng.IntN(8) == 0 {
			time.Sleep(time.Duration(rng.IntN(50)) * time.Microsecond)
		}
		it.inUse.Store(false)
	}
	holder := func(g int, rounds int, leaveParked bool, wg *sync.WaitGroup) {
		defer wg.Done()
		rng := rand.New(rand.NewPCG(uint64(g), 11))
		var parked *Resource[*item]
		for i := 0; i < rounds; i++ {
			r := parked
			parked = nil
			if r == nil || !r.Unpark() {
				var err error
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				r, err = p.Acquire(ctx)
				cancel()
				if err != nil {
					t.Errorf("Acquire: %v", err)
					return
				}
			}
			use(rng, r)
			switch n := rng.IntN(20); {
			case n == 0:
				r.Destroy()
			case n < 4:
				r.Release()
			default:
				if r.Park() {
					parked = r
				} else {
					r.Release()
				}
			}
		}
		if parked != nil && !leaveParked && parked.Unpark() {
			parked.Release()
		}
	}
	var wg sync.WaitGroup
	for g := 0; g < 12; g++ {
		wg.Add(1)
		go holder(g, 3000, g%3 == 0, &wg)
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < 20; i++ {
			time.Sleep(time.Millisecond)
			if i%5 == 0 {
				p.CloseIdle()
			}
		}
	}()
	wg.Wait()
	// Some holders left resources parked and stopped: newcomers get them.
	for g := 100; g < 108; g++ {
		wg.Add(1)
		go holder(g, 200, true, &wg)
	}
	wg.Wait()
	// At rest, but the healthcheck may hold one resource for its check.
	var s Stats
	waitFor(t, "the pool at rest", func() bool {
		s = p.Stats()
		return s.Active == 0 && s.Waiting == 0 && s.Idle == s.Total
	})
	if s.Misuses != 0 || s.CallbackPanics != 0 {
		t.Fatalf("at rest: %+v", s)
	}
	p.Close()
	s = p.Stats()
	if s.Total != 0 || s.Idle != 0 || s.Created != s.Destroyed || b.live.Load() != 0 || b.maxLive.Load() > 4 {
		t.Fatalf("after Close: %+v, live %d, max live %d", s, b.live.Load(), b.maxLive.Load())
	}
	// Every Acquire's wait is counted once, served at once or not.
	// Acquires counts hand-outs: one per Acquire, and one more for each
	// resource found expired as it was taken from idle, which the Acquire
	// gives up to go on to the next (the healthcheck, every 2ms, finds
	// those first unless a busy machine holds it back: then a few, never
	// more than expired). No Acquire timed out or was cancelled, which
	// would be waits without a hand-out.
	if gap := s.Acquires - s.WaitTime.Count; gap < 0 || gap > s.Expired+s.ReleaseRejects {
		t.Fatalf("waits %d, acquires %d: %d acquires without a wait of their own, %d expired or rejected", s.WaitTime.Count, s.Acquires, gap, s.Expired+s.ReleaseRejects)
	}
	if s.UseTime.Count+s.UntimedUses != s.Acquires || s.UntimedUses == 0 {
		t.Fatalf("uses: UseTime.Count %d + UntimedUses %d, acquires %d", s.UseTime.Count, s.UntimedUses, s.Acquires)
	}
}

// Reject counts like a failed BeforeAcquire: the holder's own check of a
// resource it took back with Unpark.
func TestReject(t *testing.T) {
	var b backend
	cfg := b.config()
	var heard []Event
	cfg.Strategy = strategyFunc(func(_ Breaker, ev Event, _ error) { heard = append(heard, ev) })
	p := newPool(t, cfg)
	r := mustAcquire(t, p)
	r.Release() // the strategy hears releases: Park would refuse
	r = mustAcquire(t, p)
	r.Reject()
	r.Reject()
	s := p.Stats()
	if s.ReleaseRejects != 1 || s.Destroyed != 1 || s.Total != 0 || s.Misuses != 1 || b.live.Load() != 0 {
		t.Fatalf("stats: %+v", s)
	}
	if len(heard) == 0 || heard[len(heard)-1] != EventCheckFailed {
		t.Fatalf("the strategy heard %v, want EventCheckFailed last", heard)
	}
}

type strategyFunc func(Breaker, Event, error)

func (f strategyFunc) Report(b Breaker, ev Event, err error) { f(b, ev, err) }

// A parked resource idle longer than MaxIdleTime is not taken back: it is
// destroyed, as an acquire from idle would. On the bubble's clock, as
// above.
func TestUnparkExpiresByIdleTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var b backend
		cfg := b.config()
		cfg.Max = 1
		cfg.MaxIdleTime = 20 * time.Millisecond
		p := newPool(t, cfg)
		r := mustAcquire(t, p)
		if !r.Park() {
			t.Fatal("Park refused")
		}
		time.Sleep(cfg.MaxIdleTime + 3*coarseTick) // the coarse clock must see it
		if r.Unpark() {
			r.Release()
			t.Fatalf("Unpark took back a resource parked %v, past MaxIdleTime %v", r.IdleFor(), cfg.MaxIdleTime)
		}
		if s := p.Stats(); s.Expired != 1 || s.Total != 0 || s.Active != 0 {
			t.Fatalf("after the expired Unpark: %+v", s)
		}
	})
}

// A stale handle (parked by one holder, taken by the pool, parked again by
// another) does not take the resource from a waiter that queued while its
// new parker was between Park's two steps.
func TestStaleUnparkYieldsToWaiter(t *testing.T) {
	var b backend
	cfg := b.config()
	cfg.Max = 1
	p := newPool(t, cfg)
	r := mustAcquire(t, p)
	if !r.Park() { // holder 1 parks
		t.Fatal("Park refused")
	}
	if r2 := mustAcquire(t, p); r2 != r { // holder 2 takes it from parking
		t.Fatal("the parked resource was not taken")
	}
	got := make(chan *Resource[*item], 1)
	go func() {
		w, err := p.Acquire(context.Background())
		if err != nil {
			t.Error(err)
		}
		got <- w
	}()
	waitFor(t, "the waiter", func() bool { return p.Stats().Waiting == 1 })
	// Holder 2's Park, first step, done by hand to hold the window open.
	if !r.state.CompareAndSwap(stateAcquired, stateParked) {
		t.Fatal("not acquired")
	}
	if r.Unpark() { // holder 1's stale handle
		t.Fatal("a stale Unpark took the resource while a waiter waits")
	}
	// Holder 2's Park, second step: it sees the waiter and takes r back
	// to release it to the waiter.
	if !r.state.CompareAndSwap(stateParked, stateAcquired) {
		t.Fatal("the resource left parking")
	}
	r.Release()
	select {
	case w := <-got:
		w.Release()
	case <-time.After(5 * time.Second):
		t.Fatal("the waiter was not served")
	}
}

// A parked resource handed to a waiter that then fails BeforeAcquire
// counts as one wait, not as an acquire served at once taken back.
func TestWaitedRejectCountsOnce(t *testing.T) {
	var b backend
	cfg := b.config()
	cfg.Max = 1
	var fail atomic.Bool
	fail.Store(true)
	cfg.BeforeAcquire = func(context.Context, *Resource[*item]) bool { return !fail.Swap(false) }
	p := newPool(t, cfg)
	r := mustAcquire(t, p)
	done := make(chan *Resource[*item])
	go func() {
		w, err := p.Acquire(context.Background())
		if err != nil {
			t.Error(err)
		}
		done <- w
	}()
	waitFor(t, "the waiter", func() bool { return p.Stats().Waiting == 1 })
	p.startCoarse()
	if !r.state.CompareAndSwap(stateAcquired, stateParked) { // Park's first step
		t.Fatal("not acquired")
	}
	p.mayBeParked.Store(true) // and the rest of it but the look at the waiters
	p.mu.Lock()
	p.feedWaitersLocked() // what a second waiter does as it queues
	p.mu.Unlock()
	w := <-done
	w.Release()
	s := p.Stats()
	if s.WaitTime.Buckets[0] < 0 || s.WaitTime.Count != s.Acquires || s.ReleaseRejects != 1 { // every hand-out, its wait counted once
		t.Fatalf("WaitTime %d (bucket 0: %d), Acquires %d, ReleaseRejects %d", s.WaitTime.Count, s.WaitTime.Buckets[0], s.Acquires, s.ReleaseRejects)
	}
}

// Return puts a parked resource where every acquire finds it.
func TestReturn(t *testing.T) {
	var b backend
	cfg := b.config()
	cfg.Max = 2
	p := newPool(t, cfg)
	r := mustAcquire(t, p)
	if !r.Park() {
		t.Fatal("Park refused")
	}
	r.Return()
	if r.Unpark() {
		t.Fatal("Unpark after Return")
	}
	if s := p.Stats(); s.Idle != 1 || s.Active != 0 || p.IdleCount() != 1 {
		t.Fatalf("after Return: %+v", s)
	}
	r2, ok := p.TryAcquire()
	if !ok || r2 != r {
		t.Fatalf("TryAcquire = %v, %t; want the returned resource", r2, ok)
	}
	r2.Release()
}

// An observer does not stop parking, and the uses add up whether or not
// one is registered: every use that ended is timed (UseTime, told to the
// observer as TimingUse) or counted in UntimedUses.
func TestParkWithObserver(t *testing.T) {
	for _, observed := range []bool{false, true} {
		var b backend
		cfg := b.config()
		cfg.Max = 2
		p := newPool(t, cfg)
		var obs timings
		if observed {
			stop := p.Observe(obs.observe)
			defer stop()
		}
		r := mustAcquire(t, p) // made for a waiter: timed from the start, but it ends with Park
		const rounds = 50
		for i := range rounds {
			if !r.Park() {
				t.Fatalf("observed %t: Park %d refused", observed, i)
			}
			if !r.Unpark() {
				t.Fatalf("observed %t: Unpark %d failed", observed, i)
			}
		}
		r.Release()                 // began with Unpark: untimed
		mustAcquire(t, p).Release() // from idle, no clock read: untimed
		r = mustAcquire(t, p)
		r.IdleFor()
		r.Release() // timed from IdleFor's clock read
		r = mustAcquire(t, p)
		if !r.Park() {
			t.Fatal("Park refused")
		}
		other := mustAcquire(t, p) // takes the parked one
		if other != r {
			t.Fatal("the parked resource was not taken")
		}
		other.Destroy() // taken from idle (parked): no clock read, untimed
		s := p.Stats()
		if want := int64(rounds + 4); s.UntimedUses != want {
			t.Errorf("observed %t: UntimedUses %d, want %d (parks, the Unparked use, two from idle, the last park)", observed, s.UntimedUses, want)
		}
		if s.UseTime.Count != 1 {
			t.Errorf("observed %t: UseTime.Count %d, want 1", observed, s.UseTime.Count)
		}
		if s.UseTime.Count+s.UntimedUses != s.Acquires-int64(s.Active) {
			t.Errorf("observed %t: UseTime.Count %d + UntimedUses %d != Acquires %d - Active %d", observed, s.UseTime.Count, s.UntimedUses, s.Acquires, s.Active)
		}
		if observed {
			obs.checkMatches(t, TimingUse, s.UseTime)
			if n, _, _ := obs.get(TimingWait); n != s.WaitTime.Count {
				t.Errorf("observer told %d waits, WaitTime counted %d", n, s.WaitTime.Count)
			}
		}
	}
}

// Every way a use ends adds up: Release, Destroy, Park, Reject, parked
// resources taken by the pool, expired at Unpark, or refused as they were
// handed out, with and without an observer, with time-based expiry (every
// acquire from idle timed) and without.
func TestUsesAddUp(t *testing.T) {
	for _, observed := range []bool{false, true} {
		for _, expiry := range []bool{false, true} {
			var b backend
			cfg := b.config()
			cfg.Max = 3
			if expiry {
				cfg.MaxIdleTime = time.Hour
			}
			var refuse atomic.Bool
			cfg.BeforeAcquire = func(context.Context, *Resource[*item]) bool { return !refuse.Swap(false) }
			p := newPool(t, cfg)
			if observed {
				stop := p.Observe(func(Timing, time.Duration) {})
				defer stop()
			}
			check := func(what string) {
				t.Helper()
				s := p.Stats()
				if s.UseTime.Count+s.UntimedUses != s.Acquires-int64(s.Active) {
					t.Fatalf("observed %t expiry %t, %s: UseTime.Count %d + UntimedUses %d != Acquires %d - Active %d",
						observed, expiry, what, s.UseTime.Count, s.UntimedUses, s.Acquires, s.Active)
				}
			}
			rng := rand.New(rand.NewPCG(3, 5))
			var held, parked []*Resource[*item]
			for i := range 400 {
				switch n := rng.IntN(9); {
				case n == 0 && len(held) < cfg.Max:
					if r, ok := p.TryAcquire(); ok {
						held = append(held, r)
					}
				case n == 1 && len(held) < cfg.Max:
					refuse.Store(rng.IntN(4) == 0)
					if r, ok := p.TryAcquire(); ok {
						held = append(held, r)
					}
					refuse.Store(false)
				case n == 2 && len(parked) > 0:
					r := parked[0]
					parked = parked[1:]
					if r.Unpark() {
						held = append(held, r)
					}
				case n == 3 && len(held) > 0:
					if held[0].Park() {
						parked = append(parked, held[0])
					} else {
						held[0].Release()
					}
					held = held[1:]
				case n == 4 && len(held) > 0:
					held[0].Destroy()
					held = held[1:]
				case n == 5 && len(held) > 0:
					held[0].Reject()
					held = held[1:]
				case n == 6 && len(parked) > 0:
					parked[0].Return()
					parked = parked[1:]
				case len(held) > 0:
					held[0].Release()
					held = held[1:]
				default:
					if len(held)+len(parked) < cfg.Max {
						held = append(held, mustAcquire(t, p))
					}
				}
				check(fmt.Sprint("step ", i))
			}
			for _, r := range held {
				r.Release()
			}
			check("at rest")
			if s := p.Stats(); s.UntimedUses == 0 || s.Misuses != 0 {
				t.Fatalf("observed %t expiry %t: %+v", observed, expiry, s)
			}
		}
	}
}
