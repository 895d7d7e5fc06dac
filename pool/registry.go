package pool

// The registry of resources: p.all lists every resource in existence,
// whatever its state, so that the pool can find the parked ones (which
// leave the idle ring without its lock: see steal.go) and count them. It
// is guarded by mu.

// register and unregister keep p.all, the list of every resource in
// existence that stealLocked scans. The caller holds mu.
func (p *Pool[T]) register(r *Resource[T]) {
	r.slot = len(p.all)
	p.all = append(p.all, r)
}

func (p *Pool[T]) unregister(r *Resource[T]) {
	last := p.all[len(p.all)-1]
	p.all[r.slot] = last
	last.slot = r.slot
	p.all[len(p.all)-1] = nil
	p.all = p.all[:len(p.all)-1]
	p.stats.reuses += r.reuses.Load()
}

// parkedLocked counts the parked resources. The caller holds mu.
func (p *Pool[T]) parkedLocked() int {
	n := 0
	for _, r := range p.all {
		if r.state.Load() == stateParked {
			n++
		}
	}
	return n
}

// idleLocked counts the idle resources, parked ones included. The caller
// holds mu.
func (p *Pool[T]) idleLocked() int { return p.idle.Len() + p.parkedLocked() }

// inUseLocked is InUse with mu held.
func (p *Pool[T]) inUseLocked() []T {
	var vs []T
	for _, r := range p.all {
		if r.state.Load() == stateAcquired {
			vs = append(vs, r.value)
		}
	}
	return vs
}
