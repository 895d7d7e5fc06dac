package otelpool_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/pooldriver/pooldriver"
	"github.com/pooldriver/pooldriver/internal/fakedb"
	"github.com/pooldriver/pooldriver/internal/servertest"
	"github.com/pooldriver/pooldriver/otelpool"
)

// traced opens a fake server's pool of one connection, traced into a span
// recorder, named orders.
func traced(t *testing.T, params string) (*sql.DB, *pooldriver.Connector, *fakedb.Server, *tracetest.SpanRecorder, trace.Tracer) {
	t.Helper()
	srv := fakedb.NewServer(strings.ReplaceAll(t.Name(), "/", "_"))
	t.Cleanup(srv.Close)
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	dsn := "fake://app:s3cret@" + srv.Name() + "?pool_name=orders&pool_max_conns=1"
	if params != "" {
		dsn += "&" + params
	}
	c := pooldriver.New(dsn, otelpool.WithTracing(tp))
	if err := c.Err(); err != nil {
		t.Fatal(err)
	}
	db := sql.OpenDB(c)
	t.Cleanup(func() { _ = db.Close() })
	return db, c, srv, rec, tp.Tracer("test")
}

// ended returns the ended spans named name whose parent is parent.
func ended(rec *tracetest.SpanRecorder, name string, parent trace.SpanContext) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.Name() == name && s.Parent().SpanID() == parent.SpanID() {
			out = append(out, s)
		}
	}
	return out
}

func attr(s sdktrace.ReadOnlySpan, key attribute.Key) string {
	for _, a := range s.Attributes() {
		if a.Key == key {
			return a.Value.String()
		}
	}
	return ""
}

// checkSpan checks the pool name, the status, error.type and that no
// password shows.
func checkSpan(t *testing.T, s sdktrace.ReadOnlySpan, errType string) {
	t.Helper()
	if got := attr(s, otelpool.PoolNameKey); got != "orders" {
		t.Errorf("%s: pool name %q, want orders", s.Name(), got)
	}
	if got := attr(s, "error.type"); got != errType {
		t.Errorf("%s: error.type %q, want %q", s.Name(), got, errType)
	}
	wantStatus := codes.Unset
	if errType != "" {
		wantStatus = codes.Error
	}
	if s.Status().Code != wantStatus {
		t.Errorf("%s: status %v %q, want %v", s.Name(), s.Status().Code, s.Status().Description, wantStatus)
	}
	if strings.Contains(s.Status().Description+s.Name()+attr(s, otelpool.PoolNameKey), "s3cret") {
		t.Errorf("%s: the password shows: %q", s.Name(), s.Status().Description)
	}
}

// A statement that waits for the only connection, held by a transaction,
// gets it when the transaction ends: its pool.acquire span is a child of
// the statement's span, lasts the wait, and succeeded.
func TestTraceWait(t *testing.T) {
	db, c, _, rec, tr := traced(t, "")
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	ctx, parent := tr.Start(context.Background(), "handler")
	done := make(chan error, 1)
	go func() {
		_, err := db.ExecContext(ctx, "INSERT t 1")
		done <- err
	}()
	servertest.WaitFor(t, "the statement waiting", func() bool { return c.Stats().Waiting > 0 })
	time.Sleep(5 * time.Millisecond) // a wait of some length, to see in the span
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	parent.End()
	spans := ended(rec, otelpool.AcquireSpanName, parent.SpanContext())
	if len(spans) != 1 {
		t.Fatalf("%d pool.acquire spans under the handler's, want 1", len(spans))
	}
	s := spans[0]
	checkSpan(t, s, "")
	if s.SpanContext().TraceID() != parent.SpanContext().TraceID() || s.SpanKind() != trace.SpanKindInternal {
		t.Errorf("span %v kind %v: not in the handler's trace", s.SpanContext(), s.SpanKind())
	}
	if d := s.EndTime().Sub(s.StartTime()); d < 5*time.Millisecond {
		t.Errorf("pool.acquire lasted %v, want the wait (≥ 5ms)", d)
	}
	// The transaction's acquire, which connected: the connect is its child.
	roots := ended(rec, otelpool.AcquireSpanName, trace.SpanContext{})
	if len(roots) != 1 {
		t.Fatalf("%d pool.acquire spans without a parent, want 1 (the transaction's)", len(roots))
	}
	connects := ended(rec, otelpool.ConnectSpanName, roots[0].SpanContext())
	if len(connects) != 1 {
		t.Fatalf("%d pool.connect spans under the transaction's acquire, want 1", len(connects))
	}
	checkSpan(t, connects[0], "")
	if connects[0].SpanKind() != trace.SpanKindClient {
		t.Errorf("pool.connect kind %v, want client", connects[0].SpanKind())
	}
}

// A hold's release is a pool.release span under the span its acquire was a
// child of (the request's): a statement's, which parks its connection, and
// a transaction's, begun and committed in the request; neither failed, the
// transaction's connection is kept.
func TestTraceRelease(t *testing.T) {
	db, _, _, rec, tr := traced(t, "")
	ctx, parent := tr.Start(context.Background(), "handler")
	if _, err := db.ExecContext(ctx, "INSERT t 1"); err != nil {
		t.Fatal(err)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.ExecContext(ctx, "INSERT t 2"); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	parent.End()
	acquires := ended(rec, otelpool.AcquireSpanName, parent.SpanContext())
	releases := ended(rec, otelpool.ReleaseSpanName, parent.SpanContext())
	if len(releases) == 0 || len(releases) != len(acquires) {
		t.Fatalf("%d pool.release spans under the handler's for %d pool.acquire spans, want one each (of %d spans in all)", len(releases), len(acquires), len(rec.Ended()))
	}
	for _, s := range releases {
		checkSpan(t, s, "")
		if s.SpanContext().TraceID() != parent.SpanContext().TraceID() || s.SpanKind() != trace.SpanKindInternal {
			t.Errorf("span %v kind %v: not in the handler's trace", s.SpanContext(), s.SpanKind())
		}
		if attr(s, otelpool.ClosedKey) != "false" || attr(s, otelpool.HeldKey) == "" {
			t.Errorf("pool.release: closed %q, held %q; want false and a duration", attr(s, otelpool.ClosedKey), attr(s, otelpool.HeldKey))
		}
	}
}

// A wait that the acquire timeout ends is recorded as failed, with
// error.type pooldriver.AcquireTimeoutError.
func TestTraceWaitTimesOut(t *testing.T) {
	// The one connection is opened by the pool, not for Begin's acquire,
	// which would wait for it only 20 ms (a busy machine).
	db, c, _, rec, tr := traced(t, "pool_acquire_timeout=20ms&pool_min_conns=1")
	for deadline := time.Now().Add(10 * time.Second); c.Stats().Idle != 1; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the pool did not open its one connection in 10 s")
		}
	}
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	ctx, parent := tr.Start(context.Background(), "handler")
	_, err = db.ExecContext(ctx, "INSERT t 1")
	parent.End()
	var te *pooldriver.AcquireTimeoutError
	if !errors.As(err, &te) {
		t.Fatalf("Exec: %v, want an *AcquireTimeoutError", err)
	}
	spans := ended(rec, otelpool.AcquireSpanName, parent.SpanContext())
	if len(spans) != 1 {
		t.Fatalf("%d pool.acquire spans under the handler's, want 1", len(spans))
	}
	checkSpan(t, spans[0], "pooldriver.AcquireTimeoutError")
	if d := spans[0].EndTime().Sub(spans[0].StartTime()); d < 20*time.Millisecond {
		t.Errorf("pool.acquire lasted %v, want the timeout (≥ 20ms)", d)
	}
	if !strings.Contains(spans[0].Status().Description, "timed out") {
		t.Errorf("status %q: does not say it timed out", spans[0].Status().Description)
	}
}

// A connect that fails is a failed pool.connect span, the child of the
// statement's pool.acquire, itself failed, itself the child of the
// statement's span.
func TestTraceConnectFails(t *testing.T) {
	db, _, srv, rec, tr := traced(t, "")
	// Every connect fails: a refusal that took the back-off's 10 ms or
	// more (a busy machine) is tried again at once for its caller
	// (docs/pool.md), and that attempt must fail too.
	srv.FailConnects(1<<30, &refused{})
	ctx, parent := tr.Start(context.Background(), "handler")
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err := db.ExecContext(ctx, "INSERT t 1")
	parent.End()
	if err == nil {
		t.Fatal("Exec succeeded, want the connect's error")
	}
	checkFailedConnect(t, rec, parent.SpanContext(), "*otelpool_test.refused")
}

// checkFailedConnect checks that a pool.acquire under parent failed with
// errType, and a pool.connect under it too.
func checkFailedConnect(t *testing.T, rec *tracetest.SpanRecorder, parent trace.SpanContext, errType string) {
	t.Helper()
	acquires := ended(rec, otelpool.AcquireSpanName, parent)
	if len(acquires) == 0 {
		t.Fatal("no pool.acquire span under the handler's")
	}
	var connects []sdktrace.ReadOnlySpan
	for _, a := range acquires {
		connects = append(connects, ended(rec, otelpool.ConnectSpanName, a.SpanContext())...)
	}
	if len(connects) == 0 {
		t.Fatal("no pool.connect span under the statement's pool.acquire")
	}
	checkSpan(t, connects[0], errType)
	checkSpan(t, acquires[0], errType)
}

// A connect error that joins several (as pgx's does, over every address it
// tried) is named by the first of them, the one its message leads with, not
// by the join.
func TestTraceErrorTypeJoined(t *testing.T) {
	db, _, srv, rec, tr := traced(t, "")
	srv.FailConnects(1<<30, fmt.Errorf("connect: %w", errors.Join(&refused{}, io.ErrUnexpectedEOF))) // every connect: see TestTraceConnectFails
	ctx, parent := tr.Start(context.Background(), "handler")
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err := db.ExecContext(ctx, "INSERT t 1")
	parent.End()
	if err == nil {
		t.Fatal("Exec succeeded, want the connect's error")
	}
	checkFailedConnect(t, rec, parent.SpanContext(), "*otelpool_test.refused")
}

// pgx's own connect errors, which join the error of every address tried:
// a refused port is named by the system's error, and, against the server
// of POOLDRIVER_POSTGRES_DSN, an unknown database by the server's
// (*pgconn.PgError).
func TestTraceErrorTypePgx(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	_ = l.Close() // nothing listens there now
	cases := []struct{ name, dsn, want string }{
		{"refused port", "postgres://app:s3cret@" + closed + "/shop?sslmode=disable", "syscall.Errno"},
	}
	if dsn := os.Getenv("POOLDRIVER_POSTGRES_DSN"); dsn != "" {
		u := strings.Replace(dsn, "/test?", "/tr56_no_such_db?", 1)
		if u == dsn {
			t.Logf("POOLDRIVER_POSTGRES_DSN %q names no database test: the unknown database case is skipped", dsn)
		} else {
			cases = append(cases, struct{ name, dsn, want string }{"unknown database", u, "*pgconn.PgError"})
		}
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec := tracetest.NewSpanRecorder()
			tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
			defer func() { _ = tp.Shutdown(context.Background()) }()
			c := pooldriver.New(tc.dsn+"&pool_name=orders", otelpool.WithTracing(tp))
			if err := c.Err(); err != nil {
				t.Fatal(err)
			}
			db := sql.OpenDB(c)
			defer db.Close()
			ctx, parent := tp.Tracer("test").Start(context.Background(), "handler")
			ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			if err := db.PingContext(ctx); err == nil {
				t.Fatal("Ping succeeded, want the connect's error")
			}
			parent.End()
			checkFailedConnect(t, rec, parent.SpanContext(), tc.want)
		})
	}
}

// refused is a connect error of a type of its own.
type refused struct{}

func (*refused) Error() string { return "connection refused" }

func TestNewTracerNil(t *testing.T) {
	if _, err := otelpool.NewTracer(nil); err == nil {
		t.Error("NewTracer(nil): no error")
	}
	srv := fakedb.NewServer(t.Name())
	defer srv.Close()
	if err := pooldriver.New("fake://"+srv.Name(), otelpool.WithTracing(nil)).Err(); err == nil || !strings.Contains(err.Error(), "TracerProvider is nil") {
		t.Errorf("WithTracing(nil): %v", err)
	}
}

// The zero Tracer records nothing, and does not end the caller's span.
func TestZeroTracer(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	ctx, parent := tp.Tracer("test").Start(context.Background(), "handler")
	var zero otelpool.Tracer
	zero.TraceAcquireEnd(zero.TraceAcquireStart(ctx, pooldriver.TraceAcquireStartData{}), pooldriver.TraceAcquireEndData{})
	zero.TraceConnectEnd(zero.TraceConnectStart(ctx, pooldriver.TraceConnectStartData{}), pooldriver.TraceConnectEndData{})
	zero.TraceReleaseContext(ctx, pooldriver.TraceReleaseData{})
	if n := len(rec.Ended()); n != 0 || !parent.IsRecording() {
		t.Errorf("%d spans ended, the handler's recording: %v", n, parent.IsRecording())
	}
	parent.End()
}
