package service_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/semconv/v1.43.0/dbconv"
	"go.opentelemetry.io/otel/trace"

	"github.com/pooldriver/pooldriver"
	"github.com/pooldriver/pooldriver/examples/service"
	"github.com/pooldriver/pooldriver/otelpool"
)

const localDSN = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// waitLimit bounds every wait for a condition: generous, for a loaded
// machine; a passing run takes a few seconds.
const waitLimit = 30 * time.Second

// TestService runs the service against PostgreSQL and reads back what an
// operator sees: the HTTP answers, /metrics as Prometheus scrapes it, the
// OpenTelemetry SDK's metrics and spans, the JSON logs; checking the names
// against promcollector's documentation and otelpool's conventions. Then
// a second pool at the server's connection limit (testServerLimit).
func TestService(t *testing.T) {
	dsn := postgresDSN(t)
	checkNoGoroutineLeak(t)
	h := newHarness(t)
	admin := h.admin(t, dsn)

	// The service's tables in a schema of the test's own, through the
	// search_path the DSN passes to the server; no health check, so that
	// the pool stands still between requests.
	schema := "pdsvc_" + randomHex(t)
	mustExec(t, admin, "CREATE SCHEMA "+schema)
	t.Cleanup(func() { mustExec(t, admin, "DROP SCHEMA "+schema+" CASCADE") })
	const name, maxConns = "service-test", 4
	srv, _ := h.start(t, withParams(t, dsn, "search_path="+schema, "pool_health_check_period=0"), service.Options{PoolName: name, MaxConns: maxConns}, true)

	// The API. The second note comes with a traceparent: its span is that
	// trace's child.
	parent := trace.SpanContextFromContext(contextWithRemoteSpan(t))
	first := h.call(t, srv, "POST", "/notes", "first", nil, http.StatusCreated)
	h.call(t, srv, "POST", "/notes", "second", http.Header{"Traceparent": {traceparent(parent)}}, http.StatusCreated)
	// The database refuses a body over 1000 characters after BEGIN: the
	// handler returns without ROLLBACK and the task's end rolls back.
	h.call(t, srv, "POST", "/notes", strings.Repeat("x", 1001), nil, http.StatusUnprocessableEntity)
	var n service.Note
	firstPath := fmt.Sprint("/notes/", decodeNote(t, first).ID)
	decode(t, h.call(t, srv, "GET", firstPath, "", nil, http.StatusOK), &n)
	if n.Body != "first" {
		t.Errorf("GET /notes/{id}: %+v", n)
	}
	h.call(t, srv, "GET", "/notes/999999999", "", nil, http.StatusNotFound)
	var notes []service.Note
	decode(t, h.call(t, srv, "GET", "/notes", "", nil, http.StatusOK), &notes)
	if len(notes) != 2 || notes[0].Body != "second" || notes[1].Body != "first" {
		t.Errorf("GET /notes: %+v", notes)
	}
	h.call(t, srv, "GET", "/healthz", "", nil, http.StatusOK)
	var events int
	if err := admin.QueryRow("SELECT count(*) FROM " + schema + ".note_events").Scan(&events); err != nil || events != 2 {
		t.Errorf("note events: %d, %v; want one per note committed", events, err)
	}

	t.Run("prometheus", func(t *testing.T) {
		// A connection whose session a request changed is reset after
		// its release, off the request's path, and counts as used until
		// it is back in the pool: wait for the pool to be at rest.
		fams := scrape(t, srv)
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
			if v, ok := promValue(fams, name, "pooldriver_connections|used"); ok && v == 0 {
				break
			}
			time.Sleep(20 * time.Millisecond)
			fams = scrape(t, srv)
		}
		checkPromNames(t, fams, name)
		want := map[string]float64{
			"pooldriver_max_connections":                 maxConns,
			"pooldriver_pending_requests":                0,
			"pooldriver_connections|used":                0,
			"pooldriver_circuit_breaker_state|closed":    1,
			"pooldriver_circuit_breaker_state|open":      0,
			"pooldriver_circuit_breaker_state|half-open": 0,
			"pooldriver_circuit_breaker_state|limited":   0,
			"pooldriver_acquire_timeouts_total":          0,
			"pooldriver_circuit_breaker_changes_total":   0,
		}
		for key, v := range want {
			if got, ok := promValue(fams, name, key); !ok || got != v {
				t.Errorf("%s{pool=%q}: %v (found: %v), want %v", key, name, got, ok, v)
			}
		}
		for _, key := range []string{"pooldriver_acquires_total", "pooldriver_connections_created_total", "pooldriver_auto_rollbacks_total"} {
			if got, _ := promValue(fams, name, key); got < 1 {
				t.Errorf("%s{pool=%q}: %v, want at least 1", key, name, got)
			}
		}
		for _, key := range []string{"pooldriver_wait_seconds", "pooldriver_create_seconds"} {
			if c := histogramCount(fams, name, key); c < 1 {
				t.Errorf("%s{pool=%q}: %d observations", key, name, c)
			}
		}
	})

	t.Run("opentelemetry metrics", func(t *testing.T) {
		// The two are read one after the other: a connection that goes
		// idle or is closed in the background (a reset's, a catalog
		// reading's) in between moves one and not the other. Read them
		// again, for up to 5 s, until they agree on the idle count.
		rm := h.collect(t)
		fams := scrape(t, srv)
		idle, _ := promValue(fams, name, "pooldriver_connections|idle")
		for end := time.Now().Add(5 * time.Second); time.Now().Before(end); {
			if got, ok := otelValue(rm, name, "db.client.connection.count|idle"); ok && got == int64(idle) {
				break
			}
			time.Sleep(50 * time.Millisecond)
			rm = h.collect(t)
			fams = scrape(t, srv)
			idle, _ = promValue(fams, name, "pooldriver_connections|idle")
		}
		checkOtelConventions(t, rm, []string{name})
		want := map[string]int64{
			"db.client.connection.count|used":       0,
			"db.client.connection.count|idle":       int64(idle),
			"db.client.connection.max":              maxConns,
			"db.client.connection.idle.max":         maxConns,
			"db.client.connection.idle.min":         0,
			"db.client.connection.pending_requests": 0,
			"db.client.connection.timeouts":         0,
		}
		for key, v := range want {
			if got, ok := otelValue(rm, name, key); !ok || got != v {
				t.Errorf("%s{pool.name=%q}: %d (found: %v), want %d (as /metrics says)", key, name, got, ok, v)
			}
		}
		for _, key := range []string{"db.client.connection.create_time", "db.client.connection.wait_time", "db.client.connection.use_time"} {
			if c := otelHistogramCount(rm, name, key); c < 1 {
				t.Errorf("%s{pool.name=%q}: %d observations", key, name, c)
			}
		}
	})

	t.Run("spans", func(t *testing.T) {
		want := []struct {
			name   string
			path   string
			status int
		}{
			{"POST /notes", "/notes", 201},
			{"POST /notes", "/notes", 201},
			{"POST /notes", "/notes", 422},
			{"GET /notes/{id}", firstPath, 200},
			{"GET /notes/{id}", "/notes/999999999", 404},
			{"GET /notes", "/notes", 200},
			{"GET /healthz", "/healthz", 200},
		}
		spans := h.waitSpans(t, len(want))
		for i, w := range want {
			s := spans[i]
			route, _ := strings.CutPrefix(w.name, strings.Fields(w.name)[0]+" ")
			checkSpan(t, s, w.name, route, w.status)
			if p := s.Attributes(); !hasAttr(p, semconv.URLPath(w.path)) {
				t.Errorf("span %d %s: attributes %v, want url.path %s", i, s.Name(), p, w.path)
			}
		}
		if s := spans[1]; s.SpanContext().TraceID() != parent.TraceID() || s.Parent().SpanID() != parent.SpanID() || !s.Parent().IsRemote() {
			t.Errorf("the span of the request with a traceparent: trace %s, parent %s (remote %v); want %s, %s",
				s.SpanContext().TraceID(), s.Parent().SpanID(), s.Parent().IsRemote(), parent.TraceID(), parent.SpanID())
		}
		// pooldriver logs the rollback at the end of the refused note's
		// task with the request's context: the line carries its span.
		refused := spans[2].SpanContext().SpanID().String()
		if !slices.ContainsFunc(h.logRecords(t), func(r map[string]any) bool {
			return r["level"] == "DEBUG" && r["pool"] == name && r["span_id"] == refused
		}) {
			t.Errorf("no DEBUG line of pool %s with the span of the refused note's request (%s): the task end's rollback", name, refused)
		}
		// The pool's spans: every acquire a child of a request's span
		// (the statements run with the request's context) or of none (the
		// test's Migrate), every connect a child of an acquire or of none
		// (the pool's own), all served.
		acquires, connects := poolSpans(t, h.spans.Ended(), name)
		if !slices.ContainsFunc(acquires, func(a sdktrace.ReadOnlySpan) bool { return childOf(a, spans) }) || len(connects) == 0 {
			t.Errorf("%d pool.acquire spans (none a request's child) and %d pool.connect spans of pool %s, want some of each", len(acquires), len(connects), name)
		}
		for _, a := range acquires {
			if a.Parent().IsValid() && !childOf(a, spans) || a.Status().Code == codes.Error {
				t.Errorf("pool.acquire span %s: parent %s, status %v; want a request's child, served", a.SpanContext().SpanID(), a.Parent().SpanID(), a.Status())
			}
		}
		for _, c := range connects {
			if c.Parent().IsValid() && !childOf(c, acquires) || c.Status().Code == codes.Error {
				t.Errorf("pool.connect span %s: parent %s, status %v; want an acquire's child (or none: the pool's own), connected", c.SpanContext().SpanID(), c.Parent().SpanID(), c.Status())
			}
		}
		// The access log line of each request carries its span.
		for _, s := range spans {
			id := s.SpanContext().SpanID().String()
			if !slices.ContainsFunc(h.logRecords(t), func(r map[string]any) bool { return r["msg"] == "request" && r["span_id"] == id }) {
				t.Errorf("no log line for the request of span %s %s", s.Name(), id)
			}
		}
	})

	t.Run("server limit", func(t *testing.T) { testServerLimit(t, h, admin, dsn, srv, name) })
}

// testServerLimit runs a second pool of the service, on the same registry
// and providers as srv's (of the pool name), over a role the server lets
// open one connection: held by another client, a request's connection is
// refused and the request answered 503 with the server's error; once the
// pool has that one connection and something holds it, a request waits,
// and /metrics shows the breaker `limited` with the request pending, as
// the SDK's metrics do; when the connection comes back, the request is
// served.
func testServerLimit(t *testing.T, h *harness, admin *sql.DB, dsn string, srv *httptest.Server, name string) {
	before := len(h.spans.Ended())
	// A role the server lets open one connection, held by another
	// client (another instance of the service, say).
	role := "pdsvc_lim_" + randomHex(t)
	mustExec(t, admin, "CREATE ROLE "+role+" LOGIN CONNECTION LIMIT 1")
	t.Cleanup(func() { dropRole(t, admin, role) })
	roleDSN := withUser(t, dsn, role)
	other, err := pgx.Connect(ctx(t), withoutPoolParams(t, roleDSN))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = other.Close(context.Background()) }()

	// A second pool of the service, on the same registry and
	// providers, over that role.
	const limited = "service-limited"
	lsrv, ldb := h.start(t, withParams(t, roleDSN, "pool_health_check_period=0", "pool_acquire_timeout=2m"), service.Options{PoolName: limited, MaxConns: 2}, false)

	// 1. No connection to be had, none in the pool: the request's own
	// connection attempt is refused, and the request waits for its turn
	// (a connection released, or the breaker's next trial) until its
	// client gives up; its answer, 503, names the server's refusal.
	impatient := &http.Client{Transport: h.client.Transport, Timeout: 2 * time.Second}
	if resp, err := impatient.Get(lsrv.URL + "/healthz"); err == nil {
		_ = resp.Body.Close()
		t.Fatalf("GET /healthz with no connection to be had: %s, want it to wait", resp.Status)
	}
	eventually(t, "the breaker's change to limited logged", func() (bool, string) {
		return slices.ContainsFunc(h.logRecords(t), func(r map[string]any) bool {
			return r["level"] == "WARN" && r["pool"] == limited && r["to"] == "limited" && strings.Contains(fmt.Sprint(r["error"]), "53300")
		}), "no such line yet"
	})
	eventually(t, "the 503 logged with the server's refusal", func() (bool, string) {
		return slices.ContainsFunc(h.logRecords(t), func(r map[string]any) bool {
			return r["msg"] == "request failed" && r["status"] == float64(http.StatusServiceUnavailable) && strings.Contains(fmt.Sprint(r["err"]), "53300")
		}), "no such line yet"
	})

	// 2. The other client lets go: the pool connects (the breaker's
	// next trial), and keeps the role's one connection.
	if err := other.Close(ctx(t)); err != nil {
		t.Fatal(err)
	}
	eventually(t, "GET /healthz served once the other client let go", func() (bool, string) {
		resp, err := h.client.Get(lsrv.URL + "/healthz")
		if err != nil {
			return false, err.Error()
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK, resp.Status
	})

	// 3. Something of the service holds that connection (a long
	// report, say), and a request needs another: the server refuses
	// it, and the request waits for the one in use.
	held, err := ldb.Conn(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = held.Close() }()
	if err := held.PingContext(ctx(t)); err != nil {
		t.Fatal(err)
	}
	answered := make(chan int, 1)
	go func() {
		resp, err := h.client.Get(lsrv.URL + "/healthz")
		if err != nil {
			answered <- -1
			return
		}
		_ = resp.Body.Close()
		answered <- resp.StatusCode
	}()
	// /metrics says limited, one request pending, one connection used;
	// so do the SDK's metrics. (While the request waits, the breaker
	// tries a connection each cool-down, recovering for as long as
	// the attempt takes: the poll reads limited between.)
	eventually(t, "the breaker limited in /metrics, one request pending", func() (bool, string) {
		fams := scrape(t, srv)
		state, _ := promValue(fams, limited, "pooldriver_circuit_breaker_state|limited")
		pending, _ := promValue(fams, limited, "pooldriver_pending_requests")
		return state == 1 && pending == 1, fmt.Sprintf("limited %v, pending %v", state, pending)
	})
	fams := scrape(t, srv)
	checkPromNames(t, fams, name, limited)
	for key, v := range map[string]float64{"pooldriver_connections|idle": 0, "pooldriver_connections|used": 1, "pooldriver_circuit_breaker_state|closed": 0} {
		if got, _ := promValue(fams, limited, key); got != v {
			t.Errorf("at the limit: %s{pool=%q} %v, want %v", key, limited, got, v)
		}
	}
	if got, _ := promValue(fams, limited, "pooldriver_connect_errors_total"); got < 2 {
		t.Errorf("at the limit: pooldriver_connect_errors_total{pool=%q} %v, want both refusals counted", limited, got)
	}
	if got, _ := promValue(fams, name, "pooldriver_circuit_breaker_state|closed"); got != 1 {
		t.Errorf("the other pool's breaker: closed %v, want 1", got)
	}
	eventually(t, "one request pending in the SDK's metrics", func() (bool, string) {
		got, _ := otelValue(h.collect(t), limited, "db.client.connection.pending_requests")
		return got == 1, fmt.Sprint("pending ", got)
	})
	rm := h.collect(t)
	checkOtelConventions(t, rm, []string{name, limited})
	for key, v := range map[string]int64{"db.client.connection.count|idle": 0, "db.client.connection.count|used": 1, "db.client.connection.max": 2} {
		if got, _ := otelValue(rm, limited, key); got != v {
			t.Errorf("at the limit: %s{pool.name=%q} %d, want %d", key, limited, got, v)
		}
	}
	select {
	case code := <-answered:
		t.Fatalf("the request answered %d while the connection was held", code)
	default:
	}

	// 4. The connection comes back: the waiting request gets it.
	if err := held.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case code := <-answered:
		if code != http.StatusOK {
			t.Fatalf("GET /healthz once the connection came back: %d", code)
		}
	case <-time.After(waitLimit):
		t.Fatal("GET /healthz still waiting after the connection came back")
	}
	fams = scrape(t, srv)
	for key, v := range map[string]float64{"pooldriver_pending_requests": 0, "pooldriver_connections_created_total": 1, "pooldriver_connections|idle": 1} {
		if got, _ := promValue(fams, limited, key); got != v {
			t.Errorf("after the limit: %s{pool=%q} %v, want %v", key, limited, got, v)
		}
	}
	rm = h.collect(t)
	for key, v := range map[string]int64{"db.client.connection.pending_requests": 0, "db.client.connection.count|idle": 1, "db.client.connection.count|used": 0} {
		if got, _ := otelValue(rm, limited, key); got != v {
			t.Errorf("after the limit: %s{pool.name=%q} %d, want %d", key, limited, got, v)
		}
	}
	// The spans of the limited pool's requests: the refused one (a
	// server error), those until it was served, the waiting one.
	all := h.spans.Ended()[before:]
	spans := requestSpans(all)
	var statuses []int
	for _, s := range spans {
		for _, a := range s.Attributes() {
			if a.Key == semconv.HTTPResponseStatusCodeKey {
				statuses = append(statuses, int(a.Value.AsInt64()))
			}
		}
	}
	if len(statuses) < 3 || statuses[0] != http.StatusServiceUnavailable || statuses[len(statuses)-1] != http.StatusOK {
		t.Errorf("the limited pool's request spans: statuses %v, want 503 first and 200 last", statuses)
	}
	checkSpan(t, spans[0], "GET /healthz", "/healthz", http.StatusServiceUnavailable)
	checkSpan(t, spans[len(spans)-1], "GET /healthz", "/healthz", http.StatusOK)

	// The pool's spans say the same: the refused request's acquire failed
	// with the connect it made, which names the server's refusal; the
	// waiting request's acquire was served.
	acquires, connects := poolSpans(t, all, limited)
	refused := func(s sdktrace.ReadOnlySpan) bool {
		return s.Status().Code == codes.Error && strings.Contains(s.Status().Description, "53300")
	}
	if !slices.ContainsFunc(connects, func(c sdktrace.ReadOnlySpan) bool { return refused(c) && childOf(c, acquires) }) {
		t.Errorf("no failed pool.connect span naming the server's refusal (53300) under an acquire, among %d connects", len(connects))
	}
	if !slices.ContainsFunc(acquires, func(a sdktrace.ReadOnlySpan) bool {
		return a.Status().Code == codes.Error && a.Parent().SpanID() == spans[0].SpanContext().SpanID()
	}) {
		t.Error("the refused request's pool.acquire span is not marked failed")
	}
	if !slices.ContainsFunc(acquires, func(a sdktrace.ReadOnlySpan) bool {
		return a.Status().Code != codes.Error && a.Parent().SpanID() == spans[len(spans)-1].SpanContext().SpanID()
	}) {
		t.Error("the waiting request's pool.acquire span is missing or failed")
	}
}

// harness is what the services of a test share: a Prometheus registry,
// OpenTelemetry providers over an SDK reader and a span recorder, and a
// JSON log.
type harness struct {
	reg    *prometheus.Registry
	reader *sdkmetric.ManualReader
	mp     *sdkmetric.MeterProvider
	spans  *tracetest.SpanRecorder
	tp     *sdktrace.TracerProvider
	logs   syncBuffer
	logger *slog.Logger
	client *http.Client
}

func newHarness(t *testing.T) *harness {
	h := &harness{reg: prometheus.NewRegistry(), reader: sdkmetric.NewManualReader(), spans: tracetest.NewSpanRecorder()}
	h.mp = sdkmetric.NewMeterProvider(sdkmetric.WithReader(h.reader))
	h.tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(h.spans))
	h.logger = slog.New(service.LogHandler(slog.NewJSONHandler(&h.logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	transport := &http.Transport{}
	h.client = &http.Client{Transport: transport, Timeout: 3 * time.Minute}
	t.Cleanup(func() {
		transport.CloseIdleConnections()
		_ = h.tp.Shutdown(context.Background())
		_ = h.mp.Shutdown(context.Background())
		if t.Failed() {
			t.Logf("the service's log:\n%s", h.logs.String())
		}
	})
	return h
}

// start runs a service over dsn on an httptest.Server, serving the shared
// registry at /metrics, all of it closed when the test ends: the server,
// then the service, then the database.
func (h *harness) start(t *testing.T, dsn string, o service.Options, migrate bool) (*httptest.Server, *sql.DB) {
	t.Helper()
	o.Logger, o.Registerer, o.Gatherer, o.MeterProvider, o.TracerProvider = h.logger, h.reg, h.reg, h.mp, h.tp
	db, err := service.Connect(dsn, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := db.Close(); err != nil {
			t.Errorf("closing the database: %v", err)
		}
	})
	svc, err := service.New(db, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := svc.Close(); err != nil {
			t.Errorf("closing the service: %v", err)
		}
	})
	if migrate {
		if err := service.Migrate(ctx(t), db); err != nil {
			t.Fatal(err)
		}
	}
	srv := httptest.NewServer(svc)
	t.Cleanup(srv.Close)
	return srv, db
}

// admin opens a database for the test's own statements (schemas, roles).
func (h *harness) admin(t *testing.T, dsn string) *sql.DB {
	t.Helper()
	db, err := pooldriver.Open(dsn, pooldriver.WithPoolName("service-test-admin"), pooldriver.WithMaxConns(2))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// call makes a request and checks its status; it returns the body.
func (h *harness) call(t *testing.T, srv *httptest.Server, method, path, body string, header http.Header, status int) []byte {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx(t), method, srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := h.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != status {
		t.Fatalf("%s %s: %d %s, want %d", method, path, resp.StatusCode, b, status)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("%s %s: Content-Type %q", method, path, ct)
	}
	return b
}

func (h *harness) collect(t *testing.T) metricdata.ResourceMetrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := h.reader.Collect(ctx(t), &rm); err != nil {
		t.Fatal(err)
	}
	return rm
}

// waitSpans waits until n request spans have ended (a request's span ends
// as its handler returns, which may be just after the client has the
// answer), and returns them in the order they started.
func (h *harness) waitSpans(t *testing.T, n int) []sdktrace.ReadOnlySpan {
	t.Helper()
	var spans []sdktrace.ReadOnlySpan
	eventually(t, fmt.Sprintf("%d spans ended", n), func() (bool, string) {
		spans = requestSpans(h.spans.Ended())
		return len(spans) >= n, fmt.Sprintf("%d ended", len(spans))
	})
	if len(spans) != n {
		t.Fatalf("%d spans, want %d", len(spans), n)
	}
	slices.SortStableFunc(spans, func(a, b sdktrace.ReadOnlySpan) int { return a.StartTime().Compare(b.StartTime()) })
	return spans
}

// requestSpans returns the service's request spans of spans, leaving out
// the pool's (otelpool's scope).
func requestSpans(spans []sdktrace.ReadOnlySpan) []sdktrace.ReadOnlySpan {
	return slices.DeleteFunc(slices.Clone(spans), func(s sdktrace.ReadOnlySpan) bool {
		return s.InstrumentationScope().Name == otelpool.ScopeName
	})
}

// poolSpans returns the spans of pool's acquires and connects among spans,
// each checked to carry the pool's name.
func poolSpans(t *testing.T, spans []sdktrace.ReadOnlySpan, pool string) (acquires, connects []sdktrace.ReadOnlySpan) {
	t.Helper()
	for _, s := range spans {
		if s.InstrumentationScope().Name != otelpool.ScopeName || !hasAttr(s.Attributes(), semconv.DBClientConnectionPoolName(pool)) {
			continue
		}
		switch s.Name() {
		case otelpool.AcquireSpanName:
			acquires = append(acquires, s)
		case otelpool.ConnectSpanName:
			connects = append(connects, s)
		case otelpool.ReleaseSpanName:
			// One per acquire that got a connection, beside it: checked
			// in otelpool (TestTraceRelease).
		default:
			t.Errorf("a span of the pool's scope named %q", s.Name())
		}
	}
	return acquires, connects
}

// childOf reports whether s's parent is one of spans.
func childOf(s sdktrace.ReadOnlySpan, spans []sdktrace.ReadOnlySpan) bool {
	return slices.ContainsFunc(spans, func(p sdktrace.ReadOnlySpan) bool {
		return s.Parent().SpanID() == p.SpanContext().SpanID() && s.SpanContext().TraceID() == p.SpanContext().TraceID()
	})
}

// logRecords parses the JSON log, a record a line.
func (h *harness) logRecords(t *testing.T) []map[string]any {
	t.Helper()
	var recs []map[string]any
	for line := range strings.Lines(h.logs.String()) {
		var r map[string]any
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("a log line that is not JSON: %q: %v", line, err)
		}
		recs = append(recs, r)
	}
	return recs
}

// promFamilies is what promcollector documents, with the type each has and
// the values of its label state, if it has one.
var promFamilies = map[string]struct {
	typ    dto.MetricType
	states []string
}{
	"pooldriver_connections":           {dto.MetricType_GAUGE, []string{"idle", "opening", "used"}},
	"pooldriver_max_connections":       {dto.MetricType_GAUGE, nil},
	"pooldriver_min_connections":       {dto.MetricType_GAUGE, nil},
	"pooldriver_min_idle_connections":  {dto.MetricType_GAUGE, nil},
	"pooldriver_pending_requests":      {dto.MetricType_GAUGE, nil},
	"pooldriver_circuit_breaker_state": {dto.MetricType_GAUGE, []string{"closed", "half-open", "limited", "open"}},
	"pooldriver_wait_seconds":          {dto.MetricType_HISTOGRAM, nil},
	"pooldriver_use_seconds":           {dto.MetricType_HISTOGRAM, nil},
	"pooldriver_create_seconds":        {dto.MetricType_HISTOGRAM, nil},
	// A counter for each counter of pooldriver.Stats; these the README and
	// this service's README name.
	"pooldriver_acquires_total":                {dto.MetricType_COUNTER, nil},
	"pooldriver_waits_total":                   {dto.MetricType_COUNTER, nil},
	"pooldriver_acquire_timeouts_total":        {dto.MetricType_COUNTER, nil},
	"pooldriver_connections_created_total":     {dto.MetricType_COUNTER, nil},
	"pooldriver_connect_errors_total":          {dto.MetricType_COUNTER, nil},
	"pooldriver_circuit_breaker_changes_total": {dto.MetricType_COUNTER, nil},
	"pooldriver_auto_rollbacks_total":          {dto.MetricType_COUNTER, nil},
}

// checkPromNames checks the scrape against promcollector's documentation:
// every family of promFamilies, of its type, with one series per pool
// (per state, where it has one); every pooldriver_ family labelled with
// the pools, and every one whose name ends in _total a counter.
func checkPromNames(t *testing.T, fams map[string]*dto.MetricFamily, pools ...string) {
	t.Helper()
	for name, want := range promFamilies {
		f, ok := fams[name]
		if !ok {
			t.Errorf("/metrics: no %s", name)
			continue
		}
		if f.GetType() != want.typ {
			t.Errorf("%s: %v, want %v", name, f.GetType(), want.typ)
		}
		for _, pool := range pools {
			var states []string
			for _, m := range f.GetMetric() {
				if label(m, "pool") == pool {
					states = append(states, label(m, "state"))
				}
			}
			slices.Sort(states)
			if want.states == nil && !slices.Equal(states, []string{""}) || want.states != nil && !slices.Equal(states, want.states) {
				t.Errorf("%s{pool=%q}: series of states %q, want %q", name, pool, states, want.states)
			}
		}
	}
	for name, f := range fams {
		if !strings.HasPrefix(name, "pooldriver_") {
			continue
		}
		if strings.HasSuffix(name, "_total") && f.GetType() != dto.MetricType_COUNTER {
			t.Errorf("%s: %v, want a counter", name, f.GetType())
		}
		var got []string
		for _, m := range f.GetMetric() {
			if p := label(m, "pool"); !slices.Contains(got, p) {
				got = append(got, p)
			}
		}
		slices.Sort(got)
		if want := slices.Sorted(slices.Values(pools)); !slices.Equal(got, want) {
			t.Errorf("%s: pools %q, want %q", name, got, want)
		}
	}
}

// otelConventions is every db.client.connection.* metric otelpool
// documents, with its unit and kind; each is checked against the semantic
// conventions' generated package too.
var otelConventions = []struct {
	name, unit string
	conv       interface {
		Name() string
		Unit() string
	}
	kind  string // "updown", "counter" or "histogram"
	state bool   // carries db.client.connection.state
}{
	{"db.client.connection.count", "{connection}", dbconv.ClientConnectionCountObservable{}, "updown", true},
	{"db.client.connection.max", "{connection}", dbconv.ClientConnectionMaxObservable{}, "updown", false},
	{"db.client.connection.idle.max", "{connection}", dbconv.ClientConnectionIdleMaxObservable{}, "updown", false},
	{"db.client.connection.idle.min", "{connection}", dbconv.ClientConnectionIdleMinObservable{}, "updown", false},
	{"db.client.connection.pending_requests", "{request}", dbconv.ClientConnectionPendingRequestsObservable{}, "updown", false},
	{"db.client.connection.timeouts", "{timeout}", dbconv.ClientConnectionTimeoutsObservable{}, "counter", false},
	{"db.client.connection.create_time", "s", dbconv.ClientConnectionCreateTime{}, "histogram", false},
	{"db.client.connection.wait_time", "s", dbconv.ClientConnectionWaitTime{}, "histogram", false},
	{"db.client.connection.use_time", "s", dbconv.ClientConnectionUseTime{}, "histogram", false},
}

// checkOtelConventions checks the SDK's collection against otelpool's
// documentation and the semantic conventions: the scope and its schema
// URL, exactly the metrics above with their units and kinds, and on every
// data point the pool name (one of pools, each present) and, for count,
// the state idle or used.
func checkOtelConventions(t *testing.T, rm metricdata.ResourceMetrics, pools []string) {
	t.Helper()
	var got []string
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != otelpool.ScopeName {
			t.Errorf("a metric scope %q besides otelpool's", sm.Scope.Name)
			continue
		}
		if sm.Scope.SchemaURL != semconv.SchemaURL {
			t.Errorf("otelpool's schema URL %q, want %q", sm.Scope.SchemaURL, semconv.SchemaURL)
		}
		for _, m := range sm.Metrics {
			got = append(got, m.Name)
		}
	}
	var want []string
	for _, c := range otelConventions {
		want = append(want, c.name)
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("OpenTelemetry metrics %q, want %q", got, want)
	}
	for _, c := range otelConventions {
		if c.conv.Name() != c.name || c.conv.Unit() != c.unit {
			t.Errorf("%s (%s): the conventions say %s (%s)", c.name, c.unit, c.conv.Name(), c.conv.Unit())
		}
		m, ok := otelMetric(rm, c.name)
		if !ok {
			continue
		}
		if m.Unit != c.unit {
			t.Errorf("%s: unit %q, want %q", c.name, m.Unit, c.unit)
		}
		var attrs []attribute.Set
		switch d := m.Data.(type) {
		case metricdata.Sum[int64]:
			if c.kind == "histogram" || d.IsMonotonic != (c.kind == "counter") {
				t.Errorf("%s: a sum (monotonic: %v), want a %s", c.name, d.IsMonotonic, c.kind)
			}
			for _, dp := range d.DataPoints {
				attrs = append(attrs, dp.Attributes)
			}
		case metricdata.Histogram[float64]:
			if c.kind != "histogram" {
				t.Errorf("%s: a histogram, want a %s", c.name, c.kind)
			}
			for _, dp := range d.DataPoints {
				attrs = append(attrs, dp.Attributes)
			}
		default:
			t.Errorf("%s: %T", c.name, m.Data)
		}
		var series []string
		for _, set := range attrs {
			pool, _ := set.Value(otelpool.PoolNameKey)
			s := pool.AsString()
			n := 1
			if c.state {
				state, _ := set.Value(otelpool.StateKey)
				s += "|" + state.AsString()
				n = 2
			}
			if set.Len() != n {
				t.Errorf("%s: attributes %v", c.name, set.ToSlice())
			}
			series = append(series, s)
		}
		var wantSeries []string
		for _, p := range pools {
			if c.state {
				wantSeries = append(wantSeries, p+"|"+string(dbconv.ClientConnectionStateIdle), p+"|"+string(dbconv.ClientConnectionStateUsed))
			} else {
				wantSeries = append(wantSeries, p)
			}
		}
		slices.Sort(series)
		slices.Sort(wantSeries)
		// A histogram of a pool that has recorded nothing has no data point.
		if !slices.Equal(series, wantSeries) && (c.kind != "histogram" || len(series) == 0 || !isSubset(series, wantSeries)) {
			t.Errorf("%s: series %q, want %q", c.name, series, wantSeries)
		}
	}
}

func isSubset(sub, of []string) bool {
	for _, s := range sub {
		if !slices.Contains(of, s) {
			return false
		}
	}
	return true
}

func otelMetric(rm metricdata.ResourceMetrics, name string) (metricdata.Metrics, bool) {
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name == name {
				return m, true
			}
		}
	}
	return metricdata.Metrics{}, false
}

// otelValue reads the int64 sum "name" or "name|state" of pool.
func otelValue(rm metricdata.ResourceMetrics, pool, key string) (int64, bool) {
	name, state, _ := strings.Cut(key, "|")
	m, ok := otelMetric(rm, name)
	if !ok {
		return 0, false
	}
	sum, ok := m.Data.(metricdata.Sum[int64])
	if !ok {
		return 0, false
	}
	for _, dp := range sum.DataPoints {
		p, _ := dp.Attributes.Value(otelpool.PoolNameKey)
		s, _ := dp.Attributes.Value(otelpool.StateKey)
		if p.AsString() == pool && s.AsString() == state {
			return dp.Value, true
		}
	}
	return 0, false
}

func otelHistogramCount(rm metricdata.ResourceMetrics, pool, name string) uint64 {
	m, _ := otelMetric(rm, name)
	h, _ := m.Data.(metricdata.Histogram[float64])
	for _, dp := range h.DataPoints {
		if p, _ := dp.Attributes.Value(otelpool.PoolNameKey); p.AsString() == pool {
			return dp.Count
		}
	}
	return 0
}

// checkSpan checks a request's span against OpenTelemetry's HTTP server
// conventions.
func checkSpan(t *testing.T, s sdktrace.ReadOnlySpan, name, route string, status int) {
	t.Helper()
	if s.Name() != name || s.SpanKind() != trace.SpanKindServer || s.InstrumentationScope().Name != service.ScopeName {
		t.Errorf("span %q (%v, scope %q), want %q (server, scope %q)", s.Name(), s.SpanKind(), s.InstrumentationScope().Name, name, service.ScopeName)
	}
	method := strings.Fields(name)[0]
	for _, kv := range []attribute.KeyValue{semconv.HTTPRequestMethodKey.String(method), semconv.HTTPRoute(route), semconv.HTTPResponseStatusCode(status)} {
		if !hasAttr(s.Attributes(), kv) {
			t.Errorf("span %s: attributes %v, want %s=%s", name, s.Attributes(), kv.Key, kv.Value.String())
		}
	}
	wantCode := codes.Unset
	if status >= 500 {
		wantCode = codes.Error
	}
	if s.Status().Code != wantCode {
		t.Errorf("span %s (%d): status %v", name, status, s.Status())
	}
}

func hasAttr(attrs []attribute.KeyValue, kv attribute.KeyValue) bool {
	return slices.ContainsFunc(attrs, func(a attribute.KeyValue) bool { return a.Key == kv.Key && a.Value == kv.Value })
}

// scrape reads /metrics as Prometheus does, in the text format.
func scrape(t *testing.T, srv *httptest.Server) map[string]*dto.MetricFamily {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx(t), "GET", srv.URL+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", string(expfmt.NewFormat(expfmt.TypeTextPlain)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/metrics: %s", resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("/metrics: %v", err)
	}
	return fams
}

// promValue reads the gauge or counter "name" or "name|state" of pool.
func promValue(fams map[string]*dto.MetricFamily, pool, key string) (float64, bool) {
	name, state, _ := strings.Cut(key, "|")
	for _, m := range fams[name].GetMetric() {
		if label(m, "pool") != pool || label(m, "state") != state {
			continue
		}
		switch {
		case m.Gauge != nil:
			return m.GetGauge().GetValue(), true
		case m.Counter != nil:
			return m.GetCounter().GetValue(), true
		}
	}
	return 0, false
}

func histogramCount(fams map[string]*dto.MetricFamily, pool, name string) uint64 {
	for _, m := range fams[name].GetMetric() {
		if label(m, "pool") == pool {
			return m.GetHistogram().GetSampleCount()
		}
	}
	return 0
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// postgresDSN returns $POOLDRIVER_POSTGRES_DSN; unset, the test skips,
// or fails under CI=true, as the integration tests do.
func postgresDSN(t *testing.T) string {
	t.Helper()
	dsn := os.Getenv("POOLDRIVER_POSTGRES_DSN")
	if dsn == "" {
		msg := fmt.Sprintf("POOLDRIVER_POSTGRES_DSN is not set; to run against a server: POOLDRIVER_POSTGRES_DSN='%s' go test ./...", localDSN)
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return dsn
}

// withParams adds query parameters to a URL DSN.
func withParams(t *testing.T, dsn string, params ...string) string {
	t.Helper()
	u := parseURL(t, dsn)
	q := u.Query()
	for _, p := range params {
		k, v, _ := strings.Cut(p, "=")
		q.Set(k, v)
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// withUser returns dsn logging in as user, with no password.
func withUser(t *testing.T, dsn, user string) string {
	t.Helper()
	u := parseURL(t, dsn)
	u.User = url.User(user)
	return u.String()
}

// withoutPoolParams returns dsn without pooldriver's parameters, for a
// plain driver.
func withoutPoolParams(t *testing.T, dsn string) string {
	t.Helper()
	u := parseURL(t, dsn)
	q := u.Query()
	for k := range q {
		if strings.HasPrefix(k, "pool_") {
			q.Del(k)
		}
	}
	u.RawQuery = q.Encode()
	return u.String()
}

func parseURL(t *testing.T, dsn string) *url.URL {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		t.Fatalf("this test needs POOLDRIVER_POSTGRES_DSN as a postgres:// URL (%v)", err)
	}
	return u
}

// dropRole drops role once its sessions are gone.
func dropRole(t *testing.T, admin *sql.DB, role string) {
	t.Helper()
	eventually(t, "the role's sessions gone", func() (bool, string) {
		var n int
		if err := admin.QueryRow("SELECT count(*) FROM pg_stat_activity WHERE usename = $1", role).Scan(&n); err != nil {
			return false, err.Error()
		}
		return n == 0, fmt.Sprint(n, " sessions")
	})
	mustExec(t, admin, "DROP ROLE "+role)
}

// mustExec runs stmt; in a cleanup too, where t.Context has ended.
func mustExec(t *testing.T, db *sql.DB, stmt string) {
	t.Helper()
	c, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if _, err := db.ExecContext(c, stmt); err != nil {
		t.Fatalf("%s: %v", stmt, err)
	}
}

func decode(t *testing.T, b []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
}

func decodeNote(t *testing.T, b []byte) service.Note {
	t.Helper()
	var n service.Note
	decode(t, b, &n)
	return n
}

// contextWithRemoteSpan returns a context carrying a span of an upstream
// caller, with ids of its own.
func contextWithRemoteSpan(t *testing.T) context.Context {
	t.Helper()
	var tid trace.TraceID
	var sid trace.SpanID
	_, _ = rand.Read(tid[:])
	_, _ = rand.Read(sid[:])
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, Remote: true})
	return trace.ContextWithRemoteSpanContext(context.Background(), sc)
}

func traceparent(sc trace.SpanContext) string {
	return fmt.Sprintf("00-%s-%s-01", sc.TraceID(), sc.SpanID())
}

func randomHex(t *testing.T) string {
	t.Helper()
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// ctx bounds a step of the test.
func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(t.Context(), waitLimit)
	t.Cleanup(cancel)
	return c
}

// eventually waits until cond holds, polling, for at most waitLimit; cond
// says what it saw, for the failure.
func eventually(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for {
		ok, saw := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waited %v for %s: %s", waitLimit, what, saw)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// checkNoGoroutineLeak fails the test if, once everything it started is
// closed, goroutines of pooldriver, pgx or net/http's servers and clients
// are still running.
func checkNoGoroutineLeak(t *testing.T) {
	t.Cleanup(func() {
		var ours []string
		deadline := time.Now().Add(waitLimit)
		for {
			ours = ours[:0]
			buf := make([]byte, 4<<20)
			buf = buf[:runtime.Stack(buf, true)]
			for i, g := range strings.Split(string(buf), "\n\n") {
				if i == 0 {
					continue // this one
				}
				for _, mark := range []string{"github.com/pooldriver/pooldriver", "github.com/jackc/pgx", "net/http.(*conn).serve", "net/http.(*persistConn)"} {
					if strings.Contains(g, mark) {
						ours = append(ours, g)
						break
					}
				}
			}
			if len(ours) == 0 || time.Now().After(deadline) {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		if len(ours) > 0 {
			t.Errorf("%d goroutines left:\n%s", len(ours), strings.Join(ours, "\n\n"))
		}
	})
}

// syncBuffer is a bytes.Buffer that the service's log may write while the
// test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
