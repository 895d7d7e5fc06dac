package pool

import "time"

// Stats is a snapshot of a pool's gauges and cumulative counters.
type Stats struct {
	// Gauges.
	Total    int // resources in existence: idle + in use + being created or checked
	Idle     int // idle resources
	Active   int // resources handed out and not yet released
	Creating int // factory calls in flight
	Waiting  int // Acquire calls waiting
	Max      int // the configured Max
	State    State

	// Why new resources cannot be made, if they cannot: the factory
	// calls failed in a row (0: the last one succeeded), and the last
	// one's error (nil after a success).
	CreateFailures  int
	LastCreateError error

	// Counters since New.
	Acquires            int64         // hand-outs: successful Acquire and TryAcquire calls, and Unparks that took a parked resource back
	Waits               int64         // Acquire calls that had to wait
	WaitDuration        time.Duration // total time Acquire calls waited, served or not
	CanceledAcquires    int64         // Acquire calls whose context ended while waiting
	Timeouts            int64         // Acquire calls that failed with ErrTimeout
	CircuitRejects      int64         // Acquire calls that failed with ErrCircuitOpen
	Created             int64         // resources the factory made
	CreateErrors        int64         // factory calls that failed
	Destroyed           int64         // resources destroyed, for any reason
	Expired             int64         // of which by MaxLifetime or MaxIdleTime (found idle, or at release)
	HealthcheckFailures int64         // of which by a failed Healthcheck
	ReleaseRejects      int64         // of which by BeforeRelease or BeforeAcquire saying no
	CallbackPanics      int64         // user callbacks that panicked (each is recovered)
	Misuses             int64         // Release or Destroy of a handle not held
	BackoffRejects      int64         // acquires refused with ErrBackoff: nothing could serve them before their deadline
	FailFastRejects     int64         // acquires refused or failed as they waited, with nothing in use, after a permanent failure (ErrPermanent) or a timed-out factory call
	IdleTrimmed         int64         // of Destroyed: given back early while the backend was at its limit: idle resources (see Config.IdleTimeUnderPressure), and released ones above the share (SetShare)
	StateChanges        int64         // changes of State

	// Durations since New, in fixed buckets (see [Observer] to be told of
	// each one as it is measured).
	WaitTime   Histogram // every Acquire's wait, as TimingWait; one served at once from idle counts as 0
	UseTime    Histogram // how long resources were held, as TimingUse, for the uses that were timed (see UntimedUses)
	CreateTime Histogram // factory calls, failed ones included, as TimingCreate

	// UntimedUses counts the uses that ended without being timed, so that
	// UseTime.Count + UntimedUses = Acquires - Active (every hand-out that
	// ended) whatever the configuration and the observers. A use is timed
	// when the pool read the clock as it began (to a waiter, by TryAcquire,
	// from idle when MaxLifetime or MaxIdleTime is set) or IdleFor read it
	// since, and it ended with Release, Destroy or Reject. Untimed: a use
	// that ended with Park or began with Unpark (parking reads no clock:
	// see [Resource.Park]), one that began from idle with no clock read,
	// and a hand-out refused by BeforeAcquire or found expired before its
	// holder had it. A snapshot taken while holders park and unpark may be
	// off by the few in flight.
	UntimedUses int64
}

// Stats returns a snapshot of the pool's gauges and counters.
func (p *Pool[T]) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := p.stats
	// Resources taken back with Unpark are acquires served at once, counted
	// on each resource so that Unpark takes no lock.
	parked := 0
	for _, r := range p.all {
		c.reuses += r.reuses.Load()
		if r.state.Load() == stateParked {
			parked++
		}
	}
	c.acquires += c.reuses
	c.immediate += c.reuses
	// A park ended a use, untimed; it ended since by Unpark (a reuse), by
	// the pool (parkEnds), or not yet (see park.go).
	c.untimed += c.reuses + c.parkEnds + int64(parked)
	// Acquires served at once from idle are waits of 0, counted here
	// rather than on their path.
	c.waitTime.Buckets[0] += c.immediate
	c.waitTime.Count += c.immediate
	return Stats{
		Total:               p.total,
		Idle:                p.idle.Len() + parked,
		Active:              p.acquired - parked,
		Creating:            p.creating,
		Waiting:             p.waiters.len(),
		Max:                 p.cfg.Max,
		State:               p.state,
		CreateFailures:      p.backoff.failures,
		LastCreateError:     p.lastFailure,
		Acquires:            c.acquires,
		Waits:               c.waits,
		WaitDuration:        c.waitDuration,
		CanceledAcquires:    c.canceled,
		Timeouts:            c.timeouts,
		CircuitRejects:      c.circuitRejects,
		Created:             c.created,
		CreateErrors:        c.createErrors,
		Destroyed:           c.destroyed,
		Expired:             c.expired,
		HealthcheckFailures: c.hcFailures,
		ReleaseRejects:      c.releaseRejects,
		CallbackPanics:      c.panics,
		Misuses:             p.misuses.Load(),
		BackoffRejects:      c.backoffRejects,
		FailFastRejects:     c.failFast,
		IdleTrimmed:         c.trimmed,
		StateChanges:        c.stateChanges,
		WaitTime:            c.waitTime,
		UseTime:             c.useTime,
		UntimedUses:         c.untimed,
		CreateTime:          c.createTime,
	}
}

// Count returns the number of resources in existence: idle, in use and being
// created or checked.
func (p *Pool[T]) Count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.total
}

// IdleCount returns the number of idle resources.
func (p *Pool[T]) IdleCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.idleLocked()
}

// ActiveCount returns the number of resources handed out and not yet
// released or destroyed.
func (p *Pool[T]) ActiveCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.acquired - p.parkedLocked()
}

// InUse returns the values of the resources handed out and not yet
// released or destroyed (parked ones are not).
func (p *Pool[T]) InUse() []T {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.inUseLocked()
}
