package pool

import "time"

// Sharing a full backend. When several pools (the instances of a service)
// share a backend that limits its connections, a pool that holds idle
// resources keeps the others from getting any: the backend refuses them,
// and the holder, which does not dial, never hears of it. A pool that has
// found the backend at its limit itself (a factory error Config.AtLimit
// recognizes) knows the backend is full; for pressureWindow after that, it
// gives back the resources that sat idle longer than
// Config.IdleTimeUnderPressure instead of keeping them for MaxIdleTime,
// keeping Min and MinIdle. Under a steady load the resources it keeps are
// those it uses (idle ones are reused most recently released first, so the
// surplus is what sits idle); the room it frees is taken by the trials of
// the pools that have none (one per cool-down: see ThresholdStrategy), and
// every pool ends up with about what it uses. Meanwhile Park refuses: a
// holder that parks takes back its own resource, and holders that take
// turns (database/sql reuses its idle connections oldest first) would keep
// every resource in use now and then, so that none ever looks surplus.

// pressureWindow is how long after a factory call last found the backend
// at its limit the pool trims its idle resources.
const pressureWindow = time.Minute

// Pressure tells the pool its backend is full, as a factory call that
// found it at its limit would: for pressureWindow from now it gives back
// the resources idle longer than IdleTimeUnderPressure. For whoever
// watches the backend (pooldriver's look at a full server): a pool whose
// resources are all in use never dials and never finds the backend full
// itself, and what a burst left at the back of its idle ring would sit
// there, in nobody's use, while the backend refuses someone else.
func (p *Pool[T]) Pressure() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.closed {
		p.atLimitLocked(p.clock())
	}
}

// atLimitLocked records that a factory call found the backend at its limit
// at now. The caller holds mu.
func (p *Pool[T]) atLimitLocked(now time.Duration) {
	p.pressureUntil = now + pressureWindow
	p.pressured.Store(true)
	p.armTrimLocked()
}

// armTrimLocked runs trimIdle every half IdleTimeUnderPressure while the
// pressure lasts. The caller holds mu.
func (p *Pool[T]) armTrimLocked() {
	if p.trimArmed || p.closed {
		return
	}
	p.trimArmed = true
	d := p.cfg.IdleTimeUnderPressure / 2
	if p.trim == nil {
		p.trim = time.AfterFunc(d, p.trimIdle)
		return
	}
	p.trim.Reset(d)
}

// trimIdle destroys the idle resources that sat idle longer than
// IdleTimeUnderPressure, oldest first, keeping Min resources and MinIdle
// idle ones, and looks again later while the pressure lasts.
func (p *Pool[T]) trimIdle() {
	p.mu.Lock()
	p.trimArmed = false
	now := p.clock()
	if p.closed || now >= p.pressureUntil {
		p.pressured.Store(false)
		p.mu.Unlock()
		return
	}
	// Parked resources are idle too (their holder parked them when it
	// last let go): into the ring with the others, where their holder's
	// Unpark no longer finds them.
	p.unparkAllLocked(now)
	idle, n := p.idle.Len(), 0
	gone := p.idle.Filter(func(r *Resource[T]) bool {
		// Oldest first, mostly: the ring's front is the longest idle.
		if p.total-n <= p.cfg.Min || idle-n <= p.cfg.MinIdle || now-r.idleSince < p.cfg.IdleTimeUnderPressure {
			return true
		}
		n++
		return false
	}, nil)
	p.stats.trimmed += int64(len(gone))
	p.armTrimLocked()
	for _, r := range gone {
		r.state.Store(stateDestroyed)
	}
	p.mu.Unlock()
	for _, r := range gone {
		p.destroy(r, true)
	}
}
