package pooldriver

import "fmt"

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
// mutex (see physConn); in the others it takes the mutex, since someone else
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
// without (physConn.park, letGoAlone).
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

// step is the one place that changes a hold's state: the state after event
// e in state s. ok is false for an event that cannot happen in s (a
// pooldriver bug); the state is then s. It has no side effects.
func step(s holdState, e holdEvent) (next holdState, ok bool) {
	switch e {
	case evOwn:
		if s == holdNone {
			return holdOwn, true
		}
	case evShare:
		if s == holdNone || s == holdOwn {
			return holdShared, true
		}
	case evSoloRows:
		if s == holdOwn {
			return holdSoloRows, true
		}
	case evRowsLocked:
		if s == holdSoloRows {
			return holdOwn, true
		}
	case evTaskTx:
		switch s {
		case holdOwn, holdReachable:
			return holdReachable, true
		case holdShared:
			return holdShared, true // reachable by the task already
		}
	case evBind:
		if s == holdOwn || s == holdReachable {
			return holdShared, true
		}
	case evDrop:
		if s == holdOwn {
			return holdNone, true
		}
	case evLose:
		if s.held() {
			return holdLost, true
		}
	case evEnd:
		if s.held() {
			return holdNone, true
		}
	case evClose:
		if s == holdNone {
			return holdClosed, true
		}
	}
	return s, false
}

// holdNext is step as a table, so that a hold's move costs a lookup on
// the statement path: holdNext[s][e] is step(s, e)'s state, or
// numHoldStates where step refuses e. Its size, powers of two, lets to
// index it without bounds checks.
var holdNext = func() (t [8][16]holdState) {
	for s := range t {
		for e := range t[s] {
			next, ok := step(holdState(s), holdEvent(e))
			if !ok {
				next = numHoldStates
			}
			t[s][e] = next
		}
	}
	return t
}()

// to moves l's hold by event e (see step). An event step refuses is a
// pooldriver bug: it is counted in Stats.Misuses, and the state kept.
func (l *conn) to(e holdEvent) {
	next := holdNext[l.state&7][e&15]
	if next == numHoldStates {
		l.c.stats.misuses.Add(1)
		return
	}
	l.state = next
}

// lose records that the hold lost its connection for cause: every later
// operation of the hold fails with the loss.
func (l *conn) lose(cause error) error {
	l.lost = lost(cause)
	l.to(evLose)
	return l.lost
}
