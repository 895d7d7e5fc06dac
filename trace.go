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
	if err == nil && tracesReleases(t) {
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

// Released tells c's Tracer, which hears of releases, of the end of a hold
// whose acquire it traced (phys.Conn.TraceHold); a ReleaseTracer that
// takes no context is called without it.
func (o connOwner) Released(ctx context.Context, held time.Duration, reset, closed bool) {
	d := TraceReleaseData{PoolName: o.c.name, Held: held, Reset: reset, Closed: closed}
	switch r := o.c.cfg.Tracer.(type) {
	case ReleaseContextTracer:
		r.TraceReleaseContext(ctx, d)
	case ReleaseTracer:
		r.TraceRelease(d)
	}
}

// tracesReleases reports whether t hears of releases too.
func tracesReleases(t Tracer) bool {
	switch t.(type) {
	case ReleaseContextTracer, ReleaseTracer:
		return true
	}
	return false
}
