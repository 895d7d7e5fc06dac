package pooldriver

import (
	"fmt"
)

// The logical side's decisions, pure: what an operation of a hold does is
// planned here from facts the hold's goroutine gathers (opFacts: the hold's
// state, the operation, its task), and carried out by start, pick and
// finish (hold.go), which decide nothing themselves. Like decide
// (internal/phys/fate.go) for the physical side, nothing here has side
// effects, and plan_test.go tests every input. The task's rules for a
// connection its holds share read the connection's state, and are the
// physical connection's (phys.Conn.Join, Check: internal/phys/task.go);
// share and checkShared (hold.go) carry out what they return.

// A hold is database/sql's use of one logical conn: from the first
// operation after database/sql handed the conn out until database/sql takes
// it back, which it does by calling IsValid (or Close). The hold keeps the
// physical connection of its first operation throughout, so a *sql.Conn is
// one session and a *sql.Tx one transaction, as with the plain driver.
//
// What the hold has of its physical connection is one holdState, changed
// only by step:
//
//	state      who else can reach the connection    the hold's operations
//	---------  -----------------------------------  -------------------------------------
//	none       (no connection)                      the first picks one: own or shared
//	own        nobody                               take its lock; the hold's first
//	                                                operation outside any task runs
//	                                                without it (nobody can be waiting)
//	soloRows   nobody                               own, with the rows of that first
//	                                                query open without the lock: the
//	                                                next operation takes it for them
//	reachable  the task's end (a *sql.Tx of the     take its lock
//	           task was begun on it)
//	shared     other holds of its task, the task's  take its lock after checking the
//	           end                                  task's rules (share, checkShared)
//	lost       a task's cleanup, maybe              fail with the loss; only the end of
//	                                                a *sql.Tx and of rows run
//	closed     (no connection)                      fail with driver.ErrBadConn
//
//	        evOwn          evSoloRows          evRowsLocked
//	none ─────────► own ─────────────► soloRows ───────────► own
//	  │              │ evTaskTx ► reachable ─┐
//	  │ evShare      │ evShare, evBind ──────┴─ evBind ─► shared
//	  └──────────────┴────────────────────────────────────► shared
//	any held state ── evLose ──► lost;  ── evEnd ──► none;  none ── evClose ──► closed
//
// In own and soloRows the hold may write the connection's state without its
// mutex (see phys.Conn); in the others it takes the mutex, since someone else
// may read it.
type holdState uint8

const (
	holdNone      holdState = iota // no hold: no connection
	holdOwn                        // a pool connection of its own, which nothing else can reach
	holdSoloRows                   // holdOwn, the rows of its first query open without the lock
	holdReachable                  // its own connection, which its task's end can reach (a task's *sql.Tx was begun on it)
	holdShared                     // the task's bound connection, used by other holds of the task too
	holdLost                       // it lost its connection: operations fail with conn.lost until the hold ends
	holdClosed                     // the logical conn is closed
	numHoldStates
)

func (s holdState) String() string {
	switch s {
	case holdNone:
		return "none"
	case holdOwn:
		return "own"
	case holdSoloRows:
		return "soloRows"
	case holdReachable:
		return "reachable"
	case holdShared:
		return "shared"
	case holdLost:
		return "lost"
	case holdClosed:
		return "closed"
	}
	return fmt.Sprintf("holdState(%d)", uint8(s))
}

// held reports whether the hold has a physical connection.
func (s holdState) held() bool { return s != holdNone && s != holdClosed }

// alone reports whether nothing but the hold can reach its connection: it
// may write the connection's state without the mutex, and let go of it
// without (phys.Conn.Release).
func (s holdState) alone() bool { return s == holdOwn || s == holdSoloRows }

// holdEvent is what happened to a hold, the input of step.
type holdEvent uint8

const (
	evOwn        holdEvent = iota // the first operation took a connection of its own from the pool
	evShare                       // the first operation took its task's connection, or bound its own to a session-mode task
	evSoloRows                    // the first operation, run without the lock, left its rows open
	evRowsLocked                  // the lock was taken for the solo rows, or they closed
	evTaskTx                      // a *sql.Tx of a task began on the hold's connection
	evBind                        // a transaction-mode task's statement left a raw transaction or session state: the task keeps the connection
	evDrop                        // the first operation gave back the connection it took (its task bound another meanwhile)
	evLose                        // the connection was lost
	evEnd                         // database/sql took the conn back (IsValid), or Close ends the hold
	evClose                       // Close
	numHoldEvents
)

func (e holdEvent) String() string {
	switch e {
	case evOwn:
		return "own"
	case evShare:
		return "share"
	case evSoloRows:
		return "soloRows"
	case evRowsLocked:
		return "rowsLocked"
	case evTaskTx:
		return "taskTx"
	case evBind:
		return "bind"
	case evDrop:
		return "drop"
	case evLose:
		return "lose"
	case evEnd:
		return "end"
	case evClose:
		return "close"
	}
	return fmt.Sprintf("holdEvent(%d)", uint8(e))
}

// holdMoves is every move a hold can make: in state from, event e leads to
// state to. An event not listed for a state cannot happen in it (a
// pooldriver bug).
var holdMoves = [...]struct {
	e        holdEvent
	from, to holdState
}{
	{evOwn, holdNone, holdOwn},
	{evShare, holdNone, holdShared},
	{evShare, holdOwn, holdShared},
	{evSoloRows, holdOwn, holdSoloRows},
	{evRowsLocked, holdSoloRows, holdOwn},
	{evTaskTx, holdOwn, holdReachable},
	{evTaskTx, holdReachable, holdReachable},
	{evTaskTx, holdShared, holdShared}, // reachable by the task already
	{evBind, holdOwn, holdShared},
	{evBind, holdReachable, holdShared},
	{evDrop, holdOwn, holdNone},
	{evLose, holdOwn, holdLost},
	{evLose, holdSoloRows, holdLost},
	{evLose, holdReachable, holdLost},
	{evLose, holdShared, holdLost},
	{evLose, holdLost, holdLost},
	{evEnd, holdOwn, holdNone},
	{evEnd, holdSoloRows, holdNone},
	{evEnd, holdReachable, holdNone},
	{evEnd, holdShared, holdNone},
	{evEnd, holdLost, holdNone},
	{evClose, holdNone, holdClosed},
}

// holdNext is holdMoves as a table, so that a hold's move costs a lookup
// on the statement path: holdNext[s][e] is the state event e leads to from
// s, or numHoldStates where e cannot happen in s. Its size, powers of two,
// lets to index it without bounds checks.
var holdNext = func() (t [8][16]holdState) {
	for s := range t {
		for e := range t[s] {
			t[s][e] = numHoldStates
		}
	}
	for _, m := range holdMoves {
		t[m.from][m.e] = m.to
	}
	return t
}()

// step is the one place that says how a hold's state changes (holdMoves,
// as a table): the state after event e in state s. ok is false for an
// event that cannot happen in s (a pooldriver bug); the state is then s.
// It has no side effects; conn.to applies it, inlined.
func step(s holdState, e holdEvent) (next holdState, ok bool) {
	if s < numHoldStates && e < numHoldEvents {
		if next = holdNext[s][e]; next != numHoldStates {
			return next, true
		}
	}
	return s, false
}

// opKind is what an operation does, for the few rules that differ.
type opKind uint8

const (
	opExec      opKind = iota // Exec: a statement that leaves nothing open
	opStmt                    // a Query that failed before returning rows
	opOpenRows                // a Query that returned rows: they keep the lock (but see holdSoloRows)
	opCloseRows               // the rows' Close: the statement is over now
	opBegin                   // BeginTx
	opEndTx                   // Commit or Rollback of a *sql.Tx
	opPrepare                 // Prepare: no state change
	opPing                    // Ping: no state change
	opRaw                     // RawConn: anything may have happened
)

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
	observeStatement                    // what the statement (or RawConn's callback, after which phys.Conn.Raw counts the session changed) left: the transaction and the session (phys.Conn.Observe)
	observeRows                         // the hold's last rows closed: first whether the driver still finds the connection usable, then observeStatement
)

// planObserve is what finish asks of the connection after an operation of
// kind k that did not break it, while the hold has rows open or not. With
// a result set open the driver is mid-protocol: it cannot be asked
// anything, and its Validator may say no (go-sql-driver/mysql does while
// its buffer holds unread rows); the rows' Close observes. A *sql.Tx's
// Commit or Rollback is observed as it ends (phys.Conn.EndTx).
func planObserve(k opKind, rows bool) observation {
	if rows {
		return observeNothing
	}
	switch k {
	case opExec, opStmt, opRaw:
		return observeStatement
	case opCloseRows:
		return observeRows
	}
	return observeNothing
}
