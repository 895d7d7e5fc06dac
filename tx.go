package pooldriver

import (
	"context"
	"database/sql/driver"
	"errors"
	"sync/atomic"

	"github.com/pooldriver/pooldriver/dialects"
	"github.com/pooldriver/pooldriver/internal/phys"
)

// Transaction states. Exactly one of Commit, Rollback and the end of the
// task moves a transaction out of txActive, so exactly one of them reaches
// the server.
const (
	txActive int32 = iota
	txDone
	txEndedByTask
)

var errTxDone = errors.New("pooldriver: transaction has already been committed or rolled back")

// tx is a transaction begun with BeginTx on a logical conn. It owns its
// physical connection's transaction until it ends.
type tx struct {
	l     *conn
	pc    *phys.Conn
	open  phys.OpenTx     // its transaction, as pc knows it
	task  *task           // the task it was begun in, or nil
	ctx   context.Context // BeginTx's: it bounds Commit and Rollback (see end)
	state atomic.Int32
	// tellsPosition: its commit learns the position its task's reads
	// must see (pool_reads=standby): it may write, on the primary.
	tellsPosition bool
	// lostCommit: its COMMIT lost its connection, whose dialect can ask
	// what became of the transaction (set by endOn, read by end).
	lostCommit *lostCommit
}

var _ driver.Tx = (*tx)(nil)

func (x *tx) claim(to int32) bool { return x.state.CompareAndSwap(txActive, to) }

// claimByTask and endByTask make x a taskTx: its task's end claims it,
// then rolls it back.
func (x *tx) claimByTask() bool { return x.claim(txEndedByTask) }

func (x *tx) endByTask(t *task) { x.pc.EndTask(t.ctx, t, &x.open, ErrTaskEnded) }

func (x *tx) endedByTask() bool { return x.state.Load() == txEndedByTask }

// ClaimedByTask reports whether the end of x's task claimed it, with the
// task's context: database/sql may close the connection (the task's
// cancellation woke it) before the task's end rolls x back, and the
// rollback settle runs then is the task's.
func (x *tx) ClaimedByTask() (context.Context, bool) {
	if x.task == nil || !x.endedByTask() {
		return nil, false
	}
	return x.task.ctx, true
}

// Admit makes the transaction phys.Conn.BeginTx just began and recorded
// x's: the hold's (and the task's end may reach its connection from now
// on), and its task's, unless the task ended meanwhile: then its
// transaction must not outlive the task, and the refusal,
// errTaskEndedAtBegin, has BeginTx roll it back.
func (x *tx) Admit() error {
	l := x.l
	if x.task != nil {
		l.to(evTaskTx)
	}
	l.tx = x
	if x.task != nil && !x.task.addTx(x) {
		x.claim(txEndedByTask)
		l.tx = nil
		return errTaskEndedAtBegin
	}
	return nil
}

// TaskEnding reports whether x's task is ending: a rollback of x then is
// the task's (see phys.Conn.EndTx).
func (x *tx) TaskEnding() bool { return x.task != nil && x.task.ending() }

// Commit commits. After the end of the task rolled the transaction back it
// fails with ErrTaskEnded and commits nothing.
func (x *tx) Commit() error {
	return x.end(true)
}

// Rollback rolls back. database/sql calls it when the transaction's context
// is cancelled; after the end of the task rolled the transaction back it
// does nothing.
func (x *tx) Rollback() error {
	return x.end(false)
}

func (x *tx) end(commit bool) error {
	l := x.l
	if !x.claim(txDone) {
		if l.tx == x {
			l.tx = nil
		}
		if x.endedByTask() {
			if commit {
				return ErrTaskEnded
			}
			return nil
		}
		return errTxDone
	}
	if x.task != nil {
		x.task.dropTx(x)
	}
	query := "ROLLBACK" // what ended it, for finish to ask of the session
	if commit {
		query = "COMMIT"
	}
	err := l.do(context.Background(), opEndTx, &lease{pc: x.pc}, query, func(pc *phys.Conn) error {
		return x.endOn(pc, commit)
	})
	if lc := x.lostCommit; lc != nil && err != nil {
		return x.l.c.resolveCommit(x.ctx, lc, err)
	}
	return err
}

// CommitOn commits x on pc, its connection, bounded by ctx
// (phys.Conn.EndTx): drv is the driver's transaction, and pc had written
// before bytes. Where pc's dialect can ask what became of a COMMIT whose
// connection broke, it notes what it needs first (watchCommit), and end
// asks (resolveCommit).
func (x *tx) CommitOn(ctx context.Context, pc *phys.Conn, drv driver.Tx, before uint64) error {
	lc := watchCommit(pc, before)
	err := x.commit(ctx, pc, drv)
	if lc.lost(ctx, pc, err) {
		lost := lc // to the heap only when lost
		x.lostCommit = &lost
	}
	return err
}

// commit commits drv, x's transaction on pc; where its task reads from
// standbys, in the round trip that learns the commit's position
// (dialects.PositionCommitter).
func (x *tx) commit(ctx context.Context, pc *phys.Conn, drv driver.Tx) error {
	if x.tellsPosition {
		if pcm, ok := pc.DC.(dialects.PositionCommitter); ok {
			p, err := pcm.CommitAt(ctx)
			switch {
			case err != nil, p == 0:
				// It may have committed (the reply lost), or did and its
				// position was not learnt: the task reads from the
				// primary.
				x.task.writeUnseen()
			default:
				x.task.readAfter(p)
			}
			return err
		}
		x.task.writeUnseen()
	}
	return drv.Commit()
}

// endOn commits or rolls back x on pc, the hold's connection, locked for it.
func (x *tx) endOn(pc *phys.Conn, commit bool) error {
	// The transaction's context bounds its end, as database/sql promises,
	// also where the driver's Commit and Rollback take none: a Rollback
	// that database/sql runs because the context already ended gets the
	// cleanup timeout instead.
	bound := x.ctx
	if bound.Err() != nil {
		var cancel context.CancelFunc
		bound, cancel = context.WithTimeout(context.WithoutCancel(bound), x.l.cleanupTimeout())
		defer cancel()
	}
	interrupted, err := pc.EndTx(bound, &x.open, commit)
	if interrupted {
		what := "ROLLBACK"
		if commit {
			what = "COMMIT"
		}
		err = &interruptedError{what: what, ctx: bound.Err(), cause: err}
	}
	x.l.tx = nil
	return err
}
