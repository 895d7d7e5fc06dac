// Command service runs the example service (package service) against a
// PostgreSQL server until SIGINT or SIGTERM:
//
//	go run ./examples/service/cmd/service [-dsn postgres://…] [-addr localhost:8080]
//
// The DSN defaults to $POOLDRIVER_POSTGRES_DSN, then to the local server;
// its pool_* parameters configure the pool. Logs are JSON lines on stdout,
// spans JSON lines on stderr; /metrics serves every metric, pooldriver's
// and OpenTelemetry's, to Prometheus. See examples/service/README.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/pooldriver/pooldriver"
	"github.com/pooldriver/pooldriver/examples/service"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, errorLine(err))
		os.Exit(1)
	}
}

// errorLine is the line main prints for run's error: prefixed "service: "
// once, whether or not the error already says it.
func errorLine(err error) string {
	if msg := err.Error(); strings.HasPrefix(msg, "service: ") {
		return msg
	}
	return "service: " + err.Error()
}

// dsnHint ends the error of a first connect that failed: how to point the
// service at a server.
const dsnHint = "point the service at a PostgreSQL server with -dsn or $POOLDRIVER_POSTGRES_DSN"

// run serves until ctx ends, then shuts down: the server first (in-flight
// requests finish, and their tasks end with them), then the service's
// metrics, the database, and the telemetry providers, which flush.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	def := os.Getenv("POOLDRIVER_POSTGRES_DSN")
	if def == "" {
		def = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	}
	fs := flag.NewFlagSet("service", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dsn := fs.String("dsn", def, "PostgreSQL DSN; its pool_* parameters configure the pool")
	addr := fs.String("addr", "localhost:8080", "listen address")
	poolName := fs.String("pool-name", "notes", "the pool's name in logs and metrics")
	maxConns := fs.Int("max-conns", 0, "the pool's maximum of server connections (0: the DSN's pool_max_conns, else 10)")
	var level slog.Level
	fs.TextVar(&level, "log-level", slog.LevelInfo, "the lowest level logged: DEBUG, INFO, WARN, ERROR")
	if err := fs.Parse(args); err != nil {
		return err
	}

	logger := slog.New(service.LogHandler(slog.NewJSONHandler(stdout, &slog.HandlerOptions{Level: level})))
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(semconv.ServiceName("pooldriver-example-service")))
	if err != nil {
		return err
	}

	// Prometheus scrapes one endpoint per service: the Go runtime's
	// metrics, promcollector's pooldriver_* and, through OpenTelemetry's
	// Prometheus exporter on the same registry, the SDK's metrics
	// (otelpool's db.client.connection.*, as db_client_connection_*). A
	// service that pushes to an OpenTelemetry collector would give the
	// MeterProvider a periodic reader over an OTLP exporter instead.
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	metricExp, err := otelprom.New(otelprom.WithRegisterer(reg))
	if err != nil {
		return err
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(metricExp), sdkmetric.WithResource(res))
	defer shutdown(logger, "meter provider", mp.Shutdown)

	// Spans go to stderr, one JSON object per line; in production, an
	// OTLP exporter (otlptracegrpc) to a collector takes its place.
	spanExp, err := stdouttrace.New(stdouttrace.WithWriter(stderr))
	if err != nil {
		return err
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(spanExp), sdktrace.WithResource(res))
	defer shutdown(logger, "tracer provider", tp.Shutdown)

	opts := service.Options{
		PoolName: *poolName, MaxConns: *maxConns, Logger: logger,
		Registerer: reg, Gatherer: reg, MeterProvider: mp, TracerProvider: tp,
	}
	db, err := service.Connect(*dsn, opts) // the Connector logs its Config
	if err != nil {
		return err
	}
	defer func() {
		if err := db.Close(); err != nil {
			logger.Error("closing the database", "err", err)
		}
	}()
	// The service registers the pool's metrics before the first statement,
	// so that the first connection's create time is among them.
	svc, err := service.New(db, opts)
	if err != nil {
		return err
	}
	defer func() { _ = svc.Close() }() // before db.Close: deferred calls run last first
	migrateCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	err = db.PingContext(migrateCtx)
	if err != nil {
		cancel()
		c, _ := pooldriver.ConnectorOf(db)
		return fmt.Errorf("service: connecting to %s: %w (%s)", c, err, dsnHint)
	}
	err = service.Migrate(migrateCtx, db)
	cancel()
	if err != nil {
		return err
	}

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: svc, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	logger.Info("listening", "addr", ln.Addr().String())

	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	logger.Info("shutting down")
	shutCtx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	err = srv.Shutdown(shutCtx)
	if serr := <-served; !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	// The requests are done; what else runs on the pool (a worker's task)
	// gets the rest of the time, and is cut past it.
	if c, ok := pooldriver.ConnectorOf(db); ok {
		err = errors.Join(err, c.Shutdown(shutCtx))
	}
	return err
}

// shutdown runs f, the Shutdown of a telemetry provider, which flushes
// what it holds, with a bound.
func shutdown(logger *slog.Logger, what string, f func(context.Context) error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := f(ctx); err != nil {
		logger.Error("shutting down the "+what, "err", err)
	}
}
