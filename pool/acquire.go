package pool

import (
	"context"
	"time"
)

// Acquire returns an idle resource, a new one, or waits for one in FIFO
// order (a waiter out of time is passed over: see nextWaiterLocked), those
// of work begun first (Config.Begun).
//
// While new resources cannot be made (the factory fails, the backend is at
// its limit), a caller waits for one in use to come back or for the next
// factory call, within its context and Config.AcquireTimeout: it is refused
// only when neither can serve it. It fails with ErrClosed on a closed
// pool; with the factory's error itself when the factory call made for it
// failed and nothing in use or being created can serve it; otherwise with
// an *AcquireError that says why and wraps the last factory error: the
// context's error when ctx ends first (the bare context error if no
// factory call was failing), ErrTimeout when Config.AcquireTimeout passes,
// ErrBackoff when nothing is in use and the next factory call would come
// after its deadline, ErrCircuitOpen while the circuit breaker is
// Inactive.
func (p *Pool[T]) Acquire(ctx context.Context) (*Resource[T], error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	front := false
	for {
		r, owes, waited, err := p.acquire(ctx, front)
		if err != nil {
			return nil, err
		}
		if owes == owesNothing {
			return r, nil // wait told the observers
		}
		if owes == owesExpiry && p.timedExpiry() && p.expired(r) {
			// Parked, then handed to this waiter: parking does not
			// expire resources, so it is done here.
			p.reject(r, true, true)
			front = true
			continue
		}
		if p.cfg.BeforeAcquire == nil || p.callBeforeAcquire(ctx, r) {
			if !waited {
				p.observers.notify(TimingWait, 0)
			}
			return r, nil
		}
		// It failed BeforeAcquire or expired: destroy it and try again,
		// keeping our place at the head of the queue, unless the caller
		// gave up meanwhile (a check bounded by ctx fails then).
		p.reject(r, false, waited)
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		p.reportCheckFailed()
		front = true
	}
}

// TryAcquire returns an idle resource if one is available at once, and never
// waits. When it finds none and the pool has room, it starts creating one in
// the background so that a later call may succeed.
func (p *Pool[T]) TryAcquire() (*Resource[T], bool) {
	for {
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return nil, false
		}
		r, ok := (*Resource[T])(nil), false
		if p.waiters.len() == 0 {
			r, ok = p.idle.PopBack()
			if !ok {
				r = p.stealLocked()
				ok = r != nil
			}
		}
		if !ok {
			if p.waiters.len() == 0 && p.total < p.maxLocked() {
				if now := p.clock(); p.dialAllowedLocked(now) {
					p.startFactoryLocked(nil, now)
				}
			}
			p.mu.Unlock()
			return nil, false
		}
		p.handOutLocked(r)
		p.stats.immediate++
		r.acquiredAt = p.clock()
		expired := p.expiredLocked(r, r.acquiredAt)
		p.mu.Unlock()
		if expired {
			p.reject(r, true, false)
			continue
		}
		if p.cfg.BeforeAcquire == nil || p.callBeforeAcquire(context.Background(), r) {
			p.observers.notify(TimingWait, 0)
			return r, true
		}
		p.reject(r, false, false)
		p.reportCheckFailed()
	}
}

// acquire gets a resource, and says what it owes: the BeforeAcquire check
// when it was idle (fresh from a pre-warm or parked included) and is not
// expired, or came straight from its release to this waiter; the expiry
// check first when it was parked and handed to this waiter. waited
// reports that it came by waiting, which told the observers already.
func (p *Pool[T]) acquire(ctx context.Context, front bool) (r *Resource[T], owes owed, waited bool, err error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, owesNothing, false, ErrClosed
	}
	if front || p.waiters.len() == 0 {
		r, ok := p.idle.PopBack()
		if !ok {
			r = p.stealLocked()
			ok = r != nil
		}
		if ok {
			p.handOutLocked(r)
			p.stats.immediate++
			fresh := r.fresh
			r.fresh = false
			r.acquiredAt = -1
			if p.timedExpiry() {
				now := p.clock()
				r.acquiredAt = now
				if !fresh && p.expiredLocked(r, now) {
					p.mu.Unlock()
					p.reject(r, true, false)
					return p.acquire(ctx, true)
				}
			}
			p.mu.Unlock()
			// A fresh resource (pre-warmed, or refilled to Min) sat
			// idle too: the server may have closed it meanwhile.
			return r, owesCheck, false, nil
		}
	}
	now := p.clock()
	w := p.newWaiter()
	w.ctx, w.start, w.deadline, w.limit = ctx, now, noDeadline, noDeadline
	w.begun = p.cfg.Begun != nil && p.cfg.Begun(ctx)
	if d, ok := ctx.Deadline(); ok {
		w.deadline = d.Sub(p.epoch)
		w.limit = w.deadline
	}
	if p.cfg.AcquireTimeout > 0 {
		w.limit = min(w.limit, now+p.cfg.AcquireTimeout)
	}
	if p.total < p.maxLocked() && p.waiters.len() == 0 && !p.dialAllowedLocked(now) {
		// It would need a new resource, which may not be created now
		// (the factory just failed, or the circuit breaker says no):
		// say so now, unless something can serve it in time.
		if err := p.refusalLocked(w, now); err != nil {
			w.reusable = true
			p.freeWaiterLocked(w)
			p.mu.Unlock()
			return nil, owesNothing, false, err
		}
	}
	if front {
		p.waiters.pushFront(w)
	} else {
		p.waiters.pushBack(w)
	}
	p.stats.waits++
	p.feedWaitersLocked()
	p.armTimeoutsLocked()
	p.startFactoriesLocked()
	p.mu.Unlock()
	r, owes, err = p.wait(ctx, w)
	return r, owes, true, err
}

// wait blocks until w is handed a result, ctx ends or the acquire timeout
// passes. w is then done with: a wait that ends without a resource frees
// it under mu, one handed a resource leaves it to the resource's release
// (see Resource.spare). owes says what the resource handed to w owes
// (see result).
func (p *Pool[T]) wait(ctx context.Context, w *waiter[T]) (r *Resource[T], owes owed, err error) {
	var res result[T] // a resource, an error, or the acquire timeout (expireWaiters)
	var giveUp error
	if done := ctx.Done(); done == nil {
		res = <-w.ch // a context that never ends: a plain receive, not a select
	} else {
		select {
		case res = <-w.ch:
		case <-done:
			giveUp = ctx.Err()
		}
	}
	if giveUp == nil {
		if res.err != nil {
			p.mu.Lock()
			p.abandonLocked(w)
			waited := p.waitEndedLocked(w)
			p.freeWaiterLocked(w)
			p.mu.Unlock()
			p.observers.notify(TimingWait, waited)
			return nil, owesNothing, res.err
		}
		p.observers.notify(TimingWait, res.waited)
		return res.r, res.owes, nil
	}

	p.mu.Lock()
	if w.queued {
		p.waiters.remove(w)
		p.stats.canceled++
		p.abandonLocked(w)
		waited := p.waitEndedLocked(w)
		p.freeWaiterLocked(w)
		if p.backoff.failures > 0 || p.state != Active {
			// New resources could not be made meanwhile: say why.
			giveUp = p.acquireErrorLocked(giveUp)
		}
		p.mu.Unlock()
		p.observers.notify(TimingWait, waited)
		return nil, owesNothing, giveUp
	}
	p.mu.Unlock()
	// We were handed a result at the same instant we gave up. It is in the
	// channel already (results are sent under mu). A resource must not be
	// lost: give it to the next waiter or back to idle. (Its wait was
	// counted when it was handed over.)
	res = <-w.ch
	if res.r != nil {
		p.observers.notify(TimingWait, res.waited)
		p.mu.Lock()
		p.stats.acquires--
		p.stats.canceled++
		res.r.spare = nil // w: not to be freed twice
		p.freeWaiterLocked(w)
		if p.closed {
			p.mu.Unlock()
			res.r.state.Store(stateDestroyed)
			p.destroy(res.r, false)
			return nil, owesNothing, giveUp
		}
		p.acquired--
		p.putLocked(res.r, p.clock(), res.owes)
		p.mu.Unlock()
		return nil, owesNothing, giveUp
	}
	p.mu.Lock()
	waited := p.waitEndedLocked(w)
	p.freeWaiterLocked(w)
	p.mu.Unlock()
	p.observers.notify(TimingWait, waited)
	return nil, owesNothing, res.err
}

// waitEndedLocked counts the wait of w, which ended without a resource, and
// returns its length. A wait that was handed a resource is counted by
// putLocked, which knows the time already.
func (p *Pool[T]) waitEndedLocked(w *waiter[T]) time.Duration {
	d := p.clock() - w.start
	p.stats.waitDuration += d
	p.stats.waitTime.observe(d)
	return d
}

// reject destroys a resource taken from idle that had expired or failed
// BeforeAcquire. It was counted as served at once; the Acquire goes on.
//
// waited says r came by waiting: its wait was counted as such, not as an
// acquire served at once.
func (p *Pool[T]) reject(r *Resource[T], expired, waited bool) {
	r.state.Store(stateDestroyed)
	p.mu.Lock()
	if !waited {
		p.stats.immediate--
	}
	p.stats.untimed++ // a hand-out that ended before its use began
	if expired {
		p.stats.expired++
	} else {
		p.stats.releaseRejects++
	}
	p.mu.Unlock()
	p.destroy(r, false)
}

// refusalLocked decides for w, a caller that found no idle resource while
// the pool has room for a new one that may not be created now: nil when
// it may wait (for a resource in use or being checked, the factory call
// under way, the next one or the breaker's next trial), or the error to
// refuse it with at once (counted).
func (p *Pool[T]) refusalLocked(w *waiter[T], now time.Duration) error {
	switch p.state {
	case Inactive:
		if p.acquired+p.creating+p.checking > 0 {
			return nil // an open circuit spaces dials; it waits for one in use
		}
		p.stats.circuitRejects++
		return p.acquireErrorLocked(ErrCircuitOpen)
	case Active:
		if p.acquired+p.creating+p.checking == 0 && p.refusingLocked(now) {
			p.stats.failFast++
			return p.acquireErrorLocked(ErrPermanent)
		}
		if p.acquired+p.creating > 0 || p.backoff.next <= w.limit {
			return nil
		}
		p.stats.backoffRejects++
		return p.acquireErrorLocked(ErrBackoff)
	}
	return nil
}
