package pooldriver

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"time"
)

// logInterval is how often at most a pool logs one kind of line (its level
// and message) at INFO or above: an acquire timeout per statement, a raw
// BEGIN left open per request or the breaker's flapping at a connection
// limit would otherwise write a line per event.
const logInterval = 10 * time.Second

// The attributes the limiter adds to a line: how many of its kind it held
// back since the last one written, where the statement came from, and what
// to do about a misuse.
const (
	attrSuppressed = "suppressed"
	attrSite       = "site"
	attrRemedy     = "remedy"
)

// remedies says what to do about a WARN line that reports a misuse, by its
// message (the message as logAt writes it).
var remedies = map[string]string{
	"pooldriver: rolled back a transaction left open":                          "a transaction begun with a statement (BEGIN, START TRANSACTION) outside a task ends with its statement's hold, and database/sql may run the next statement on another connection: use db.BeginTx, one *sql.Conn for the whole transaction, or run it in a task (pooldriver.WithTask, pooldriver.Middleware)",
	"pooldriver: connection still busy when its task ended; it will be closed": "close every *sql.Rows (defer rows.Close()) before the task ends",
}

// spacedKey marks the context of a line that spaces itself (the 2nd, 4th,
// 8th... connect failure in a row): the limiter lets it through.
type spacedKey struct{}

// limitedHandler writes each kind of line at INFO or above at most once per
// logInterval for its pool, with the count held back since the last one
// (attrSuppressed); the last one held back is written when the interval
// ends, so that the latest state is never lost. A WARN line gets the
// statement's site (the first frame outside database/sql, the standard
// library and pooldriver), and a misuse its remedy. DEBUG lines pass
// as they are. The handlers derived by WithAttrs and WithGroup share
// their pool's limiter.
type limitedHandler struct {
	inner slog.Handler
	lim   *limiter
}

// limiter is one pool's record of the kinds of lines it wrote.
type limiter struct {
	mu     sync.Mutex // guards the fields below
	kinds  map[lineKind]*lineState
	closed bool // the Connector closed: lines pass, nothing is held back
}

type lineKind struct {
	level slog.Level
	msg   string
}

type lineState struct {
	written    time.Time    // when a line of this kind was last written
	suppressed int          // held back since
	last       slog.Record  // the last one held back, written when the interval ends
	lastBy     slog.Handler // the handler it came through
	flush      *time.Timer  // armed while one is held back
}

func newLimitedHandler(h slog.Handler) *limitedHandler {
	return &limitedHandler{inner: h, lim: &limiter{kinds: map[lineKind]*lineState{}}}
}

func (h *limitedHandler) Enabled(ctx context.Context, level slog.Level) bool {
	return h.inner.Enabled(ctx, level)
}

func (h *limitedHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &limitedHandler{inner: h.inner.WithAttrs(as), lim: h.lim}
}

func (h *limitedHandler) WithGroup(name string) slog.Handler {
	return &limitedHandler{inner: h.inner.WithGroup(name), lim: h.lim}
}

func (h *limitedHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Level < slog.LevelInfo {
		return h.inner.Handle(ctx, r)
	}
	if r.Level >= slog.LevelWarn {
		r.AddAttrs(slog.String(attrSite, callerSite()))
		if remedy, ok := remedies[r.Message]; ok {
			r.AddAttrs(slog.String(attrRemedy, remedy))
		}
	}
	if spaced, _ := ctx.Value(spacedKey{}).(bool); spaced {
		return h.inner.Handle(ctx, r)
	}
	now := time.Now()
	k := lineKind{r.Level, r.Message}
	l := h.lim
	l.mu.Lock()
	st := l.kinds[k]
	switch {
	case l.closed:
	case st == nil:
		l.kinds[k] = &lineState{written: now}
	case st.suppressed == 0 && now.Sub(st.written) >= logInterval:
		st.written = now
	default:
		st.suppressed++
		st.last, st.lastBy = r.Clone(), h.inner
		if st.flush == nil {
			st.flush = time.AfterFunc(st.written.Add(logInterval).Sub(now), func() { l.flush(k) })
		}
		l.mu.Unlock()
		return nil
	}
	l.mu.Unlock()
	return h.inner.Handle(ctx, r)
}

// flush writes the last line of kind k held back, with the count of the
// others, and starts its kind's next interval.
func (l *limiter) flush(k lineKind) {
	l.mu.Lock()
	st := l.kinds[k]
	if st == nil || st.suppressed == 0 {
		l.mu.Unlock()
		return
	}
	r, h, n := st.last, st.lastBy, st.suppressed-1
	st.written, st.suppressed, st.last, st.lastBy, st.flush = time.Now(), 0, slog.Record{}, nil, nil
	l.mu.Unlock()
	if n > 0 {
		r.AddAttrs(slog.Int(attrSuppressed, n))
	}
	_ = h.Handle(context.Background(), r)
}

// close writes every line held back, at once, and lets later lines pass:
// the Connector is closing.
func (l *limiter) close() {
	l.mu.Lock()
	l.closed = true
	var kinds []lineKind
	for k, st := range l.kinds {
		if st.flush != nil {
			st.flush.Stop()
			kinds = append(kinds, k)
		}
	}
	l.mu.Unlock()
	for _, k := range kinds {
		l.flush(k)
	}
}

// module is pooldriver's module path: frames of its packages are not a
// statement's site (its tests, examples and benchmarks are).
const module = "github.com/pooldriver/pooldriver"

// callerSite returns the first frame of the calling goroutine outside the
// standard library (database/sql, log/slog, ...) and pooldriver, as
// "function (file:line)". On a goroutine of pooldriver's own (the pool
// dialing, the leak detector, a task's end after its context was done),
// where there is none, it names the pooldriver function the goroutine
// runs, the outermost of pooldriver's named frames (the closure that
// started it only if there is no other): "pooldriver's own goroutine:
// (*leakDetector).run", "... pool.(*Pool[...]).create".
func callerSite() string {
	var pcs [64]uintptr
	frames := runtime.CallersFrames(pcs[:runtime.Callers(2, pcs[:])])
	own, closure := "", ""
	for {
		f, more := frames.Next()
		switch {
		case f.Function == "":
		case !internalFrame(f.Function):
			return fmt.Sprintf("%s (%s:%d)", f.Function, f.File, f.Line)
		case !strings.HasPrefix(f.Function, module):
		case isClosure(f.Function):
			closure = f.Function // the goroutine's launcher: named only if nothing else is
		default:
			own = f.Function
		}
		if !more {
			break
		}
	}
	if own == "" {
		own = closure
	}
	if own == "" {
		return "pooldriver's own goroutine"
	}
	return "pooldriver's own goroutine: " + strings.TrimLeft(strings.TrimPrefix(own, module), "./")
}

// isClosure reports whether fn, a function's full name, is a function
// literal's ("pkg.f.func1", "pkg.f.gowrap2").
func isClosure(fn string) bool {
	last := fn[strings.LastIndexByte(fn, '.')+1:]
	return strings.HasPrefix(last, "func") || strings.HasPrefix(last, "gowrap")
}

// internalFrame reports whether fn, a function's full name, is of the
// standard library or of pooldriver's packages. A package path whose first
// element has no dot counts as the standard library's, but for main.
func internalFrame(fn string) bool {
	pkg := fn
	if i := strings.LastIndexByte(pkg, '/'); i >= 0 {
		if j := strings.IndexByte(pkg[i:], '.'); j >= 0 {
			pkg = pkg[:i+j]
		}
	} else if j := strings.IndexByte(pkg, '.'); j >= 0 {
		pkg = pkg[:j]
	}
	first, _, _ := strings.Cut(pkg, "/")
	if !strings.Contains(first, ".") && pkg != "main" {
		return true // the standard library (and the runtime): no dot in its first element
	}
	if pkg != module && !strings.HasPrefix(pkg, module+"/") {
		return false
	}
	for _, own := range []string{"/integration", "/examples", "/bench"} {
		if pkg == module+own || strings.HasPrefix(pkg, module+own+"/") {
			return false
		}
	}
	return true
}
