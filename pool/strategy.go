package pool

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"time"
)

// Breaker is the circuit-breaker side of a pool, as a [Strategy] sees it.
// *Pool implements it.
type Breaker interface {
	State() State
	Activate()
	Deactivate()
	Recover()
	Limit()
}

// Event is what the pool tells its [Strategy].
type Event int

const (
	// EventCreated: the factory made a resource.
	EventCreated Event = iota
	// EventCreateFailed: the factory failed, and Config.AtLimit did not
	// say that the backend is full: it is unreachable or refusing.
	EventCreateFailed
	// EventAtLimit: the factory failed and Config.AtLimit says the backend
	// has no room for another connection.
	EventAtLimit
	// EventCheckFailed: an idle resource failed BeforeAcquire (for a caller
	// whose context had not ended) or the background Healthcheck.
	EventCheckFailed
	// EventReleased: a resource came back and passed BeforeRelease.
	EventReleased
	// EventReleaseFailed: a resource failed BeforeRelease.
	EventReleaseFailed
)

// String names the event, for logs.
func (e Event) String() string {
	switch e {
	case EventCreated:
		return "created"
	case EventCreateFailed:
		return "create failed"
	case EventAtLimit:
		return "at limit"
	case EventCheckFailed:
		return "check failed"
	case EventReleased:
		return "released"
	case EventReleaseFailed:
		return "release failed"
	case eventCoolDownEnded:
		return "cool-down ended"
	}
	return fmt.Sprintf("Event(%d)", int(e))
}

// Strategy drives the circuit breaker. The pool calls Report after every
// factory call, failed idle check and release, with the error when there is
// one. Calls come from the goroutines doing those things, concurrently,
// never with the pool's lock held, so a strategy may call the Breaker's
// methods. Report runs on every Release: it must be cheap for
// EventReleased.
type Strategy interface {
	Report(b Breaker, ev Event, err error)
}

// Manual is a [Strategy] that ignores every event: the breaker changes state
// only when driven by hand.
var Manual Strategy = manual{}

type manual struct{}

func (manual) Report(Breaker, Event, error) {}

func (manual) ignoresReleases() {}

// ignoresReleases is implemented by this package's strategies, which do
// nothing on EventReleased and EventReleaseFailed: the pool then spares
// every Release the call.
type ignoresReleases interface{ ignoresReleases() }

// ThresholdStrategy is the ready [Strategy]. It tells three kinds of trouble
// apart:
//
//   - the backend is unreachable or refusing: after Failures failed factory
//     calls in a row it opens the circuit (Inactive); with Failures 0 it
//     never does (a failed trial from Recovering then activates the pool
//     again, so that every caller may dial, as without a breaker). A failed check of an
//     idle resource counts towards the threshold but never opens the circuit
//     by itself: a connection the backend closed while idle (a killed
//     session, an idle timeout) says nothing about the next one, and the
//     factory call that replaces it decides;
//   - the backend is at its own connection limit (EventAtLimit): it stops
//     creating at once (Limited) and the pool serves its callers from the
//     resources it has;
//   - errors of the work done with a resource (EventReleased,
//     EventReleaseFailed): they never move the breaker.
//
// A cool-down after opening or limiting it (a random time between half and
// all of coolDown, so that the pools of several instances of a service do
// not try together) lets one trial factory call through (Recovering); a
// resource created activates the pool again, a failed trial opens or
// limits it again for another cool-down. A pool that has no resource at a
// full backend thus keeps trying, once per cool-down, for the callers that
// wait.
type ThresholdStrategy struct {
	failures int
	coolDown time.Duration

	mu          sync.Mutex // protects the fields below
	consecutive int        // unreachable signals in a row
	timer       *time.Timer
	armed       uint64 // bumped by every state change the strategy makes: a stale timer does nothing
}

// NewThresholdStrategy returns a ThresholdStrategy. failures must not be
// negative (0: the circuit never opens, it only limits) and coolDown must be
// positive.
func NewThresholdStrategy(failures int, coolDown time.Duration) (*ThresholdStrategy, error) {
	if failures < 0 {
		return nil, fmt.Errorf("pool: ThresholdStrategy failures = %d, must be 0 (never open) or more", failures)
	}
	if coolDown <= 0 {
		return nil, fmt.Errorf("pool: ThresholdStrategy cool-down = %v, must be positive", coolDown)
	}
	return &ThresholdStrategy{failures: failures, coolDown: coolDown}, nil
}

func (*ThresholdStrategy) ignoresReleases() {}

// eventCoolDownEnded is the strategy's own event: its timer fired.
const eventCoolDownEnded Event = -1

// Report moves the breaker as the table in [ThresholdStrategy] says.
func (s *ThresholdStrategy) Report(b Breaker, ev Event, _ error) {
	if ev == EventReleased || ev == EventReleaseFailed {
		return // never sent by the pool (ignoresReleases); a user may
	}
	s.step(b, ev, 0)
}

func (s *ThresholdStrategy) step(b Breaker, ev Event, gen uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ev == eventCoolDownEnded && gen != s.armed {
		return // the state changed since this timer was set
	}
	st := b.State()
	s.consecutive = countSignal(s.consecutive, ev)
	next := transition(st, ev, s.failures > 0, s.failures > 0 && s.consecutive >= s.failures)
	if next == st {
		return
	}
	s.armed++
	if s.timer != nil {
		s.timer.Stop()
		s.timer = nil
	}
	if next == Inactive || next == Limited {
		gen := s.armed
		// The timer's goroutine exists only while it fires; a change on a
		// closed pool does nothing.
		d := s.coolDown/2 + rand.N(s.coolDown/2+1)
		s.timer = time.AfterFunc(d, func() { s.step(b, eventCoolDownEnded, gen) })
	}
	switch next {
	case Active:
		b.Activate()
	case Inactive:
		b.Deactivate()
	case Recovering:
		b.Recover()
	case Limited:
		b.Limit()
	}
}

// countSignal returns the count of unreachable signals in a row after ev.
func countSignal(n int, ev Event) int {
	switch ev {
	case EventCreated, EventAtLimit: // the backend answered
		return 0
	case EventCreateFailed, EventCheckFailed:
		return n + 1
	}
	return n
}

// transition is the strategy's table: the state after ev in st, where
// opens tells that the strategy opens the circuit at all (Failures > 0) and
// tripped that the unreachable signals in a row reached the threshold.
func transition(st State, ev Event, opens, tripped bool) State {
	switch ev {
	case EventCreated:
		return Active
	case EventAtLimit:
		return Limited
	case EventCreateFailed:
		switch {
		case !opens && st == Recovering:
			return Active // the limit is gone, or no longer tells: dial as usual
		case opens && (st == Recovering || tripped):
			return Inactive
		}
	case eventCoolDownEnded:
		if st == Inactive || st == Limited {
			return Recovering
		}
	}
	return st
}
