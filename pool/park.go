package pool

import "time"

// Parking: a holder that will likely want the same resource again soon (a
// logical connection that runs one statement after another) may end its use
// with Park instead of Release. The resource is then free for anyone, but
// stays out of the idle ring and off the pool's lock: Unpark takes it back
// with one atomic operation, and an Acquire that finds the ring empty, or a
// waiter that arrives, takes it (steals it) under the lock. A parked
// resource counts as idle in every gauge.
//
// Neither reads the clock, which costs as much as the rest of a Park and
// Unpark together: they read a coarse clock instead, which a goroutine of
// the pool advances every coarseTick once anything was parked. Lifetimes and
// idle times of parked resources are known to within that.
//
// No waiter waits while a resource is parked, so a holder that takes its
// resource back never overtakes one: Park refuses while anyone waits, and a
// waiter, once counted, looks for parked resources before it sleeps. Both
// sides write first (the state, the count of waiters) and read the other's
// word after, with sequentially consistent atomics: at least one sees the
// other.
//
// Parking and the durations: a use that ends with Park, or begins with
// Unpark, is not timed (no TimingUse, not in [Stats].UseTime): timing it
// would cost the two clock reads parking saves (measured 2026-11-23 on the
// 2-core VM, where a clock read is 26 ns and a serial fake-server Exec 330
// ns through plain database/sql: reading it in Park and Unpark added 6%
// instructions per Exec and moved BenchmarkInterleaved's ratio to plain
// from 1.18 to 1.34 for Exec, 1.17 to 1.26 for Query). It is counted
// instead, in [Stats].UntimedUses, so that UseTime.Count + UntimedUses is
// every use that ended (Acquires - Active) whatever else is configured.
// An Observer does not stop parking (it is told of the durations the pool
// measures, and these are not measured): registering one (an exporter)
// changes neither the numbers nor whether holders park. It does cost a
// holder that parks what the observer itself costs: Unpark tells it a wait
// of 0 (TimingWait), as an Acquire served from idle does. Only
// what must see each release stops it: BeforeRelease, a strategy that
// hears of releases, and the pressure of pressure.go.
//
// The count costs Park and Unpark nothing: a park ends in exactly one way
// (Unpark takes it back, counted on the resource as reuses; the pool takes
// it under mu, or Unpark finds it expired, counted in parkEnds; or it is
// still parked, which Stats counts), so Stats adds those up.

// coarseTick is the resolution of the coarse clock.
const coarseTick = 100 * time.Millisecond

// Park ends the holder's use of r and leaves r where the holder can take it
// back with Unpark, until anyone else takes it. It reports false when r
// cannot be parked now (someone waits for a resource, the pool is closing,
// BeforeRelease or the strategy wants to see each release, the backend was
// found full lately (see pressure.go), r has outlived MaxLifetime by the
// coarse clock):
// the holder still has r, and must Release or Destroy it.
//
// After Park the handle, like a released one, must not be used except for
// Unpark. The use that ends is not timed: it counts in [Stats].UntimedUses.
func (r *Resource[T]) Park() bool {
	p := r.pool
	if !p.parkable() || !p.coarseOn.Load() && !p.startCoarse() {
		return false
	}
	if r.state.Load() != stateAcquired {
		p.misuse() // parked or released already: another holder may read idleSince
		return true
	}
	if r.Contended() {
		// Someone waits already: refuse before the two state changes that
		// the check below would undo (the usual case under contention,
		// when every release goes to a waiter).
		return false
	}
	now := time.Duration(p.coarse.Load())
	if r.lifetime > 0 && now-r.created >= r.lifetime {
		return false // Release destroys it
	}
	r.idleSince = now
	if !r.state.CompareAndSwap(stateAcquired, stateParked) {
		p.misuse()
		return true // not the caller's: nothing for it to release
	}
	if !p.mayBeParked.Load() {
		p.mayBeParked.Store(true) // see stealLocked; a load only, once set
	}
	if p.waiters.n.Load() == 0 && !p.tending.Load() && !p.closing.Load() && !r.retired.Load() {
		return true
	}
	// A waiter (or a TendNext) arrived, Close began, or Retire marked it: release it the
	// usual way (which destroys a retired one), unless the waiter (or
	// Close, or Retire) took it already.
	if r.state.CompareAndSwap(stateParked, stateAcquired) {
		return false
	}
	return true
}

// Contended reports whether anyone waits for a resource of r's pool now, when
// Park would refuse: a holder that checks before Park (and before the work
// it does to decide whether to park) may skip that work. Anyone may start
// waiting right after, which Park sees.
func (r *Resource[T]) Contended() bool {
	return r.pool.waiters.n.Load() != 0 || r.pool.tending.Load()
}

// Spare reports whether a resource of r's pool is to be had now without
// waiting for one in use: nobody waits, and one is idle or there is room
// to create one. A holder about to keep r out of the pool a while (to
// clean it up) may ask: where none is spare, keeping r out costs someone a
// wait.
func (r *Resource[T]) Spare() bool {
	p := r.pool
	if p.waiters.n.Load() != 0 {
		return false
	}
	p.mu.Lock()
	spare := p.idle.Len() > 0 || p.total < p.cfg.Max
	p.mu.Unlock()
	return spare
}

// parkable reports whether the pool's configuration allows Park: nothing
// is to be told of each release, and the backend was not found full
// lately. Observers do not count: they are told of durations, and a use
// that parks has none (see above).
func (p *Pool[T]) parkable() bool {
	return p.cfg.BeforeRelease == nil && !p.releaseEvents.Load() && !p.pressured.Load() && !p.shareOn.Load()
}

// Unpark takes back r, which the caller parked. It reports false when
// someone took it meanwhile (r is not the caller's then, which acquires as
// usual), when anyone waits (r goes to the waiter: see below), or when it
// has outlived MaxLifetime or MaxIdleTime (it was destroyed). On success the
// caller holds r as if Acquire had taken it from idle, except that
// Config.BeforeAcquire was not called: the caller owes r the check it makes
// there, and Rejects it if it fails. IdleFor is how long r was parked, on
// the coarse clock. The use that begins is not timed (it counts in
// [Stats].UntimedUses when it ends).
func (r *Resource[T]) Unpark() bool {
	p := r.pool
	// A waiter and a parked resource meet only while a Park is between its
	// two steps (a waiter takes parked resources when it queues): that
	// Park then finds its resource still parked and releases it to the
	// waiter. Taking it here would overtake the waiter, with a handle that
	// may be stale (parked by another holder since).
	if p.waiters.n.Load() != 0 {
		return false
	}
	if !r.state.CompareAndSwap(stateParked, stateAcquired) {
		return false
	}
	now := time.Duration(p.coarse.Load())
	r.acquiredAt = -1
	r.parkedFor = max(now-r.idleSince, 0)
	if r.lifetime > 0 && now-r.created >= r.lifetime || p.cfg.MaxIdleTime > 0 && r.parkedFor >= p.cfg.MaxIdleTime && p.aboveMin() {
		r.state.Store(stateDestroyed)
		p.mu.Lock()
		p.stats.expired++
		p.stats.parkEnds++
		p.mu.Unlock()
		p.destroy(r, false) // counted as acquired while parked
		return false
	}
	r.reuses.Add(1)
	p.observers.notify(TimingWait, 0)
	return true
}

// Reject destroys r, which its holder found unusable before using it (after
// Unpark, the check BeforeAcquire would have made): it counts as a failed
// BeforeAcquire, in [Stats].ReleaseRejects and for the strategy. Its use
// ends as with Destroy.
func (r *Resource[T]) Reject() {
	if !r.state.CompareAndSwap(stateAcquired, stateDestroyed) {
		r.pool.misuse()
		return
	}
	p := r.pool
	now := time.Duration(-1)
	if r.acquiredAt >= 0 {
		now = p.clock()
	}
	p.mu.Lock()
	p.stats.releaseRejects++
	held, timed := p.useEndedLocked(r, now)
	p.mu.Unlock()
	if timed {
		p.observers.notify(TimingUse, held)
	}
	p.destroy(r, false)
	p.reportCheckFailed()
}

// Return gives up the caller's claim on r, which it parked and will not
// take back: if nobody took r meanwhile, it goes where a released resource
// goes (to the oldest waiter that can use it, or idle), where every
// acquire, the healthcheck and expiry find it. It takes the pool's lock.
func (r *Resource[T]) Return() {
	p := r.pool
	p.mu.Lock()
	if r.state.Load() == stateParked && r.state.CompareAndSwap(stateParked, stateChecking) {
		p.acquired--
		p.stats.parkEnds++
		r.stolen = true
		p.putLocked(r, p.clock(), owesExpiry)
	}
	p.mu.Unlock()
}

// startCoarse starts the coarse clock, at the first Park. It reports false
// when the pool is closed.
func (p *Pool[T]) startCoarse() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	if !p.coarseOn.Load() {
		p.coarse.Store(int64(p.clock()))
		p.coarseOn.Store(true)
		p.goBackground(p.coarseLoop)
	}
	return true
}

// coarseLoop advances the coarse clock until the pool closes.
func (p *Pool[T]) coarseLoop() {
	p.every(coarseTick, func() { p.coarse.Store(int64(p.clock())) })
}
