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

var errInterruptedLate = errors.New("pooldriver: the connection's I/O was interrupted as its transaction ended")

var errTxDone = errors.New("pooldriver: transaction has already been committed or rolled back")

// tx is a transaction begun with BeginTx on a logical conn. It owns its
// physical connection's transaction until it ends.
type tx struct {
	l     *conn
	pc    *phys.Conn
	open  phys.OpenTx     // the driver's transaction, as pc knows it
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

// commit commits x on pc; where its task reads from standbys, in the
// round trip that learns the commit's position (dialects.PositionCommitter).
func (x *tx) commit(ctx context.Context, pc *phys.Conn, nested bool) error {
	if x.tellsPosition && !nested {
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
	return x.open.Drv.Commit()
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
	sp, nested := nestedIn(&x.open)
	if nested {
		sp.ctx = bound
	}
	stop := pc.WatchBlocking(bound)
	var err error
	if commit {
		var lc lostCommit
		if !nested {
			lc = watchCommit(pc)
		}
		err = x.commit(bound, pc, nested)
		if lc.lost(bound, pc, err) {
			lost := lc // to the heap only when lost
			x.lostCommit = &lost
		}
	} else {
		err = x.open.Drv.Rollback()
		if x.task != nil && x.task.ending() {
			// database/sql rolls back because the task's context ended
			// (its parent was cancelled, say) before the task's own end
			// claimed the transaction: this is the task's rollback.
			pc.CountUndo()
		}
	}
	if !stop() {
		if err != nil {
			what := "ROLLBACK"
			if commit {
				what = "COMMIT"
			}
			err = &interruptedError{what: what, ctx: bound.Err(), cause: err}
		} else {
			// It succeeded as the interruption came: the outcome stands,
			// the connection's I/O does not.
			pc.Lose(errInterruptedLate, false)
		}
	}
	if nested {
		// The task's transaction goes on, unless a statement of the
		// *sql.Tx ended it: ask, as after any statement.
		pc.EndedTx(true)
		if oerr := pc.Observe(bound, nestedEnd(commit)); oerr != nil && err == nil {
			err = oerr
		}
		close(sp.done)
	} else {
		pc.EndedTx(false)
	}
	x.l.tx = nil
	return err
}
