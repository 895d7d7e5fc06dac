package pool

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"
	"time"
)

// TestStress runs goroutines that acquire, release, destroy, give up and
// try, against a factory and a healthcheck that fail at random and a breaker
// flipped at random, then closes the pool under load and checks that the
// accounting adds up and nothing leaked.
func TestStress(t *testing.T) {
	checkNoGoroutineLeak(t)
	var b backend
	cfg := b.config()
	cfg.Min, cfg.Max = 2, 8
	cfg.HealthcheckInterval = time.Millisecond
	cfg.MaxIdleTime = 5 * time.Millisecond
	cfg.MaxLifetime = 50 * time.Millisecond
	cfg.AcquireTimeout = 20 * time.Millisecond
	inner := b.factory
	observing := make(chan struct{}) // the pre-warm waits for the observer
	cfg.Factory = func(ctx context.Context) (*item, error) {
		<-observing
		if rand.IntN(10) == 0 {
			return nil, errFactory
		}
		return inner(ctx)
	}
	cfg.Healthcheck = func(_ context.Context, it *item) error {
		if it.inUse.Load() {
			t.Error("healthcheck of a resource in use")
		}
		if rand.IntN(10) == 0 {
			return errors.New("flaky")
		}
		return nil
	}
	cfg.BeforeRelease = func(it *item) bool { return !it.broken.Load() }
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var obs timings
	p.Observe(obs.observe)
	close(observing)

	stop := make(chan struct{})
	var wg sync.WaitGroup
	for g := 0; g < 32; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 7))
			for {
				select {
				case <-stop:
					return
				default:
				}
				var r *Resource[*item]
				var err error
				switch rng.IntN(10) {
				case 0:
					var ok bool
					if r, ok = p.TryAcquire(); !ok {
						continue
					}
				case 1:
					ctx, cancel := context.WithTimeout(context.Background(), time.Duration(rng.IntN(200))*time.Microsecond)
					r, err = p.Acquire(ctx)
					cancel()
				default:
					r, err = p.Acquire(context.Background())
				}
				if err != nil {
					if !errors.Is(err, errFactory) && !errors.Is(err, ErrTimeout) && !errors.Is(err, ErrClosed) &&
						!errors.Is(err, ErrCircuitOpen) && !errors.Is(err, context.DeadlineExceeded) {
						t.Errorf("unexpected Acquire error: %v", err)
					}
					if errors.Is(err, ErrClosed) {
						return
					}
					continue
				}
				it := r.Value()
				if !it.inUse.CompareAndSwap(false, true) {
					t.Error("resource handed to two holders")
				}
				if rng.IntN(4) == 0 {
					time.Sleep(time.Duration(rng.IntN(100)) * time.Microsecond)
				}
				it.inUse.Store(false)
				switch rng.IntN(20) {
				case 0:
					r.Destroy()
				case 1:
					it.broken.Store(true)
					r.Release()
				default:
					r.Release()
				}
			}
		}()
	}
	// A chaos goroutine flips the breaker now and then.
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(3 * time.Millisecond):
			}
			switch i % 10 {
			case 3:
				p.Deactivate()
			case 4:
				p.Recover()
			case 6:
				p.Activate()
			}
		}
	}()

	time.Sleep(300 * time.Millisecond)
	p.Close() // under load
	close(stop)
	wg.Wait()

	s := p.Stats()
	if s.Total != 0 || s.Active != 0 || s.Idle != 0 || s.Waiting != 0 || s.Creating != 0 {
		t.Fatalf("after Close and every release: %+v", s)
	}
	if s.Created != s.Destroyed || b.live.Load() != 0 || b.maxLive.Load() > 8 {
		t.Fatalf("created %d destroyed %d live %d max live %d", s.Created, s.Destroyed, b.live.Load(), b.maxLive.Load())
	}
	if s.Misuses != 0 || s.CallbackPanics != 0 {
		t.Fatalf("stats: %+v", s)
	}
	// Every duration was counted once, and told to the observer once.
	obs.checkMatches(t, TimingWait, s.WaitTime)
	obs.checkMatches(t, TimingUse, s.UseTime)
	obs.checkMatches(t, TimingCreate, s.CreateTime)
	if s.WaitDuration != s.WaitTime.Sum || s.CreateTime.Count != s.Created+s.CreateErrors ||
		s.WaitTime.Count < s.Acquires+s.Timeouts+s.CanceledAcquires {
		t.Fatalf("durations: %+v", s)
	}
	t.Logf("acquires %d waits %d timeouts %d canceled %d created %d expired %d hc failures %d rejects %d circuit %d",
		s.Acquires, s.Waits, s.Timeouts, s.CanceledAcquires, s.Created, s.Expired, s.HealthcheckFailures, s.ReleaseRejects, s.CircuitRejects)
}
