package pool

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// timings records what an Observer is told, per Timing.
type timings struct {
	mu  sync.Mutex
	n   [3]int64
	sum [3]time.Duration
	max [3]time.Duration
}

func (o *timings) observe(t Timing, d time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.n[t]++
	o.sum[t] += d
	o.max[t] = max(o.max[t], d)
}

func (o *timings) get(t Timing) (int64, time.Duration, time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.n[t], o.sum[t], o.max[t]
}

// checkMatches fails unless the observer was told exactly what the
// histogram counted.
func (o *timings) checkMatches(t *testing.T, tm Timing, h Histogram) {
	t.Helper()
	n, sum, _ := o.get(tm)
	if n != h.Count || sum != h.Sum {
		t.Errorf("%v: observer told %d durations summing %v; histogram %d, %v", tm, n, sum, h.Count, h.Sum)
	}
}

// TestDurationsCounted walks a pool through each kind of wait, use and
// create, and checks the histograms, WaitDuration and an Observer against
// what happened.
func TestDurationsCounted(t *testing.T) {
	var b backend
	cfg := b.config()
	cfg.Max = 1
	// Long enough that a waiter is served by the release it waits for
	// on a loaded machine, whose scheduler can stall a goroutine for
	// hundreds of milliseconds.
	cfg.AcquireTimeout = 2 * time.Second
	cfg.MaxIdleTime = time.Hour // the clock is read at every acquire: every use is timed
	p := newPool(t, cfg)
	var obs timings
	stop := p.Observe(obs.observe)

	// A create and a wait for it: the first Acquire finds nothing idle.
	r := mustAcquire(t, p)
	time.Sleep(5 * time.Millisecond)
	r.Release()           // a use of at least 5ms
	r = mustAcquire(t, p) // served at once: a wait of 0

	// A wait that times out, and one whose context is cancelled.
	if _, err := p.Acquire(context.Background()); !errors.Is(err, ErrTimeout) {
		t.Fatalf("want ErrTimeout, got %v", err)
	}
	// The cancel comes once the caller waits: a deadline could pass
	// before Acquire starts, which then fails without waiting.
	ctx, cancel := context.WithCancel(context.Background())
	canceled := make(chan error)
	go func() {
		_, err := p.Acquire(ctx)
		canceled <- err
	}()
	waitFor(t, "a waiter to cancel", func() bool { return p.Stats().Waiting == 1 })
	time.Sleep(20 * time.Millisecond)
	cancel()
	if err := <-canceled; !errors.Is(err, context.Canceled) {
		t.Fatalf("want the context's error, got %v", err)
	}
	// A waiter served by a release.
	got := make(chan *Resource[*item])
	go func() {
		r, err := p.Acquire(context.Background())
		if err != nil {
			t.Error(err)
		}
		got <- r
	}()
	waitFor(t, "a waiter", func() bool { return p.Stats().Waiting == 1 })
	time.Sleep(2 * time.Millisecond)
	r.Release()
	r = <-got
	r.Destroy() // a use ended by Destroy

	s := p.Stats()
	if s.WaitTime.Count != 5 || s.Waits != 4 || s.Acquires != 3 || s.Timeouts != 1 || s.CanceledAcquires != 1 {
		t.Fatalf("wait count %d, stats %+v", s.WaitTime.Count, s)
	}
	if s.WaitTime.Buckets[0] < 1 {
		t.Errorf("the acquire served at once is not a wait of 0: %v", s.WaitTime.Buckets)
	}
	// The timed-out and the cancelled waits are in WaitDuration: at least
	// 2s + 20ms, plus the waiter's 2ms.
	if s.WaitDuration != s.WaitTime.Sum || s.WaitDuration < 2022*time.Millisecond {
		t.Errorf("WaitDuration %v, histogram sum %v", s.WaitDuration, s.WaitTime.Sum)
	}
	if q := s.WaitTime.Quantile(1); q < 1500*time.Millisecond {
		t.Errorf("longest wait at most %v: the timeout is missing", q)
	}
	if s.UseTime.Count != 3 || s.UseTime.Sum < 7*time.Millisecond {
		t.Errorf("use: %+v", s.UseTime)
	}
	if s.CreateTime.Count != 1 || s.Created != 1 {
		t.Errorf("create: %+v, created %d", s.CreateTime, s.Created)
	}
	obs.checkMatches(t, TimingWait, s.WaitTime)
	obs.checkMatches(t, TimingUse, s.UseTime)
	obs.checkMatches(t, TimingCreate, s.CreateTime)

	// After stop, the observer hears nothing; the histograms go on.
	stop()
	stop()
	mustAcquire(t, p).Release()
	if n, _, _ := obs.get(TimingWait); n != 5 {
		t.Errorf("observer told after stop: %d waits", n)
	}
	if s := p.Stats(); s.WaitTime.Count != 6 || s.CreateTime.Count != 2 {
		t.Errorf("after stop: wait %d create %d", s.WaitTime.Count, s.CreateTime.Count)
	}
}

// TestUseTimedWithoutExpiry: when nothing expires, the acquire of an idle
// resource reads no clock, so its use is timed only if IdleFor read it.
func TestUseTimedWithoutExpiry(t *testing.T) {
	var b backend
	p := newPool(t, b.config())
	mustAcquire(t, p).Release() // made for a waiter: timed
	mustAcquire(t, p).Release() // from idle: not timed
	r := mustAcquire(t, p)
	time.Sleep(2 * time.Millisecond)
	if d := r.IdleFor(); d <= 0 {
		t.Fatalf("IdleFor = %v", d)
	}
	time.Sleep(2 * time.Millisecond)
	r.Release() // timed from IdleFor's clock read
	s := p.Stats()
	if s.Acquires != 3 || s.UseTime.Count != 2 || s.UseTime.Sum < 2*time.Millisecond || s.UseTime.Sum > time.Minute {
		t.Fatalf("acquires %d, use %+v", s.Acquires, s.UseTime)
	}
}

// TestFailedCreateAndRejectedIdleCounted: a failed factory call is a create
// duration, and an idle resource rejected by BeforeAcquire or found expired
// is not an acquire served at once (the Acquire goes on). On the bubble's
// clock: the idle resource of the first part has not expired yet, and that
// of the second has, however busy the machine.
func TestFailedCreateAndRejectedIdleCounted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var b backend
		cfg := b.config()
		cfg.Max = 2
		cfg.MaxLifetime = time.Second
		cfg.NoBackoff = true // the caller gets its dial's error
		var reject bool
		cfg.BeforeAcquire = func(context.Context, *Resource[*item]) bool { return !reject }
		p := newPool(t, cfg)

		b.failNext.Store(1)
		if _, err := p.Acquire(context.Background()); !errors.Is(err, errFactory) {
			t.Fatalf("want the factory's error, got %v", err)
		}
		s := p.Stats()
		if s.CreateTime.Count != 1 || s.CreateErrors != 1 || s.WaitTime.Count != 1 {
			t.Fatalf("after a failed create: %+v", s)
		}
		waitFor(t, "the back-off to end", func() bool {
			r, err := p.Acquire(context.Background())
			if err == nil {
				r.Release()
			}
			return err == nil
		})
		s = p.Stats()
		reject = true
		r := mustAcquire(t, p) // the idle one is rejected, a new one made for a wait
		r.Release()
		s2 := p.Stats()
		if s2.WaitTime.Count-s.WaitTime.Count != 1 || s2.ReleaseRejects-s.ReleaseRejects != 1 {
			t.Fatalf("rejected idle: waits %d → %d, rejects %d → %d", s.WaitTime.Count, s2.WaitTime.Count, s.ReleaseRejects, s2.ReleaseRejects)
		}
		reject = false
		time.Sleep(1100 * time.Millisecond) // the idle one outlives MaxLifetime
		r = mustAcquire(t, p)
		r.Release()
		s3 := p.Stats()
		if s3.WaitTime.Count-s2.WaitTime.Count != 1 || s3.Expired-s2.Expired != 1 || s3.ReleaseRejects != s2.ReleaseRejects {
			t.Fatalf("expired idle: waits %d → %d, expired %d → %d", s2.WaitTime.Count, s3.WaitTime.Count, s2.Expired, s3.Expired)
		}
	})
}

// TestObserveConcurrently adds and removes observers while the pool works.
func TestObserveConcurrently(t *testing.T) {
	var b backend
	cfg := b.config()
	cfg.Max = 4
	p := newPool(t, cfg)
	var wg sync.WaitGroup
	done := make(chan struct{})
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				mustAcquire(t, p).Release()
			}
		}()
	}
	var all timings
	for range 200 {
		var o timings
		stop := p.Observe(o.observe)
		stopAll := p.Observe(all.observe)
		stop()
		stopAll()
	}
	close(done)
	wg.Wait()
	if p.observers.list.Load() != nil {
		t.Fatal("observers left after every stop")
	}
	if p.Observe(nil) == nil {
		t.Fatal("Observe(nil) returned a nil stop")
	}
}
