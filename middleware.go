package pooldriver

import (
	"context"
	"log/slog"
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
// request without a token reads as any other.
//
// A request whose token ReadToken did not write (malformed) reads as one
// without a token, and is not refused: when it ends, the Connector with
// standbys that its statements ran on counts it (Stats.ReadTokensMalformed)
// and logs it at WARN, with the header's or cookie's name and the token's
// length (not the token), once per log interval as every kind of line.
// Nothing tells it where the request ran no statement on such a
// Connector: there the token made no difference.
func MiddlewareWithReadToken(name string) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ctx := r.Context()
			tok, from := r.Header.Get(name), "header"
			if tok == "" {
				if ck, err := r.Cookie(name); err == nil {
					tok, from = ck.Value, "cookie"
				}
			}
			withTok, err := WithReadToken(ctx, tok)
			if err == nil {
				ctx = withTok
			}
			ctx, end := WithTask(ctx)
			defer end() // runs when the handler panics too
			if err != nil {
				// Before end: the task still says where it ran.
				defer readTokenMalformed(ctx, name, from, len(tok))
			}
			next.ServeHTTP(w, r.WithContext(ctx))
		})
	}
}

// readTokenMalformed counts and logs a malformed token of
// MiddlewareWithReadToken, carried in the header or cookie (from) name
// and n bytes long, on the Connector with standbys that the request's
// task, ctx's, ran a statement on; it does nothing where there is none.
func readTokenMalformed(ctx context.Context, name, from string, n int) {
	t := taskFrom(ctx)
	if t == nil {
		return
	}
	r := t.reads.on.Load()
	if r == nil {
		return
	}
	r.tokensMalformed.Add(1)
	r.c.logAt(slog.LevelWarn, "a request's read token is malformed: it reads as one without a token", nil, "name", name, "from", from, "length", n)
}
