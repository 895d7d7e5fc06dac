package pooldriver

import (
	"context"
	"time"

	"github.com/pooldriver/pooldriver/internal/phys"
)

// acquireTraced is acquire, told to c's Tracer.
func (c *Connector) acquireTraced(ctx context.Context) (*phys.Conn, error) {
	t := c.cfg.Tracer
	start := time.Now()
	caller := ctx
	ctx = t.TraceAcquireStart(ctx, TraceAcquireStartData{PoolName: c.name})
	pc, err := c.take(ctx)
	now := time.Now()
	t.TraceAcquireEnd(ctx, TraceAcquireEndData{PoolName: c.name, Wait: now.Sub(start), Err: err})
	if err == nil && c.env.Releases != nil {
		// Nobody else has pc: the hold's own.
		pc.TraceHold(caller, now)
	}
	return pc, err
}

// openTraced is open, told to c's Tracer.
func (c *Connector) openTraced(ctx context.Context) (*phys.Conn, error) {
	t := c.cfg.Tracer
	start := time.Now()
	ctx = t.TraceConnectStart(ctx, TraceConnectStartData{PoolName: c.name})
	pc, err := c.connect(ctx)
	t.TraceConnectEnd(ctx, TraceConnectEndData{PoolName: c.name, Duration: time.Since(start), Err: err})
	return pc, err
}

// releaseTracer returns t, where it hears of releases too, as the physical
// connections' releaseHook for the pool named name, else nil: a
// ReleaseTracer that takes no context is called without it.
func releaseTracer(t Tracer, name string) phys.ReleaseHook {
	switch r := t.(type) {
	case ReleaseContextTracer:
		return releaseTrace{r, name}
	case ReleaseTracer:
		return releaseTrace{releaseWithoutContext{r}, name}
	}
	return nil
}

// releaseTrace tells a ReleaseContextTracer of the end of a traced hold.
type releaseTrace struct {
	t        ReleaseContextTracer
	poolName string
}

// Released: a hold let go of a connection, which was reset or closed, or
// neither.
func (r releaseTrace) Released(ctx context.Context, held time.Duration, reset, closed bool) {
	r.t.TraceReleaseContext(ctx, TraceReleaseData{PoolName: r.poolName, Held: held, Reset: reset, Closed: closed})
}

// releaseWithoutContext is a ReleaseTracer called as a ReleaseContextTracer.
type releaseWithoutContext struct{ r ReleaseTracer }

func (w releaseWithoutContext) TraceReleaseContext(_ context.Context, d TraceReleaseData) {
	w.r.TraceRelease(d)
}
