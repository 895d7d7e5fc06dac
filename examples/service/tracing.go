package service

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// traced runs next in a server span per request, named and attributed as
// OpenTelemetry's HTTP conventions say ("GET /notes/{id}", http.route the
// pattern routes matches), as the child of a W3C traceparent the request
// carries; then logs the request at INFO. The route is looked up before
// next runs, because the request next's ServeMux records its pattern on is
// a copy (the Middleware's).
func traced(routes *http.ServeMux, tracer trace.Tracer, log *slog.Logger, next http.Handler) http.Handler {
	var prop propagation.TraceContext
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		_, pattern := routes.Handler(r)
		_, route, _ := strings.Cut(pattern, " ") // "GET /notes/{id}": the method, then the route
		method, name := r.Method, r.Method
		switch method {
		case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
			http.MethodDelete, http.MethodConnect, http.MethodOptions, http.MethodTrace:
		default:
			method, name = "_OTHER", "HTTP"
		}
		attrs := []attribute.KeyValue{semconv.HTTPRequestMethodKey.String(method), semconv.URLPath(r.URL.Path)}
		if route != "" {
			name += " " + route
			attrs = append(attrs, semconv.HTTPRoute(route))
		}
		ctx := prop.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
		ctx, span := tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...))
		defer span.End()

		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(sw, r.WithContext(ctx))

		span.SetAttributes(semconv.HTTPResponseStatusCode(sw.status))
		if sw.status >= http.StatusInternalServerError {
			span.SetStatus(codes.Error, http.StatusText(sw.status))
		}
		log.LogAttrs(ctx, slog.LevelInfo, "request", slog.String("method", r.Method), slog.String("route", route),
			slog.String("path", r.URL.Path), slog.Int("status", sw.status), slog.Duration("duration", time.Since(start)))
	})
}

// statusWriter records the status a handler answered.
type statusWriter struct {
	http.ResponseWriter
	status int
	wrote  bool
}

func (w *statusWriter) WriteHeader(status int) {
	if !w.wrote {
		w.status, w.wrote = status, true
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	w.wrote = true
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// LogHandler returns h adding trace_id and span_id to every record logged
// with a context that carries a span: the service's request lines, and
// pooldriver's own lines that are logged with the request's context (the
// rollback at a task's end).
func LogHandler(h slog.Handler) slog.Handler { return traceHandler{h} }

type traceHandler struct{ slog.Handler }

func (h traceHandler) Handle(ctx context.Context, r slog.Record) error {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		r = r.Clone()
		r.AddAttrs(slog.String("trace_id", sc.TraceID().String()), slog.String("span_id", sc.SpanID().String()))
	}
	return h.Handler.Handle(ctx, r)
}

func (h traceHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return traceHandler{h.Handler.WithAttrs(attrs)}
}

func (h traceHandler) WithGroup(name string) slog.Handler {
	return traceHandler{h.Handler.WithGroup(name)}
}
