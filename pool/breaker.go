package pool

import (
	"fmt"
	"sync"
	"time"
)

// State is the circuit breaker's state.
type State int32

const (
	// Active: the pool works normally.
	Active State = iota
	// Inactive: the circuit is open; Acquire and TryAcquire fail at once
	// with ErrCircuitOpen.
	Inactive
	// Recovering: one trial acquire at a time is let through (others fail
	// with ErrCircuitOpen) until the strategy, or the user, activates or
	// deactivates the pool.
	Recovering
)

// String returns "active", "inactive" or "recovering".
func (s State) String() string {
	switch s {
	case Active:
		return "active"
	case Inactive:
		return "inactive"
	case Recovering:
		return "recovering"
	}
	return fmt.Sprintf("State(%d)", int32(s))
}

// Breaker is the circuit-breaker side of a pool, as a [Strategy] sees it.
// *Pool implements it.
type Breaker interface {
	State() State
	Activate()
	Deactivate()
	Recover()
}

// Strategy drives the circuit breaker. The pool calls ReportSuccess when a
// resource is released and passes BeforeRelease, and ReportFailure when the
// factory fails or a release fails BeforeRelease. Calls come from the
// goroutines doing those things, concurrently, never with the pool's lock
// held, so a strategy may call the Breaker's methods.
type Strategy interface {
	ReportSuccess(b Breaker)
	ReportFailure(b Breaker, err error)
}

var _ Breaker = (*Pool[int])(nil)

// State returns the circuit breaker's state.
func (p *Pool[T]) State() State {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.state
}

// Activate closes the circuit: the pool works normally.
func (p *Pool[T]) Activate() { p.setState(Active) }

// Deactivate opens the circuit: every waiter fails with ErrCircuitOpen, and so
// does every Acquire until Recover or Activate.
func (p *Pool[T]) Deactivate() { p.setState(Inactive) }

// Recover lets one trial acquire at a time through.
func (p *Pool[T]) Recover() { p.setState(Recovering) }

func (p *Pool[T]) setState(s State) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	p.state = s
	p.trial = false
	if s == Inactive {
		for w := p.waiters.popFront(); w != nil; w = p.waiters.popFront() {
			p.stats.circuitRejects++
			w.ch <- result[T]{err: ErrCircuitOpen}
		}
	}
}

// SetStrategy installs s (nil: none) to drive the circuit breaker.
func (p *Pool[T]) SetStrategy(s Strategy) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.strategy = s
}

// ThresholdStrategy is a ready [Strategy]: after Failures consecutive
// failures it deactivates the pool; after CoolDown it lets the pool recover;
// the first success activates it again, and a failure while recovering
// deactivates it for another CoolDown.
type ThresholdStrategy struct {
	failures int
	coolDown time.Duration

	mu          sync.Mutex // protects the fields below
	consecutive int
	timer       *time.Timer
}

// NewThresholdStrategy returns a ThresholdStrategy. failures must be at least
// 1 and coolDown positive.
func NewThresholdStrategy(failures int, coolDown time.Duration) (*ThresholdStrategy, error) {
	if failures < 1 {
		return nil, fmt.Errorf("pool: ThresholdStrategy failures = %d, must be at least 1", failures)
	}
	if coolDown <= 0 {
		return nil, fmt.Errorf("pool: ThresholdStrategy cool-down = %v, must be positive", coolDown)
	}
	return &ThresholdStrategy{failures: failures, coolDown: coolDown}, nil
}

// ReportSuccess resets the failure count and activates a pool that is not
// active.
func (s *ThresholdStrategy) ReportSuccess(b Breaker) {
	s.mu.Lock()
	s.consecutive = 0
	s.mu.Unlock()
	if b.State() != Active {
		b.Activate()
	}
}

// ReportFailure counts a failure and opens the circuit when the threshold is
// reached, or at once when the pool was recovering.
func (s *ThresholdStrategy) ReportFailure(b Breaker, _ error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.consecutive++
	st := b.State()
	if st == Recovering || st == Active && s.consecutive >= s.failures {
		b.Deactivate()
		if s.timer != nil {
			s.timer.Stop()
		}
		// The timer's goroutine exists only while it fires; Recover on a
		// closed pool does nothing.
		s.timer = time.AfterFunc(s.coolDown, b.Recover)
	}
}
