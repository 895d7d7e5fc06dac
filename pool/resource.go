package pool

import (
	"sync/atomic"
	"time"
)

// Resource states. A handle moves idle → acquired → (idle | destroyed);
// Release and Destroy accept only an acquired handle, which is how a double
// Release or Destroy is detected.
const (
	stateIdle int32 = iota
	stateAcquired
	stateReleasing
	stateChecking
	stateDestroyed
	stateParked // see Park
)

// Resource is a handle on one pooled value, held by whoever acquired it until
// Release or Destroy.
//
// The handle is reused by the pool after Release (that is what keeps Acquire
// free of allocations), so a handle must not be used after it was released or
// destroyed. A second Release or Destroy right after the first is detected,
// ignored and counted in [Stats].Misuses; one issued after the resource was
// acquired again by someone else cannot be told apart from that holder's own.
type Resource[T any] struct {
	value T
	pool  *Pool[T]
	state atomic.Int32

	// Guarded by pool.mu while the resource is idle; its holder's while
	// it is acquired (Park and Unpark write idleSince, acquiredAt and
	// parkedFor).
	created    time.Duration // on the pool's clock
	lifetime   time.Duration // MaxLifetime plus this resource's jitter; 0: unlimited
	idleSince  time.Duration
	acquiredAt time.Duration // when last handed out, if the clock was read then; else -1 until the holder's IdleFor reads it
	fresh      bool          // made by the factory and not yet handed out
	slot       int           // index in pool.all
	parkedFor  time.Duration // set by Unpark: how long it was parked, on the coarse clock; else -1
	stolen     bool          // taken from parking by the pool, not yet handed out
	// spare is the waiter r was last handed to, guarded by pool.mu: its
	// goroutine received r from it, so it is done with it by the time r
	// is released, when the pool frees it (freeWaiterLocked). Set while
	// r is handed to a waiter, cleared as r is released.
	spare *waiter[T]

	reuses atomic.Int64 // Unparks (park.go)
	// retired: Retire ran while r was not idle; its Release, Park or
	// check's end destroys it instead of making it idle.
	retired atomic.Bool
}

// Value returns the pooled value.
func (r *Resource[T]) Value() T { return r.value }

// CreatedAt returns when the factory made the value.
func (r *Resource[T]) CreatedAt() time.Time { return r.pool.epoch.Add(r.created) }

// IdleSince returns when the resource was last put back into the pool (for a
// new resource, when it was created). It is meaningful to the holder of an
// acquired resource, and is the basis of "check it if it sat idle long".
func (r *Resource[T]) IdleSince() time.Time { return r.pool.epoch.Add(r.idleSince) }

// IdleFor returns how long the resource sat idle before it was last handed
// out (0 for one that never was idle). It is meant for the holder, and for
// Config.BeforeAcquire, which may use it to check only resources idle long.
//
// It reads the clock if the pool did not as it handed the resource out, and
// keeps that time as the start of the holder's use (see [Stats].UseTime).
// For a resource that was parked (taken back with Unpark, or by an Acquire)
// it is how long it was parked, on the coarse clock, and reads no clock: 0
// when it was parked within the current tick, as good as just released.
func (r *Resource[T]) IdleFor() time.Duration {
	if r.parkedFor >= 0 {
		return r.parkedFor // small enough to be inlined: a parked one is checked at each take
	}
	return r.idleBeforeAcquire()
}

// idleBeforeAcquire is IdleFor for a resource handed out from idle.
func (r *Resource[T]) idleBeforeAcquire() time.Duration {
	if r.acquiredAt < 0 {
		r.acquiredAt = r.pool.clock()
	}
	if d := r.acquiredAt - r.idleSince; d > 0 {
		return d
	}
	return 0
}
