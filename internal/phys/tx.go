package phys

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"

	"github.com/pooldriver/pooldriver/dialects"
)

// A *sql.Tx's transaction, from its begin to its end, as its physical
// connection runs it: BeginTx begins it (on the driver, or as a savepoint
// in its task's raw transaction), records it and has the *sql.Tx admit
// it, rolling it back where the *sql.Tx's task ended meanwhile; EndTx
// commits or rolls it back and records that it ended, and what it left
// on the session. What the root adds
// (the hold's state, the task's list of transactions, a commit's
// position and what became of a COMMIT whose connection broke) it asks
// of the *sql.Tx, as a TaskClaim.

// OpenTx is a transaction begun with BeginTx, as its physical connection
// sees it: what EndTx ends, and what is rolled back should the connection
// be settled with it still open. The *sql.Tx's wrapper (the root's tx)
// holds one.
type OpenTx struct {
	drv driver.Tx // the driver's; nil where nested
	// nested: a savepoint in the task's raw transaction, whose rollback is
	// the raw transaction's; done is closed when it ends.
	nested bool
	done   chan struct{}
	// of is the *sql.Tx's wrapper, which says whether its task's end
	// claimed it: a rollback settle runs then is the task's (see clean).
	of TaskClaim
}

// Nested reports whether o is a *sql.Tx's savepoint nested in its task's
// raw transaction, with a channel closed when it ends: another BeginTx of
// the task waits for that to nest in turn. A nil o is none.
func (o *OpenTx) Nested() (done <-chan struct{}, ok bool) {
	if o == nil || !o.nested {
		return nil, false
	}
	return o.done, true
}

// errNoTxOwner is BeginTx's answer to a call without the *sql.Tx whose
// transaction it would begin: EndTx, its task's end and settle all ask it.
var errNoTxOwner = errors.New("pooldriver: internal error: a transaction begun without its *sql.Tx")

// BeginTx begins the transaction of of, a *sql.Tx, on pc with opts and
// records it in open, which of keeps. In a task (inTask) whose raw
// transaction is open on pc, the *sql.Tx nests in that transaction: its
// transaction is a savepoint (beginNested); otherwise it is the driver's
// (begin). Once it is recorded, of admits it (TaskClaim.Admit); where of
// refuses it, its task having ended meanwhile, the transaction is rolled
// back as the task's (undo) and BeginTx returns the refusal, or the
// rollback's error where that failed; without of or open it begins
// nothing and returns errNoTxOwner. The caller holds sem.
func (pc *Conn) BeginTx(ctx context.Context, opts driver.TxOptions, inTask bool, of TaskClaim, open *OpenTx) error {
	if of == nil || open == nil {
		return errNoTxOwner
	}
	nested := inTask && pc.st.Tx == TxRaw
	var drv driver.Tx
	var err error
	if nested {
		err = pc.beginNested(ctx, opts)
	} else {
		drv, err = pc.begin(ctx, opts)
	}
	if err != nil {
		return err
	}
	pc.beganTx(open, drv, nested, of)
	if err := of.Admit(); err != nil {
		if rerr := pc.undo(ctx, open, undoBegunAfterEnd); rerr != nil {
			return rerr
		}
		return err
	}
	return nil
}

// EndTx commits or rolls back the transaction open, a *sql.Tx's begun on
// pc with BeginTx, and records that it ended. ctx bounds it, also where
// the driver's Commit and Rollback take no context (watchBlocking). A
// commit of the driver's transaction is the *sql.Tx's to run
// (TaskClaim.CommitOn), handed the bytes pc has written so far; a
// rollback while the *sql.Tx's task is ending (database/sql rolls back
// because the task's context ended before the task's own end claimed the
// transaction) is the task's, and counted as undo counts it. A nested transaction's end leaves its task's raw
// transaction open, unless a statement of the *sql.Tx ended it: pc asks,
// as after any statement. Where the end succeeded, pc records whether
// the session changed during the transaction (observeEndTx).
//
// interrupted reports that the driver's call failed because ctx ended
// while it waited and pc's I/O was interrupted: err is then the driver's
// error. Where the call succeeded as the interruption came, the outcome
// stands and pc is lost. The caller holds sem, or its hold's rows do.
func (pc *Conn) EndTx(ctx context.Context, open *OpenTx, commit bool) (interrupted bool, err error) {
	stop := pc.watchBlocking(ctx)
	switch {
	case open.nested:
		err = pc.endNested(ctx, commit)
	case commit:
		err = open.of.CommitOn(ctx, pc, open.drv, pc.sent())
	default:
		err = open.drv.Rollback()
	}
	if !commit && open.of.TaskEnding() {
		// database/sql rolls back because the task's context ended (its
		// parent was cancelled, say) before the task's own end claimed the
		// transaction: this is the task's rollback, counted as undo would.
		pc.Env.stats.autoRollbacks.Add(1)
		pc.Env.stats.taskEndRollbacks.Add(1)
	}
	if !stop() {
		if err != nil {
			interrupted = true
		} else {
			// It succeeded as the interruption came: the outcome stands,
			// the connection's I/O does not. Lost before the end is
			// recorded, it tells its task of the transaction it carried.
			pc.Lose(errInterruptedLate, false)
		}
	}
	if open.nested {
		// The task's transaction goes on, unless a statement of the
		// *sql.Tx ended it: ask, as after any statement.
		pc.endedTx(true)
		if _, oerr := pc.Observe(ctx, nestedEnd(commit), false); oerr != nil && err == nil {
			err = oerr
		}
		close(open.done)
	} else {
		pc.endedTx(false)
	}
	if err == nil {
		pc.observeEndTx(commit)
	}
	return interrupted, err
}

var errInterruptedLate = errors.New("pooldriver: the connection's I/O was interrupted as its transaction ended")

// begin begins a transaction with opts on the driver, as database/sql
// would: its BeginTx, else its Begin, where opts ask for nothing else. The
// caller holds sem.
func (pc *Conn) begin(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	if pc.beginner != nil {
		return pc.beginner.BeginTx(ctx, opts)
	}
	if opts.Isolation != 0 || opts.ReadOnly {
		return nil, errors.New("pooldriver: the driver supports neither isolation levels nor read-only transactions")
	}
	return pc.drv.Begin() //nolint:staticcheck // the driver offers nothing newer
}

// beganTx records that a *sql.Tx's transaction began on pc: drv, the
// driver's, or a savepoint in pc's raw transaction where nested. of is the
// *sql.Tx's wrapper, which keeps the transaction as pc knows it in open.
// The caller holds sem.
func (pc *Conn) beganTx(open *OpenTx, drv driver.Tx, nested bool, of TaskClaim) {
	*open = OpenTx{drv: drv, nested: nested, of: of}
	s := TxBegun
	if nested {
		open.done = make(chan struct{})
		s = TxRaw
	}
	pc.setTx(s, open)
}

// endedTx records that the *sql.Tx whose transaction was open on pc
// ended: none is open now, unless it was nested in a raw transaction,
// which goes on (nested). The caller holds sem.
func (pc *Conn) endedTx(nested bool) {
	s := TxNone
	if nested {
		s = pc.st.Tx
	}
	pc.setTx(s, nil)
}

// watchBlocking bounds a call of the driver that ignores its context (a
// *sql.Tx's Commit or Rollback, on a dialect that says so by implementing
// dialects.Interrupter): when ctx ends first, the call's I/O is
// interrupted. stop reports whether it was not. Without an interrupter it
// does nothing.
func (pc *Conn) watchBlocking(ctx context.Context) (stop func() bool) {
	if pc.interrupter == nil || ctx.Done() == nil {
		return func() bool { return true }
	}
	return context.AfterFunc(ctx, pc.interrupter.Interrupt)
}

// observeEndTx records whether the session changed during a *sql.Tx that
// just ended (EndTx, commit or not): its statements are not asked while it
// is open (a setting changed inside it, by SET LOCAL or set_config in a
// function, may still revert), so its end asks, as after a raw COMMIT,
// with COMMIT or ROLLBACK for the statement. The transaction state is
// known. With result sets open on pc the driver is mid-protocol, and
// nothing is asked. The caller holds sem, or its hold's rows do.
func (pc *Conn) observeEndTx(commit bool) {
	pc.mu.Lock()
	rows := pc.st.Rows
	pc.mu.Unlock()
	if rows > 0 {
		return
	}
	query := "ROLLBACK"
	if commit {
		query = "COMMIT"
	}
	changed, _, _ := pc.ask(context.Background(), query, false) // no error without askTx
	_ = pc.observed(changed, false, dialects.TxIdle, nil)
}

// A *sql.Tx begun in a task whose connection has a raw transaction open (a
// statement of the task ran BEGIN) nests inside that transaction (see the
// root's nest.go): its begin is a savepoint, its Commit releases it, its
// Rollback rolls back to it.

// savepointName is the savepoint of the nested *sql.Tx. One name serves
// every nesting: one is open at a time on a connection, and a savepoint
// of the same name as an older one hides it (PostgreSQL, SQLite) or
// replaces it (MySQL), either of which leaves the newest to release or to
// roll back to. The name is an identifier every SQL database accepts.
const savepointName = "pooldriver_nested_tx"

// beginNested nests a *sql.Tx in the raw transaction open on pc: after
// checking that opts can hold there, it takes the savepoint. The caller
// holds sem.
func (pc *Conn) beginNested(ctx context.Context, opts driver.TxOptions) error {
	if err := pc.checkNestedOptions(ctx, opts); err != nil {
		return err
	}
	if _, err := pc.Exec(ctx, "SAVEPOINT "+savepointName, nil); err != nil {
		return fmt.Errorf("pooldriver: nesting the *sql.Tx in the task's open transaction (SAVEPOINT): %w", err)
	}
	return nil
}

// endNested ends a nested *sql.Tx: its commit releases the savepoint, and
// its work joins the task's transaction; its rollback undoes its work,
// rolling back to the savepoint. The task's transaction goes on. The
// caller holds sem.
func (pc *Conn) endNested(ctx context.Context, commit bool) error {
	query := nestedEnd(commit)
	if _, err := pc.Exec(ctx, query, nil); err != nil {
		return fmt.Errorf("pooldriver: ending the *sql.Tx nested in the task's transaction (%s): %w", query, err)
	}
	return nil
}

// nestedEnd is the statement that commits or rolls back a nested *sql.Tx.
func nestedEnd(commit bool) string {
	if commit {
		return "RELEASE SAVEPOINT " + savepointName
	}
	return "ROLLBACK TO SAVEPOINT " + savepointName
}

// checkNestedOptions refuses options a savepoint cannot honour: an
// isolation level or a read-only access mode other than the open
// transaction's. Without options there is nothing to check, and no round
// trip.
func (pc *Conn) checkNestedOptions(ctx context.Context, opts driver.TxOptions) error {
	if opts.Isolation == driver.IsolationLevel(sql.LevelDefault) && !opts.ReadOnly {
		return nil
	}
	want := "read-only"
	if opts.Isolation != driver.IsolationLevel(sql.LevelDefault) {
		want = sql.IsolationLevel(opts.Isolation).String()
		if opts.ReadOnly {
			want += ", read-only"
		}
	}
	in, ok := pc.DC.(dialects.OpenTxInspector)
	if !ok {
		return fmt.Errorf("pooldriver: a *sql.Tx nested in the task's open transaction cannot be %s: this database cannot tell the open transaction's isolation level and access mode; begin it without TxOptions", want)
	}
	level, readOnly, err := in.OpenTx(ctx)
	if err != nil {
		return err
	}
	if opts.Isolation != driver.IsolationLevel(sql.LevelDefault) && opts.Isolation != level || opts.ReadOnly && !readOnly {
		return fmt.Errorf("pooldriver: a *sql.Tx nested in the task's open transaction cannot be %s: the open transaction is %s", want, describeTx(level, readOnly))
	}
	return nil
}

// describeTx names an isolation level and access mode for an error.
func describeTx(level driver.IsolationLevel, readOnly bool) string {
	mode := "read-write"
	if readOnly {
		mode = "read-only"
	}
	if level == driver.IsolationLevel(sql.LevelDefault) {
		return mode
	}
	return sql.IsolationLevel(level).String() + ", " + mode
}
