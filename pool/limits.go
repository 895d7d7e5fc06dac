package pool

// The bounds on the pool's size, read under mu: Max, or the share below it
// (share.go), and Min and MinIdle.

// maxLocked is the most resources the pool may hold now. The caller holds
// mu.
func (p *Pool[T]) maxLocked() int {
	if p.share > 0 {
		return p.share
	}
	return p.cfg.Max
}

// aboveShareLocked reports whether a resource being released is to be
// destroyed to bring the pool down to its share. The caller holds mu.
func (p *Pool[T]) aboveShareLocked() bool { return p.share > 0 && p.total > p.share }

// belowMinLocked reports whether fewer than Min resources exist, or fewer
// than MinIdle are idle, being created or being checked (an idle resource
// the healthcheck holds comes back idle, or is destroyed and then
// replaced: counting it as missing would make one too many).
func (p *Pool[T]) belowMinLocked() bool {
	return p.total < p.cfg.Min || p.cfg.MinIdle > 0 && p.idleLocked()+p.creating+p.checking < p.cfg.MinIdle
}

// aboveMin reports whether the pool holds more than Min resources: idle
// time may take one then (see expiredLocked).
func (p *Pool[T]) aboveMin() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.total > p.cfg.Min
}
