package pool

import "context"

// healthLoop runs the background healthcheck every HealthcheckInterval until
// the pool closes.
func (p *Pool[T]) healthLoop() { p.every(p.cfg.HealthcheckInterval, p.CheckNow) }

// CheckNow runs one healthcheck round at once: make parked resources idle
// (see Park), destroy the idle resources
// that outlived MaxLifetime or MaxIdleTime (idle time keeping Min
// resources and MinIdle idle ones), check each remaining idle one
// with Healthcheck (destroying failures), then refill to Min. Resources in
// use are never touched. The background healthcheck calls it every
// HealthcheckInterval.
func (p *Pool[T]) CheckNow() {
	now := p.clock()
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.unparkAllLocked(now) // checked with the idle ones: parked long, maybe
	// Idle time takes the pool neither below Min resources nor below
	// MinIdle idle ones (see expiredLocked); n counts those already chosen
	// to go, the longest idle first (the ring's front).
	idle, n := p.idle.Len(), 0
	expired := p.idle.Filter(func(r *Resource[T]) bool {
		if p.outlivedLocked(r, now) || p.idleTooLongLocked(r, now) && p.total-n > p.cfg.Min && idle-n > p.cfg.MinIdle {
			n++
			return false
		}
		return true
	}, nil)
	for _, r := range expired {
		r.state.Store(stateDestroyed)
	}
	p.stats.expired += int64(len(expired))
	var snapshot []*Resource[T]
	if p.cfg.Healthcheck != nil {
		snapshot = make([]*Resource[T], 0, p.idle.Len())
		for i := 0; i < p.idle.Len(); i++ {
			snapshot = append(snapshot, p.idle.At(i))
		}
	}
	p.mu.Unlock()
	for _, r := range expired {
		p.destroy(r, true)
	}
	for _, r := range snapshot {
		p.tend(r, p.callHealthcheck, true)
	}
	p.mu.Lock()
	p.fillToMinLocked()
	p.mu.Unlock()
}

// Tend runs f on r's value if r is idle, taken out of the idle ring
// meanwhile (as the healthcheck takes one), and then puts it back, or
// destroys it when f fails. It reports whether r was idle. The user of a
// resource runs its own upkeep this way off the acquirers' paths: a
// session reset that waited for the next user, say, once it sat idle.
func (r *Resource[T]) Tend(f func(T) error) bool {
	return r.pool.tend(r, f, false)
}

// TendOne runs f, as Tend does, on the resource idle longest (parked ones
// made idle first, as CheckNow does), and reports whether there was one.
func (p *Pool[T]) TendOne(f func(T) error) bool {
	p.mu.Lock()
	if !p.closed {
		p.unparkAllLocked(p.clock())
	}
	if p.closed || p.idle.Len() == 0 {
		p.mu.Unlock()
		return false
	}
	r := p.idle.At(0)
	p.mu.Unlock()
	return p.tend(r, f, false)
}

// tend takes r out of the idle ring if it is still idle (and, for the
// healthcheck, was not used since the snapshot), runs f on it, and puts it
// back or destroys it: when f fails, and when CloseIdle ran meanwhile (it
// would have destroyed r, idle). check: f is the healthcheck, whose
// failures count.
func (p *Pool[T]) tend(r *Resource[T], f func(T) error, check bool) bool {
	p.mu.Lock()
	if p.closed || !r.state.CompareAndSwap(stateIdle, stateChecking) {
		p.mu.Unlock()
		return false // in use now, or gone
	}
	p.idle.Filter(func(x *Resource[T]) bool { return x != r }, nil)
	p.checking++
	closes := p.idleCloses
	p.mu.Unlock()

	return p.tended(r, f(r.value), closes, check)
}

// tended ends a tend of r that f ran (closes: the CloseIdle calls when r
// was taken): it puts r back, or destroys it when f failed (err) or it
// went stale meanwhile. It reports true.
func (p *Pool[T]) tended(r *Resource[T], err error, closes uint64, check bool) bool {
	p.mu.Lock()
	p.checking--
	if err != nil || p.closed || p.idleCloses != closes || r.retired.Load() {
		if err != nil && check {
			p.stats.hcFailures++
		}
		r.state.Store(stateDestroyed)
		p.mu.Unlock()
		p.destroy(r, true)
		if err != nil && check {
			p.reportCheckFailed()
		}
		return true
	}
	if p.waiters.len() > 0 {
		p.putLocked(r, p.clock(), owesNothing)
	} else {
		// It was idle longer than anything released meanwhile: the front.
		r.state.Store(stateIdle)
		p.idle.PushFront(r)
	}
	p.mu.Unlock()
	return true
}

// TendNext runs f, as Tend does, on an idle resource, or, where none is,
// on the next one released (a holder's Park hands it back meanwhile, as
// for a waiter: see Resource.Contended), waiting for it within ctx, ahead
// of Acquire's waiters; a new resource made while they wait is theirs
// (see putLocked). It starts no factory call, and what it takes is no
// hand-out: the pool neither grows for it nor counts it as an acquire,
// and it is in use only as the healthcheck's is. The user of a resource
// runs upkeep this way that cannot wait for a resource to sit idle
// (callers that keep every one busy), and is worth a short wait of
// theirs. One TendNext waits at a time: it reports false at once beside
// another, as when ctx ends before a resource comes, and true once it ran
// f.
func (p *Pool[T]) TendNext(ctx context.Context, f func(T) error) bool {
	if p.TendOne(f) {
		return true
	}
	p.mu.Lock()
	if p.closed || p.tender != nil {
		p.mu.Unlock()
		return false
	}
	t := &tender[T]{ch: make(chan *Resource[T], 1)}
	p.tender = t
	p.tending.Store(true) // before the steal: see stealLocked and Park
	if r := p.stealLocked(); r != nil {
		p.putLocked(r, p.clock(), owesExpiry) // to t
	}
	p.mu.Unlock()
	var r *Resource[T]
	select {
	case r = <-t.ch:
	case <-ctx.Done():
		p.mu.Lock()
		if p.tender == t {
			p.tender = nil
			p.tending.Store(false)
			p.mu.Unlock()
			return false
		}
		p.mu.Unlock()
		r = <-t.ch // handed one as ctx ended: it is t's to put back
	}
	return p.tended(r, f(r.value), t.closes, false)
}
