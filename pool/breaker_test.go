package pool

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

func TestManualBreaker(t *testing.T) {
	var b backend
	p := newPool(t, b.config())
	if p.State() != Active {
		t.Fatalf("new pool is %v", p.State())
	}
	p.Deactivate()
	if _, err := p.Acquire(context.Background()); !errors.Is(err, ErrCircuitOpen) {
		t.Fatalf("Acquire while inactive: %v", err)
	}
	if _, ok := p.TryAcquire(); ok {
		t.Fatal("TryAcquire while inactive succeeded")
	}
	p.Recover()
	trial := mustAcquire(t, p)
	if _, err := p.Acquire(context.Background()); !errors.Is(err, ErrCircuitOpen) {
		t.Fatalf("second acquire during a trial: %v", err)
	}
	trial.Release() // no strategy: the trial ends, another may start
	trial = mustAcquire(t, p)
	trial.Release()
	p.Activate()
	a, b2 := mustAcquire(t, p), mustAcquire(t, p)
	a.Release()
	b2.Release()
	if s := p.Stats(); s.CircuitRejects != 3 {
		t.Fatalf("CircuitRejects = %d, want 3", s.CircuitRejects)
	}
}

func TestDeactivateWakesWaiters(t *testing.T) {
	var b backend
	cfg := b.config()
	cfg.Max = 1
	p := newPool(t, cfg)
	r := mustAcquire(t, p)
	errc := make(chan error, 1)
	go func() {
		_, err := p.Acquire(context.Background())
		errc <- err
	}()
	waitFor(t, "waiter", func() bool { return p.Stats().Waiting == 1 })
	p.Deactivate()
	if err := <-errc; !errors.Is(err, ErrCircuitOpen) {
		t.Fatalf("waiter: %v", err)
	}
	r.Release()
}

type recordingStrategy struct {
	mu                 sync.Mutex
	successes, failure int
	errs               []error
}

func (s *recordingStrategy) ReportSuccess(Breaker) { s.mu.Lock(); s.successes++; s.mu.Unlock() }
func (s *recordingStrategy) ReportFailure(_ Breaker, err error) {
	s.mu.Lock()
	s.failure++
	s.errs = append(s.errs, err)
	s.mu.Unlock()
}

func TestStrategyIsToldWhatHappened(t *testing.T) {
	var b backend
	cfg := b.config()
	cfg.BeforeRelease = func(it *item) bool { return !it.broken.Load() }
	p := newPool(t, cfg)
	var s recordingStrategy
	p.SetStrategy(&s)
	r := mustAcquire(t, p)
	r.Release()
	r = mustAcquire(t, p)
	r.Value().broken.Store(true)
	r.Release()
	r = mustAcquire(t, p)
	r.Destroy() // an explicit Destroy is not reported
	b.failNext.Store(1)
	if _, err := p.Acquire(context.Background()); err == nil {
		t.Fatal("factory failure not reported to the caller")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.successes != 1 || s.failure != 2 || !errors.Is(s.errs[1], errFactory) {
		t.Fatalf("successes %d failures %d errs %v", s.successes, s.failure, s.errs)
	}
}

func TestThresholdStrategy(t *testing.T) {
	if _, err := NewThresholdStrategy(0, time.Second); err == nil {
		t.Fatal("0 failures accepted")
	}
	if _, err := NewThresholdStrategy(1, 0); err == nil {
		t.Fatal("0 cool-down accepted")
	}
	synctest.Test(t, func(t *testing.T) {
		var b backend
		st, err := NewThresholdStrategy(3, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		cfg := b.config()
		cfg.Strategy = st
		cfg.NoBackoff = true // every acquire tries the factory
		p, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()

		b.failNext.Store(3)
		for i := 0; i < 3; i++ {
			if _, err := p.Acquire(context.Background()); !errors.Is(err, errFactory) {
				t.Fatalf("attempt %d: %v", i, err)
			}
		}
		if p.State() != Inactive {
			t.Fatalf("after 3 failures: %v", p.State())
		}
		if _, err := p.Acquire(context.Background()); !errors.Is(err, ErrCircuitOpen) {
			t.Fatalf("while open: %v", err)
		}
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if p.State() != Recovering {
			t.Fatalf("after the cool-down: %v", p.State())
		}
		// A failed trial opens the circuit again at once.
		b.failNext.Store(1)
		if _, err := p.Acquire(context.Background()); !errors.Is(err, errFactory) {
			t.Fatalf("trial: %v", err)
		}
		if p.State() != Inactive {
			t.Fatalf("after a failed trial: %v", p.State())
		}
		time.Sleep(5 * time.Second)
		synctest.Wait()
		r, err := p.Acquire(context.Background())
		if err != nil {
			t.Fatalf("trial after the second cool-down: %v", err)
		}
		r.Release()
		if p.State() != Active {
			t.Fatalf("after a good trial: %v", p.State())
		}
	})
}
