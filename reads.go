package pooldriver

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/pooldriver/pooldriver/dialects"
	"github.com/pooldriver/pooldriver/internal/phys"
	"github.com/pooldriver/pooldriver/pool"
)

// Reads says where reads may go (pool_reads).
type Reads int

const (
	// ReadsPrimary (the default): everything runs on the primary.
	ReadsPrimary Reads = iota
	// ReadsStandby: with a DSN that names a primary and its standbys
	// (PostgreSQL's multi-host DSN), reads go to a standby that has
	// replayed what they must see: a read-only *sql.Tx, and every
	// statement run with a context from ReadOnly. See docs/reads.md.
	ReadsStandby
	// ReadsSelects: as ReadsStandby, and a statement outside a
	// transaction that the dialect proves only reads by its text (one
	// SELECT of built-ins that write nothing) goes to a standby too,
	// whatever its context says. Outside a task nothing tells a caller's
	// writes: such a read may miss the caller's own write, as with any
	// read/write split; a task's reads never do.
	ReadsSelects
)

// String returns "primary", "standby" or "selects", the pool_reads values.
func (r Reads) String() string {
	switch r {
	case ReadsPrimary:
		return "primary"
	case ReadsStandby:
		return "standby"
	case ReadsSelects:
		return "selects"
	}
	return fmt.Sprintf("Reads(%d)", int(r))
}

// ParseReads parses a pool_reads value: "primary", "standby" or "selects".
func ParseReads(s string) (Reads, error) {
	switch s {
	case "primary":
		return ReadsPrimary, nil
	case "standby":
		return ReadsStandby, nil
	case "selects":
		return ReadsSelects, nil
	}
	return 0, fmt.Errorf("unknown reads %q (want primary, standby or selects)", s)
}

// knownReads is pool_reads's check.
func knownReads(v any) error {
	if r := v.(Reads); r < ReadsPrimary || r > ReadsSelects {
		return errors.New("unknown reads")
	}
	return nil
}

// WithReads sets where reads may go (pool_reads).
func WithReads(r Reads) Option {
	return option("WithReads", int(r), func(c *Config) { c.Reads = r })
}

// WithMaxReplicaLag bounds how far behind the primary a standby that
// serves reads may be (pool_max_replica_lag, default 1s).
func WithMaxReplicaLag(d time.Duration) Option {
	return option("WithMaxReplicaLag", d, func(c *Config) { c.MaxReplicaLag = d })
}

// WithReadWait sets how long a read whose position no standby has
// replayed yet (a task's read after its write) waits for a standby close
// behind to replay it, before the primary serves it (pool_read_wait,
// default 5ms; 0: it does not wait).
func WithReadWait(d time.Duration) Option {
	return option("WithReadWait", d, func(c *Config) { c.ReadWait = d })
}

// WithMaxLag returns a context whose reads may go to a standby up to d
// behind the primary, instead of pool_max_replica_lag: a staleness budget
// for one request's reads, looser or stricter. What a read must see (its
// task's writes, a token) it still sees. d must be positive.
func WithMaxLag(ctx context.Context, d time.Duration) (context.Context, error) {
	if d <= 0 {
		return ctx, fmt.Errorf("pooldriver: WithMaxLag: %v is not a positive duration", d)
	}
	m := readMarkFrom(ctx)
	m.maxLag = d
	return context.WithValue(ctx, readsKey{}, m), nil
}

// readsKey is the context key of a readMark.
type readsKey struct{}

// readMark is what a context says of its reads: that its statements only
// read, and the log position they must see.
type readMark struct {
	readOnly bool
	primary  bool // a statement a standby refused, run again on the primary
	after    dialects.Position
	maxLag   time.Duration // WithMaxLag's; 0: pool_max_replica_lag
}

func readMarkFrom(ctx context.Context) readMark {
	m, _ := ctx.Value(readsKey{}).(readMark)
	return m
}

// ReadOnly returns a context whose statements only read: with
// pool_reads=standby they run on a standby (one that has replayed what
// they must see, and is within pool_max_replica_lag of the primary), else
// on the primary. A task started from it (WithTask) is read-only: all its
// statements run on standbys. A statement that writes, outside a
// transaction, is refused by the standby and runs again on the primary
// (once, where it was its hold's first); in a *sql.Tx it fails, as on a
// read-only connection. Without pool_reads=standby it changes nothing.
func ReadOnly(ctx context.Context) context.Context {
	m := readMarkFrom(ctx)
	m.readOnly = true
	return context.WithValue(ctx, readsKey{}, m)
}

// ReadToken returns what a later request must read after to see the
// writes of ctx's task (and of the tasks it was started from), and what
// its reads saw: the log
// position of its last write on the primary, written as text to hand to
// the client (a cookie, a header), "" when the task wrote nothing that
// pooldriver knows of. Give it back with WithReadToken. A task that wrote
// outside a *sql.Tx has no position for it: ReadToken asks the primary
// for its position now (a round trip), with ctx's deadline; the task's
// reads may go to standbys again once they have replayed it. What the
// task's last read saw a look begun after it tells: ReadToken waits for
// it (kicked, a round trip on the look's connection, shared by all who
// wait). Where the server cannot say (its connection lost, ctx done),
// the token is never weaker than what it covers: it sends the reads of
// the request that gives it back to the primary (a position no standby
// has reached).
func ReadToken(ctx context.Context) string {
	t := taskFrom(ctx)
	if t == nil {
		if m := readMarkFrom(ctx); m.after != 0 {
			return m.after.String()
		}
		return ""
	}
	if r := t.replicasOn(); r != nil {
		if e := t.unseenRead(r); e != nil {
			p, ok := r.seenSince(ctx, e)
			if !ok {
				return unreachedPosition.String()
			}
			t.readAfter(p)
			t.reads.ended.CompareAndSwap(e, nil)
		}
	}
	if t.wroteUnseen() && !t.primaryPosition(ctx) {
		return unreachedPosition.String()
	}
	p := t.readsAfter()
	if p == 0 {
		return ""
	}
	return p.String()
}

// unreachedPosition is a position no standby reaches: a read that must
// see it runs on the primary (ReadToken's where the primary's position
// could not be read).
const unreachedPosition = dialects.Position(1<<64 - 1)

// WithReadToken returns a context whose statements, and the tasks started
// from it, read only from standbys that have replayed the writes token
// stands for (see ReadToken), else from the primary. An empty token
// changes nothing; one ReadToken did not write is an error.
func WithReadToken(ctx context.Context, token string) (context.Context, error) {
	if token == "" {
		return ctx, nil
	}
	p, err := dialects.ParsePosition(token)
	if err != nil {
		return ctx, fmt.Errorf("pooldriver: WithReadToken: %w", err)
	}
	m := readMarkFrom(ctx)
	m.after = max(m.after, p)
	if t := taskFrom(ctx); t != nil {
		t.readAfter(p)
	}
	return context.WithValue(ctx, readsKey{}, m), nil
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

// readEnd is where a task's read ran (nil: the primary) and when it
// ended.
type readEnd struct {
	on *standby
	at time.Time
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

// route returns the standby that serves an operation of kind k with ctx,
// of task t (nil: none), where it only reads: it runs with a ReadOnly
// context or in a read-only task, begins a read-only *sql.Tx (readTx),
// or, with pool_reads=selects, is a statement (query) the dialect proves
// only reads; nil: the primary serves it, as it serves everything where
// primary. read reports a task's read, whose end the hold reports
// (task.readEnded). A read must see what ctx's token and the task's
// writes and earlier reads saw. The standby the task read from last,
// else the one whose connection the logical conn parked (taken without
// the pool), is taken first while it can serve. A task's statement on
// the primary outside a *sql.Tx may have written where nothing tells the
// position: the task's reads go to the primary from then on (see
// taskReads).
//
// Monotonic reads: a read sees at least what its server had replayed (a
// standby) or flushed (the primary) when it ended, which only a look
// begun after that tells. Until one has, the task's next read goes where
// the last one did (the same standby, while it can serve, else the
// primary, which is ahead of every standby); once one has, what it saw
// is the task's floor, and any server that reached it serves.
func (r *replicas) route(ctx context.Context, t *task, k opKind, readTx, primary bool, query string, parked *pool.Resource[*phys.Conn]) (h *standby, read bool) {
	m := readMarkFrom(ctx)
	for u := t; u != nil && u.reads.on.Load() == nil; u = u.reads.parent {
		u.reads.on.Store(r) // its parents' too: a token of theirs covers what it wrote
	}
	if primary || m.primary || !r.reads(m, t, k, readTx, query) {
		if t != nil && writes(k) {
			t.writeUnseen()
		}
		if m.primary || !primary && (m.readOnly || t != nil && t.reads.readOnly) {
			// A read a standby refused, run again here, or one that
			// a standby would answer differently.
			r.onPrimary.Add(1)
		}
		return nil, false
	}
	after := m.after
	var last *standby
	if t != nil {
		if t.wroteUnseen() {
			r.onPrimary.Add(1)
			return nil, true
		}
		if e := t.unseenRead(r); e != nil {
			if e.on == nil || !r.serves(e.on, max(after, t.readsAfter()), m.maxLag, time.Now()) {
				r.onPrimary.Add(1)
				return nil, true
			}
			r.onStandby.Add(1)
			return e.on, true
		}
		after = max(after, t.readsAfter())
		last = t.reads.last.Load()
	}
	if last == nil && parked != nil {
		last = r.of(parked.Value()) // its parked connection is taken without the pool
	}
	h = r.source(ctx, after, last, m.maxLag)
	if h != nil && t != nil {
		// What the standby was last seen to have replayed, the read
		// sees at least.
		if s := h.seen.Load(); s != nil {
			t.readAfter(s.replayed)
		}
		if last != h {
			t.reads.last.Store(h)
		}
	}
	return h, t != nil
}

// sawSince returns how far e's server was seen to be by a look begun
// after e's read ended: a standby's replayed position, the primary's
// flushed one; false where no look has told yet (or the standby no
// longer answers as one).
func (r *replicas) sawSince(e *readEnd) (dialects.Position, bool) {
	if e.on != nil {
		s := e.on.seen.Load()
		if s == nil || !s.up || !s.started.After(e.at) {
			return 0, false
		}
		return s.replayed, true
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.n == 0 {
		return 0, false
	}
	s := r.seen[(r.next-1+positionHistory)%positionHistory]
	if !s.started.After(e.at) {
		return 0, false
	}
	return s.pos, true
}

// reads reports whether an operation of kind k, with a context marked m,
// of task t (or nil), only reads, as a standby would run it: see route.
// A statement its caller says only reads (ReadOnly, a read-only task)
// does, unless the dialect finds in it what a standby answers
// differently or refuses (an unlogged table, a sequence, a view reaching
// code): the primary serves that.
func (r *replicas) reads(m readMark, t *task, k opKind, readTx bool, query string) bool {
	if readTx {
		return true
	}
	if m.readOnly || t != nil && t.reads.readOnly {
		return query == "" || r.prover == nil || !r.prover.StandbyDiffers(query)
	}
	return r.selects && query != "" && (k == opExec || k == opStmt) && r.prover.ReadsOnly(query)
}

// writes reports whether an operation of kind k may write: a statement,
// or anything done with the raw connection. Beginning a *sql.Tx does not
// (its commit tells its position), nor do Prepare and Ping.
func writes(k opKind) bool { return k == opExec || k == opStmt || k == opRaw }

// wroteOn records that task t ran an operation of kind k on pc, the
// connection its task kept bound, outside a *sql.Tx: a write whose
// position nothing tells, where pc is the primary's (see route).
func (c *Connector) wroteOn(t *task, k opKind, pc *phys.Conn) {
	if c.reads != nil && writes(k) && pc.Env == &c.env {
		t.writeUnseen()
	}
}

// leaveStandby is start's for a hold that has its connection already
// (a *sql.Conn's later operation), outside a *sql.Tx, with standbys. On
// the primary's connection it records a task's write there (see route).
// On a standby's, an operation that does not only read ends the hold, so
// that a new one starts on the primary, and reports true: the standby's
// session ran reads only (a *sql.Conn's first statement, proven a read,
// took it), so nothing is lost. It stays where the session changed, or
// where rows are open or the task shares the connection: there the
// operation runs on the standby, which refuses a write.
func (l *conn) leaveStandby(ctx context.Context, k opKind, le *lease) bool {
	if !l.state.held() {
		return false
	}
	t := taskFrom(ctx)
	m := readMarkFrom(ctx)
	h := l.standby
	if h == nil {
		if t != nil && writes(k) && !l.c.reads.reads(m, t, k, le.readTx, l.text) {
			t.writeUnseen()
		}
		return false
	}
	if k == opPrepare || k == opPing || l.c.reads.reads(m, t, k, le.readTx, l.text) {
		return false
	}
	if l.state != holdOwn || l.rows != 0 || !l.pc.St.SessionUnchanged() || l.pc.St.Tx != phys.TxNone {
		return false
	}
	l.endHold()
	l.standby = nil
	return true
}

// retryOnPrimary reports whether a statement that failed with err on a
// standby's connection runs again on the primary, with the context it
// returns: the standby refused it as a primary would not have (a write,
// a conflict with its recovery), or its connection was lost under it (a
// standby going down: whatever it ran there, it wrote nothing). It must
// have been its hold's first (fresh: a *sql.Conn's later statements keep
// their connection and session), outside a transaction, on a connection of
// the hold's own (not a session-mode task's). The hold ends first: the
// retry starts another.
func (l *conn) retryOnPrimary(ctx context.Context, err error, fresh bool) (context.Context, bool) {
	if !fresh || l.tx != nil || l.rows != 0 {
		return ctx, false
	}
	h := l.standby
	refused := l.state == holdOwn && h.refused != nil && h.refused(err)
	if !refused && l.state != holdLost {
		return ctx, false
	}
	l.endHold()
	m := readMarkFrom(ctx)
	m.primary = true
	return context.WithValue(ctx, readsKey{}, m), true
}

// missed moves a read counted as served by a standby, whose pool could not
// connect, to those the primary served.
func (r *replicas) missed() {
	r.onStandby.Add(-1)
	r.onPrimary.Add(1)
}

// of returns the standby whose pool pc is of, nil for the primary's.
func (r *replicas) of(pc *phys.Conn) *standby {
	for _, h := range r.hosts {
		if pc.Env == &h.c.env {
			return h
		}
	}
	return nil
}
