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

// MiddlewareWithReadToken is Middleware whose tasks read only what has
// replayed the writes of the token (ReadToken) that the request carries in
// its header name, or else in its cookie name: the service hands the
// token of a request that wrote to its client, and the client's next
// request reads its writes, also from a standby (pool_reads=standby). A
// request without a token, or with one ReadToken did not write, reads as
// any other.
func MiddlewareWithReadToken(name string) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ctx := r.Context()
			tok := r.Header.Get(name)
			if tok == "" {
				if ck, err := r.Cookie(name); err == nil {
					tok = ck.Value
				}
			}
			if withTok, err := WithReadToken(ctx, tok); err == nil {
				ctx = withTok
			}
			ctx, end := WithTask(ctx)
			defer end() // runs when the handler panics too
			next.ServeHTTP(w, r.WithContext(ctx))
		})
	}
}
