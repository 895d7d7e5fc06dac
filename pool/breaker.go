package pool

import (
	"fmt"
	"time"
)

// State is the circuit breaker's state. In every state an idle resource is
// handed out: the breaker only decides whether the pool may create new
// resources, and what a caller that would need one gets instead. Its
// String is the plain word of circuit breakers, the one errors, log lines
// and metrics use: closed (serving normally), open (refusing new
// resources), half-open (trial creates) and limited (the backend at its
// own connection limit). The Go names are older: read Active as closed,
// Inactive as open, Recovering as half-open.
type State int32

const (
	// Active: the circuit is closed ("closed"); the pool works normally.
	Active State = iota
	// Inactive: the circuit is open ("open") because the backend looks
	// unreachable. No factory call starts. An Acquire that finds no idle
	// resource and nothing in use (or being created or checked) that could
	// come back fails at once with ErrCircuitOpen (wrapping the last
	// factory error): failing fast is what opening the circuit is for.
	// One that can wait for a resource in use waits for it, bounded by its
	// context and Config.AcquireTimeout, whether or not the pool is at
	// Max: the circuit refuses new resources, not the ones there are (at a
	// backend's connection limit, below Max, they are what serves); when
	// the last of them is gone, the callers still waiting fail with
	// ErrCircuitOpen.
	Inactive
	// Recovering: the circuit is half-open ("half-open"): one trial
	// factory call at a time is let through; its outcome, told to the
	// strategy, decides the next state. Meanwhile a caller that would need
	// another new resource waits, as in Limited.
	Recovering
	// Limited ("limited"): the backend is at its own connection limit. No
	// factory call starts; callers are served from the resources in
	// existence: an Acquire that finds none idle waits, bounded by its
	// context and Config.AcquireTimeout, for one in use or for the
	// breaker's next trial (with no resource at all, the trial is what can
	// serve it).
	Limited
)

// String returns "closed" (Active), "open" (Inactive), "half-open"
// (Recovering) or "limited".
func (s State) String() string {
	switch s {
	case Active:
		return "closed"
	case Inactive:
		return "open"
	case Recovering:
		return "half-open"
	case Limited:
		return "limited"
	}
	return fmt.Sprintf("State(%d)", int32(s))
}

// states are the States by their word, for UnmarshalText.
var states = map[string]State{"closed": Active, "open": Inactive, "half-open": Recovering, "limited": Limited}

// MarshalText returns the state's word, as String: a Stats marshalled to
// JSON (or YAML, or a log handler's text) reads "BreakerState":"closed",
// not 0. A value that is no State is an error.
func (s State) MarshalText() ([]byte, error) {
	if s < Active || s > Limited {
		return nil, fmt.Errorf("pool: State(%d) is not a breaker state", int32(s))
	}
	return []byte(s.String()), nil
}

// UnmarshalText reads a word MarshalText writes: closed, open, half-open
// or limited.
func (s *State) UnmarshalText(text []byte) error {
	st, ok := states[string(text)]
	if !ok {
		return fmt.Errorf("pool: %q is not a breaker state (closed, open, half-open, limited)", text)
	}
	*s = st
	return nil
}

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
func (manual) ignoresReleases()             {}

var _ Breaker = (*Pool[int])(nil)

// State returns the circuit breaker's state.
func (p *Pool[T]) State() State {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.state
}

// Activate closes the circuit (Active, "closed"): the pool works normally.
func (p *Pool[T]) Activate() { p.setState(Active) }

// Deactivate opens the circuit (Inactive, "open"): the backend is
// unreachable.
func (p *Pool[T]) Deactivate() { p.setState(Inactive) }

// Recover half-opens the circuit (Recovering, "half-open"): one trial
// factory call at a time.
func (p *Pool[T]) Recover() { p.setState(Recovering) }

// Limit stops creating resources (Limited, "limited"): the backend is
// full.
func (p *Pool[T]) Limit() { p.setState(Limited) }

func (p *Pool[T]) setState(s State) {
	p.notifyMu.Lock() // state changes reach OnStateChange in their order
	defer p.notifyMu.Unlock()
	p.mu.Lock()
	from := p.state
	if p.closed || from == s {
		p.mu.Unlock()
		return
	}
	p.state = s
	p.trial = false
	p.stats.stateChanges++
	cause := p.lastFailure
	// Waiters that need a new resource learn what the new state means
	// for them: a factory call, a wait, or an error. A trial may refill
	// to Min, with or without a caller waiting.
	p.startFactoriesLocked()
	p.fillToMinLocked()
	p.mu.Unlock()
	if p.cfg.OnStateChange != nil {
		p.callOnStateChange(from, s, cause)
	}
}

// SetStrategy installs s (nil: none) to drive the circuit breaker. A nil
// pointer of a Strategy type (a nil *ThresholdStrategy) counts as nil:
// none, as New's Config.Strategy cannot be (New refuses it).
func (p *Pool[T]) SetStrategy(s Strategy) {
	if isNilPointer(s) {
		s = nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.setStrategyLocked(s)
}

func (p *Pool[T]) setStrategyLocked(s Strategy) {
	p.strategy = s
	_, quiet := s.(ignoresReleases)
	p.onRelease = s != nil && !quiet
	p.releaseEvents.Store(p.onRelease)
}

// ignoresReleases is implemented by this package's strategies, which do
// nothing on EventReleased and EventReleaseFailed: the pool then spares
// every Release the call.
type ignoresReleases interface{ ignoresReleases() }

// dialAllowedLocked reports whether a factory call for a caller may start
// now: always while Active (unless backing off), once at a time while
// Recovering.
func (p *Pool[T]) dialAllowedLocked(now time.Duration) bool {
	switch p.state {
	case Active:
		// While refusing, one factory call at a time (see Config.Permanent).
		return !p.backoff.active(now) && (p.creating == 0 || !p.refusingLocked(now))
	case Recovering:
		// The cool-down that led here outranks the back-off: the trial
		// is the next attempt.
		return !p.trial
	}
	return false
}

// refillAllowedLocked is dialAllowedLocked for the pool's own refill, which
// backs off longer (see backoff).
func (p *Pool[T]) refillAllowedLocked(now time.Duration) bool {
	if p.state == Active {
		return !p.backoff.refillActive(now)
	}
	return p.dialAllowedLocked(now)
}
