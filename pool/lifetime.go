package pool

import (
	"math/rand/v2"
	"time"
)

// lifetime draws the lifetime of a new resource: MaxLifetime plus a random
// share of MaxLifetimeJitter, so that resources created together expire
// spread over the jitter instead of all at once.
func (p *Pool[T]) lifetime() time.Duration {
	d := p.cfg.MaxLifetime
	if d > 0 && p.cfg.MaxLifetimeJitter > 0 {
		d += rand.N(p.cfg.MaxLifetimeJitter)
	}
	return d
}

// CloseIdle destroys every idle resource (parked ones included) now and starts refilling to Min
// and MinIdle with new ones; resources in use are not touched (their
// holder decides, on Release or Destroy). It returns how many it destroyed.
func (p *Pool[T]) CloseIdle() int {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return 0
	}
	p.unparkAllLocked(p.clock())
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

// InUse returns the values of the resources handed out and not yet
// released or destroyed (parked ones are not).
func (p *Pool[T]) InUse() []T {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.inUseLocked()
}
