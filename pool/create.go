package pool

import (
	"context"
	"errors"
	"time"
)

// A factory call and its outcome (create, createFailed: who gets the new
// resource or the error, what the strategy hears), and the end of a
// resource (destroy), which frees its slot for the next call.

// create runs the factory with the values of ctx (nil: none). The new
// resource goes to the next waiter in turn (not necessarily owner: FIFO
// wins) or to idle; an error goes to owner if it still waits and nothing
// else can serve it in time. retires is p.retires when the call was
// decided: a resource Retire ran against while it was being made is
// destroyed, and the factory called again for whom it was made.
func (p *Pool[T]) create(owner *waiter[T], call *factoryCall, trial bool, retires uint64) {
	start := p.clock()
	v, err := p.callFactory(call)
	now := p.clock()
	p.mu.Lock()
	if call != nil && call.abandoned {
		p.abandoning--
	}
	if err != nil && call != nil && call.abandoned {
		p.withdrawLocked(owner, trial)
		p.mu.Unlock()
		return
	}
	p.stats.createTime.observe(now - start)
	strategy := p.strategy
	ended := false // this success ends a back-off
	if err == nil {
		ended = p.backoff.failures > 0
		p.backoff.succeeded()
		p.lastFailure = nil
		p.permanent = false
		p.connected = true
	}
	p.mu.Unlock()
	p.observers.notify(TimingCreate, now-start)
	if err != nil {
		p.createFailed(owner, trial, err, now-start)
		return
	}
	// The strategy hears of the success before anyone uses the resource:
	// a caller it serves meets the breaker as the success left it.
	if strategy != nil {
		p.report(strategy, EventCreated, nil)
	}
	p.mu.Lock()
	p.creating--
	if owner != nil {
		owner.creating, owner.call = false, nil
	}
	if trial {
		p.trial = false
	}
	p.stats.created++
	if p.closed || p.retires != retires {
		p.mu.Unlock()
		p.destruct(v)
		p.mu.Lock()
		p.total--
		p.stats.destroyed++
		if !p.closed {
			p.startFactoriesLocked()
			p.fillToMinLocked()
		}
		p.mu.Unlock()
		return
	}
	r := &Resource[T]{value: v, pool: p, created: now, idleSince: now, fresh: true, lifetime: p.lifetime(), parkedFor: -1}
	p.register(r)
	p.putLocked(r, now, owesNothing)
	if (ended || p.growthCapped) && p.state == Active {
		// The back-off is over, or the pool may grow further: the other
		// waiters that need a new resource get their factory calls now.
		// (While Recovering, the breaker's next state decides.)
		p.growthCapped = false
		p.startFactoriesLocked()
	}
	p.fillToMinLocked()
	p.mu.Unlock()
}

// abandonLocked ends the factory call made for w, which gave up waiting,
// if the backend is silent (see factoryCall) and another call goes on:
// the last call in flight runs to its end, so that the pool learns
// whether the backend answers again. Were every call ended with its
// caller, callers that give up sooner than a connect takes (a storm of
// short deadlines) would end every call, none would succeed, and the
// backend would stay "silent" for good. Its slot goes to the next call
// when it has returned (withdrawLocked).
func (p *Pool[T]) abandonLocked(w *waiter[T]) {
	if w.creating && w.call != nil && p.state == Active && p.backoff.failures > 0 && isTimeout(p.lastFailure) &&
		p.creating-p.abandoning > 1 {
		w.call.abandoned = true
		p.abandoning++
		w.call.cancel()
	}
}

// withdrawLocked frees the slot of an abandoned factory call that failed.
// Its failure is the caller's giving up, not news of the backend: the
// back-off, the last failure and the strategy stay as they were; it
// counts as a failed call.
func (p *Pool[T]) withdrawLocked(owner *waiter[T], trial bool) {
	p.creating--
	p.total--
	p.stats.createErrors++
	owner.creating, owner.call = false, nil
	if trial {
		p.trial = false
	}
	p.startFactoriesLocked()
	p.fillToMinLocked()
}

// createFailed handles a failed factory call. The strategy hears of it
// before the caller does, so that the caller meets the breaker's reaction.
// Who learns of it at once, while the circuit is closed and nothing is in
// use (parked included) or being checked:
//
//   - a permanent failure while the pool refuses (refusingLocked): every
//     caller without a factory call of its own under way, with
//     ErrPermanent;
//   - a timeout (the backend said nothing within the factory's own time
//     limit, which the call took): the same callers, with the factory's
//     error, those that waited at least half that long, through most of
//     this call. A silent backend gives the next call the same silence: a
//     caller that waited for this one would wait as long again for its
//     own (plain database/sql fails it after one such wait). One that came
//     late in the call's life waits for the next, which may find the
//     backend back (the end of a black hole).
//
// Otherwise the caller it was made for goes on waiting if a resource in
// use or being created can still serve it (see servableLocked), or if the
// backend was at its limit (EventAtLimit) and the circuit is not open:
// it waits, within its deadline, for a resource released or the next
// attempt; it gets the factory's error itself if not (at its deadline,
// the AcquireError wraps the last one).
func (p *Pool[T]) createFailed(owner *waiter[T], trial bool, err error, took time.Duration) {
	ev := p.createEvent(err)
	permanent := ev == EventCreateFailed && p.askAbout("Permanent", p.cfg.Permanent, err)
	now := p.clock()
	p.mu.Lock()
	p.creating--
	p.total--
	if trial {
		p.trial = false
	}
	p.stats.createErrors++
	if p.backoff.failures == 0 {
		p.failingSince = now
	}
	p.backoff.failed(p.lastStart, p.cfg.BackoffMin, p.cfg.BackoffMax)
	p.lastFailure = err
	p.permanent = permanent
	if ev == EventAtLimit {
		p.atLimitLocked(now)
	}
	strategy := p.strategy
	p.mu.Unlock()
	if strategy != nil {
		p.report(strategy, ev, err)
	}
	p.mu.Lock()
	if owner != nil {
		owner.creating, owner.call = false, nil // kept until now: nobody dials for it twice
	}
	if p.state == Active && p.acquired+p.checking == 0 && !p.closed {
		now = p.clock()
		refusing := p.refusingLocked(now)
		if refusing || ev == EventCreateFailed && isTimeout(err) {
			since := noDeadline // refusing: whenever they came
			if !refusing {
				since = now - took/2
			}
			p.failWaitingLocked(err, refusing, owner, since)
			p.startFactoriesLocked()
			p.fillToMinLocked()
			p.mu.Unlock()
			return
		}
	}
	if p.redialLocked(owner, ev, err, took) {
		p.startFactoryLocked(owner, now)
	}
	// At the backend's limit the caller waits on, within its deadline,
	// for a resource released or the next attempt (the breaker's trial,
	// or the end of the back-off): a connection may free any moment, and
	// trying again is what cures this error.
	tell := owner != nil && owner.queued && !p.servableLocked() && (ev != EventAtLimit || p.state == Inactive)
	if tell {
		p.waiters.remove(owner)
	}
	p.startFactoriesLocked()
	p.fillToMinLocked()
	p.mu.Unlock()
	if tell {
		owner.ch <- result[T]{err: err} // it waits for this: it left the queue
	}
}

// redialLocked reports whether owner, whose own factory call failed with
// err after took, gets its next call at once, past the back-off: the call
// was answered (not a timeout, not a permanent cause) after a while (at
// least BackoffMin), as a standby refuses a primary's callers, or a
// server starting up its new ones, during a failover. The next attempt
// may be the first the promoted server accepts, and a plain driver's
// caller would be dialling it now; the back-off is for failures that come
// at once (a port nobody listens on), which it still spaces, and for
// silence; not for one the backend accepted (Accepted). One call per
// waiting caller at most, within Max.
func (p *Pool[T]) redialLocked(owner *waiter[T], ev Event, err error, took time.Duration) bool {
	return owner != nil && owner.queued && !owner.creating && p.state == Active && !p.closed &&
		ev == EventCreateFailed && !p.permanent && !isTimeout(err) && !errors.As(err, new(*acceptedError)) &&
		p.cfg.BackoffMin > 0 && took >= p.cfg.BackoffMin && p.total < p.maxLocked()
}

// Accepted marks a factory error that came after the backend accepted
// the resource: the factory's own set-up of it failed (a caller's hook on
// a new connection). The backend answered, but not as a standby refuses a
// primary's callers during a failover: calling the factory again at once
// (redialLocked) cures nothing, and the caller it was made for gets the
// error, as for one that came at once. errors.Is and errors.As reach err.
func Accepted(err error) error { return &acceptedError{err: err} }

type acceptedError struct{ err error }

func (e *acceptedError) Error() string { return e.err.Error() }
func (e *acceptedError) Unwrap() error { return e.err }

// failWaitingLocked fails the waiters that have no factory call of their
// own under way, after a failed factory call with nothing in use (see
// createFailed): owner, and those that came by since. With ErrPermanent
// when refusing, else with err itself.
func (p *Pool[T]) failWaitingLocked(err error, refusing bool, owner *waiter[T], since time.Duration) {
	for w := p.waiters.head; w != nil; {
		next := w.next
		if !w.creating && (w == owner || w.start <= since) {
			p.waiters.remove(w)
			p.stats.failFast++
			if refusing {
				w.ch <- result[T]{err: p.acquireErrorLocked(ErrPermanent)} // it waits for this: it left the queue
			} else {
				w.ch <- result[T]{err: err}
			}
		}
		w = next
	}
}

// refusingLocked reports whether the pool fails at once the callers that
// only a new resource could serve: the last factory call failed for a
// permanent cause, the circuit is closed (the breaker's own states rule
// otherwise), and the pool never created a resource, or has failed for
// PermanentGrace.
func (p *Pool[T]) refusingLocked(now time.Duration) bool {
	return p.permanent && p.state == Active && (!p.connected || now-p.failingSince >= p.cfg.PermanentGrace)
}

// isTimeout reports a factory error that says the backend did not answer
// in time: a context deadline, or an error that says Timeout (net.Error's
// convention).
func isTimeout(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}

// servableLocked reports whether a caller whose own factory call just
// failed may go on waiting rather than get that call's error: while a resource is
// in use or being created, which can still serve it. With nothing of the
// kind, the attempt made for it was the one that could serve it, and its
// error is the answer (as a caller of a plain driver gets its own dial's
// error): a factory that fails for good (a bad password, a bad setup
// query) then fails each caller once, not for as long as it would wait.
// While Inactive, and without a back-off (NoBackoff: the next call would
// follow at once), it gets the error: the failure that opened the circuit
// is its answer, as a plain driver's caller gets its own dial's error
// (those that wait without a failed call of their own wait for a resource
// in use: see refusalLocked).
func (p *Pool[T]) servableLocked() bool {
	switch p.state {
	case Inactive:
		return false
	case Active:
		if p.cfg.BackoffMin <= 0 {
			return false
		}
	}
	return p.acquired+p.creating > 0
}

// destroy calls the destructor, then frees r's slot: the slot is freed only
// once the resource is really gone, so that Max holds for the backend too.
// idle tells whether r was idle (not counted in acquired).
func (p *Pool[T]) destroy(r *Resource[T], idle bool) {
	p.destruct(r.value)
	p.mu.Lock()
	p.unregister(r)
	p.total--
	if !idle {
		p.acquired--
	}
	p.stats.destroyed++
	p.startFactoriesLocked()
	p.fillToMinLocked() // at once, not at the next healthcheck
	p.mu.Unlock()
}
