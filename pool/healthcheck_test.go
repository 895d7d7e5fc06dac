package pool

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

func TestHealthcheckChecksIdleOnlyAndRefills(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var b backend
		var checkedInUse atomic.Int64
		cfg := b.config()
		cfg.Min, cfg.Max = 2, 4
		cfg.HealthcheckInterval = time.Second
		cfg.Healthcheck = func(_ context.Context, it *item) error {
			if it.inUse.Load() {
				checkedInUse.Add(1)
			}
			it.checked.Add(1)
			if it.broken.Load() {
				return errors.New("broken")
			}
			return nil
		}
		p, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		synctest.Wait()
		if p.IdleCount() != 2 {
			t.Fatalf("pre-warm: %d idle", p.IdleCount())
		}
		held, _ := p.Acquire(context.Background())
		held.Value().inUse.Store(true)
		idle, _ := p.Acquire(context.Background())
		idle.Value().broken.Store(true)
		idle.Release()

		time.Sleep(1500 * time.Millisecond) // one round
		synctest.Wait()
		if checkedInUse.Load() != 0 || held.Value().checked.Load() != 0 {
			t.Fatal("the healthcheck touched a resource in use")
		}
		s := p.Stats()
		if s.HealthcheckFailures != 1 {
			t.Fatalf("broken idle resource not destroyed: %+v", s)
		}
		// Refilled to Min: the held one plus one new idle.
		if s.Total != 2 || s.Idle != 1 || b.made.Load() != 3 {
			t.Fatalf("not refilled to Min: %+v (made %d)", s, b.made.Load())
		}
		held.Value().inUse.Store(false)
		held.Release()
	})
}

// TestMinIdleCountsTheOneBeingChecked: an idle resource the healthcheck
// holds counts as idle for MinIdle. A resource made for MinIdle that
// arrives while the other idle one is checked does not make the pool dial
// again: MinIdle idle beside the one in use, never more.
func TestMinIdleCountsTheOneBeingChecked(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var b backend
		cfg := b.config()
		cfg.MinIdle, cfg.Max = 2, 4
		gate := make(chan struct{})
		var gated atomic.Bool
		cfg.Factory = func(ctx context.Context) (*item, error) {
			if gated.Load() {
				<-gate
			}
			return b.factory(ctx)
		}
		var hold atomic.Bool
		checking, resume := make(chan struct{}), make(chan struct{})
		cfg.Healthcheck = func(context.Context, *item) error {
			if hold.CompareAndSwap(true, false) {
				close(checking)
				<-resume
			}
			return nil
		}
		p, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		synctest.Wait()
		r, err := p.Acquire(context.Background()) // one idle left
		if err != nil {
			t.Fatal(err)
		}
		gated.Store(true)
		p.CheckNow() // refills: a dial for the second idle one, held at the gate
		synctest.Wait()
		hold.Store(true)
		go p.CheckNow()
		<-checking // the idle one is out for its check
		close(gate)
		synctest.Wait() // the dial's resource is idle
		close(resume)
		synctest.Wait()
		if s := p.Stats(); s.Total != 3 || s.Idle != 2 || b.made.Load() != 3 {
			t.Fatalf("want 2 idle beside the one in use, 3 made: %+v (made %d)", s, b.made.Load())
		}
		r.Release()
	})
}

func TestExpiryByLifetimeAndIdleTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var b backend
		cfg := b.config()
		cfg.MaxLifetime = 10 * time.Second
		cfg.MaxIdleTime = 3 * time.Second
		cfg.HealthcheckInterval = time.Second
		p, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()

		r, _ := p.Acquire(context.Background())
		r.Release()
		time.Sleep(4500 * time.Millisecond)
		synctest.Wait()
		if p.Count() != 0 || p.Stats().Expired != 1 {
			t.Fatalf("idle past MaxIdleTime not destroyed: %+v", p.Stats())
		}

		// Kept busy (never idle long), it still dies of old age: on release
		// past its lifetime it is destroyed, not pooled.
		r, _ = p.Acquire(context.Background())
		id := r.Value().id
		for i := 0; i < 6; i++ {
			r.Release()
			time.Sleep(2 * time.Second)
			r, _ = p.Acquire(context.Background())
		}
		if r.Value().id == id {
			t.Fatal("resource outlived MaxLifetime")
		}
		r.Release()
	})
}

func TestExpiredIdleIsNotHandedOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var b backend
		cfg := b.config()
		cfg.MaxIdleTime = time.Second // no background healthcheck
		p, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		r, _ := p.Acquire(context.Background())
		r.Release()
		time.Sleep(2 * time.Second)
		r, _ = p.Acquire(context.Background())
		if r.Value().id != 2 || b.destroyed.Load() != 1 {
			t.Fatalf("expired idle resource handed out (id %d)", r.Value().id)
		}
		r.Release()
	})
}

func TestAcquireTimeoutIsExact(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var b backend
		cfg := b.config()
		cfg.Max = 1
		cfg.AcquireTimeout = 250 * time.Millisecond
		p, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		r, _ := p.Acquire(context.Background())
		start := time.Now()
		_, err = p.Acquire(context.Background())
		if !errors.Is(err, ErrTimeout) || time.Since(start) != 250*time.Millisecond {
			t.Fatalf("Acquire: %v after %v", err, time.Since(start))
		}
		r.Release()
	})
}

// TestIdleTimeKeepsMin: idle time never takes the pool below Min nor its
// idle resources below MinIdle, as pgxpool keeps its minimum: a pool at
// rest with Min 2 and a 2 s idle time makes its two resources and no
// more in 6 s, whether the healthcheck or an acquire finds them idle; the
// surplus above the minimum still goes, the longest idle first; the
// lifetime still replaces a resource kept for the minimum.
func TestIdleTimeKeepsMin(t *testing.T) {
	for _, tc := range []struct {
		name          string
		min, minIdle  int
		checkInterval time.Duration
	}{
		{"min, healthcheck", 2, 0, 100 * time.Millisecond},
		{"min idle, healthcheck", 0, 2, 100 * time.Millisecond},
		{"min, acquire", 2, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var b backend
				cfg := b.config()
				cfg.Min, cfg.MinIdle, cfg.Max = tc.min, tc.minIdle, 4
				cfg.MaxIdleTime = 2 * time.Second
				cfg.HealthcheckInterval = tc.checkInterval
				p, err := New(cfg)
				if err != nil {
					t.Fatal(err)
				}
				defer p.Close()
				synctest.Wait()
				if tc.checkInterval > 0 {
					time.Sleep(6 * time.Second)
				} else {
					for range 3 { // each idle past MaxIdleTime when taken
						time.Sleep(2500 * time.Millisecond)
						r, err := p.Acquire(context.Background())
						if err != nil {
							t.Fatal(err)
						}
						r.Release()
					}
				}
				synctest.Wait()
				if made := b.made.Load(); made != 2 || p.Count() != 2 {
					t.Fatalf("made %d resources in 6 idle seconds, %d left; want the minimum's 2 and no churn", made, p.Count())
				}

				// Above the minimum, idle time takes the surplus.
				var held []*Resource[*item]
				for range 4 {
					r, err := p.Acquire(context.Background())
					if err != nil {
						t.Fatal(err)
					}
					held = append(held, r)
				}
				for _, r := range held {
					r.Release()
				}
				time.Sleep(3 * time.Second)
				if tc.checkInterval == 0 {
					p.CheckNow()
				}
				synctest.Wait()
				if p.Count() != 2 || p.Stats().Expired != 2 {
					t.Fatalf("surplus above the minimum: %d left, %+v", p.Count(), p.Stats())
				}
			})
		})
	}
}

// TestLifetimeReplacesMin: a resource kept for Min still dies of old age
// and is replaced.
func TestLifetimeReplacesMin(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var b backend
		cfg := b.config()
		cfg.Min, cfg.Max = 1, 2
		cfg.MaxLifetime = 2 * time.Second
		cfg.MaxIdleTime = time.Second
		cfg.HealthcheckInterval = 100 * time.Millisecond
		p, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if made := b.made.Load(); made < 2 || p.Count() != 1 {
			t.Fatalf("made %d, %d left: the minimum's resource was not replaced at its lifetime", made, p.Count())
		}
	})
}

// TestCloseIdleWhileChecked: CloseIdle destroys an idle resource the
// healthcheck has taken out when the check ends, as it would have
// destroyed it idle, and the pool refills to Min with a new one.
func TestCloseIdleWhileChecked(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var b backend
		inCheck, letGo := make(chan struct{}), make(chan struct{})
		cfg := b.config()
		cfg.Min, cfg.Max = 1, 2
		cfg.Healthcheck = func(_ context.Context, it *item) error {
			inCheck <- struct{}{}
			<-letGo
			return nil
		}
		p := newPool(t, cfg)
		synctest.Wait()
		first := p.idle.At(0).Value().id
		go p.CheckNow()
		<-inCheck
		if n := p.CloseIdle(); n != 0 {
			t.Fatalf("CloseIdle destroyed %d; the only resource is being checked", n)
		}
		close(letGo)
		synctest.Wait()
		s := p.Stats()
		if s.Total != 1 || s.Idle != 1 || s.HealthcheckFailures != 0 || b.destroyed.Load() != 1 {
			t.Fatalf("the checked resource outlived CloseIdle: %+v (destroyed %d)", s, b.destroyed.Load())
		}
		if id := p.idle.At(0).Value().id; id == first {
			t.Fatalf("resource %d, checked through CloseIdle, is idle again", id)
		}
	})
}
