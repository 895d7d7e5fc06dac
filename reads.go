package pooldriver

import (
	"context"
	"fmt"
	"time"

	"github.com/pooldriver/pooldriver/dialects"
	"github.com/pooldriver/pooldriver/internal/phys"
	"github.com/pooldriver/pooldriver/pool"
)

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
// the last one did: the same standby while it stays (a late look does
// not send the read to the primary, which may not show yet a commit the
// standby showed), else the primary; once one has, what it saw is the
// task's floor, and any server that reached it serves (the task's own
// standby first, and while it stays rather than the primary).
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
			if e.on == nil || !r.stays(e.on, max(after, t.readsAfter()), m.maxLag, time.Now()) {
				r.onPrimary.Add(1)
				return nil, true
			}
			r.onStandby.Add(1)
			return e.on, true
		}
		after = max(after, t.readsAfter())
		last = t.reads.last.Load()
	}
	own := last
	if last == nil && parked != nil {
		last = r.of(parked.Value()) // its parked connection is taken without the pool
	}
	h = r.source(ctx, after, last, own, m.maxLag)
	if h != nil && t != nil {
		// What the standby was last seen to have replayed, the read
		// sees at least.
		if s := h.seen.Load(); s != nil {
			t.readAfter(s.replayed)
		}
		if own != h {
			t.reads.last.Store(h) // where it came from the parked connection too
		}
	}
	return h, t != nil
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
