package pooldriver

import (
	"context"
	"errors"
	"time"
)

// WithTracer sets t to trace the pool's acquires and connects (see
// [Tracer]); without one, nothing is traced and nothing is paid for it.
func WithTracer(t Tracer) Option {
	return func(c *Config) error {
		if t == nil {
			return errors.New("pooldriver: WithTracer(nil): a Tracer is required")
		}
		c.Tracer = t
		return nil
	}
}

// acquireTraced is acquire, told to c's Tracer.
func (c *Connector) acquireTraced(ctx context.Context) (*physConn, error) {
	t := c.cfg.Tracer
	start := time.Now()
	ctx = t.TraceAcquireStart(ctx, TraceAcquireStartData{PoolName: c.name})
	pc, err := c.take(ctx)
	t.TraceAcquireEnd(ctx, TraceAcquireEndData{PoolName: c.name, Wait: time.Since(start), Err: err})
	return pc, err
}

// openTraced is open, told to c's Tracer.
func (c *Connector) openTraced(ctx context.Context) (*physConn, error) {
	t := c.cfg.Tracer
	start := time.Now()
	ctx = t.TraceConnectStart(ctx, TraceConnectStartData{PoolName: c.name})
	pc, err := c.connect(ctx)
	t.TraceConnectEnd(ctx, TraceConnectEndData{PoolName: c.name, Duration: time.Since(start), Err: err})
	return pc, err
}
