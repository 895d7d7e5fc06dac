// Package service is a small HTTP service on pooldriver, as a service in
// production wires it: a Config parsed from the DSN and completed in code
// (Connect), one task per request (pooldriver.Middleware), a raw
// transaction spread over helpers that share only the request's context
// (notes.go), JSON logs through log/slog, the pool's metrics for Prometheus
// (promcollector) and for OpenTelemetry (otelpool), and a span per request.
//
// The command in cmd/service runs it; service_test.go runs it against a
// real PostgreSQL and reads back what an operator would see.
package service

import (
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/pooldriver/pooldriver"
	"github.com/pooldriver/pooldriver/otelpool"
	"github.com/pooldriver/pooldriver/promcollector"
)

// ScopeName is the instrumentation scope of the service's tracer.
const ScopeName = "github.com/pooldriver/pooldriver/examples/service"

// Options is what the service is given: where it logs, where its metrics
// and spans go, and how its pool is named and sized.
type Options struct {
	// PoolName names the pool in log lines and metrics (Config.Name);
	// "": the DSN's pool_name, else pooldriver's default.
	PoolName string
	// MaxConns caps the pool's server connections (Config.MaxConns); 0:
	// the DSN's pool_max_conns, else pooldriver's default.
	MaxConns int

	Logger *slog.Logger // required
	// Registerer receives the pool's Prometheus collector; Gatherer, when
	// not nil, is served at /metrics (usually both are one
	// *prometheus.Registry).
	Registerer prometheus.Registerer
	Gatherer   prometheus.Gatherer
	// MeterProvider receives the pool's OpenTelemetry metrics (otelpool),
	// TracerProvider the request spans (and, once wired in Connect, the
	// pool's own spans).
	MeterProvider  metric.MeterProvider
	TracerProvider trace.TracerProvider
}

func (o *Options) check() error {
	switch {
	case o.Logger == nil:
		return errors.New("service: Options.Logger is nil")
	case o.Registerer == nil:
		return errors.New("service: Options.Registerer is nil")
	case o.MeterProvider == nil:
		return errors.New("service: Options.MeterProvider is nil")
	case o.TracerProvider == nil:
		return errors.New("service: Options.TracerProvider is nil")
	}
	return nil
}

// Service is the HTTP handler of the service over one database. Close it
// before closing the database.
type Service struct {
	db      *sql.DB
	log     *slog.Logger
	handler http.Handler

	collector prometheus.Collector
	reg       prometheus.Registerer
	otelReg   metric.Registration
}

// New returns the service over db, which must be opened by pooldriver
// (Connect does), with its pool's metrics registered on o.Registerer and
// o.MeterProvider. Several services, over pools of different names, may
// share one registry and one provider.
func New(db *sql.DB, o Options) (*Service, error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	c, ok := pooldriver.ConnectorOf(db)
	if !ok {
		return nil, errors.New("service: the database is not opened by pooldriver")
	}
	s := &Service{db: db, log: o.Logger, reg: o.Registerer}
	s.collector = promcollector.New(c, o.PoolName)
	if err := o.Registerer.Register(s.collector); err != nil {
		return nil, fmt.Errorf("service: registering the pool's collector: %w", err)
	}
	var err error
	if s.otelReg, err = otelpool.Register(c, o.MeterProvider, o.PoolName); err != nil {
		o.Registerer.Unregister(s.collector)
		return nil, fmt.Errorf("service: registering the pool's OpenTelemetry metrics: %w", err)
	}

	api := http.NewServeMux()
	api.HandleFunc("POST /notes", s.createNote)
	api.HandleFunc("GET /notes", s.listNotes)
	api.HandleFunc("GET /notes/{id}", s.getNote)
	api.HandleFunc("GET /healthz", s.health)

	// The API runs one task per request (a raw transaction of a handler
	// spans its helpers, and is rolled back if the handler returns before
	// COMMIT), inside the request's span, so that the task's end, its
	// rollback included, is part of the request's time. /metrics needs
	// neither.
	root := http.NewServeMux()
	root.Handle("/", traced(api, o.TracerProvider.Tracer(ScopeName, trace.WithSchemaURL(semconv.SchemaURL)), o.Logger, pooldriver.Middleware(api)))
	if o.Gatherer != nil {
		root.Handle("GET /metrics", promhttp.HandlerFor(o.Gatherer, promhttp.HandlerOpts{ErrorLog: slog.NewLogLogger(o.Logger.Handler(), slog.LevelError)}))
	}
	s.handler = root
	return s, nil
}

// ServeHTTP implements http.Handler.
func (s *Service) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.handler.ServeHTTP(w, r) }

// Close unregisters the pool's metrics. It does not close the database.
func (s *Service) Close() error {
	s.reg.Unregister(s.collector)
	return s.otelReg.Unregister()
}

var _ http.Handler = (*Service)(nil)
