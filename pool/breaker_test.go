package pool

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

var allStates = []State{Active, Inactive, Recovering, Limited}

// setState puts p in s by hand.
func setState(p *Pool[*item], s State) {
	switch s {
	case Active:
		p.Activate()
	case Inactive:
		p.Deactivate()
	case Recovering:
		p.Recover()
	case Limited:
		p.Limit()
	}
}

// TestTransitionTable: the default strategy's table, every state × event,
// with the threshold of unreachable signals reached or not.
func TestTransitionTable(t *testing.T) {
	A, I, R, L := Active, Inactive, Recovering, Limited
	events := []Event{EventCreated, EventCreateFailed, EventAtLimit, EventCheckFailed, EventReleased, EventReleaseFailed, eventCoolDownEnded}
	// want[state][event] for (not tripped, tripped) of a strategy that
	// opens the circuit, and for one that never does (Failures 0: never
	// tripped).
	want := map[State][7][3]State{
		A: {{A, A, A}, {A, I, A}, {L, L, L}, {A, A, A}, {A, A, A}, {A, A, A}, {A, A, A}},
		I: {{A, A, A}, {I, I, I}, {L, L, L}, {I, I, I}, {I, I, I}, {I, I, I}, {R, R, R}},
		R: {{A, A, A}, {I, I, A}, {L, L, L}, {R, R, R}, {R, R, R}, {R, R, R}, {R, R, R}},
		L: {{A, A, A}, {L, I, L}, {L, L, L}, {L, L, L}, {L, L, L}, {L, L, L}, {R, R, R}},
	}
	for _, st := range allStates {
		for i, ev := range events {
			for k, c := range []struct{ opens, tripped bool }{{true, false}, {true, true}, {false, false}} {
				if got := transition(st, ev, c.opens, c.tripped); got != want[st][i][k] {
					t.Errorf("%v + %v (opens %v, tripped %v) → %v, want %v", st, ev, c.opens, c.tripped, got, want[st][i][k])
				}
			}
		}
	}
	// The count of unreachable signals in a row.
	counts := map[Event]int{EventCreated: 0, EventAtLimit: 0, EventCreateFailed: 4, EventCheckFailed: 4,
		EventReleased: 3, EventReleaseFailed: 3, eventCoolDownEnded: 3}
	for ev, n := range counts {
		if got := countSignal(3, ev); got != n {
			t.Errorf("countSignal(3, %v) = %d, want %d", ev, got, n)
		}
	}
}

// TestStrategyStateByEvent drives a real pool into every state and makes
// every event happen for real (a dial in flight finishing, an idle resource
// failing its check, a release), then checks the state the default
// strategy leaves it in, and that an opened or limited circuit recovers
// after the cool-down.
func TestStrategyStateByEvent(t *testing.T) {
	A, I, R, L := Active, Inactive, Recovering, Limited
	events := []Event{EventCreated, EventCreateFailed, EventAtLimit, EventCheckFailed, EventReleased, EventReleaseFailed}
	want := map[State][6]State{ // with a threshold of 1
		A: {A, I, L, A, A, A},
		I: {A, I, L, I, I, I},
		R: {A, I, L, R, R, R},
		L: {A, I, L, L, L, L},
	}
	const coolDown = 5 * time.Second
	for _, st := range allStates {
		for i, ev := range events {
			t.Run(fmt.Sprintf("%v/%v", st, ev), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					b := backend{block: make(chan struct{})}
					cfg := b.config()
					cfg.NoBackoff = true
					cfg.AtLimit = atLimit
					cfg.BeforeAcquire = func(_ context.Context, r *Resource[*item]) bool { return !r.Value().broken.Load() }
					cfg.BeforeRelease = func(it *item) bool { return !it.broken.Load() }
					p := newStrategyPool(t, cfg, 1, coolDown)
					makeEvent(t, p, &b, st, ev)
					synctest.Wait()
					if got := p.State(); got != want[st][i] {
						t.Fatalf("%v + %v → %v, want %v", st, ev, got, want[st][i])
					}
					if got := p.State(); (got == Inactive || got == Limited) && st != got {
						// The strategy changed it: its timer runs.
						time.Sleep(coolDown)
						synctest.Wait()
						if p.State() != Recovering {
							t.Fatalf("after the cool-down: %v", p.State())
						}
					}
				})
			})
		}
	}
}

// newStrategyPool returns a pool driven by a ThresholdStrategy, closed when
// the test (or its synctest bubble) ends.
func newStrategyPool(t *testing.T, cfg Config[*item], failures int, coolDown time.Duration) *Pool[*item] {
	strategy, err := NewThresholdStrategy(failures, coolDown)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Strategy = strategy
	return newPool(t, cfg)
}

// acquireAsync runs Acquire in a goroutine; its outcome arrives on the
// channel.
func acquireAsync(p *Pool[*item]) <-chan result[*item] {
	got := make(chan result[*item], 1)
	go func() {
		r, err := p.Acquire(context.Background())
		got <- result[*item]{r: r, err: err}
	}()
	return got
}

// makeEvent puts p, Active, in st by hand and makes ev happen for real.
// The backend's factory waits for a token on b.block.
func makeEvent(t *testing.T, p *Pool[*item], b *backend, st State, ev Event) {
	ctx := context.Background()
	switch ev {
	case EventCreated, EventCreateFailed, EventAtLimit:
		// A dial starts while Active and ends in st. Its caller may go
		// on waiting (at the limit): it gives up once the strategy heard.
		done := make(chan struct{})
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		go func() {
			defer close(done)
			if r, err := p.Acquire(ctx); err == nil {
				r.Release()
			}
		}()
		synctest.Wait()
		setState(p, st)
		switch ev {
		case EventCreateFailed:
			b.failNext.Store(1)
		case EventAtLimit:
			b.fullNext.Store(1)
		}
		b.block <- struct{}{}
		synctest.Wait()
		cancel()
		<-done
	case EventCheckFailed:
		go func() { b.block <- struct{}{} }()
		r := mustAcquire(t, p)
		synctest.Wait() // the strategy has heard of the dial
		r.Release()
		setState(p, st)
		r.Value().broken.Store(true)
		if _, ok := p.TryAcquire(); ok {
			t.Fatal("a broken idle resource was handed out")
		}
	case EventReleased, EventReleaseFailed:
		go func() { b.block <- struct{}{} }()
		r := mustAcquire(t, p)
		synctest.Wait() // the strategy has heard of the dial
		setState(p, st)
		r.Value().broken.Store(ev == EventReleaseFailed)
		r.Release()
	}
}

// TestBreakerAdmission: what a caller gets in each state, by what the pool
// holds: an idle resource is handed out in every state; a caller that
// needs a new one dials (Active, the Recovering trial), fails at once
// (Inactive), waits for one in use (Limited), or, with none in use, waits
// for the breaker's next trial (Limited); at Max everyone waits.
func TestBreakerAdmission(t *testing.T) {
	type outcome int
	const (
		idle  outcome = iota // handed the idle resource, no factory call
		dials                // a factory call made for it
		fails                // ErrCircuitOpen at once
		waits                // waits, and gets the resource released
		trial                // waits, and gets the trial's resource once Recovering
	)
	cases := []struct {
		name   string
		max    int
		inUse  int  // resources acquired by someone else first
		idle   bool // plus one idle
		expect map[State]outcome
	}{
		{"one idle", 3, 1, true, map[State]outcome{Active: idle, Inactive: idle, Recovering: idle, Limited: idle}},
		{"none", 3, 0, false, map[State]outcome{Active: dials, Inactive: fails, Recovering: dials, Limited: trial}},
		{"one in use", 3, 1, false, map[State]outcome{Active: dials, Inactive: waits, Recovering: dials, Limited: waits}},
		{"all in use", 2, 2, false, map[State]outcome{Active: waits, Inactive: waits, Recovering: waits, Limited: waits}},
	}
	for _, c := range cases {
		for _, st := range allStates {
			t.Run(c.name+"/"+st.String(), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					var b backend
					cfg := b.config()
					cfg.Max = c.max
					p, err := New(cfg)
					if err != nil {
						t.Fatal(err)
					}
					defer p.Close()
					var held []*Resource[*item]
					for range c.inUse {
						held = append(held, mustAcquire(t, p))
					}
					if c.idle {
						mustAcquire(t, p).Release()
					}
					setState(p, st)
					calls := b.calls.Load()
					got := acquireAsync(p)
					synctest.Wait()
					want := c.expect[st]
					if want == waits || want == trial {
						select {
						case res := <-got:
							t.Fatalf("did not wait: %v", res.err)
						default:
						}
						if want == trial {
							if b.calls.Load() != calls {
								t.Fatal("dialled while Limited")
							}
							p.Recover() // as the cool-down's end does
						} else {
							held[0].Release()
							held = held[1:]
						}
					}
					res := <-got
					r, err := res.r, res.err
					switch {
					case want == fails:
						if !errors.Is(err, ErrCircuitOpen) || b.calls.Load() != calls {
							t.Fatalf("got %v after %d factory calls, want ErrCircuitOpen and none", err, b.calls.Load()-calls)
						}
					case err != nil:
						t.Fatalf("got %v, want a resource", err)
					case (want == dials || want == trial) && b.calls.Load() != calls+1, want != dials && want != trial && b.calls.Load() != calls:
						t.Fatalf("%d factory calls for outcome %d", b.calls.Load()-calls, want)
					}
					if r != nil {
						r.Release()
					}
					for _, h := range held {
						h.Release()
					}
				})
			})
		}
	}
}

// TestRecoveringOneTrial: while the trial dial is under way, a second
// caller that needs a new resource waits for it instead of dialling too.
func TestRecoveringOneTrial(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := backend{block: make(chan struct{})}
		p, err := New(b.config())
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		p.Recover()
		got := make(chan *Resource[*item], 2)
		for range 2 {
			go func() {
				r, err := p.Acquire(context.Background())
				if err != nil {
					t.Error(err)
				}
				got <- r
			}()
		}
		synctest.Wait()
		if n := b.calls.Load(); n != 1 {
			t.Fatalf("%d factory calls while Recovering, want the one trial", n)
		}
		b.block <- struct{}{}
		first := <-got
		first.Release() // to the second caller
		second := <-got
		second.Release()
		if b.calls.Load() != 1 {
			t.Fatalf("%d factory calls", b.calls.Load())
		}
	})
}

// TestAtLimitCallerWaits: a dial that fails because the backend is full
// does not fail its caller while a resource in use can serve it; with none
// in use, a caller waits for the breaker's trial after the cool-down (one
// factory call per cool-down, however many wait), and one whose deadline
// passes first gets its context's error, which says the pool is Limited and
// wraps the backend's. The caller a failed trial was made for waits on
// for the next (issue 49: at the limit, a caller with time left waits for
// its turn).
func TestAtLimitCallerWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var b backend
		cfg := b.config()
		cfg.AtLimit = atLimit
		var mu sync.Mutex
		var changes []string
		cfg.OnStateChange = func(from, to State, cause error) {
			mu.Lock()
			changes = append(changes, fmt.Sprintf("%v→%v (%v)", from, to, cause))
			mu.Unlock()
		}
		p := newStrategyPool(t, cfg, 5, time.Second)
		held := mustAcquire(t, p)
		b.fullNext.Store(1)
		got := acquireAsync(p)
		synctest.Wait()
		if p.State() != Limited {
			t.Fatalf("after a dial at the limit: %v", p.State())
		}
		select {
		case res := <-got:
			t.Fatalf("the caller was not kept waiting: %v", res.err)
		default:
		}
		held.Release()
		res := <-got
		if res.err != nil {
			t.Fatalf("the caller was not served the released resource: %v", res.err)
		}
		res.r.Destroy() // now none is in use: nothing can come back

		// A caller whose deadline comes before the trial: its context's
		// error, saying why.
		calls := b.calls.Load()
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		_, err := p.Acquire(ctx)
		cancel()
		var ae *AcquireError
		if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, errFull) || !errors.As(err, &ae) || ae.State != Limited || ae.InUse != 0 {
			t.Fatalf("Limited with none in use, past the deadline: %v, want the deadline wrapping the backend's error", err)
		}
		// Three callers with time: the first trial finds the backend
		// still full (the caller it was made for waits on), the next one
		// serves them all.
		start := time.Now()
		b.fullNext.Store(1)
		var wg sync.WaitGroup
		var refused atomic.Int64
		for range 3 {
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				r, err := p.Acquire(ctx)
				if errors.Is(err, errFull) {
					refused.Add(1)
					r, err = p.Acquire(ctx)
				}
				if err != nil {
					t.Errorf("a caller waiting for the trial: %v", err)
					return
				}
				time.Sleep(time.Millisecond)
				r.Release()
			})
		}
		synctest.Wait()
		if b.calls.Load() != calls {
			t.Fatal("dialled while Limited")
		}
		wg.Wait()
		if d := time.Since(start); d > 2*time.Second {
			t.Fatalf("served after %v: more than two cool-downs", d)
		}
		// The good trial made the pool Active: the two callers behind
		// its own got factory calls of their own at once.
		if n := b.calls.Load() - calls; n != 4 || refused.Load() != 0 {
			t.Fatalf("%d factory calls and %d refusals, want 2 trials and 2 dials, and none refused", n, refused.Load())
		}
		mu.Lock()
		defer mu.Unlock()
		want := []string{"closed→limited (backend full)", "limited→half-open (backend full)", "half-open→limited (backend full)",
			"limited→half-open (backend full)", "half-open→closed (<nil>)"}
		if fmt.Sprint(changes) != fmt.Sprint(want) {
			t.Fatalf("state changes %q, want %q", changes, want)
		}
		if s := p.Stats(); s.StateChanges != 5 || s.CircuitRejects != 0 || s.CanceledAcquires != 1 {
			t.Fatalf("stats: %+v", s)
		}
	})
}

// TestThresholdCounts: failed dials in a row open the circuit at the
// threshold; failed checks of idle resources count but never open it by
// themselves; an answer from the backend (a dial, even one refused at its
// limit) starts the count again.
func TestThresholdCounts(t *testing.T) {
	if _, err := NewThresholdStrategy(-1, time.Second); err == nil {
		t.Fatal("-1 failures accepted")
	}
	if _, err := NewThresholdStrategy(1, 0); err == nil {
		t.Fatal("0 cool-down accepted")
	}
	var b Pool[*item] // a Breaker that is never used as a pool
	s, err := NewThresholdStrategy(3, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		ev   Event
		want State
	}{
		{EventCreateFailed, Active}, {EventCheckFailed, Active}, {EventCheckFailed, Active}, {EventCheckFailed, Active},
		{EventCreated, Active}, {EventCreateFailed, Active}, {EventCreateFailed, Active}, {EventReleased, Active},
		{EventReleaseFailed, Active}, {EventCreateFailed, Inactive}, {EventCreateFailed, Inactive},
	}
	for i, st := range steps {
		s.Report(&b, st.ev, nil)
		if got := b.State(); got != st.want {
			t.Fatalf("step %d (%v): %v, want %v", i, st.ev, got, st.want)
		}
	}
	s.Report(&b, EventAtLimit, nil) // the backend answers: the count starts again
	b.Activate()
	for range 2 {
		s.Report(&b, EventCreateFailed, nil)
	}
	if b.State() != Active {
		t.Fatalf("two failures after an answer: %v", b.State())
	}
	s.mu.Lock()
	s.timer.Stop()
	s.mu.Unlock()

	// Failures 0 never opens the circuit; it still limits, and a failed
	// trial after the limit lets every caller dial again.
	var b0 Pool[*item]
	s0, err := NewThresholdStrategy(0, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	for range 100 {
		s0.Report(&b0, EventCreateFailed, nil)
	}
	if b0.State() != Active {
		t.Fatalf("100 failed dials opened a strategy of Failures 0: %v", b0.State())
	}
	s0.Report(&b0, EventAtLimit, nil)
	if b0.State() != Limited {
		t.Fatalf("at the limit: %v", b0.State())
	}
	b0.Recover() // as the cool-down's end does
	s0.Report(&b0, EventCreateFailed, nil)
	if b0.State() != Active {
		t.Fatalf("a failed trial of a strategy of Failures 0: %v, want active", b0.State())
	}
	s0.mu.Lock()
	if s0.timer != nil {
		t.Error("a timer is left armed in Active")
		s0.timer.Stop()
	}
	s0.mu.Unlock()
}

// TestManualStrategyAndRecovering: driven by hand, a Recovering pool lets
// one trial dial through and stays Recovering until told otherwise.
func TestManualStrategyAndRecovering(t *testing.T) {
	var b backend
	cfg := b.config()
	cfg.Strategy = Manual
	p := newPool(t, cfg)
	p.Deactivate()
	if _, err := p.Acquire(context.Background()); !errors.Is(err, ErrCircuitOpen) {
		t.Fatalf("Acquire while inactive: %v", err)
	}
	if _, ok := p.TryAcquire(); ok {
		t.Fatal("TryAcquire while inactive succeeded")
	}
	p.Recover()
	mustAcquire(t, p).Release()
	if p.State() != Recovering {
		t.Fatalf("Manual: %v", p.State())
	}
	p.Activate()
	if s := p.Stats(); s.CircuitRejects != 1 || s.StateChanges != 3 {
		t.Fatalf("stats: %+v", s)
	}
}

// TestSetStrategyNilPointer: a nil *ThresholdStrategy given to SetStrategy
// counts as none, as documented: the events that follow reach no strategy
// (a nil one would panic at each, which the pool would recover and count)
// and the failures leave the pool Active.
func TestSetStrategyNilPointer(t *testing.T) {
	var b backend
	cfg := b.config()
	cfg.NoBackoff = true
	p := newPool(t, cfg)
	p.SetStrategy((*ThresholdStrategy)(nil))
	b.failNext.Store(3)
	for range 3 {
		if _, err := p.Acquire(context.Background()); !errors.Is(err, errFactory) {
			t.Fatalf("Acquire with a failing factory: %v", err)
		}
	}
	if p.State() != Active {
		t.Fatalf("state %v after failures with no strategy", p.State())
	}
	mustAcquire(t, p).Release()
	if s := p.Stats(); s.CallbackPanics != 0 {
		t.Fatalf("a callback panicked %d times: the nil strategy was called", s.CallbackPanics)
	}
}

// TestStateWords: the states read as circuit breakers' are read
// everywhere (errors, logs, metrics): closed is normal operation, open
// refuses new resources.
func TestStateWords(t *testing.T) {
	for s, want := range map[State]string{Active: "closed", Inactive: "open", Recovering: "half-open", Limited: "limited", State(9): "State(9)"} {
		if got := s.String(); got != want {
			t.Errorf("State(%d).String() = %q, want %q", int32(s), got, want)
		}
	}
	e := &AcquireError{Reason: ErrCircuitOpen, State: Inactive, Max: 1}
	if got := e.Error(); !strings.Contains(got, "circuit breaker open: not creating new resources") || !strings.Contains(got, "(circuit breaker open;") {
		t.Fatalf("%q", got)
	}
}

// TestOpenCircuitWaitsForInUse (issue 37): a pool below Max at a backend's
// connection limit, ThresholdStrategy(3, 2s). Three dials that fail for
// another cause open the circuit while two resources are in use; the
// callers that find none idle wait for those (they serve them as they come
// back) instead of failing with ErrCircuitOpen; once the last resource in
// use is gone, those still waiting fail at once, and a new caller with
// nothing to wait for too.
func TestOpenCircuitWaitsForInUse(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var b backend
		cfg := b.config()
		cfg.Max = 20
		cfg.AtLimit = atLimit
		p := newStrategyPool(t, cfg, 3, 2*time.Second)
		held := []*Resource[*item]{mustAcquire(t, p), mustAcquire(t, p)}
		b.failNext.Store(3)
		for i := range 3 {
			if i > 0 {
				time.Sleep(time.Second) // past the back-off: the next caller dials
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
			_, _ = p.Acquire(ctx) // a dial for it, failed
			cancel()
			synctest.Wait()
		}
		if p.State() != Inactive {
			t.Fatalf("after 3 failed dials: %v, want open", p.State())
		}
		calls, start := b.calls.Load(), time.Now()
		var got []<-chan result[*item]
		for range 3 {
			got = append(got, acquireAsync(p))
			synctest.Wait() // queued in this order
		}
		for i, g := range got {
			select {
			case res := <-g:
				t.Fatalf("caller %d was refused with 2 resources in use: %v", i, res.err)
			default:
			}
		}
		held[0].Release() // served to the first
		res := <-got[0]
		if res.err != nil {
			t.Fatalf("the first caller was not served the released resource: %v", res.err)
		}
		res.r.Release() // and on to the second
		res = <-got[1]
		if res.err != nil {
			t.Fatalf("the second caller: %v", res.err)
		}
		res.r.Destroy()
		synctest.Wait()
		select {
		case res := <-got[2]:
			t.Fatalf("the third caller did not wait for the one still in use: %v", res.err)
		default:
		}
		held[1].Destroy() // the last in use: nothing can serve the third now
		if res := <-got[2]; !errors.Is(res.err, ErrCircuitOpen) || !errors.Is(res.err, errFactory) {
			t.Fatalf("with nothing left in use: %v, want ErrCircuitOpen wrapping the factory's error", res.err)
		}
		if _, err := p.Acquire(context.Background()); !errors.Is(err, ErrCircuitOpen) {
			t.Fatalf("a new caller with nothing in use: %v, want ErrCircuitOpen", err)
		}
		if b.calls.Load() != calls || time.Since(start) != 0 {
			t.Fatalf("%d factory calls and %v while open", b.calls.Load()-calls, time.Since(start))
		}
		if s := p.Stats(); s.CircuitRejects != 2 {
			t.Fatalf("circuit rejects %d, want 2", s.CircuitRejects)
		}
	})
}
