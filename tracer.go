package pooldriver

import (
	"context"
	"time"
)

// Tracer hears of the two things a pool does that a trace of a request
// wants to show: a hold taking a physical connection from the pool (which
// may wait, and is where the pool's delays show), and the pool opening a
// new physical connection (pgxpool's AcquireTracer and pgx's
// ConnectTracer). Each Start method returns the context the rest of the
// operation runs with, and its End method is called with that context:
// a tracer keeps its span there. otelpool.WithTracing makes one that
// records OpenTelemetry spans.
//
// Which acquires are traced: every one that goes to the pool, whether it
// finds an idle connection at once, waits in the queue, or has a new one
// opened for it (as pgxpool traces every Acquire), since only the pool
// knows which it will be, and a wait must be in a trace from its start for
// the connect it causes to be its child. A hold that takes back the
// connection its logical conn parked (serial work's fast path, which takes
// no lock) does not go to the pool and is not traced: it can neither wait
// nor connect. So serial work records few acquires, and work that
// contends for connections records one per hold, with its wait.
//
// Which connects are traced: every attempt, with the context of the acquire
// that caused it (the connect span is the child of its acquire span; the
// connection goes to the longest waiter, which is not always that one),
// or, for the connections the pool opens by itself (pool_min_conns,
// pool_min_idle_conns, the healthcheck's refill), a context with no span.
// A connect goes on when the caller that caused it gives up, and ends
// after it.
//
// The methods are called concurrently, from the goroutines of the
// statements and of the pool, and must not block. The data never holds a
// password: errors are the ones pooldriver returns, redacted.
type Tracer interface {
	TraceAcquireStart(ctx context.Context, data TraceAcquireStartData) context.Context
	TraceAcquireEnd(ctx context.Context, data TraceAcquireEndData)
	TraceConnectStart(ctx context.Context, data TraceConnectStartData) context.Context
	TraceConnectEnd(ctx context.Context, data TraceConnectEndData)
}

// TraceAcquireStartData is what a Tracer is told when a hold goes to the
// pool for a physical connection.
type TraceAcquireStartData struct {
	PoolName string // Connector.PoolName
}

// TraceAcquireEndData is how an acquire ended.
type TraceAcquireEndData struct {
	PoolName string
	// Wait is how long the acquire took: from going to the pool to having
	// a connection (after the BeforeAcquire hook), or failing.
	Wait time.Duration
	// Err is nil when a connection was acquired; otherwise the error the
	// statement gets: an *AcquireTimeoutError, the caller's context's
	// error (errors.Is), ErrCircuitOpen, ErrClosed, a failed connect's
	// error, the BeforeAcquire hook's.
	Err error
}

// TraceConnectStartData is what a Tracer is told when the pool starts to
// open a physical connection.
type TraceConnectStartData struct {
	PoolName string
}

// TraceConnectEndData is how an attempt to open a physical connection
// ended.
type TraceConnectEndData struct {
	PoolName string
	// Duration is how long the attempt took: credentials, the driver's
	// connect and the AfterConnect hook.
	Duration time.Duration
	Err      error // nil: connected
}

// ReleaseTracer is implemented by a Tracer that also hears of a hold
// giving back a physical connection it took from the pool (pgxpool's
// ReleaseTracer): how long it held it, and what pooldriver did with it
// then. Its releases are those of the acquires TraceAcquireEnd reports as
// successful, one each, including a hold that parks its connection for
// its logical conn's next statement (whose taking it back is not traced:
// see Tracer). TraceRelease is called on the goroutine that ends the hold,
// and must not block.
type ReleaseTracer interface {
	TraceRelease(data TraceReleaseData)
}

// ReleaseContextTracer is a Tracer that hears of releases as a
// ReleaseTracer does, and is told the context of the release's request:
// the one the hold's acquire was traced with (the caller's, as given to
// TraceAcquireStart, not the one that returned, whose acquire has ended),
// so that a release can join the request's trace. A Tracer that
// implements it is called through it, and not through TraceRelease.
// otelpool's Tracer records a pool.release span with it.
type ReleaseContextTracer interface {
	TraceReleaseContext(ctx context.Context, data TraceReleaseData)
}

// TraceReleaseData is how a hold gave back its physical connection.
type TraceReleaseData struct {
	PoolName string
	// Held is how long the hold had the connection: from its acquire to
	// its end.
	Held time.Duration
	// Reset: the connection is settled before anyone else gets it, off
	// the caller's path: its session reset, or a transaction left open
	// rolled back.
	Reset bool
	// Closed: the connection is closed rather than given back (broken,
	// its state unknown, opened before Connector.Reset, or refused by the
	// AfterRelease hook); also where the reset or rollback then fails.
	Closed bool
}
