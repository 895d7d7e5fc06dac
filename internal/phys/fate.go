package phys

import "fmt"

// TxState is what pooldriver knows of the transaction open on a physical
// connection's server session.
type TxState uint8

const (
	TxNone  TxState = iota // no transaction open
	TxBegun                // begun with BeginTx: a *sql.Tx owns it
	TxRaw                  // begun by a statement (a raw BEGIN), as the server reports
)

func (s TxState) String() string {
	switch s {
	case TxNone:
		return "none"
	case TxBegun:
		return "begun"
	case TxRaw:
		return "raw"
	}
	return fmt.Sprintf("txState(%d)", uint8(s))
}

// sessionState is what pooldriver knows of the rest of the session.
type sessionState uint8

const (
	sessionClean sessionState = iota // as opened, or reset since
	SessionDirty                     // a statement changed it (SET, a lock, a temporary table, ...): reset before reuse
	SessionLost                      // the connection broke, or its state is unknown: destroy it
)

func (s sessionState) String() string {
	switch s {
	case sessionClean:
		return "clean"
	case SessionDirty:
		return "dirty"
	case SessionLost:
		return "lost"
	}
	return fmt.Sprintf("sessionState(%d)", uint8(s))
}

// ConnState is the whole state of a physical connection, the input of
// decide. See Conn for who may change it and under which lock.
type ConnState struct {
	Tx      TxState
	Session sessionState
	Rows    int         // open result sets; they hold the connection's lock (but see Conn's lock rules)
	Holds   int         // holds using it: database/sql's logical conns, or a task's cleanup
	task    TaskBinding // the task it is bound to, or nil
	mode    Mode        // task's mode on the connection's Connector, when task is set
	TxOwner *OpenTx     // the *sql.Tx's transaction open on it, when tx is txBegun

	// resetAlways: whatever it saw, the Connector resets the session
	// before the connection goes back to the pool (WithResetAlways), as
	// the server does not report every change (PostgreSQL 15 does not
	// report search_path, which a function may set). Set when the
	// connection is made, never changed.
	resetAlways bool
	// parkable: nothing is told of the connection's release (Env):
	// a hold that had it alone may park it rather than release it. Set
	// when the connection is made, never changed.
	parkable bool
	// Stale: opened before its Connector's last Reset. The connection
	// fills it in each time it asks decide (Conn.verdict): a value
	// left from before is never read.
	Stale bool
	// rejected: the AfterRelease hook said no to the settled connection
	// going back to the pool. Not kept: settle fills it in when it asks
	// decide, after the hook ran.
	rejected bool

	// What the features that act on a let-go connection want of it, filled
	// in each time a hold or a task lets go (Conn.letGoVerdict); a
	// settled connection asks decide without them. lookDue: the Connector
	// wants to know how full the server is (the root's share.go), through a
	// connection on its way back. carries: the dialect can send a session
	// reset with the next statement (carry.go). resetWaits: such a reset
	// waits on the connection, from a hold before that ran nothing there.
	lookDue, carries, resetWaits bool
}

func (s ConnState) String() string {
	mode := "-" // the mode counts only for a bound connection
	switch {
	case s.task != nil && s.mode == SessionMode:
		mode = "session"
	case s.task != nil:
		mode = "transaction"
	}
	return fmt.Sprintf("tx=%s session=%s rows=%d holds=%d bound=%t mode=%s owner=%t resetAlways=%t parkable=%t stale=%t rejected=%t lookDue=%t carries=%t resetWaits=%t",
		s.Tx, s.Session, s.Rows, s.Holds, s.task != nil, mode, s.TxOwner != nil, s.resetAlways, s.parkable, s.Stale, s.rejected,
		s.lookDue, s.carries, s.resetWaits)
}

// Fate is what happens to a physical connection when a hold or a task lets
// go of it.
type Fate uint8

const (
	fateInUse         Fate = iota // still held, or rows open: whoever lets go last decides
	fateKeepForTask               // stays bound to its task, out of the pool
	fateRelease                   // back to the pool as it is
	fatePark                      // back to the pool as it is, parked for the hold that had it alone (Conn.Release)
	fateRollback                  // roll the transaction back, then back to the pool
	fateReset                     // reset the session, then back to the pool
	fateRollbackReset             // both, in that order
	fateDestroy                   // close it; the pool opens another when needed

	// The ways back to the pool that a feature asks for, in place of
	// fateRelease, fatePark or fateReset.
	fateLook         // look at how full the server is through it, off the caller's path, then back (the root's share.go)
	fateCarry        // its session reset goes with the next statement run there, where no other connection is to be had (carry.go)
	fateReleaseCarry // back to the pool with the reset a hold before carried still waiting on it (carry.go)
)

// resets reports whether f resets the connection's session on its way
// back: a rollback, a reset, or a reset carried with the next statement.
func (f Fate) resets() bool {
	return f == fateReset || f == fateRollback || f == fateRollbackReset || f == fateCarry
}

func (f Fate) String() string {
	switch f {
	case fateInUse:
		return "in use"
	case fateKeepForTask:
		return "keep for task"
	case fateRelease:
		return "release"
	case fatePark:
		return "park"
	case fateRollback:
		return "rollback"
	case fateReset:
		return "reset"
	case fateRollbackReset:
		return "rollback+reset"
	case fateDestroy:
		return "destroy"
	case fateLook:
		return "look"
	case fateCarry:
		return "carry reset"
	case fateReleaseCarry:
		return "release, reset carried"
	}
	return fmt.Sprintf("fate(%d)", uint8(f))
}

// decide is the one place that decides a physical connection's fate when
// something lets go of it. mode is the mode of the task it is bound to
// (ignored when it is not bound). What it knows besides the state is in
// the state too: staleness, the AfterRelease hook's verdict, parkability,
// what the share and the carried reset want. It has no side effects (it
// reads *s only: a pointer, because the state is eight words and it runs
// at the end of every hold): the caller applies the result
// (Conn.settle, or park).
func decide(s *ConnState, mode Mode) Fate {
	f := decideState(s, mode)
	switch {
	case (f == fateRelease || f == fatePark) && s.lookDue:
		return fateLook
	case f == fateReset && s.carries:
		return fateCarry
	case (f == fateRelease || f == fatePark) && s.resetWaits:
		return fateReleaseCarry
	}
	return f
}

// decideState is decide by the connection's state alone: what is to be
// kept, undone or closed.
func decideState(s *ConnState, mode Mode) Fate {
	if s.Holds > 0 || s.Rows > 0 {
		return fateInUse
	}
	if s.Session == SessionLost {
		return fateDestroy
	}
	if s.task != nil {
		// A session-mode task keeps its connection to the end; a
		// transaction-mode task keeps it while a raw transaction is open
		// or once its session changed, so that the task's next statements
		// still see them.
		if mode == SessionMode || s.Tx == TxRaw || s.Session == SessionDirty {
			return fateKeepForTask
		}
	}
	if s.Stale || s.rejected {
		// Opened before Reset, or the AfterRelease hook wants it closed:
		// closing it ends what it carried.
		return fateDestroy
	}
	return poolFate(s)
}

// parksAsIs reports, cheaper than decide, the usual end of a hold that had
// its connection alone: nothing uses it, nothing is open or changed on it,
// no task has it, and it may park. decide says fatePark for such a state
// unless it is stale (the caller checks that) or rejected; when parksAsIs
// says false, the caller asks decide (TestParksAsIs checks both).
func parksAsIs(s *ConnState) bool { return s.Holds == 0 && parksClean(s) }

// parksClean is parksAsIs but for the holds: park asks it before the
// hold's end is counted (one hold).
func parksClean(s *ConnState) bool {
	return s.Rows == 0 && s.Tx == TxNone && s.Session == sessionClean &&
		s.task == nil && s.parkable && !s.resetAlways && !s.rejected
}

// poolFate is decide's fate for a connection that goes back to the pool:
// what must be undone on it first, if anything. Every hold ran a statement
// on it (that is how a hold takes a connection), so with resetAlways it is
// dirty now; a task that keeps it is not told so (see decide): it resets at
// the task's end, when the connection comes back here.
func poolFate(s *ConnState) Fate {
	open := s.Tx != TxNone
	dirty := s.Session == SessionDirty || s.resetAlways
	switch {
	case open && dirty:
		return fateRollbackReset
	case open:
		return fateRollback
	case dirty:
		return fateReset
	case s.parkable:
		return fatePark
	}
	return fateRelease
}
