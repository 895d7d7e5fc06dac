package pool

import "fmt"

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
