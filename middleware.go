package pooldriver

import (
	"context"
	"net/http"
)

// Middleware runs each request of next in its own task, in the Connector's
// default mode: a connection bound by the handler is released, and an open
// transaction rolled back, when the handler returns or panics.
func Middleware(next http.Handler) http.Handler {
	return MiddlewareWithMode(-1)(next)
}

// MiddlewareWithMode is Middleware with the mode of every request's task
// chosen; a negative mode means the Connector's default.
func MiddlewareWithMode(m Mode) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			var ctx context.Context
			var end func()
			if m < 0 {
				ctx, end = WithTask(r.Context())
			} else {
				ctx, end = WithTask(r.Context(), m)
			}
			defer end() // runs when the handler panics too
			next.ServeHTTP(w, r.WithContext(ctx))
		})
	}
}
