// Package inner is the sealed package of TestSealed.
package inner

import "sync"

// State is the state behind Conn's lock.
type State struct{ N int }

// Conn keeps its state behind its methods.
type Conn struct {
	Mu    sync.Mutex
	St    State  // its state: read by its methods only
	Ptr   *State // a pointer: not reported when read
	Count int
}

// Locked runs fn with c's state under its lock.
func (c *Conn) Locked(fn func(*State)) {
	c.Mu.Lock()
	defer c.Mu.Unlock()
	fn(&c.St)
}
