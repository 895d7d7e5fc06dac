package pooldriver

import (
	"context"
	"time"
)

// acquireTraced is acquire, told to c's Tracer.
func (c *Connector) acquireTraced(ctx context.Context) (*physConn, error) {
	t := c.cfg.Tracer
	start := time.Now()
	caller := ctx
	ctx = t.TraceAcquireStart(ctx, TraceAcquireStartData{PoolName: c.name})
	pc, err := c.take(ctx)
	now := time.Now()
	t.TraceAcquireEnd(ctx, TraceAcquireEndData{PoolName: c.name, Wait: now.Sub(start), Err: err})
	if err == nil && c.env.releases != nil {
		// Nobody else has pc: the hold's own.
		pc.tracedAt, pc.tracedCtx, pc.traced = now, caller, true
	}
	return pc, err
}

// releaseTrace takes what the release of pc's traced hold is told: the
// acquire's context and the data, without the fate's part. The caller has
// pc to itself; after it, pc keeps no context.
func (pc *physConn) releaseTrace() (context.Context, TraceReleaseData) {
	ctx := pc.tracedCtx
	pc.traced, pc.tracedCtx = false, nil
	return ctx, TraceReleaseData{PoolName: pc.env.poolName, Held: time.Since(pc.tracedAt)}
}

// traceRelease tells the release tracer that pc's hold, whose acquire was
// traced, ends with fate f. The caller has pc to itself.
func (pc *physConn) traceRelease(f fate) {
	ctx, d := pc.releaseTrace()
	d.Reset = f == fateReset || f == fateRollback || f == fateRollbackReset || f == fateCarry
	d.Closed = f == fateDestroy
	pc.env.releases.TraceReleaseContext(ctx, d)
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

// releaseTracer returns t where it hears of releases too, else nil: a
// ReleaseTracer that takes no context is called without it.
func releaseTracer(t Tracer) ReleaseContextTracer {
	switch r := t.(type) {
	case ReleaseContextTracer:
		return r
	case ReleaseTracer:
		return releaseWithoutContext{r}
	}
	return nil
}

// releaseWithoutContext is a ReleaseTracer called as a ReleaseContextTracer.
type releaseWithoutContext struct{ r ReleaseTracer }

func (w releaseWithoutContext) TraceReleaseContext(_ context.Context, d TraceReleaseData) {
	w.r.TraceRelease(d)
}
