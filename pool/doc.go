// Package pool is a generic resource pool. It knows nothing about databases:
// it creates resources with a factory, hands them out, takes them back, and
// destroys them when they fail a check, grow too old or the pool closes.
//
// What it promises:
//
//   - Laziness: nothing is created until an Acquire needs it, except the
//     Config.Min resources pre-warmed in the background after [New].
//   - A bound: never more than Config.Max resources exist at once, counting
//     idle ones, ones in use and ones being created.
//   - Fairness: waiters are served first come, first served; a released
//     resource goes straight to the oldest waiter and no newcomer overtakes
//     a waiter. One exception: a waiter whose deadline is too near to make
//     use of a resource (less than 4 average holds left) is passed over
//     while one with time waits (see nextWaiterLocked).
//   - Robustness: a factory call in flight is not aborted because the caller
//     that started it gave up; a waiter that gives up never loses a resource
//     handed to it at the same instant; a panicking callback never wedges the
//     pool.
//   - Availability: a caller is refused only when nothing can serve it
//     within its context. While new resources cannot be made (the factory
//     fails, the backend is full), it waits for one in use or for the next
//     factory call; the back-off spaces factory calls, not callers, and the
//     first success ends it for every waiting caller at once. A factory
//     error reaches its caller as it is; every other refusal is an
//     [AcquireError] that says why and wraps the last factory error.
//   - A circuit breaker ([State], [Strategy]) that stops creating resources
//     while the backend is down (an opt-in: Acquire fails fast) or full
//     (Acquire waits for a resource in use, or the next trial), and never
//     refuses an idle one.
//   - Refill: Min and MinIdle are made again as soon as a resource is
//     destroyed, as the back-off allows.
//   - Sharing a full backend: a pool grows at most twofold per round of
//     factory calls; for a minute after it found the backend at its limit
//     (Config.AtLimit), it gives back resources idle longer than
//     Config.IdleTimeUnderPressure and does not park, so that the pools of
//     several instances converge to what each uses; a pool with nothing
//     keeps trying once per cool-down.
//   - Durations that mean the same however the pool is configured and
//     observed: every wait and factory call is in [Stats]' histograms and
//     told to the [Observer]s; every use that ended is either timed (in
//     [Stats].UseTime, told as TimingUse) or counted in
//     [Stats].UntimedUses (a use parking ended or began: parking reads no
//     clock, see [Resource.Park]). Observing does not stop parking.
//
// Idle resources are kept in a ring buffer and reused most recently released
// first, so that a pool larger than its load lets the surplus expire by
// Config.MaxIdleTime.
package pool
