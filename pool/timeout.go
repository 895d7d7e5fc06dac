package pool

import "time"

// The acquire timeout (Config.AcquireTimeout): one timer for the pool, not
// one per wait, fails the waiters whose time is up.

// armTimeoutsLocked arms the pool's acquire-timeout timer for a waiter just
// queued, unless it is armed already: then it fires for an older waiter
// first and expireWaiters re-arms it. Unarmed, no older waiter is queued, so
// the new one's timeout is the first due.
func (p *Pool[T]) armTimeoutsLocked() {
	if p.cfg.AcquireTimeout <= 0 || p.timeoutsArmed {
		return
	}
	p.timeoutsArmed = true
	if p.timeouts == nil {
		p.timeouts = time.AfterFunc(p.cfg.AcquireTimeout, p.expireWaiters)
		return
	}
	p.timeouts.Reset(p.cfg.AcquireTimeout)
}

// expireWaiters fails, with ErrTimeout, every waiter that has waited
// Config.AcquireTimeout, and re-arms the timer for the oldest one left.
// Waiters are queued in arrival order but for the few put back at the front
// (they are older still), so this looks at all of them; it runs once per
// timeout, not per wait.
func (p *Pool[T]) expireWaiters() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.timeoutsArmed = false
	if p.closed {
		return
	}
	now := p.clock()
	oldest := noDeadline
	for w := p.waiters.head; w != nil; {
		next := w.next
		if now-w.start >= p.cfg.AcquireTimeout {
			p.waiters.remove(w)
			p.stats.timeouts++
			w.ch <- result[T]{err: p.acquireErrorLocked(ErrTimeout)} // it waits for this: it left the queue
		} else if w.start < oldest {
			oldest = w.start
		}
		w = next
	}
	if oldest != noDeadline {
		p.timeoutsArmed = true
		p.timeouts.Reset(oldest + p.cfg.AcquireTimeout - now)
	}
}
