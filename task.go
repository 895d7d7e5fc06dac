package pooldriver

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pooldriver/pooldriver/dialects"
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
	txs      []taskTx // open transactions begun with the task's context
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

// taskOn is task t on Connector c, binding a connection there
// (phys.Conn.Bind, which asks BindConn under the connection's mutex).
type taskOn struct {
	t *task
	c *Connector
}

// BindConn records pc as b.t's connection on b.c (bind), and says in which
// mode pc is bound.
func (b taskOn) BindConn(pc *phys.Conn) (t phys.TaskBinding, session, ok bool) {
	return b.t, b.t.modeFor(b.c) == SessionMode, b.t.bind(b.c, pc)
}

// bind records pc, a connection of c, as t's there. The caller holds pc's
// mutex (phys.Conn.Bind, which binds pc to t if bind says yes). It fails
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
	return true
}

// UnbindConn forgets pc as t's connection, unless it was lost (the record
// stays: the task's later statements must fail). The caller, pc, holds its
// mutex.
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
// transaction or session of t's. The caller, pc, holds its mutex.
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

// taskTx is a transaction begun with a task's context (tx.go), which the
// task's end rolls back.
type taskTx interface {
	// claimByTask takes the transaction for the task's end; false where
	// it ended already.
	claimByTask() bool
	// endByTask rolls the claimed transaction back with t's end.
	endByTask(t *task)
}

// addTx records x, begun with t's context, for rollback at t's end. It
// fails when t already ended.
func (t *task) addTx(x taskTx) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ended {
		return false
	}
	t.txs = append(t.txs, x)
	return true
}

// dropTx forgets x, which ended.
func (t *task) dropTx(x taskTx) {
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
		var claimed []taskTx
		for _, x := range txs {
			if x.claimByTask() {
				claimed = append(claimed, x)
			}
		}
		t.cancel(ErrTaskEnded)
		for _, x := range claimed {
			x.endByTask(t)
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

// taskFrom returns the task ctx carries, or nil. Small enough to inline,
// so that a process with no task pays an atomic load.
func taskFrom(ctx context.Context) *task {
	if !tasksBegun.Load() {
		return nil // no context carries one yet: see tasksBegun
	}
	return taskIn(ctx)
}

// taskIn looks the task up in ctx. Not inlined: inlined, it would make
// taskFrom too large to inline.
//
//go:noinline
func taskIn(ctx context.Context) *task {
	t, _ := ctx.Value(taskKey{}).(*task)
	return t
}

// taskReads is what a task's reads must see, where its Connector sends
// reads to standbys: the log position of its writes and of what it read,
// and the standby it last read from. A task started from a context that
// carries a task (its parent) sees all its parent sees, and its parent
// what it writes and reads: the methods below follow the chain. One task
// may use several Connectors; positions are of one database's log, so a
// task reads after its writes on the one Connector with standbys it uses
// (a second one's positions would not compare).
type taskReads struct {
	readOnly bool  // started from a ReadOnly context
	parent   *task // the task whose context it started from, or nil
	// after: the position its reads must see (its commits, the standby
	// it read from, a token).
	after atomic.Uint64
	// unseen counts the task's statements that ran on the primary
	// outside a *sql.Tx, where nothing tells their position; covered,
	// how many of them a position the primary told since covers. While
	// some are not covered its reads go to the primary (ReadToken asks
	// the primary for its position).
	unseen, covered atomic.Uint64
	on              atomic.Pointer[replicas] // the Connector's, once it ran a statement there
	last            atomic.Pointer[standby]  // the standby it last read from, taken again while it can serve
	// ended: where its last read ran and when it ended, until a look
	// begun after that tells how far the server was then (see route).
	ended atomic.Pointer[readEnd]
}

// readEnded records that t's read, on h (nil: the primary), ended now:
// for its parents too, whose reads must not go behind it either.
func (t *task) readEnded(h *standby) {
	e := &readEnd{on: h, at: time.Now()}
	for ; t != nil; t = t.reads.parent {
		t.reads.ended.Store(e)
	}
}

// unseenRead returns t's last read while no look since told how far its
// server was; nil where t read nothing, or its floor was raised to what
// a look told.
func (t *task) unseenRead(r *replicas) *readEnd {
	e := t.reads.ended.Load()
	if e == nil {
		return nil
	}
	p, ok := r.sawSince(e)
	if !ok {
		return e
	}
	t.readAfter(p)
	t.reads.ended.CompareAndSwap(e, nil)
	return nil
}

// replicasOn returns the Connector's standbys t (or a parent) ran a
// statement on; nil: none.
func (t *task) replicasOn() *replicas {
	for ; t != nil; t = t.reads.parent {
		if r := t.reads.on.Load(); r != nil {
			return r
		}
	}
	return nil
}

// readsAfter is the position t's reads must see: the highest of its own
// and its parents'.
func (t *task) readsAfter() dialects.Position {
	var p uint64
	for ; t != nil; t = t.reads.parent {
		p = max(p, t.reads.after.Load())
	}
	return dialects.Position(p)
}

// readAfter raises the position t's reads, and its parents', must see to
// p.
func (t *task) readAfter(p dialects.Position) {
	for ; t != nil; t = t.reads.parent {
		raise(&t.reads.after, uint64(p))
	}
}

// raise sets v to n where n is higher.
func raise(v *atomic.Uint64, n uint64) {
	for {
		old := v.Load()
		if n <= old || v.CompareAndSwap(old, n) {
			return
		}
	}
}

// wroteUnseen reports whether t or a parent ran a statement on the
// primary whose position nothing has told since.
func (t *task) wroteUnseen() bool {
	for ; t != nil; t = t.reads.parent {
		if t.reads.unseen.Load() > t.reads.covered.Load() {
			return true
		}
	}
	return false
}

// writeUnseen records a statement of t (and so of its parents) on the
// primary whose position nothing tells.
func (t *task) writeUnseen() {
	for ; t != nil; t = t.reads.parent {
		t.reads.unseen.Add(1)
	}
}

// primaryPosition asks the primary of the Connector t (or a parent) ran
// on for its log position, which then covers the writes t and its
// parents made before; false where it could not be read.
func (t *task) primaryPosition(ctx context.Context) bool {
	r := t.replicasOn()
	if r == nil {
		return false
	}
	var seen []uint64
	for u := t; u != nil; u = u.reads.parent {
		seen = append(seen, u.reads.unseen.Load())
	}
	p, err := r.primaryPosition(ctx)
	if err != nil {
		return false
	}
	t.readAfter(p)
	for u := t; u != nil; u = u.reads.parent {
		raise(&u.reads.covered, seen[0])
		seen = seen[1:]
	}
	return true
}
