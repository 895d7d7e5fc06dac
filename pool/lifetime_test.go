package pool

import (
	"context"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// expiryTimes pre-warms n resources with the given lifetime and jitter,
// lets the healthcheck expire them all, and returns when each was
// destroyed, as time since the pool started, sorted.
func expiryTimes(t *testing.T, n int, lifetime, jitter time.Duration) []time.Duration {
	var times []time.Duration
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var b backend
		start := time.Now()
		cfg := b.config()
		cfg.Destructor = func(it *item) {
			mu.Lock()
			times = append(times, time.Since(start))
			mu.Unlock()
			b.destructor(it)
		}
		cfg.Min, cfg.Max = n, n
		cfg.MaxLifetime, cfg.MaxLifetimeJitter = lifetime, jitter
		cfg.HealthcheckInterval = 100 * time.Millisecond
		p, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if b.made.Load() != int64(n) {
			t.Fatalf("pre-warmed %d, want %d", b.made.Load(), n)
		}
		// The refill to Min makes more, which expire later: only the
		// first n count.
		time.Sleep(lifetime + jitter + time.Second)
		p.Close()
	})
	slices.Sort(times)
	return times[:n]
}

// TestLifetimeJitterSpreadsExpiry: pre-warmed resources without jitter
// all expire in the same healthcheck round; with jitter their expiries
// spread over it, each within [lifetime, lifetime+jitter] (plus one round).
func TestLifetimeJitterSpreadsExpiry(t *testing.T) {
	const n = 50
	const lifetime, jitter, round = 10 * time.Second, 10 * time.Second, 100 * time.Millisecond

	same := expiryTimes(t, n, lifetime, 0)
	if spread := same[n-1] - same[0]; spread > 0 {
		t.Fatalf("without jitter: expiries spread over %v, want one round", spread)
	}

	times := expiryTimes(t, n, lifetime, jitter)
	for _, d := range times {
		if d < lifetime || d > lifetime+jitter+round {
			t.Fatalf("expired after %v, want within [%v, %v]", d, lifetime, lifetime+jitter+round)
		}
	}
	// 50 uniform draws over 10s: every half of the range gets some (the
	// chance that one half gets none is 2·2⁻⁵⁰).
	if times[0] >= lifetime+jitter/2 || times[n-1] < lifetime+jitter/2 {
		t.Fatalf("expiries not spread over the jitter: first %v, last %v", times[0], times[n-1])
	}
	distinct := map[time.Duration]bool{}
	for _, d := range times {
		distinct[d] = true
	}
	if len(distinct) < n/4 {
		t.Fatalf("only %d distinct expiry rounds of %d resources", len(distinct), n)
	}
}

// TestLifetimeJitterOnRelease: a resource released past its own lifetime
// (MaxLifetime plus its jitter) is destroyed, one released before it is
// pooled.
func TestLifetimeJitterOnRelease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var b backend
		cfg := b.config()
		cfg.MaxLifetime, cfg.MaxLifetimeJitter = time.Second, time.Second
		p := newPool(t, cfg)
		r := mustAcquire(t, p)
		own := r.lifetime
		if own < time.Second || own >= 2*time.Second {
			t.Fatalf("lifetime %v outside [1s, 2s)", own)
		}
		time.Sleep(own - time.Millisecond)
		r.Release()
		if p.Stats().Destroyed != 0 {
			t.Fatal("destroyed before its lifetime")
		}
		r = mustAcquire(t, p)
		time.Sleep(time.Millisecond)
		r.Release()
		if p.Stats().Expired != 1 {
			t.Fatalf("not destroyed at its lifetime: %+v", p.Stats())
		}
	})
}

// TestMinIdle: the pool keeps MinIdle resources idle while others are in
// use, within Max.
func TestMinIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var b backend
		cfg := b.config()
		cfg.MinIdle, cfg.Max = 2, 3
		cfg.HealthcheckInterval = time.Second
		p := newPool(t, cfg)
		synctest.Wait()
		if s := p.Stats(); s.Idle != 2 || s.Total != 2 {
			t.Fatalf("after New: %+v, want 2 idle", s)
		}
		r1, r2 := mustAcquire(t, p), mustAcquire(t, p)
		time.Sleep(time.Second + time.Millisecond)
		synctest.Wait()
		if s := p.Stats(); s.Idle != 1 || s.Total != 3 {
			t.Fatalf("with 2 in use: %+v, want 1 idle (Max 3)", s)
		}
		r1.Release()
		r2.Release()
		if _, err := New(Config[*item]{Factory: b.factory, MinIdle: 4, Max: 3}); err == nil {
			t.Fatal("MinIdle > Max accepted")
		}
	})
}

// TestCloseIdle: idle resources are destroyed at once, those in use are
// not, and the pool refills to Min with new ones.
func TestCloseIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var b backend
		cfg := b.config()
		cfg.Min, cfg.Max = 3, 4
		p := newPool(t, cfg)
		synctest.Wait()
		held := mustAcquire(t, p)
		if n := p.CloseIdle(); n != 2 {
			t.Fatalf("CloseIdle destroyed %d, want 2", n)
		}
		synctest.Wait()
		if s := p.Stats(); s.Total != 3 || s.Idle != 2 || b.made.Load() != 5 {
			t.Fatalf("after CloseIdle: %+v, made %d", s, b.made.Load())
		}
		if held.Value().id > 3 {
			t.Fatal("the held resource changed")
		}
		held.Release()
	})
}

// TestRetire: Retire destroys the idle resources at once and each one in
// use when it comes back, whether it is released, parked or being
// checked; none of them serves again, and the pool refills to Min.
func TestRetire(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var b backend
		inCheck, letGo := make(chan struct{}), make(chan struct{})
		cfg := b.config()
		cfg.Min, cfg.Max = 4, 6
		var checked *item
		cfg.Healthcheck = func(_ context.Context, it *item) error {
			checked = it
			inCheck <- struct{}{}
			<-letGo
			return nil
		}
		p := newPool(t, cfg)
		synctest.Wait()
		released, parked, kept := mustAcquire(t, p), mustAcquire(t, p), mustAcquire(t, p)
		go p.CheckNow() // takes the idle one out to check it
		<-inCheck
		if n := p.Retire(); n != 0 {
			t.Fatalf("Retire destroyed %d at once; none was idle", n)
		}
		released.Release()
		if parked.Park() {
			t.Fatal("a retired resource parked")
		}
		parked.Release()
		close(letGo)
		synctest.Wait()
		if d := b.destroyed.Load(); d != 3 {
			t.Fatalf("destroyed %d, want the released, the parked and the checked one", d)
		}
		old := map[*item]bool{released.Value(): true, parked.Value(): true, checked: true}
		for range 3 {
			r := mustAcquire(t, p)
			if old[r.Value()] {
				t.Fatalf("resource %d, from before Retire, served again", r.Value().id)
			}
			defer r.Release()
		}
		kept.Release()
		synctest.Wait()
		if d := b.destroyed.Load(); d != 4 {
			t.Fatalf("destroyed %d after the last one came back, want 4", d)
		}
	})
}

// TestRetireWhileCreating: a resource whose factory call was under way when
// Retire ran does not serve: it is destroyed as it arrives, and the factory
// is called again for whoever it was made for (a waiter, and Min).
func TestRetireWhileCreating(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := backend{block: make(chan struct{})}
		cfg := b.config()
		cfg.Min, cfg.Max = 1, 2
		p := newPool(t, cfg)
		got := make(chan *Resource[*item])
		go func() {
			r, err := p.Acquire(context.Background())
			if err != nil {
				t.Error(err)
			}
			got <- r
		}()
		synctest.Wait()
		if c := b.calls.Load(); c != 2 {
			t.Fatalf("%d factory calls under way, want 2 (Min's and the waiter's)", c)
		}
		if n := p.Retire(); n != 0 {
			t.Fatalf("Retire destroyed %d at once; none existed", n)
		}
		b.block <- struct{}{}
		b.block <- struct{}{}
		synctest.Wait()
		if d := b.destroyed.Load(); d != 2 {
			t.Fatalf("destroyed %d, want the 2 made by calls that began before Retire", d)
		}
		if c := b.calls.Load(); c != 3 {
			t.Fatalf("%d factory calls, want 1 more after the retired ones (the waiter's, which Min counts)", c)
		}
		b.block <- struct{}{}
		r := <-got
		if id := r.Value().id; id <= 2 {
			t.Fatalf("the waiter got resource %d, made before Retire", id)
		}
		r.Release()
		synctest.Wait()
		if s := p.Stats(); s.Total != 1 || s.Destroyed != 2 {
			t.Fatalf("stats %+v, want 1 resource and the 2 retired destroyed", s)
		}
	})
}
