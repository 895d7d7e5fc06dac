package pool

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
	"time"
)

// TestParkWakeStress hunts a lost wake-up between Park and a waiter that
// queues: a waiter left asleep beside a parked resource. Nothing else
// rescues one here (no healthcheck, no expiry, no CloseIdle): holders park
// and take back their resource, acquire without a deadline of their own,
// and some stop with their resource left parked while the others go on, so
// a lost wake-up hangs an Acquire until the test's long timeout. It runs
// with few resources and more holders than resources, where waiters queue
// while Parks are between their steps, and the word that says whether
// anything may be parked (stealLocked) is cleared and set over and over.
func TestParkWakeStress(t *testing.T) {
	checkNoGoroutineLeak(t)
	for _, tc := range []struct{ max, holders int }{{1, 2}, {1, 5}, {2, 3}, {2, 8}, {3, 16}} {
		t.Run(fmt.Sprintf("max=%d/holders=%d", tc.max, tc.holders), func(t *testing.T) {
			var b backend
			cfg := b.config()
			cfg.Max = tc.max
			p := newPool(t, cfg)
			holder := func(g, rounds int, leaveParked bool, wg *sync.WaitGroup) {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(uint64(g), uint64(tc.max)))
				var parked *Resource[*item]
				for i := 0; i < rounds; i++ {
					r := parked
					parked = nil
					if r == nil || !r.Unpark() {
						ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
						var err error
						r, err = p.Acquire(ctx)
						cancel()
						if err != nil {
							t.Errorf("holder %d round %d: Acquire: %v (a waiter slept beside a parked resource?)", g, i, err)
							return
						}
					}
					it := r.Value()
					if !it.inUse.CompareAndSwap(false, true) {
						t.Error("resource handed to two holders")
					}
					if rng.IntN(4) == 0 {
						runtime.Gosched()
					}
					it.inUse.Store(false)
					switch rng.IntN(10) {
					case 0:
						r.Release()
					case 1:
						if r.Park() {
							r.Return()
						} else {
							r.Release()
						}
					default:
						if r.Park() {
							parked = r
						} else {
							r.Release()
						}
					}
				}
				if parked != nil && !leaveParked {
					if parked.Unpark() {
						parked.Release()
					}
				}
			}
			var wg sync.WaitGroup
			for g := 0; g < tc.holders; g++ {
				wg.Add(1)
				go holder(g, 4000, g%2 == 0, &wg)
			}
			wg.Wait()
			// Holders left resources parked and stopped: newcomers that
			// outnumber the resources get them.
			for g := 100; g < 100+tc.holders; g++ {
				wg.Add(1)
				go holder(g, 500, true, &wg)
			}
			wg.Wait()
			s := p.Stats()
			if s.Active != 0 || s.Waiting != 0 || s.Idle != s.Total || s.Misuses != 0 {
				t.Fatalf("at rest: %+v", s)
			}
			if s.UseTime.Count+s.UntimedUses != s.Acquires {
				t.Fatalf("uses: UseTime.Count %d + UntimedUses %d, acquires %d", s.UseTime.Count, s.UntimedUses, s.Acquires)
			}
			p.Close()
			if b.live.Load() != 0 || b.maxLive.Load() > int64(tc.max) {
				t.Fatalf("after Close: live %d, max live %d", b.live.Load(), b.maxLive.Load())
			}
		})
	}
}

// A waiter that finds nothing parked clears mayBeParked; a resource parked
// after that is found all the same: by an Acquire that finds the ring
// empty, and by a waiter that queues while its Park is between its steps.
func TestParkAfterWordCleared(t *testing.T) {
	var b backend
	cfg := b.config()
	cfg.Max = 1
	p := newPool(t, cfg)
	r := mustAcquire(t, p)
	if !r.Park() {
		t.Fatal("Park refused")
	}
	if !r.Unpark() {
		t.Fatal("Unpark failed")
	}
	acquired := func() chan *Resource[*item] {
		got := make(chan *Resource[*item], 1)
		go func() {
			w, err := p.Acquire(context.Background())
			if err != nil {
				t.Error(err)
			}
			got <- w
		}()
		return got
	}
	receive := func(got chan *Resource[*item]) *Resource[*item] {
		t.Helper()
		select {
		case w := <-got:
			return w
		case <-time.After(5 * time.Second):
			t.Fatal("the waiter was not served")
			return nil
		}
	}
	got := acquired()
	waitFor(t, "the waiter", func() bool { return p.Stats().Waiting == 1 })
	if p.mayBeParked.Load() {
		t.Fatal("a waiter that found nothing parked left mayBeParked set")
	}
	r.Release()
	r = receive(got)
	if !r.Park() {
		t.Fatal("Park refused")
	}
	if !p.mayBeParked.Load() {
		t.Fatal("Park left mayBeParked clear")
	}
	// Taken from parking by an Acquire that finds the ring empty.
	if r2 := mustAcquire(t, p); r2 != r {
		t.Fatal("the parked resource was not taken")
	}
	// Clear the word again (a waiter finds nothing parked), then Park's
	// first step by hand, then a waiter, then Park's second step: it
	// sets the word, sees the waiter and releases the resource to it.
	got = acquired()
	waitFor(t, "the waiter", func() bool { return p.Stats().Waiting == 1 })
	r.Release()
	r = receive(got)
	if p.mayBeParked.Load() {
		t.Fatal("mayBeParked set")
	}
	if !r.state.CompareAndSwap(stateAcquired, stateParked) {
		t.Fatal("not acquired")
	}
	got = acquired()
	waitFor(t, "the waiter", func() bool { return p.Stats().Waiting == 1 })
	p.mayBeParked.Store(true)
	if p.waiters.n.Load() == 0 {
		t.Fatal("no waiter counted")
	}
	if !r.state.CompareAndSwap(stateParked, stateAcquired) {
		t.Fatal("the resource left parking")
	}
	r.Release()
	receive(got).Release()
	// And a waiter that queues after a complete Park takes the resource.
	r = mustAcquire(t, p)
	if !r.Park() {
		t.Fatal("Park refused")
	}
	receive(acquired()).Release()
	if s := p.Stats(); s.Misuses != 0 || s.Active != 0 || s.Idle != 1 {
		t.Fatalf("at rest: %+v", s)
	}
}

// TestStealRescansAfterClear lands a Park in the window TestParkWakeStress
// can only hope to hit: after stealLocked's scan found nothing parked and
// before it clears mayBeParked. The Park sees the word still set and does
// not set it; the clear that follows would leave its resource parked where
// no waiter looks, but for the second scan, which must find it: the
// Acquire gets the resource at once instead of waiting beside it.
func TestStealRescansAfterClear(t *testing.T) {
	var b backend
	cfg := b.config()
	cfg.Max = 1
	p := newPool(t, cfg)
	r, err := p.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// Park and take back: mayBeParked stays set with nothing parked.
	if !r.Park() || !r.Unpark() {
		t.Fatal("Park and Unpark of an uncontended resource refused")
	}
	var (
		once   sync.Once
		ran    bool
		parked bool
	)
	testHookScanned = func() { once.Do(func() { ran, parked = true, r.Park() }) }
	defer func() { testHookScanned = nil }()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	got, err := p.Acquire(ctx)
	// The hook runs on this goroutine, inside Acquire: no race on ran, parked.
	switch {
	case !ran:
		t.Fatalf("the hook never ran (Acquire: %v): the test did not reach the window", err)
	case !parked:
		t.Fatalf("Park inside the window refused (Acquire: %v): the test did not set up the case", err)
	case err != nil:
		t.Fatalf("Acquire beside a resource parked during the steal's clear: %v (the rescan missed it)", err)
	case got != r:
		t.Fatalf("Acquire got %p, want the parked resource %p", got, r)
	}
	got.Release()
}
