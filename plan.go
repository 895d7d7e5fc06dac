package pooldriver

// The logical side's decisions, pure: what an operation of a hold does is
// planned here from facts the hold's goroutine gathers (opFacts: the hold's
// state, the operation, its task; connFacts: the physical connection's
// state, read under its mutex), and carried out by start, pick, share,
// checkShared and finish (hold.go), which decide nothing themselves. Like
// decide (fate.go) for the physical side, nothing here has side effects,
// and plan_test.go tests every input.

// opFacts is what the plan of an operation of a hold reads of the hold and
// of the operation's task. The hold's goroutine reads them without a lock:
// database/sql serializes a logical conn's calls.
type opFacts struct {
	state   holdState
	k       opKind
	conn    bool // the operation has its connection already: the hold's
	rows    bool // the hold has result sets open
	tx      bool // the hold has a *sql.Tx open
	txEnded bool // ... which its task's end claimed
	task    bool // the operation's context carries a task
	taskErr bool // ... which WithTask refused (task.err)
	mode    Mode // ... its mode on the hold's Connector
}

// refusal is why an operation fails before it touches a connection.
type refusal uint8

const (
	refuseNone      refusal = iota
	refuseClosed            // the logical conn is closed: driver.ErrBadConn
	refuseLost              // the hold lost its connection: the loss (conn.lost)
	refuseTaskEnded         // the hold's *sql.Tx was claimed by its task's end: ErrTaskEnded
	refuseTaskErr           // the task is a misuse: its error (task.err)
)

// startPlan is one round of an operation's start: start carries it out,
// and plans again after waiting for a busy connection.
type startPlan struct {
	refuse refusal // fail at once (checked before the first round only)
	// The connection: pick one (the task's or the pool's) when the hold
	// has none; otherwise, on a connection shared with other holds of the
	// task, check the task's rules first (checkShared).
	pick, checkShared bool
	// The lock. With rows of the hold open, the rows have it (the
	// operation takes none and the driver decides), unless they are solo
	// rows, which never had it: take it for them now (lockRows), before
	// this operation can let anyone reach the connection (evRowsLocked).
	// Otherwise take it and check again under it (lock; checkLocked).
	lockRows, lock bool
}

// planStart plans a round of the start of the operation f describes (see
// startPlan).
func planStart(f opFacts) startPlan {
	p := startPlan{refuse: refuseOf(f)}
	p.pick = !f.conn
	p.checkShared = f.conn && f.state == holdShared
	p.lockRows = f.rows && f.state == holdSoloRows
	p.lock = !f.rows
	return p
}

// refuseOf is why the operation f describes fails before it starts, if it
// does.
func refuseOf(f opFacts) refusal {
	switch {
	case f.state == holdClosed:
		return refuseClosed
	case f.state == holdLost:
		return refuseLost
	case f.txEnded:
		return refuseTaskEnded
	case f.taskErr:
		return refuseTaskErr
	}
	return refuseNone
}

// watchesTaskState reports whether the operation f describes must learn
// whether it leaves its transaction-mode task's state (a raw transaction,
// a changed session) on a connection not bound to the task: start notes
// what the connection kept before it (lease.hadState), finish binds the
// connection to the task when the operation left some (bindForTask). A
// *sql.Tx's operations never bind: its transaction is its own.
func watchesTaskState(f opFacts) bool {
	return f.task && f.state != holdShared && !f.tx && f.mode == TransactionMode
}

// observation is what finish asks of the connection after an operation
// that did not break it, outside finish's common case.
type observation uint8

const (
	observeNothing   observation = iota // nothing to learn (rows of the hold still open, or an operation that changes nothing)
	observeStatement                    // what the statement left: the transaction and the session (physConn.observe)
	observeRows                         // the hold's last rows closed: first whether the driver still finds the connection usable, then observeStatement
	observeRaw                          // observeStatement, and the session is dirty whatever it says: RawConn's callback could do anything
	observeEndTx                        // a *sql.Tx's Commit or Rollback succeeded: the raw transaction it may have been nested in (physConn.observeEndTx)
)

// planObserve is what finish asks of the connection after an operation of
// kind k, which failed (without breaking the connection) or not, while the
// hold has rows open or not. With a result set open the driver is
// mid-protocol: it cannot be asked anything, and its Validator may say no
// (go-sql-driver/mysql does while its buffer holds unread rows); the rows'
// Close observes.
func planObserve(k opKind, rows, failed bool) observation {
	if rows {
		return observeNothing
	}
	switch k {
	case opExec, opStmt:
		return observeStatement
	case opCloseRows:
		return observeRows
	case opRaw:
		return observeRaw
	case opEndTx:
		if !failed {
			return observeEndTx
		}
	}
	return observeNothing
}

// connFacts is what the task's rules read of a physical connection, under
// its mutex.
type connFacts struct {
	bound   bool    // bound to the operation's task
	lost    bool    // its session is lost (sessionLost)
	dirty   bool    // its session changed (sessionDirty)
	rows    bool    // result sets are open on it
	tx      txState // the transaction open on it
	otherTx bool    // another hold's *sql.Tx has it (connState.txOwner)
}

// shareVerdict is what the task's rules say of an operation on the task's
// connection.
type shareVerdict uint8

const (
	shareOK          shareVerdict = iota // use it
	shareGone                            // a new hold: it is no longer the task's, or it is lost; look again
	shareLost                            // a hold on it: it is lost (errLostShared)
	shareOwnerBusy                       // a *sql.Tx of another hold has it (ownerBusy)
	shareSessionBusy                     // BeginTx where a *sql.Tx's transaction is open: ErrSessionBusy
	shareSeparate                        // a connection of its own from the pool instead (lease.separate)
	shareBusyConn                        // another statement's rows are open in a transaction: wait (busyError, ErrConnBusy)
	shareBusySession                     // another statement's rows are open, and the task's session is there: wait (busyError, ErrSessionBusy)
)

// planShare is the task's rules for the first operation of a hold, of kind
// k, on the connection c bound to its task (mode: the task's mode), which
// other holds of the task may be using. BeginTx in a transaction-mode task
// takes it only to nest in its raw transaction; a statement that finds it
// busy with rows waits for them where another connection would not have
// the task's transaction or session, and goes to the pool otherwise.
func planShare(k opKind, mode Mode, c connFacts) shareVerdict {
	switch {
	case !c.bound || c.lost:
		return shareGone
	case c.otherTx:
		return shareOwnerBusy
	case k == opBegin && c.tx == txBegun:
		return shareSessionBusy
	case k == opBegin && c.tx == txNone && mode == TransactionMode:
		return shareSeparate // nothing to nest in: a transaction of its own
	case c.rows && c.tx != txNone:
		return shareBusyConn
	case c.rows && (mode == SessionMode || c.dirty):
		// Another connection would not have the task's session (its SET,
		// its temporary table): wait rather than run without it.
		return shareBusySession
	case c.rows:
		return shareSeparate
	}
	return shareOK
}

// planShared is the task's rules for a later operation of a hold, of kind
// k, on the task's connection c that the hold shares; rows: the hold's own
// rows are open there (they have its lock, and any other rows are its
// own). checkLocked asks it with rows true: what no operation may meet,
// before the wait for the lock and after.
func planShared(k opKind, rows bool, c connFacts) shareVerdict {
	switch {
	case c.lost:
		return shareLost
	case c.otherTx:
		return shareOwnerBusy
	case k == opBegin && c.tx == txBegun:
		return shareSessionBusy
	case rows || !c.rows:
		return shareOK
	case c.tx != txNone:
		return shareBusyConn
	}
	return shareBusySession
}
