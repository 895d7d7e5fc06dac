package pool

import (
	"context"
	"fmt"
	"reflect"
	"time"
)

// DefaultMax is the pool size when Config.Max is 0.
const DefaultMax = 10

// DefaultPermanentGrace is Config.PermanentGrace's default: longer than a
// password rotation's window or a server's restart usually lasts.
const DefaultPermanentGrace = 5 * time.Second

// DefaultHealthcheckTimeout bounds one Healthcheck call when
// Config.HealthcheckTimeout is 0.
const DefaultHealthcheckTimeout = 5 * time.Second

// DefaultIdleTimeUnderPressure is Config.IdleTimeUnderPressure's default.
const DefaultIdleTimeUnderPressure = time.Second

// Config configures a [Pool]. Only Factory is required; the zero value of
// every other field is a documented default.
type Config[T any] struct {
	// Factory creates a resource. Its context carries the values of the
	// context of the Acquire that needed it (a background context for the
	// pool's own refill), but not its deadline or cancellation: a dial in
	// flight goes on when the caller that needed it gives up, and serves
	// the next one. It is cancelled when the pool closes, and when its
	// caller gives up while the backend is silent (the last call timed
	// out), as a plain driver's dial ends with its caller. An error it
	// returns reaches the caller as it is (see Acquire).
	Factory func(ctx context.Context) (T, error)

	// Destructor, if set, is called once for every resource the pool
	// destroys.
	Destructor func(T)

	// Healthcheck, if set, is called every HealthcheckInterval for each idle
	// resource (never for one in use); a resource that fails it is
	// destroyed.
	Healthcheck func(ctx context.Context, v T) error

	// BeforeAcquire, if set, is called before an idle resource is handed
	// out, with the context of the Acquire (TryAcquire: a background
	// context) so that a check bounded by it never outlasts the caller;
	// false destroys the resource and Acquire tries the next one. It is
	// called for every resource taken from idle, including those made by
	// the pre-warm or the refill to Min that were never handed out, and not
	// for one the factory has just made for the caller. r.IdleFor tells how
	// long the resource sat idle.
	BeforeAcquire func(ctx context.Context, r *Resource[T]) bool

	// Begun, if set, reports whether the Acquire with ctx continues work
	// already begun (a caller's earlier Acquires served the same unit of
	// work). Whenever callers wait, those of work begun are served before
	// those of new work, FIFO within each class, so that under overload
	// the work begun finishes rather than all of it advancing together.
	// It is called only when an Acquire must wait, under the pool's lock:
	// it must be quick, and must not call the pool.
	Begun func(ctx context.Context) bool

	// BeforeRelease, if set, is called by Release; false destroys the
	// resource instead of returning it to the pool.
	BeforeRelease func(v T) bool

	// Min resources are created in the background after New, and again
	// as soon as one is destroyed (as the back-off allows), not only by
	// the healthcheck. Default 0.
	Min int

	// Max bounds the resources in existence: idle, in use and being
	// created. Default DefaultMax.
	Max int

	// AcquireTimeout bounds the wait of one Acquire; the error is
	// ErrTimeout. 0: only the caller's context bounds it.
	AcquireTimeout time.Duration

	// HealthcheckInterval is the period of the background healthcheck
	// (expiry, Healthcheck, refill to Min). 0: no background work at all.
	HealthcheckInterval time.Duration

	// HealthcheckTimeout bounds one Healthcheck call. Default
	// DefaultHealthcheckTimeout.
	HealthcheckTimeout time.Duration

	// MaxLifetime destroys a resource this long after it was created, when
	// it is next idle. 0: unlimited.
	MaxLifetime time.Duration

	// MaxLifetimeJitter adds to each resource's MaxLifetime a random
	// duration in [0, MaxLifetimeJitter), drawn when it is created, so that
	// resources created together (the pre-warm to Min) do not all expire
	// together. 0: none.
	MaxLifetimeJitter time.Duration

	// MinIdle resources are kept idle, as far as Max allows: the pre-warm,
	// the destruction of a resource and the healthcheck create resources
	// while fewer are idle (or being created). Default 0.
	MinIdle int

	// MaxIdleTime destroys a resource that has been idle this long, as
	// long as Min resources and MinIdle idle ones remain (the refill would
	// only open another at once). 0: unlimited.
	MaxIdleTime time.Duration

	// IdleTimeUnderPressure is the idle time after which a resource is
	// given back, beyond Min and MinIdle, for a minute after a factory
	// call found the backend at its limit (AtLimit): the room serves the
	// other pools that share the backend and have none. Default
	// DefaultIdleTimeUnderPressure. It does nothing without AtLimit.
	IdleTimeUnderPressure time.Duration

	// Strategy, if set, drives the circuit breaker from the start; see
	// [Pool.SetStrategy].
	Strategy Strategy

	// AtLimit, if set, tells whether a factory error means that the
	// backend refused a new resource because it is at its own limit (it is
	// up, and full): the strategy hears EventAtLimit instead of
	// EventCreateFailed, and while the pool is Limited the caller that
	// needed the resource waits for one in use instead of getting the
	// error. The pool knows nothing of what the errors mean; its user does.
	AtLimit func(err error) bool

	// Permanent, if set, tells whether a factory error is permanent: the
	// backend refuses for a cause that calling the factory again the same
	// way does not cure (a wrong password, an unknown database, nothing
	// listening). Such a failure fails at once every caller that only a
	// new resource could serve (no resource in use that could come back
	// to it), with an *AcquireError matching ErrPermanent that wraps the
	// factory's error, and such callers keep failing at once until a
	// factory call succeeds; meanwhile factory calls go on one at a time,
	// spaced by the back-off, each for a caller that came when the last
	// back-off had ended (the callers that come while it runs wait for
	// it). A pool that created a resource before waits PermanentGrace
	// first, as for any failure: what worked may work again (a password
	// rotation, a restart). The pool knows nothing of what the errors
	// mean; its user does.
	Permanent func(err error) bool

	// PermanentGrace is how long a pool that has created a resource before
	// goes on treating permanent failures (see Permanent) as transient
	// ones, counted from the first failure of the run. Default
	// DefaultPermanentGrace.
	PermanentGrace time.Duration

	// OnStateChange, if set, is called after every change of the circuit
	// breaker's state, in order, with the last factory error (nil if
	// none): to log it, say. It must not change the state itself.
	OnStateChange func(from, to State, cause error)

	// BackoffMin and BackoffMax space factory calls after failures: after
	// the n-th failure in a row, the next factory call for a waiting
	// caller starts a random time between half and all of
	// BackoffMin·2^(n-1), capped at BackoffMax, after the newest call
	// started (the pool's own refill backs off further, up to 2s or
	// BackoffMax), and each call started meanwhile pushes the next one on
	// as much: the back-off spaces the factory calls, not the callers. A caller that needs a new resource
	// meanwhile waits, within its context and AcquireTimeout, for a
	// resource in use or for its turn of factory call; it gets that
	// call's error when it fails with nothing in use, and is refused
	// (ErrBackoff) at once only when nothing is in use and the call would
	// come after its deadline. The first success ends the back-off, and
	// every waiting caller gets its factory call at once. Defaults DefaultBackoffMin and
	// DefaultBackoffMax. NoBackoff turns it off: then a caller whose
	// factory call failed gets its error at once.
	BackoffMin, BackoffMax time.Duration
	NoBackoff              bool
}

// validate checks c and fills in defaults.
func (c *Config[T]) validate() error {
	if c.Factory == nil {
		return fmt.Errorf("pool: Config.Factory is required")
	}
	if c.Max < 0 {
		return fmt.Errorf("pool: Config.Max = %d, must be at least 1 (or 0 for the default %d)", c.Max, DefaultMax)
	}
	if c.Max == 0 {
		c.Max = DefaultMax
	}
	if c.Min < 0 {
		return fmt.Errorf("pool: Config.Min = %d, must not be negative", c.Min)
	}
	if c.Min > c.Max {
		return fmt.Errorf("pool: Config.Min = %d is greater than Config.Max = %d", c.Min, c.Max)
	}
	if c.MinIdle < 0 || c.MinIdle > c.Max {
		return fmt.Errorf("pool: Config.MinIdle = %d, must be between 0 and Config.Max = %d", c.MinIdle, c.Max)
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"AcquireTimeout", c.AcquireTimeout},
		{"HealthcheckInterval", c.HealthcheckInterval},
		{"HealthcheckTimeout", c.HealthcheckTimeout},
		{"MaxLifetime", c.MaxLifetime},
		{"MaxLifetimeJitter", c.MaxLifetimeJitter},
		{"MaxIdleTime", c.MaxIdleTime},
		{"IdleTimeUnderPressure", c.IdleTimeUnderPressure},
		{"PermanentGrace", c.PermanentGrace},
		{"BackoffMin", c.BackoffMin},
		{"BackoffMax", c.BackoffMax},
	} {
		if d.v < 0 {
			return fmt.Errorf("pool: Config.%s = %v, must not be negative", d.name, d.v)
		}
	}
	if c.HealthcheckTimeout == 0 {
		c.HealthcheckTimeout = DefaultHealthcheckTimeout
	}
	if c.IdleTimeUnderPressure == 0 {
		c.IdleTimeUnderPressure = DefaultIdleTimeUnderPressure
	}
	if c.PermanentGrace == 0 {
		c.PermanentGrace = DefaultPermanentGrace
	}
	if c.BackoffMin == 0 {
		c.BackoffMin = DefaultBackoffMin
	}
	if c.BackoffMax == 0 {
		c.BackoffMax = DefaultBackoffMax
	}
	if c.BackoffMax < c.BackoffMin {
		return fmt.Errorf("pool: Config.BackoffMax = %v is less than Config.BackoffMin = %v", c.BackoffMax, c.BackoffMin)
	}
	if c.NoBackoff {
		c.BackoffMin, c.BackoffMax = 0, 0
	}
	if isNilPointer(c.Strategy) {
		return fmt.Errorf("pool: Config.Strategy is a nil %T (leave it nil for no strategy)", c.Strategy)
	}
	return nil
}

// isNilPointer reports whether v, an interface value, holds a nil pointer:
// not nil itself, but every method called on it would fail.
func isNilPointer(v any) bool {
	r := reflect.ValueOf(v)
	return r.Kind() == reflect.Pointer && r.IsNil()
}
