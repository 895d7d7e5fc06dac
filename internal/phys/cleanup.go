package phys

import "sync"

// Cleanups runs the session resets of connections let go of
// (Conn.settle) on goroutines of their own, so that the statement whose
// hold ended, or the task's end, does not wait a round trip for them: the
// connection is out of everyone's reach until its cleanup hands it back to
// the pool. The Connector's Close waits for those under way; once it began,
// a cleanup runs on the goroutine that let go, as before.
type Cleanups struct {
	mu     sync.Mutex // protects the fields below
	idle   *sync.Cond // on mu: running reached 0
	closed bool
	n      int // cleanups running
}

// start runs f on a goroutine of its own and reports true, unless the
// Connector is closing: then it reports false and the caller runs f.
func (c *Cleanups) start(f func()) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false
	}
	c.n++
	go func() {
		defer c.finish()
		f()
	}()
	return true
}

func (c *Cleanups) finish() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n--; c.n == 0 && c.idle != nil {
		c.idle.Broadcast()
	}
}

// Wait waits until no cleanup runs (each is bounded by the cleanup
// timeout).
func (c *Cleanups) Wait() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.idle == nil {
		c.idle = sync.NewCond(&c.mu)
	}
	for c.n > 0 {
		c.idle.Wait()
	}
}

// Close makes every later cleanup run on its caller's goroutine and waits
// for those under way.
func (c *Cleanups) Close() {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.Wait()
}
