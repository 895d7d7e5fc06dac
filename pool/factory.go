package pool

import (
	"time"
)

// When factory calls start: one for each waiter that needs a new resource
// (startFactoriesLocked), and the pool's own refill to Min and MinIdle
// (fillToMinLocked), as far as Max, the growth limit, the back-off and the
// circuit breaker allow. The call itself and its outcome are create.go's.

// startFactoriesLocked starts a factory call for each waiter that has none,
// as far as Max and the growth limit (growthLocked) allow. When no factory
// call may start (back-off, circuit breaker), see noDialLocked.
func (p *Pool[T]) startFactoriesLocked() {
	now := time.Duration(-1) // read once needed: at Max, which a busy pool is at, never
	for !p.closed && p.total < p.maxLocked() {
		w := p.waiters.firstWithoutFactory()
		if w == nil {
			return
		}
		if now < 0 {
			now = p.clock()
		}
		if !p.growthLocked() && !p.failingFastLocked() && !p.staleLocked(now) {
			if p.backoff.failures > 0 && p.creating > 0 {
				p.armDialsLocked(p.lastStart+staleAfter, now) // once they are stale (staleLocked)
			}
			return // the next one made starts more (create)
		}
		if !p.dialAllowedLocked(now) {
			p.noDialLocked(now)
			return
		}
		p.startFactoryLocked(w, now)
	}
}

// growthStart is how many factory calls a pool with no resource makes at
// once; see growthLocked.
const growthStart = 4

// growthLocked reports whether another factory call may start beside those
// in flight: at most as many as the resources that exist, and at least
// growthStart. A pool grows at most twofold per round of factory calls, as
// TCP's slow start: a cold pool with 20 callers makes 4, then 8, then the
// rest. Several pools that start together against a backend with room for
// fewer connections than they ask for thus fill it about evenly, and each
// finds it full (which is how it learns to share it: see pressure.go), and
// a restarted fleet does not open every connection in one burst. When it
// says no, growthCapped asks the next success to go on.
func (p *Pool[T]) growthLocked() bool {
	if p.creating < max(growthStart, p.total-p.creating) {
		return true
	}
	p.growthCapped = true
	return false
}

// failingFastLocked reports whether a waiter's factory call may start
// beside those in flight although growthLocked says no: factory calls are
// failing, and the last failure was an answer (a refusal, a standby where a
// primary is wanted), not a timeout. While calls fail so, the backend may
// be moving (a failover: the new primary ready at any moment, the old one
// perhaps silent until its connect timeout), and each waiting caller's call
// is one more chance to find it as soon as it answers, as a caller of a
// plain driver dials for itself; the back-off still spaces the starts, and
// Max and the waiters (one call each) bound how many are in flight. Not
// while the last failure was a timeout: the backend said nothing (a black
// hole, every host silent), and a call started now would wait as long.
//
// One slot below Max stays free of them: should every one of them hang (a
// host that went silent after it answered), the free slot is the one a
// stale call leaves to a waiter (staleLocked).
func (p *Pool[T]) failingFastLocked() bool {
	return p.backoff.failures > 0 && p.creating > 0 && !isTimeout(p.lastFailure) && p.total+1 < p.maxLocked()
}

// staleAfter is how long the newest factory call in flight has run, while
// calls fail, before a waiter without one may start another (staleLocked).
const staleAfter = 100 * time.Millisecond

// staleLocked reports whether a waiter's factory call may start beside
// those in flight although growthLocked says no: calls fail, and every
// call in flight started staleAfter ago or more. Calls stuck on a host
// that went silent (a primary killed mid-connect, its connect timeout
// seconds away) then hold back no call that may reach a host that answers;
// at most one more each staleAfter, as far as Max.
func (p *Pool[T]) staleLocked(now time.Duration) bool {
	return p.backoff.failures > 0 && p.creating > 0 && now-p.lastStart >= staleAfter
}

// noDialLocked tells the waiters that need a new resource, when none may
// be created now, what that means for them. While Inactive they wait for
// a resource in use, being created or being checked (an open circuit
// spaces dials, it does not fail callers who can wait for one), and fail
// at once when there is none: the last to go (destroy) tells them. During
// the back-off they wait for a resource in use or for the next factory
// call, which the dials timer starts; those that nothing can serve before
// their deadline fail at once. While Limited or Recovering they wait for a
// resource in use or for the breaker's next trial.
func (p *Pool[T]) noDialLocked(now time.Duration) {
	switch p.state {
	case Inactive:
		if p.acquired+p.creating+p.checking > 0 {
			return // they wait for one of those, within their context
		}
		for w := p.waiters.firstWithoutFactory(); w != nil; w = p.waiters.firstWithoutFactory() {
			p.waiters.remove(w)
			p.stats.circuitRejects++
			w.ch <- result[T]{err: p.acquireErrorLocked(ErrCircuitOpen)} // it waits for this: it left the queue
		}
	case Active:
		if p.creating > 0 && p.refusingLocked(now) {
			return // one factory call at a time; its end starts the next
		}
		if p.acquired+p.creating == 0 {
			for w := p.waiters.head; w != nil; {
				next := w.next
				if !w.creating && w.limit < p.backoff.next {
					p.waiters.remove(w)
					p.stats.backoffRejects++
					w.ch <- result[T]{err: p.acquireErrorLocked(ErrBackoff)} // it waits for this: it left the queue
				}
				w = next
			}
		}
		if p.waiters.firstWithoutFactory() != nil {
			p.armDialsLocked(p.backoff.next, now)
		}
	}
}

// dialAllowedLocked reports whether a factory call for a caller may start
// now: always while Active (unless backing off), once at a time while
// Recovering.
func (p *Pool[T]) dialAllowedLocked(now time.Duration) bool {
	switch p.state {
	case Active:
		// While refusing, one factory call at a time (see Config.Permanent).
		return !p.backoff.active(now) && (p.creating == 0 || !p.refusingLocked(now))
	case Recovering:
		// The cool-down that led here outranks the back-off: the trial
		// is the next attempt.
		return !p.trial
	}
	return false
}

// refillAllowedLocked is dialAllowedLocked for the pool's own refill, which
// backs off longer (see backoff).
func (p *Pool[T]) refillAllowedLocked(now time.Duration) bool {
	if p.state == Active {
		return !p.backoff.refillActive(now)
	}
	return p.dialAllowedLocked(now)
}

// fillToMinLocked starts factory calls until Min resources exist and MinIdle
// are idle or being created. During the back-off, the dials timer tries
// again when it ends; while the breaker allows no factory call, its next
// state does (setState).
func (p *Pool[T]) fillToMinLocked() {
	if p.cfg.Min == 0 && p.cfg.MinIdle == 0 || p.closed {
		return
	}
	now := time.Duration(-1)
	for !p.closed && p.total < p.maxLocked() && p.belowMinLocked() && p.growthLocked() {
		if now < 0 {
			now = p.clock()
		}
		if !p.refillAllowedLocked(now) {
			if p.state == Active {
				p.armDialsLocked(p.backoff.refill, now)
			}
			return
		}
		p.startFactoryLocked(nil, now)
	}
}

// armDialsLocked makes the pool look again, at at, for the factory calls
// the back-off holds back, unless it will look sooner already.
func (p *Pool[T]) armDialsLocked(at, now time.Duration) {
	if p.dialsArmed && p.dialAt <= at {
		return
	}
	p.dialsArmed, p.dialAt = true, at
	if p.dials == nil {
		p.dials = time.AfterFunc(max(at-now, 0), p.dialDue)
		return
	}
	p.dials.Reset(max(at-now, 0))
}

// dialDue starts the factory calls the back-off held back, now that it
// ended.
func (p *Pool[T]) dialDue() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.dialsArmed = false
	if p.closed {
		return
	}
	p.startFactoriesLocked()
	p.fillToMinLocked()
}

// startFactoryLocked reserves a slot and calls the factory in the
// background on behalf of owner (nil: for the pool itself), with the values
// of owner's context. While Recovering, the call is the circuit breaker's
// trial.
func (p *Pool[T]) startFactoryLocked(owner *waiter[T], now time.Duration) {
	var call *factoryCall
	if owner != nil {
		owner.creating = true
		call = newFactoryCall(owner.ctx, p.bgCtx)
		owner.call = call
	}
	trial := p.state == Recovering
	if trial {
		p.trial = true
	} else {
		p.backoff.started(now, p.cfg.BackoffMin, p.cfg.BackoffMax)
	}
	p.total++
	p.creating++
	p.lastStart = now
	retires := p.retires
	p.goBackground(func() { p.create(owner, call, trial, retires) })
}
