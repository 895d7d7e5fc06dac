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
	now := time.Now()
	t.TraceAcquireEnd(ctx, TraceAcquireEndData{PoolName: c.name, Wait: now.Sub(start), Err: err})
	if err == nil && c.env.releases != nil {
		pc.tracedAt, pc.traced = now, true // nobody else has pc: the hold's own
	}
	return pc, err
}

// traceRelease tells the ReleaseTracer that pc's hold, whose acquire was
// traced, ends with fate f. The caller has pc to itself.
func (pc *physConn) traceRelease(f fate) {
	pc.traced = false
	pc.env.releases.TraceRelease(TraceReleaseData{
		PoolName: pc.env.poolName,
		Held:     time.Since(pc.tracedAt),
		Reset:    f == fateReset || f == fateRollback || f == fateRollbackReset,
		Closed:   f == fateDestroy,
	})
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

// releaseTracer returns t where it hears of releases too, else nil.
func releaseTracer(t Tracer) ReleaseTracer {
	r, _ := t.(ReleaseTracer)
	return r
}
