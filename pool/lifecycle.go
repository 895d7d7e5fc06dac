package pool

import (
	"context"
	"time"
)

// A pool's life: New, then Drain, Close or CloseAsync; CloseIdle replaces
// its idle resources with new ones.

// New validates cfg, applies its defaults and returns a pool. Min resources
// are created in the background; nothing else is created until needed.
func New[T any](cfg Config[T]) (*Pool[T], error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	p := &Pool[T]{cfg: cfg, epoch: time.Now()}
	p.setStrategyLocked(cfg.Strategy)
	p.bgCtx, p.bgCancel = context.WithCancel(context.Background())
	p.mu.Lock()
	p.fillToMinLocked()
	p.mu.Unlock()
	if cfg.HealthcheckInterval > 0 {
		p.goBackground(p.healthLoop)
	}
	return p, nil
}

// Close closes the pool: every waiter fails with ErrClosed, idle resources
// are destroyed, resources in use are destroyed when they are released,
// factory calls in flight are cancelled, and Close returns once every
// background goroutine has stopped (a CloseAsync's included). Later
// Acquire calls fail with ErrClosed. Close is idempotent.
func (p *Pool[T]) Close() {
	if idle, first := p.closeBegin(nil); first {
		p.closeEnd(idle)
	}
	p.wg.Wait()
	p.closers.Wait()
}

// CloseAsync is Close without the waiting: when it returns the pool is
// closed (waiters failed, Acquire refused, factory calls cancelled); the
// idle resources are destroyed, and the background goroutines waited for,
// on a goroutine of its own, which a later Close waits for. It returns the
// values of the resources in use as it closed the pool (InUse's), read
// before the waiters it fails wake to contend for the pool's lock; nil
// when the pool was closed already.
func (p *Pool[T]) CloseAsync() (inUse []T) {
	idle, first := p.closeBegin(&inUse)
	if first {
		p.closers.Add(1)
		go func() {
			defer p.closers.Done()
			p.closeEnd(idle)
		}()
	}
	return inUse
}

// closeBegin closes the pool, unless it is closed already (first is false
// then): it fails the waiters, cancels the factory calls in flight, and
// returns the idle resources, which closeEnd destroys. With inUse, it
// stores there the values of the resources in use first.
func (p *Pool[T]) closeBegin(inUse *[]T) (idle []*Resource[T], first bool) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, false
	}
	if inUse != nil {
		*inUse = p.inUseLocked()
	}
	p.closed = true
	p.closing.Store(true)
	if p.timeouts != nil {
		p.timeouts.Stop()
	}
	if p.dials != nil {
		p.dials.Stop()
	}
	if p.trim != nil {
		p.trim.Stop()
	}
	for w := p.waiters.popFront(); w != nil; w = p.waiters.popFront() {
		w.ch <- result[T]{err: ErrClosed}
	}
	p.unparkAllLocked(p.clock()) // into the ring, destroyed by closeEnd
	for r, ok := p.idle.PopBack(); ok; r, ok = p.idle.PopBack() {
		r.state.Store(stateDestroyed)
		idle = append(idle, r)
	}
	p.mu.Unlock()
	p.bgCancel()
	return idle, true
}

// closeEnd destroys the idle resources closeBegin took and waits for the
// background goroutines.
func (p *Pool[T]) closeEnd(idle []*Resource[T]) {
	for _, r := range idle {
		p.destroy(r, true)
	}
	p.wg.Wait()
}

// CloseIdle destroys every idle resource (parked ones included) now and starts refilling to Min
// and MinIdle with new ones; resources in use are not touched (their
// holder decides, on Release or Destroy). Those being checked or tended
// (taken out of idle by CheckNow, Tend or TendOne) are destroyed when that
// ends. It returns how many it destroyed now.
func (p *Pool[T]) CloseIdle() int {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return 0
	}
	p.unparkAllLocked(p.clock())
	p.idleCloses++
	var idle []*Resource[T]
	for r, ok := p.idle.PopBack(); ok; r, ok = p.idle.PopBack() {
		r.state.Store(stateDestroyed)
		idle = append(idle, r)
	}
	p.mu.Unlock()
	for _, r := range idle {
		p.destroy(r, true)
	}
	p.mu.Lock()
	p.fillToMinLocked()
	p.mu.Unlock()
	return len(idle)
}

// Retire is CloseIdle for every resource that exists now: the idle ones
// (parked ones included) are destroyed at once, each in use, or being
// checked or tended, when it comes back (its Release, Park or check
// destroys it), and each being created as it arrives (its factory is
// called again), so that none of them serves. New ones refill to Min
// and MinIdle. It returns how many it destroyed now. A holder that must
// see its resources go (a credential change, a failover) calls it rather
// than CloseIdle: the holder's own check of a resource it releases may
// have run before Retire did.
func (p *Pool[T]) Retire() int {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return 0
	}
	p.retires++
	for _, r := range p.all {
		r.retired.Store(true) // before they can be unparked to a waiter
	}
	p.mu.Unlock()
	return p.CloseIdle()
}

// Drain readies the pool for its holders' last uses before Close: every
// parked resource is made idle (its Unpark fails) and none is parked from
// then on, so that each use begins with Acquire, where the caller can
// refuse it. Acquire serves as before.
func (p *Pool[T]) Drain() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	p.closing.Store(true)
	p.unparkAllLocked(p.clock())
}
