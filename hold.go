package pooldriver

import (
	"context"
	"database/sql/driver"
	"errors"
	"time"

	"github.com/pooldriver/pooldriver/dialects"
	"github.com/pooldriver/pooldriver/internal/phys"
)

// A hold's operations, carried out: what they do is planned in plan.go,
// with the hold's states and events; here they are done.

// lose records that the hold lost its connection for cause: every later
// operation of the hold fails with the loss, l.lost.
func (l *conn) lose(cause error) {
	l.lost = lost(cause)
	l.to(evLose)
}

// Every operation of a hold (a statement, BeginTx, a *sql.Tx's Commit and
// Rollback, Prepare, Ping, RawConn) runs through do; a statement through
// exec, or query when it opens rows, whose Close is the operation's second
// half. All three are start, the operation, finish: start picks the
// physical connection (the hold's, else the task's, else one from the
// pool) and takes its lock as the
// hold's state says; the operation runs on it; finish records what the
// operation left (the transaction the server reports, a changed session, a
// lost connection), binds the connection to a transaction-mode task that
// now needs it, maps the error and unlocks. endHold lets go of the physical
// connection, whose fate decide then settles.

// lease is one operation's use of its hold's physical connection.
type lease struct {
	pc *phys.Conn
	t  *task // the task of the operation's context, or nil
	leaseFacts
}

// leaseFacts is what a lease knows besides its pointers, apart so that a
// result set's wrapper, reused, can take it in two words (see newRows).
type leaseFacts struct {
	locked   bool   // the operation took pc's lock (false: its hold's open rows have it, or it runs solo)
	solo     bool   // the hold's first operation, outside any task, run without the lock (see start)
	readTx   bool   // it begins a read-only *sql.Tx that a standby may serve (pool_reads=standby)
	primary  bool   // it begins a *sql.Tx a standby would refuse (serializable): on the primary
	fresh    bool   // pc was new to the task or hold with this operation: it carried nothing before
	separate bool   // on a pool connection because the task's own was busy with rows
	hadState bool   // a transaction-mode task's statement found a raw transaction or a changed session on its unbound connection
	sent     uint64 // bytes written before the operation, as pc.Ready said when it started (see phys.Conn.Wrote)
}

// do runs one operation of kind k on l's hold: start, then fn on the
// hold's physical connection, then finish with fn's error. le is the
// operation's lease: a zero one, except for the end of a *sql.Tx, which
// names its connection.
func (l *conn) do(ctx context.Context, k opKind, le *lease, query string, fn func(pc *phys.Conn) error) error {
	if err := l.start(ctx, k, le); err != nil {
		return err
	}
	return l.finish(ctx, le, k, query, fn(le.pc))
}

// exec is do for a statement: it runs query with args, or the prepared
// statement s (with its text) when s is not nil, without the closure do
// takes, which every statement would pay for.
func (l *conn) exec(ctx context.Context, query string, args []driver.NamedValue, s *stmt) (driver.Result, error) {
	var le lease
	if l.c.reads != nil {
		l.text = query // for a read's route (pool_reads=selects)
	}
	if err := l.start(ctx, opExec, &le); err != nil {
		return nil, err
	}
	var lc lostCommit
	if before, ok := le.pc.RawCommit(query); ok {
		lc = watchCommit(le.pc, before) // the raw transaction's end (lostcommit.go)
	}
	var res driver.Result
	var err error
	if s == nil {
		res, err = le.pc.Exec(ctx, query, args)
	} else {
		res, err = s.execOn(ctx, le.pc, args)
	}
	lost := lc.lost(ctx, le.pc, err)
	if err = l.finish(ctx, &le, opExec, query, err); lost {
		if err = l.c.resolveCommit(ctx, &lc, err); err == nil {
			res = driver.RowsAffected(0) // committed, as the reply would have said
		}
		return res, err
	}
	if err != nil && l.standby != nil {
		if pctx, ok := l.retryOnPrimary(ctx, err, le.fresh); ok {
			return l.exec(pctx, query, args, s)
		}
	}
	return res, err
}

// query is do for an operation that returns rows: they keep the
// connection's lock until they close (those of a hold's first query outside
// any task never have it: see holdSoloRows), and their Close finishes the
// statement with the lease they keep (rows.Close).
// Like exec, it runs query with args, or the prepared statement s.
func (l *conn) query(ctx context.Context, query string, args []driver.NamedValue, s *stmt) (driver.Rows, error) {
	var le lease
	if l.c.reads != nil {
		l.text = query
	}
	if err := l.start(ctx, opStmt, &le); err != nil {
		return nil, err
	}
	var dr driver.Rows
	var err error
	if s == nil {
		dr, err = le.pc.Query(ctx, query, args)
	} else {
		dr, err = s.queryOn(ctx, le.pc, args)
	}
	if err != nil {
		if err = l.finish(ctx, &le, opStmt, query, err); l.standby != nil {
			if pctx, ok := l.retryOnPrimary(ctx, err, le.fresh); ok {
				return l.query(pctx, query, args, s)
			}
		}
		return nil, err
	}
	// The rows are open: counted here rather than in finish, which has
	// nothing else to do for them outside a task.
	le.pc.AddRows(1, !l.state.alone())
	l.rows++
	if le.solo {
		l.to(evSoloRows) // the hold's first operation: no other rows
	}
	r := newRows(l, le, dr, query)
	if le.t != nil {
		_ = l.finish(ctx, &le, opOpenRows, query, nil) // nil: rows change no state until they close
	}
	return r, nil
}

// lock takes pc's lock for an operation of l. A connection other holds of
// the task share may be busy with their rows, which may never be closed
// while this goroutine waits (the reader may be waiting for it): that is a
// busyError, with its bounded wait, not an unbounded wait for the lock.
func (l *conn) lock(ctx context.Context, pc *phys.Conn, k opKind) error {
	if pc.TryClaim() {
		return nil
	}
	if l.state != holdShared {
		return pc.Claim(ctx) // only a statement of this hold, or a task's cleanup, has it: both end
	}
	for {
		if err := l.checkShared(pc, k); err != nil {
			return err
		}
		// A statement of another hold runs: wait for it, but look again
		// now and then, in case it left rows open.
		wctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		err := pc.Claim(wctx)
		cancel()
		if err == nil {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
}

// start begins an operation of kind k on l's hold, filling le.
func (l *conn) start(ctx context.Context, k opKind, le *lease) error {
	if l.state == holdNone && l.tx == nil {
		t := taskFrom(ctx)
		if t != nil {
			return l.startWith(ctx, k, t, le)
		}
		// The hold's first operation, outside any task: a connection of
		// its own, which nothing else can reach, so its lock is free and
		// there is nothing to check on it. A statement needs no lock at
		// all: nobody else can reach the connection while it runs (the
		// pool orders the hold's end before the next taker's use). A
		// query's rows stay open without the lock (holdSoloRows) until
		// they close or the hold's next operation, which takes it for them
		// (see startWith) before it can let a task reach the connection.
		// Anything else takes it. Were the lock taken after all, the
		// general path waits for it under ctx.
		pc, err := l.takeOwn(ctx, l.source(ctx, nil, k, le.readTx, le.primary))
		if err != nil {
			return err
		}
		le.fresh = true
		if solo := k == opExec || k == opStmt; solo || pc.TryClaim() {
			le.pc = pc
			le.locked, le.solo = !solo, solo
			le.sent, _, _ = pc.Ready(solo, false, false) // no rows open yet, no task to watch: nothing to refuse
			return nil
		}
		return l.startWith(ctx, k, nil, le)
	}
	switch k {
	case opEndTx:
		// le.pc is the transaction's connection, which the hold keeps
		// while it is open; the end runs even on a lost one (it fails
		// there), and is the only operation left to a *sql.Tx that its
		// task's end claimed (see tx.end).
		if l.rows == 0 {
			_ = le.pc.Claim(context.Background()) // held only by statements, which end
			le.locked = true
		}
		return nil
	}
	if l.c.reads != nil && l.tx == nil && l.leaveStandby(ctx, k, le) {
		return l.start(ctx, k, le) // the hold ended: a new one starts
	}
	return l.startWith(ctx, k, taskFrom(ctx), le)
}

// startWith is start in every other case; t is the task of ctx, or nil. It
// carries out planStart's plan, round after round while the connection is
// busy.
func (l *conn) startWith(ctx context.Context, k opKind, t *task, le *lease) error {
	if l.state != holdNone && l.state != holdClosed {
		le.pc = l.pc
	}
	p := planStart(l.facts(k, t, le))
	if p.refuse != refuseNone {
		return l.refusal(p.refuse, t)
	}
	le.t = t
	var deadline time.Time
	for {
		err := l.startRound(ctx, k, le, p)
		switch e := err.(type) {
		case *busyError:
			err = e.wait(ctx, &deadline)
		case *nestBusyError:
			err = e.wait(ctx)
		case nil:
			// Where the hold's own rows are open, they hold the lock: the
			// driver decides, unless its server sends one result at a time
			// (ErrResultOpen). Otherwise Ready drops the statements closed
			// since (pgx would still run them by their text) and says what
			// the lease keeps.
			stmt, watch := k == opExec || k == opStmt, watchesTaskState(l.facts(k, t, le))
			le.sent, le.hadState, err = le.pc.Ready(stmt, l.rows > 0, watch)
			return err
		}
		if err != nil {
			return err
		}
		p = planStart(l.facts(k, t, le))
	}
}

// facts gathers what planStart and watchesTaskState read for an operation
// of kind k of l's hold in task t (or nil), with lease le.
func (l *conn) facts(k opKind, t *task, le *lease) opFacts {
	f := opFacts{state: l.state, k: k, conn: le.pc != nil, rows: l.rows > 0}
	if x := l.tx; x != nil {
		f.tx, f.txEnded = true, x.endedByTask()
	}
	if t != nil {
		f.task, f.taskErr, f.mode = true, t.err != nil, t.modeFor(l.c)
	}
	return f
}

// refusal is the error of refusal r of an operation in task t.
func (l *conn) refusal(r refusal, t *task) error {
	switch r {
	case refuseClosed:
		return driver.ErrBadConn
	case refuseLost:
		return l.lost
	case refuseTaskEnded:
		return ErrTaskEnded
	}
	return t.err
}

// startRound carries out one round p of an operation's start: the
// connection, then its lock, as p says.
func (l *conn) startRound(ctx context.Context, k opKind, le *lease, p startPlan) error {
	var err error
	switch {
	case p.pick:
		err = l.pick(ctx, k, le)
	case p.checkShared:
		err = l.checkShared(le.pc, k)
	}
	switch {
	case err != nil:
		return err
	case p.lockRows:
		if err := le.pc.Claim(ctx); err != nil {
			return err
		}
		l.to(evRowsLocked)
	case p.lock:
		if err := l.lock(ctx, le.pc, k); err != nil {
			return err
		}
		le.locked = true
		if err := l.checkLocked(le.pc, k); err != nil {
			le.pc.Unclaim()
			le.locked = false
			return err
		}
	}
	return nil
}

// pick chooses the physical connection of a new hold: the task's, if its
// context carries a task with one; otherwise one from the pool, bound to
// the task at once in session mode. BeginTx in a transaction-mode task
// takes the task's connection only to nest in its raw transaction (see
// share); otherwise its own from the pool: a *sql.Tx never shares a
// connection with another transaction.
func (l *conn) pick(ctx context.Context, k opKind, le *lease) error {
	t := le.t
	for {
		useTask := t != nil && !le.separate
		if useTask {
			pc, err := t.lookup(l.c)
			if err != nil {
				return err
			}
			if pc != nil {
				ok, err := l.share(pc, t, k, le)
				if err != nil {
					return err
				}
				if ok {
					return nil
				}
				continue // unbound meanwhile, or busy: look again
			}
		}
		if useTask && t.modeFor(l.c) == SessionMode && l.c.cfg.ServerPooling == dialects.ServerPoolingTransaction {
			return ErrNoServerSession
		}
		// A connection a session-mode task binds serves its writes too:
		// only a read-only task's may be a standby's. The task's reads
		// and writes count whether or not the connection will be its own.
		bind := useTask && t.modeFor(l.c) == SessionMode && !t.reads.readOnly
		pc, err := l.takeOwn(ctx, l.source(ctx, t, k, le.readTx, bind || le.primary))
		if err != nil {
			return err
		}
		if t != nil && !t.begun.Load() {
			t.begun.Store(true)
		}
		if useTask && t.modeFor(l.c) == SessionMode {
			if !pc.Bind(taskOn{t, l.c}) {
				// Another goroutine of the task bound one first, or the
				// task ended: let this one go and look again.
				l.to(evDrop)
				pc.Release(false)
				continue
			}
			l.to(evShare)
		}
		le.pc, le.fresh = pc, true
		return nil
	}
}

// takeOwn makes a connection from from's pool the hold's own: the one the
// logical conn last parked, if it is still there and passes the idle check,
// else one the pool hands out. from is where the operation runs, as
// l.source decided (a standby's Connector, or l.c); where a standby's
// pool cannot connect, the primary's serves.
func (l *conn) takeOwn(ctx context.Context, from *Connector) (*phys.Conn, error) {
	var pc *phys.Conn
	if l.parked != nil {
		pc = from.env.Unpark(ctx, l.parked) // nil: taken meanwhile, another pool's, or failed the idle check
	}
	if pc == nil {
		var err error
		if pc, err = from.acquire(ctx); err != nil {
			if from == l.c || ctx.Err() != nil {
				return nil, err
			}
			// The standby's pool could not connect: the primary serves
			// the read.
			l.c.reads.missed()
			l.standby = nil
			if pc, err = l.c.acquire(ctx); err != nil {
				return nil, err
			}
		}
	}
	if l.pc != pc {
		l.pc = pc
	}
	l.to(evOwn)
	return pc, nil
}

// share makes pc, bound to task t, the hold's connection, unless the
// task's rules forbid it (phys.Conn.Join): it is taken by a *sql.Tx of the
// task, or busy with rows of another statement (then a transaction-mode
// statement outside a transaction goes to the pool instead: le.separate).
func (l *conn) share(pc *phys.Conn, t *task, k opKind, le *lease) (ok bool, err error) {
	joined, separate, owner, busy := pc.Join(t, k == opBegin, t.modeFor(l.c) == SessionMode)
	switch {
	case joined:
		// Join counted the hold on pc, under pc's mutex with the rules'
		// verdict: what is left is the hold's own, which only this
		// goroutine reads.
		l.pc, le.pc = pc, pc
		l.to(evShare)
		if l.tx == nil {
			l.c.wroteOn(t, k, pc)
		}
		return true, nil
	case separate:
		le.separate = true
		return false, nil
	}
	return false, refused(pc, owner, busy, k) // nil: unbound meanwhile, or lost
}

// refused is the error of an operation of kind k that the task's rules
// keep off pc (phys.Conn.Join, Check): the transaction of owner, a
// *sql.Tx, is open there, or pc is busy with rows of another statement,
// which busy says. Nil where neither.
func refused(pc *phys.Conn, owner *phys.OpenTx, busy error, k opKind) error {
	switch {
	case owner != nil:
		return ownerBusy(owner, k)
	case busy != nil:
		return &busyError{pc: pc, err: busy}
	}
	return nil
}

// checkShared applies the task's rules (phys.Conn.Check) to a later
// operation of a hold whose connection other holds of its task may use too.
func (l *conn) checkShared(pc *phys.Conn, k opKind) error {
	return l.checkRules(pc, k, l.rows > 0)
}

// checkRules is checkShared's verdict, rows saying whether the hold's
// rows are open; with rows true, it is only what no operation on a shared
// connection may meet, checked before the wait for its lock and again
// after: the connection lost, another hold's transaction on it, or (for
// BeginTx) any transaction open on it.
func (l *conn) checkRules(pc *phys.Conn, k opKind, rows bool) error {
	var own *phys.OpenTx
	if l.tx != nil {
		own = &l.tx.open
	}
	lost, owner, busy := pc.Check(k == opBegin, rows, own)
	if lost {
		l.lose(errLostShared)
		return l.lost
	}
	return refused(pc, owner, busy, k)
}

// ownerBusy is the error of an operation of kind k on a connection that
// owner, a *sql.Tx's transaction, keeps it off (another hold's, or, for
// BeginTx, any): a BeginTx waits for a nested one to end, to nest in turn;
// anything else fails at once.
func ownerBusy(owner *phys.OpenTx, k opKind) error {
	if done, ok := owner.Nested(); ok && k == opBegin {
		return &nestBusyError{done: done}
	}
	return ErrSessionBusy
}

// busyWait bounds how long a statement waits for rows that another
// statement of its task holds open on the task's connection. Another
// goroutine of the task reading a few rows closes them in time; the same
// goroutine, reading them in a loop, never can: past busyWait the statement
// fails with the busyError's error instead of hanging until its context
// ends.
const busyWait = 500 * time.Millisecond

// busyError says that pc, which the statement must use, is busy with
// another statement's open rows.
type busyError struct {
	pc  *phys.Conn
	err error
}

func (e *busyError) Error() string { return e.err.Error() }
func (e *busyError) Unwrap() error { return e.err }

// wait waits until the rows are closed, at most until the deadline
// (busyWait after the first wait of the statement) or ctx's end.
func (e *busyError) wait(ctx context.Context, deadline *time.Time) error {
	if deadline.IsZero() {
		*deadline = time.Now().Add(busyWait)
	}
	wctx, cancel := context.WithDeadline(ctx, *deadline)
	defer cancel()
	if err := e.pc.Claim(wctx); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return e.err
	}
	e.pc.Unclaim() // free now: look again, from the start
	return nil
}

var errLostShared = errors.New("pooldriver: the connection broke during another statement of the task, or the task ended and undid its transaction or session")

// checkLocked is what the holder of pc's lock must check before it runs
// anything, because it may have changed while the operation waited: a
// statement of a *sql.Tx whose task's end claimed it fails (it would run
// after the task's rollback, outside the transaction); and, on a shared
// connection, no statement runs inside another hold's transaction and
// BeginTx never runs where a transaction is open.
func (l *conn) checkLocked(pc *phys.Conn, k opKind) error {
	if x := l.tx; x != nil && x.endedByTask() {
		return ErrTaskEnded
	}
	if l.state != holdShared {
		return nil
	}
	return l.checkRules(pc, k, true)
}

// finish ends an operation of kind k that ran query on le.pc and returned
// err; it returns the error for the caller.
func (l *conn) finish(ctx context.Context, le *lease, k opKind, query string, err error) error {
	pc := le.pc
	// Whether the hold has pc's lock for this operation, to give back once
	// no rows of the hold are open: the operation took it, or these are
	// the hold's rows closing, which kept it, unless they never had it.
	locked := le.locked
	// (opOpenRows: query counted the rows, and calls this only in a task:
	// there is nothing to learn before they close, err is nil, but the
	// connection may have to be bound to the task.)
	if k == opCloseRows {
		pc.AddRows(-1, !l.state.alone())
		l.rows--
		if l.state == holdSoloRows {
			l.to(evRowsLocked) // closed: the hold's only rows, without the lock
		} else {
			locked = true
		}
	}
	if err == nil && le.t == nil && l.rows == 0 && (k == opExec || k == opStmt || k == opCloseRows) {
		// The common case, outside any task: the statement succeeded (or
		// the hold's last rows closed cleanly, on a connection the driver
		// still finds usable) and only what it did to the transaction and
		// the session is left to learn.
		// If that fails, the connection is lost as below; the statement
		// itself succeeded, and says so, as with the plain driver (a COMMIT
		// whose reply arrived committed).
		if usable, oerr := pc.Observe(ctx, query, k == opCloseRows); usable {
			if oerr != nil {
				pc.Lose(oerr, false)
				l.lose(oerr)
			}
			if locked {
				pc.Unclaim()
			}
			return nil
		}
	}
	return l.finishRest(ctx, le, k, query, err, locked)
}

// finishRest is finish outside its common case: it learns what the
// operation left on le.pc (lostBy), loses the connection or binds it to
// the operation's task as that says, and gives back the lock the operation
// had (locked) once no rows of the hold are open.
func (l *conn) finishRest(ctx context.Context, le *lease, k opKind, query string, err error, locked bool) error {
	pc := le.pc
	// Whether the operation's own error is the connection's end (rather
	// than an answer of the server's, after which only what followed
	// failed), and if so whether bytes of it left: looked at before
	// lostBy, which may learn more.
	broke, sent := pc.Wrote(le.sent, err)
	if cause := l.lostBy(ctx, le, k, query, err, broke); cause != nil {
		carried := pc.Lose(cause, le.fresh)
		l.lose(cause)
		// A *sql.Tx's Commit or Rollback lost the transaction it ended.
		err = l.lostError(ctx, le, err, broke, sent, carried || k == opEndTx)
	} else if l.leavesTaskState(le, k) {
		if e := l.bindForTask(le); err == nil {
			err = e
		}
	}
	if l.rows == 0 && locked {
		pc.Unclaim()
	}
	return err
}

// lostBy observes what an operation of kind k that ran query and returned
// err left on le.pc, as planObserve says, outside finish's common case,
// and returns why the connection is lost, or nil when it is not. broke
// says err is the connection's end (phys.Conn.Wrote).
func (l *conn) lostBy(ctx context.Context, le *lease, k opKind, query string, err error, broke bool) error {
	pc := le.pc
	if broke || err != nil && interrupted(err) {
		return err
	}
	obs := planObserve(k, l.rows > 0)
	if obs == observeNothing {
		return nil
	}
	usable, oerr := pc.Observe(ctx, query, obs == observeRows)
	if !usable {
		// Rows report a broken connection from Next, which the driver's
		// Close may not repeat.
		if err != nil {
			return err
		}
		return errors.New("pooldriver: the driver reports the connection unusable")
	}
	if oerr == nil {
		return nil // after Raw, the session counts as changed (phys.Conn.Raw)
	}
	// The statement ran, or may have: its own outcome stands (a COMMIT
	// whose reply arrived did commit), but what it left on the connection
	// is unknown, so the connection is lost and the hold's (and the
	// task's) later statements fail.
	cause := oerr
	if err != nil {
		cause = err // the statement's own error says more
	}
	le.fresh = false
	if le.t != nil {
		// It may have begun a transaction (a raw BEGIN) that is now gone:
		// the task's next statements must not run without it.
		le.t.markLost(l.c, pc, cause)
	}
	return cause
}

// leavesTaskState reports whether the operation, of a transaction-mode task
// on a connection not bound to it, left a raw transaction or a changed
// session there that it did not find: the task must keep the connection
// (bindForTask).
func (l *conn) leavesTaskState(le *lease, k opKind) bool {
	return le.t != nil && !le.hadState && watchesTaskState(l.facts(k, le.t, le)) && le.pc.KeepsTaskState()
}

// lostError is what an operation that lost its connection returns, err
// being its own error (nil if it succeeded and only what followed
// failed), broke whether that error is the connection's end, sent, where
// it is, whether bytes of the statement reached the server (see
// phys.Conn.Wrote: where the dialect does not count them, only the
// driver's ErrBadConn says none did), and carried whether the connection
// carried a transaction or session the hold or the task relied on. Where
// it did, that is ErrConnLost: the caller must know its state is gone.
// Where the connection broke after the statement was sent, before its
// reply arrived, the statement may have run: the error matches
// ErrConnLost too, and is never retried. Where the operation's context
// ended it, it is the driver's own error (a context's error stays that
// error), as with the plain driver. Otherwise the driver's error passes,
// with one difference: the driver's driver.ErrBadConn, which lets
// database/sql run the statement again on another connection, passes only
// for the hold's first operation on a fresh connection and only where no
// byte of it reached the server, as far as the dialect can tell.
// database/sql's rule is to retry only what provably did not run.
func (l *conn) lostError(ctx context.Context, le *lease, err error, broke, sent, carried bool) error {
	badConn := errors.Is(err, driver.ErrBadConn)
	switch {
	case err == nil:
		return nil
	case carried:
		return l.lost
	case badConn && le.fresh && errors.Is(err, dialects.ErrNotRun):
		return err // sent, but the dialect knows it was not run
	case broke && sent && ctx.Err() == nil:
		return &notRetriedError{cause: err, sent: true, lost: true}
	case !badConn:
		return err
	case sent || !le.fresh:
		return &notRetriedError{cause: err, sent: sent}
	}
	return err
}

// bindForTask binds the hold's connection to the transaction-mode task whose
// statement just opened a raw transaction or changed the session on it, so
// that the task's next statements run there. When the task already has
// another connection (its own was busy with rows), the transaction is rolled
// back at once and the caller told, rather than left to believe the next
// statements join it. The caller holds pc's lock.
func (l *conn) bindForTask(le *lease) error {
	pc, t := le.pc, le.t
	if !le.separate {
		if pc.Bind(taskOn{t, l.c}) {
			l.to(evBind)
			return nil
		}
		if _, err := t.lookup(l.c); err != nil {
			return err // ended: the hold's end settles the connection
		}
	}
	if err := pc.UndoTaskBusy(context.Background()); err != nil {
		l.lose(err)
		return l.lost
	}
	return ErrTaskConnBusy
}

// endHold ends l's hold where database/sql did not take l back: it closed
// it, or a standby's hold gives way to the primary's. IsValid, on the
// statement path, is the one that does it.
func (l *conn) endHold() { l.IsValid() }
