package pooldriver

import (
	"context"
	"fmt"
	"net/http"
	"sync"
)

// task is the unit of work a context carries: while it lasts, the physical
// connection bound to it (one per Connector) serves every statement run with
// the task's context.
type task struct {
	mode    Mode  // meaningful when hasMode
	hasMode bool  // false: each Connector's default mode applies
	err     error // a misuse found by WithTask, returned by every statement
	ctx     context.Context
	cancel  context.CancelFunc
	stop    func() bool // stops the context.AfterFunc that ends the task
	once    sync.Once

	mu       sync.Mutex // protects the fields below
	ended    bool
	bindings []binding
}

type binding struct {
	c  *Connector
	pc *physConn
}

type taskKey struct{}

// WithTask starts a task: it returns a context carrying it and the function
// that ends it. Every statement run with the context (through any *sql.DB
// method, sql.Conn or ORM on a pooldriver Connector) uses the task's
// physical connection while it is bound; see [Mode] for how long that is.
// Without a mode the Connector's default (pool_mode) applies; give at most
// one.
//
// The task ends when end is called or ctx is done, whichever comes first:
// the task's context is cancelled, an open transaction is rolled back, the
// session is reset in session mode, and the connection goes back to the
// pool. end returns when that is done. Calling end again does nothing.
func WithTask(ctx context.Context, mode ...Mode) (context.Context, func()) {
	t := &task{}
	switch {
	case len(mode) > 1:
		t.err = fmt.Errorf("pooldriver: WithTask given %d modes; give at most one", len(mode))
	case len(mode) == 1 && !mode[0].valid():
		t.err = fmt.Errorf("pooldriver: WithTask: unknown mode %d", int(mode[0]))
	case len(mode) == 1:
		t.mode, t.hasMode = mode[0], true
	}
	ctx, t.cancel = context.WithCancel(ctx)
	ctx = context.WithValue(ctx, taskKey{}, t)
	t.ctx = ctx
	t.stop = context.AfterFunc(ctx, t.end)
	return ctx, t.end
}

// taskFrom returns the task ctx carries, or nil.
func taskFrom(ctx context.Context) *task {
	t, _ := ctx.Value(taskKey{}).(*task)
	return t
}

// ending reports whether the task's context is done: the task has ended or
// is ending.
func (t *task) ending() bool { return t.ctx.Err() != nil }

// modeFor returns the task's mode on connector c.
func (t *task) modeFor(c *Connector) Mode {
	if t.hasMode {
		return t.mode
	}
	return c.s.mode
}

// end ends the task once; concurrent callers wait until it is done.
func (t *task) end() {
	t.once.Do(func() {
		t.stop()
		t.mu.Lock()
		t.ended = true
		bs := t.bindings
		t.bindings = nil
		t.mu.Unlock()
		// Claim the open transactions before cancelling the context: the
		// cancellation wakes database/sql, which would roll them back
		// itself; this way the task's cleanup does it, once, and counts it.
		for _, b := range bs {
			b.pc.claimTxForTask(t)
		}
		t.cancel()
		for _, b := range bs {
			b.c.endBinding(t, b.pc)
		}
	})
}

// bound returns the physical connection bound to t on c, or nil.
func (t *task) bound(c *Connector) *physConn {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, b := range t.bindings {
		if b.c == c {
			return b.pc
		}
	}
	return nil
}

// bindLocked binds pc to t; the caller holds pc.mu. It fails when the task
// ended or already has a connection on pc's Connector.
func (t *task) bindLocked(pc *physConn) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ended {
		return false
	}
	for _, b := range t.bindings {
		if b.c == pc.c {
			return false
		}
	}
	t.bindings = append(t.bindings, binding{c: pc.c, pc: pc})
	pc.task = t
	return true
}

// unbindLocked undoes bindLocked; the caller holds pc.mu.
func (t *task) unbindLocked(pc *physConn) {
	t.mu.Lock()
	for i, b := range t.bindings {
		if b.pc == pc {
			t.bindings = append(t.bindings[:i], t.bindings[i+1:]...)
			break
		}
	}
	t.mu.Unlock()
	pc.task = nil
}

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
