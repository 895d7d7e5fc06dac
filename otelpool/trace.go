package otelpool

import (
	"context"
	"errors"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/pooldriver/pooldriver"
)

// The names of the spans a Tracer records. The database client conventions
// name no span for a pool's acquire or connect, so these are pooldriver's.
const (
	AcquireSpanName = "pool.acquire"
	ConnectSpanName = "pool.connect"
	ReleaseSpanName = "pool.release"
)

// The attributes of a pool.release span, pooldriver's own: how long the
// hold had the connection, in seconds, whether the connection is reset or
// rolled back before anyone else gets it, and whether it is closed instead
// (see pooldriver.TraceReleaseData).
const (
	HeldKey   = attribute.Key("pooldriver.connection.held")
	ResetKey  = attribute.Key("pooldriver.connection.reset")
	ClosedKey = attribute.Key("pooldriver.connection.closed")
)

// Tracer records OpenTelemetry spans of a pool's acquires and connects: it
// is a [pooldriver.Tracer] (see there for which are traced), made by
// [NewTracer]; [WithTracing] is the Option that sets one.
//
//   - pool.acquire (SpanKind internal): a hold going to the pool for a
//     physical connection, from the start of its wait to having one, a
//     child of the statement's span (the caller's context);
//   - pool.connect (SpanKind client): an attempt to open a physical
//     connection, a child of the acquire that caused it, or a root span
//     for those the pool opens by itself (pool_min_conns, the refill);
//   - pool.release (SpanKind internal): a hold giving back the connection
//     it acquired, a child of the span its acquire was a child of (the
//     statement's, or the request's), with [HeldKey], [ResetKey] and
//     [ClosedKey]: a moment, recorded as the hold ends (see
//     pooldriver.ReleaseContextTracer).
//
// All carry db.client.connection.pool.name (the Connector's PoolName). One
// that failed has the status Error, with the error's text (pooldriver's
// errors hold no password) and error.type: pooldriver.AcquireTimeoutError,
// pooldriver.ErrCircuitOpen, pooldriver.ErrClosed, context.DeadlineExceeded,
// context.Canceled, else the type of the innermost cause (*pgconn.PgError,
// *mysql.MySQLError, syscall.Errno for a refused port, ...), as
// semconv.ErrorType names it. The innermost cause is found by unwrapping;
// through an error that joins several (errors.Join, fmt.Errorf with more
// than one %w, pgx's connect error over every address it tried), by the
// first of them, the one its message leads with. A Tracer not
// made by NewTracer (the zero Tracer) records nothing.
type Tracer struct {
	tracer trace.Tracer
	// The start options of the last pool name seen, built once: a Tracer
	// usually serves one Connector, whose name does not change.
	opts atomic.Pointer[startOptions]
}

// startOptions are the options of the spans of one pool.
type startOptions struct {
	pool             string
	acquire, connect []trace.SpanStartOption
	name             attribute.KeyValue
}

// options returns the start options of pool's spans.
func (t *Tracer) options(pool string) *startOptions {
	if o := t.opts.Load(); o != nil && o.pool == pool {
		return o
	}
	kv := semconv.DBClientConnectionPoolName(pool)
	name := trace.WithAttributes(kv)
	o := &startOptions{
		pool:    pool,
		acquire: []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindInternal), name},
		connect: []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindClient), name},
		name:    kv,
	}
	t.opts.Store(o)
	return o
}

var (
	_ pooldriver.Tracer               = (*Tracer)(nil)
	_ pooldriver.ReleaseContextTracer = (*Tracer)(nil)
)

// NewTracer returns a Tracer that records spans through a tracer of tp,
// whose instrumentation scope is [ScopeName] with the conventions' schema
// URL. A nil tp is an error.
func NewTracer(tp trace.TracerProvider) (*Tracer, error) {
	if tp == nil {
		return nil, errors.New("otelpool: NewTracer: the TracerProvider is nil")
	}
	return &Tracer{tracer: tp.Tracer(ScopeName, trace.WithSchemaURL(SchemaURL))}, nil
}

// WithTracing is the pooldriver Option that traces the pool's acquires and
// connects through tp (see [Tracer]):
//
//	c := pooldriver.New(dsn, otelpool.WithTracing(otel.GetTracerProvider()))
//
// A nil tp makes the Connector fail: its Err, and so every Connect, reports
// it.
func WithTracing(tp trace.TracerProvider) pooldriver.Option {
	t, err := NewTracer(tp)
	if err != nil {
		return func(*pooldriver.Config) error { return err }
	}
	return pooldriver.WithTracer(t)
}

// TraceAcquireStart starts the pool.acquire span.
func (t *Tracer) TraceAcquireStart(ctx context.Context, d pooldriver.TraceAcquireStartData) context.Context {
	if t == nil || t.tracer == nil {
		return ctx
	}
	ctx, _ = t.tracer.Start(ctx, AcquireSpanName, t.options(d.PoolName).acquire...)
	return ctx
}

// TraceAcquireEnd ends the pool.acquire span with its outcome.
func (t *Tracer) TraceAcquireEnd(ctx context.Context, d pooldriver.TraceAcquireEndData) {
	if t == nil || t.tracer == nil {
		return // ctx holds no span of ours: the caller's must not be ended
	}
	end(trace.SpanFromContext(ctx), d.Err)
}

// TraceConnectStart starts the pool.connect span.
func (t *Tracer) TraceConnectStart(ctx context.Context, d pooldriver.TraceConnectStartData) context.Context {
	if t == nil || t.tracer == nil {
		return ctx
	}
	ctx, _ = t.tracer.Start(ctx, ConnectSpanName, t.options(d.PoolName).connect...)
	return ctx
}

// TraceConnectEnd ends the pool.connect span with its outcome.
func (t *Tracer) TraceConnectEnd(ctx context.Context, d pooldriver.TraceConnectEndData) {
	if t == nil || t.tracer == nil {
		return // ctx holds no span of ours: the caller's must not be ended
	}
	end(trace.SpanFromContext(ctx), d.Err)
}

// TraceReleaseContext records the pool.release span, under ctx's span:
// the acquire's caller's.
func (t *Tracer) TraceReleaseContext(ctx context.Context, d pooldriver.TraceReleaseData) {
	if t == nil || t.tracer == nil {
		return
	}
	_, span := t.tracer.Start(ctx, ReleaseSpanName, trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(
		t.options(d.PoolName).name,
		HeldKey.Float64(d.Held.Seconds()),
		ResetKey.Bool(d.Reset),
		ClosedKey.Bool(d.Closed),
	))
	span.End()
}

// end ends span, failed with err unless it is nil.
func end(span trace.Span, err error) {
	if err != nil {
		span.SetAttributes(attribute.KeyValue{Key: semconv.ErrorTypeKey, Value: attribute.StringValue(errorType(err))})
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// errorType names err for error.type, with few values: pooldriver's own
// outcomes by name, else the innermost cause's type.
func errorType(err error) string {
	var timeout *pooldriver.AcquireTimeoutError
	switch {
	case errors.As(err, &timeout):
		return "pooldriver.AcquireTimeoutError"
	case errors.Is(err, pooldriver.ErrCircuitOpen):
		return "pooldriver.ErrCircuitOpen"
	case errors.Is(err, pooldriver.ErrClosed):
		return "pooldriver.ErrClosed"
	case errors.Is(err, context.DeadlineExceeded):
		return "context.DeadlineExceeded"
	case errors.Is(err, context.Canceled):
		return "context.Canceled"
	}
	return semconv.ErrorType(innermost(err)).Value.AsString()
}

// innermost returns the cause at the bottom of err's chain. Where an error
// wraps several (errors.Join, fmt.Errorf with more than one %w, pgx's
// connect error over every address it tried), the chain goes on through
// the first of them: the one the error's message leads with.
func innermost(err error) error {
	for {
		switch u := err.(type) {
		case interface{ Unwrap() error }:
			next := u.Unwrap()
			if next == nil {
				return err
			}
			err = next
		case interface{ Unwrap() []error }:
			next := firstOf(u.Unwrap())
			if next == nil {
				return err
			}
			err = next
		default:
			return err
		}
	}
}

// firstOf returns the first error of errs that is not nil, or nil.
func firstOf(errs []error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}
