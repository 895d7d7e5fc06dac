package pool

import "context"

// factoryCall is a factory call made for a waiting caller: it carries the
// caller's values but not its cancellation, so that a call in flight goes
// on when the caller that needed it gives up, and its resource serves the
// next one. Except while the backend is silent (the last call failed by a
// timeout): then the caller's giving up ends its call (abandonLocked). A
// call hung in a black hole would otherwise hold its slot until its own
// timeout, past the end of the black hole, and with every slot so held
// the callers that came after it could not dial a backend that answers
// again (a plain driver's dial is the caller's, and ends with it).
type factoryCall struct {
	ctx       context.Context
	cancel    context.CancelFunc
	stop      func() bool // of the AfterFunc that ends it with the pool
	abandoned bool        // guarded by the pool's mu
}

// newFactoryCall makes the context of a call for a caller whose context
// is caller, in a pool whose own context is pool (ended by Close).
func newFactoryCall(caller, pool context.Context) *factoryCall {
	ctx, cancel := context.WithCancel(context.WithoutCancel(caller))
	return &factoryCall{ctx: ctx, cancel: cancel, stop: context.AfterFunc(pool, cancel)}
}

func (c *factoryCall) end() {
	c.stop()
	c.cancel()
}
