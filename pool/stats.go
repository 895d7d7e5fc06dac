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
