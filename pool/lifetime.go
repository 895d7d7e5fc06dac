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

// timedExpiry reports whether resources expire with time at all.
func (p *Pool[T]) timedExpiry() bool { return p.cfg.MaxLifetime > 0 || p.cfg.MaxIdleTime > 0 }

// expired is expiredLocked for a resource the caller holds.
func (p *Pool[T]) expired(r *Resource[T]) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.expiredLocked(r, p.clock())
}

// expiredLocked reports whether r, idle or just taken from idle, is to be
// destroyed rather than used: it outlived its lifetime, or it sat idle
// MaxIdleTime while the pool holds more than Min resources. Idle time never
// takes the pool below Min (as pgxpool keeps its minimum): the refill would
// open another at once, and a pool at rest would churn its minimum every
// MaxIdleTime. The caller holds mu.
func (p *Pool[T]) expiredLocked(r *Resource[T], now time.Duration) bool {
	return p.outlivedLocked(r, now) || p.idleTooLongLocked(r, now) && p.total > p.cfg.Min
}

// outlivedLocked reports whether r outlived its lifetime (MaxLifetime plus
// its jitter): it goes, whatever the minimum.
func (p *Pool[T]) outlivedLocked(r *Resource[T], now time.Duration) bool {
	return r.lifetime > 0 && now-r.created >= r.lifetime
}

// idleTooLongLocked reports whether r has been idle MaxIdleTime; whether
// it goes depends on the minimums (expiredLocked, CheckNow).
func (p *Pool[T]) idleTooLongLocked(r *Resource[T], now time.Duration) bool {
	return p.cfg.MaxIdleTime > 0 && now-r.idleSince >= p.cfg.MaxIdleTime
}
