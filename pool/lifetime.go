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
