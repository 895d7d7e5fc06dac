package pooldriver

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/pooldriver/pooldriver/internal/phys"
)

// task is the unit of work a context carries. While it lasts, the physical
// connection bound to it (one per Connector) serves every hold that starts
// with the task's context; see Mode for how long a connection stays bound.
// The task also owns the *sql.Tx transactions begun with its context: it
// rolls back those still open when it ends.
type task struct {
	mode    Mode   // meaningful when hasMode
	hasMode bool   // false: each Connector's default mode applies
	seq     uint64 // the task's number, in the order tasks began (taskSeq)
	err     error  // a misuse found by WithTask, returned by every statement
	cancel  context.CancelCauseFunc
	ctx     context.Context // the task's, for the log lines of its end
	done    <-chan struct{} // the task's context's Done
	stop    func() bool     // stops the context.AfterFunc that ends the task
	once    sync.Once
	// begun is set once a statement of the task took a connection from a
	// pool: its later statements are served first when callers wait
	// (taskBegun), so that the tasks under way finish before new ones
	// start, whether or not they hold a connection between statements.
	begun atomic.Bool
	reads taskReads // what its reads must see (reads.go)

	mu       sync.Mutex // protects the fields below
	ended    bool
	bindings []binding // one per Connector the task ran a statement on
	first    [1]binding
	txs      []*tx // open transactions begun with the task's context
}

// binding is the task's record on one Connector it ran a statement on:
// the connection bound to it there, or none, or the record that it was
// lost. The Connector counts the task among its live ones until the task
// ends (Connector.tasks: Shutdown waits for them).
type binding struct {
	c    *Connector
	pc   *phys.Conn // nil: none bound, or lost
	lost error      // why the connection was lost
}

// WithTask starts a task: it returns a context carrying it and the function
// that ends it. Every statement run with the context (through any *sql.DB
// method, sql.Conn or ORM on a pooldriver Connector) uses the task's
// physical connection while it is bound; see [Mode] for how long that is.
// Without a mode the Connector's default (pool_mode) applies; give at most
// one.
//
// The task ends when end is called or ctx is done, whichever comes first:
// every transaction of the task (a raw BEGIN, or a *sql.Tx begun with the
// task's context) is rolled back, the session is reset where needed, the
// connections go back to the pool, and the task's context is cancelled with
// the cause ErrTaskEnded (see context.Cause). end returns when that is done,
// but for a session reset, which runs as its connection goes back to the
// pool, off the caller's path (nobody else can have the connection before
// it is done). Calling end again does nothing.
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
	if !tasksBegun.Load() {
		tasksBegun.Store(true)
	}
	t.seq = taskSeq.Add(1)
	t.reads.parent = taskFrom(ctx)
	if m := readMarkFrom(ctx); m != (readMark{}) {
		t.reads.readOnly = m.readOnly
		t.readAfter(m.after)
	}
	ctx, t.cancel = context.WithCancelCause(ctx)
	t.done = ctx.Done()
	ctx = context.WithValue(ctx, taskKey{}, t)
	t.ctx = ctx
	t.stop = context.AfterFunc(ctx, t.end)
	return ctx, t.end
}

// ending reports whether the task's context is done: the task has ended or
// is ending.
func (t *task) ending() bool {
	select {
	case <-t.done:
		return true
	default:
		return false
	}
}

// modeFor returns the task's mode on connector c.
func (t *task) modeFor(c *Connector) Mode {
	if t.hasMode {
		return t.mode
	}
	return c.cfg.Mode
}

// lookup returns the connection bound to t on c, or the error that every
// statement of t on c now gets: t ended, or lost its connection there, or
// c shuts down and t began after (see Connector.Shutdown). The first
// lookup on c records the task there.
func (t *task) lookup(c *Connector) (*phys.Conn, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ended {
		return nil, ErrTaskEnded
	}
	for i := range t.bindings {
		if b := &t.bindings[i]; b.c == c {
			if b.lost != nil {
				return nil, b.lost
			}
			return b.pc, nil
		}
	}
	if !c.admits(t.seq) {
		return nil, ErrShuttingDown
	}
	t.addBindingLocked(binding{c: c})
	return nil, nil
}

// addBindingLocked records b, on a Connector t has no record on yet, and
// counts t there. The caller holds t.mu.
func (t *task) addBindingLocked(b binding) {
	if t.bindings == nil {
		t.bindings = t.first[:0]
	}
	t.bindings = append(t.bindings, b)
	b.c.tasks.Add(1)
}

// bind binds pc, a connection of c, to t. The caller holds pc.Mu. It fails
// when t ended or already has a connection (or a lost one) there.
func (t *task) bind(c *Connector, pc *phys.Conn) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ended {
		return false
	}
	i := 0
	for i < len(t.bindings) && t.bindings[i].c != c {
		i++
	}
	switch {
	case i == len(t.bindings):
		t.addBindingLocked(binding{c: c, pc: pc})
	case t.bindings[i].pc != nil || t.bindings[i].lost != nil:
		return false
	default:
		t.bindings[i].pc = pc
	}
	pc.BindLocked(t, phys.Mode(t.modeFor(c)))
	return true
}

// UnbindConn forgets pc as t's connection, unless it was lost (the record
// stays: the task's later statements must fail). The caller holds pc.Mu.
func (t *task) UnbindConn(pc *phys.Conn) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for i := range t.bindings {
		if b := &t.bindings[i]; b.pc == pc && b.lost == nil {
			b.pc = nil
			return
		}
	}
}

// LostConn records that pc, t's connection, was lost while it carried a
// transaction or session of t's. The caller holds pc.Mu.
func (t *task) LostConn(pc *phys.Conn, cause error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for i := range t.bindings {
		if b := &t.bindings[i]; b.pc == pc {
			b.pc, b.lost = nil, &lostError{cause: cause}
			return
		}
	}
}

var _ phys.TaskBinding = (*task)(nil)

// markLost records that t's connection on c, lostPC, was lost while it
// carried a transaction or session of t's (or may have: its state after a
// statement of t's is unknown). The caller holds lostPC's mu, if it has it.
func (t *task) markLost(c *Connector, lostPC *phys.Conn, cause error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	err := &lostError{cause: cause}
	for i := range t.bindings {
		if b := &t.bindings[i]; b.c == c {
			if b.pc != nil && b.pc != lostPC {
				return // the task still has its connection; another one was lost
			}
			b.pc, b.lost = nil, err
			return
		}
	}
	if !t.ended {
		t.addBindingLocked(binding{c: c, lost: err})
	}
}

// addTx records x, begun with t's context, for rollback at t's end. It
// fails when t already ended.
func (t *task) addTx(x *tx) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ended {
		return false
	}
	t.txs = append(t.txs, x)
	return true
}

// dropTx forgets x, which ended.
func (t *task) dropTx(x *tx) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for i, y := range t.txs {
		if y == x {
			t.txs = append(t.txs[:i], t.txs[i+1:]...)
			return
		}
	}
}

// end ends the task once; concurrent callers wait until it is done.
func (t *task) end() {
	t.once.Do(func() {
		t.stop()
		t.mu.Lock()
		t.ended = true
		bs, txs := t.bindings, t.txs
		t.bindings, t.txs = nil, nil
		t.mu.Unlock()
		// Claim the open transactions before cancelling the context: the
		// cancellation wakes database/sql, which would roll them back
		// itself; this way the task does it, once, and counts it.
		var claimed []*tx
		for _, x := range txs {
			if x.claim(txEndedByTask) {
				claimed = append(claimed, x)
			}
		}
		t.cancel(ErrTaskEnded)
		for _, x := range claimed {
			x.pc.EndTask(t.ctx, t, &x.open, ErrTaskEnded)
		}
		for _, b := range bs {
			if b.pc != nil {
				b.pc.EndTask(t.ctx, t, nil, ErrTaskEnded)
			}
			b.c.tasks.Add(-1)
		}
	})
}

// began reports whether a statement of t took a connection (ctxTask).
func (t *task) began() bool { return t.begun.Load() }

// number is t's number, in the order tasks began (ctxTask).
func (t *task) number() uint64 { return t.seq }
