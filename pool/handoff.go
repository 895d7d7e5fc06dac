package pool

import "time"

// Handing a resource on: to the waiter whose turn it is, or to the idle
// ring. Every path that frees a resource for others ends here: a release,
// a new resource, a check passed, a parked one taken back by the pool.

// putLocked gives a healthy resource to the waiter nextWaiterLocked picks
// (the oldest that can still use it), or makes it idle. owes is what the
// waiter owes it before use (see result). A waiter whose
// context ended is told so and passed over: handing it the resource would
// only wake it to hand the resource on again, and under a storm of
// cancellations the oldest waiters are the likeliest to have given up.
// A TendNext waiting comes first, but for a new resource while callers
// wait: their factory calls made it (after an outage, the first
// connection a returning server accepts goes to a caller, not to upkeep),
// and the TendNext has it only where they all gave up.
func (p *Pool[T]) putLocked(r *Resource[T], now time.Duration, owes owed) {
	if !(r.fresh && p.waiters.len() > 0) && p.tendLocked(r) {
		return
	}
	for w := p.nextWaiterLocked(now); w != nil; w = p.nextWaiterLocked(now) {
		p.waiters.remove(w)
		if err := w.ctx.Err(); err != nil {
			p.stats.canceled++
			w.ch <- result[T]{err: err} // it waits for this: it left the queue
			continue
		}
		p.handOutLocked(r)
		r.fresh = false
		r.acquiredAt = now
		waited := now - w.start
		p.stats.waitDuration += waited
		p.stats.waitTime.observe(waited)
		r.spare = w // freed by r's release, once w's goroutine is done with it
		w.ctx = nil // nothing reads it once w left the queue: do not keep the caller's context alive with r
		w.ch <- result[T]{r: r, waited: waited, owes: owes}
		return
	}
	if r.fresh && p.tendLocked(r) {
		return
	}
	r.state.Store(stateIdle)
	p.idle.PushBack(r)
}

// handOutLocked marks r as acquired.
func (p *Pool[T]) handOutLocked(r *Resource[T]) {
	r.parkedFor = -1
	if r.stolen {
		r.stolen = false
		r.parkedFor = max(time.Duration(p.coarse.Load())-r.idleSince, 0)
	}
	r.state.Store(stateAcquired)
	p.acquired++
	p.stats.acquires++
}

// tendLocked hands r, released or stolen, to the TendNext waiting, if
// one is, and reports whether it did: r is then in its hands as the
// healthcheck's is in tend's. The caller holds mu.
func (p *Pool[T]) tendLocked(r *Resource[T]) bool {
	t := p.tender
	if t == nil {
		return false
	}
	p.tender = nil
	p.tending.Store(false)
	r.state.Store(stateChecking)
	p.checking++
	t.closes = p.idleCloses
	t.ch <- r
	return true
}
