package pool

import "time"

// The pool's side of parking (park.go): under mu it takes parked resources
// for an Acquire that finds the idle ring empty, for a waiter that
// arrives, and for whatever makes every resource idle first (the
// healthcheck, CloseIdle, Close).

// stealLocked takes a parked resource for the pool, or returns nil. It is
// then counted as idle (a parked resource is counted as acquired, since
// Park takes no lock), and the caller hands it out or makes it idle. The
// caller holds mu.
//
// It scans p.all only while mayBeParked is set: under contention nothing
// is parked (Park refuses while anyone waits), and a waiter that queues
// then pays one load rather than a scan of every resource. Park sets the
// word after its state change, unless it is set already (a load: the
// serial Park and Unpark take no further locked instruction); a scan that
// finds nothing parked clears it, then scans again, and sets it again if
// that finds one.
//
// Why no parked resource is missed. Every access to mayBeParked, the
// resources' states and the count of waiters is sequentially consistent,
// so they happen in one total order S. Claim: whenever mu is free, a
// resource whose Park has done its load (and store) of mayBeParked and
// that is still parked has mayBeParked set. Take the last clear in S. If
// it came before Park's load, Park found the word clear and set it, or
// found it set by a later store; no clear follows. If it came after,
// the clear's second scan came after Park's state change, found the
// resource parked (it still is: only its holder's Unpark or a steal,
// which then sets the word, ends a park), and set the word again.
// Now a waiter (or Close) writes the count of waiters (closing) under mu,
// then loads mayBeParked, and scans if set; Park writes its state, then
// does its load (and store) of mayBeParked, then loads the count of
// waiters (closing). If Park's load of the count misses the waiter, Park
// did all of its work before the waiter's load of mayBeParked: by the
// claim (the waiter holds mu) the word is set, and the waiter's scan,
// later still in S, finds the resource parked, unless someone took it.
// Otherwise Park sees the waiter and takes its resource back itself to
// release it, as before. Either way they do not both stay.
func (p *Pool[T]) stealLocked() *Resource[T] {
	if !p.mayBeParked.Load() {
		return nil
	}
	if r := p.stealAnyLocked(); r != nil {
		return r
	}
	if testHookScanned != nil {
		testHookScanned()
	}
	p.mayBeParked.Store(false)
	if r := p.stealAnyLocked(); r != nil {
		p.mayBeParked.Store(true) // there may be more
		return r
	}
	return nil
}

// testHookScanned, when a test sets it, runs in stealLocked between the
// scan that found nothing and the clear: where a Park that lands there
// would be missed but for the second scan (TestStealRescansAfterClear).
var testHookScanned func()

// stealAnyLocked is stealLocked's scan. The caller holds mu.
func (p *Pool[T]) stealAnyLocked() *Resource[T] {
	for _, r := range p.all {
		if r.state.Load() == stateParked && r.state.CompareAndSwap(stateParked, stateChecking) {
			p.acquired--
			p.stats.parkEnds++
			r.stolen = true // IdleFor: how long it was parked, on the coarse clock
			return r
		}
	}
	return nil
}

// feedWaitersLocked hands parked resources to the waiters, oldest first, as
// long as both exist. A waiter that just queued calls it: a resource parked
// before it was counted would not come to it otherwise. The caller holds mu.
func (p *Pool[T]) feedWaitersLocked() {
	for p.waiters.len() > 0 && p.mayBeParked.Load() {
		r := p.stealLocked()
		if r == nil {
			return
		}
		p.putLocked(r, p.clock(), owesExpiry)
	}
}

// unparkAllLocked moves every parked resource into the idle ring (or to a
// waiter), where the healthcheck, CloseIdle and Close find it. The caller
// holds mu.
func (p *Pool[T]) unparkAllLocked(now time.Duration) {
	for r := p.stealLocked(); r != nil; r = p.stealLocked() {
		p.putLocked(r, now, owesExpiry)
	}
}
