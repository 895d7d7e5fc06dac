package pool

// Sharing a full backend with pools that cannot see each other (the
// instances of a service): pressure.go gives back idle resources once this
// pool found the backend full, but pools whose resources are all in use,
// and that never dial, never find it full, and an instance started after
// them never gets a resource. Whoever watches the backend (pooldriver asks
// the server who is connected: see its share.go) sets the pool's share: the
// most resources it may hold. Above its share the pool creates none, and a
// released resource is destroyed rather than kept or handed on, so the
// room goes to the backend's other clients; parking is refused meanwhile,
// as under pressure. The share never goes below Min.

// SetShare sets the most resources the pool may hold to n, from Min (or 1)
// to Max; n ≥ Max lifts the limit. Idle resources above it are destroyed
// at once, those in use as they are released.
func (p *Pool[T]) SetShare(n int) {
	p.mu.Lock()
	n = min(max(n, p.cfg.Min, 1), p.cfg.Max)
	if n == p.cfg.Max {
		n = 0
	}
	p.share = n
	p.shareOn.Store(n > 0)
	if n == 0 || p.closed {
		p.startFactoriesLocked()
		p.mu.Unlock()
		return
	}
	p.unparkAllLocked(p.clock())
	var gone []*Resource[T]
	for p.total-len(gone) > n {
		r, ok := p.idle.PopFront() // the longest idle
		if !ok {
			break
		}
		r.state.Store(stateDestroyed)
		gone = append(gone, r)
	}
	p.stats.trimmed += int64(len(gone))
	p.mu.Unlock()
	for _, r := range gone {
		p.destroy(r, true)
	}
}

// Share returns the most resources the pool may hold now: Max unless
// SetShare lowered it.
func (p *Pool[T]) Share() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.maxLocked()
}
