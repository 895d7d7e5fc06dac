package pool

import (
	"fmt"
	"time"
)

// Release returns the resource to the pool, or straight to the next waiter
// in turn.
// If Config.BeforeRelease says no, or the pool is closed, or the resource
// has outlived Config.MaxLifetime, it is destroyed instead.
func (r *Resource[T]) Release() {
	if !r.state.CompareAndSwap(stateAcquired, stateReleasing) {
		r.pool.misuse()
		return
	}
	r.pool.release(r)
}

// Destroy destroys the resource (it is broken) and frees its slot.
func (r *Resource[T]) Destroy() {
	if !r.state.CompareAndSwap(stateAcquired, stateDestroyed) {
		r.pool.misuse()
		return
	}
	r.pool.destroyAcquired(r)
}

// release implements Resource.Release for an acquired resource.
func (p *Pool[T]) release(r *Resource[T]) {
	ok := true
	if p.cfg.BeforeRelease != nil {
		ok = p.callCheck(p.cfg.BeforeRelease, r.value)
	}
	now := p.clock()
	p.mu.Lock()
	if w := r.spare; w != nil {
		r.spare = nil
		p.freeWaiterLocked(w)
	}
	held, timed := p.useEndedLocked(r, now)
	strategy := p.strategy
	if !p.onRelease {
		strategy = nil
	}
	if !ok || p.closed || r.retired.Load() || r.lifetime > 0 && now-r.created >= r.lifetime || p.aboveShareLocked() {
		switch {
		case !ok:
			p.stats.releaseRejects++
		case p.closed, r.retired.Load():
		case p.aboveShareLocked():
			p.stats.trimmed++
		default:
			p.stats.expired++
		}
		p.mu.Unlock()
		if timed {
			p.observers.notify(TimingUse, held)
		}
		r.state.Store(stateDestroyed)
		p.destroy(r, false)
		if !ok && strategy != nil {
			p.report(strategy, EventReleaseFailed, errBeforeRelease)
		}
		return
	}
	p.acquired--
	if timed {
		p.holds.observe(held)
	}
	r.idleSince = now
	p.putLocked(r, now, owesCheck)
	p.mu.Unlock()
	if timed {
		p.observers.notify(TimingUse, held)
	}
	if strategy != nil {
		p.report(strategy, EventReleased, nil)
	}
}

// destroyAcquired implements Resource.Destroy: the end of a use, too.
func (p *Pool[T]) destroyAcquired(r *Resource[T]) {
	now := time.Duration(-1) // no clock read for a use that cannot be timed
	if r.acquiredAt >= 0 {
		now = p.clock()
	}
	p.mu.Lock()
	held, timed := p.useEndedLocked(r, now)
	p.mu.Unlock()
	if timed {
		p.observers.notify(TimingUse, held)
	}
	p.destroy(r, false)
}

// useEndedLocked counts the use of r that ends at now, when its start is
// known, and returns its length; timed is false when it is not, and the use
// counts in UntimedUses. The start is known when the pool read the clock as
// it handed r out (to a waiter, by TryAcquire, or from idle when resources
// expire with time) or IdleFor read it since: the pool reads it for no
// other reason, to keep the acquire of an idle resource free of clock reads
// when nothing expires.
func (p *Pool[T]) useEndedLocked(r *Resource[T], now time.Duration) (held time.Duration, timed bool) {
	if r.acquiredAt < 0 {
		p.stats.untimed++
		return 0, false
	}
	held = now - r.acquiredAt
	p.stats.useTime.observe(held)
	return held, true
}

var errBeforeRelease = fmt.Errorf("pool: resource failed BeforeRelease")
