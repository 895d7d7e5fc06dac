package phys

import "errors"

// A task's use of a physical connection: its binding (Bind), and the rules
// under which the holds of the task share the connection bound to it
// (Join, Check). Each reads pc's state and acts on it under mu, so that
// nothing changes between the rules' verdict and the hold it counts or the
// task it binds; the deciders, planShare and planShared, are pure and
// tested over every input. The caller, the root's hold.go, carries out
// what they return for its hold.

var (
	// ErrSessionBusy is what a task's statement fails with where it cannot
	// run on the task's session without running inside a transaction of
	// another statement of the task (a *sql.Tx open on it, or BeginTx while
	// a transaction is open there), or while the session stays busy with
	// open rows of another statement. The root exports it as its own.
	ErrSessionBusy = errors.New("pooldriver: the session task's connection is busy (a transaction or open rows of another statement); finish it first")

	// ErrConnBusy is what a task's statement fails with where the task's
	// connection has a transaction open and stays busy with open rows of
	// another statement. The root exports it as its own.
	ErrConnBusy = errors.New("pooldriver: the task's connection is busy with open rows inside its transaction; close them first")
)

// Bind binds pc to the task b is (TaskBinder.BindConn), in session mode or
// transaction mode as b says, unless the task refuses it. The task records
// pc and pc records the task under mu, together, so that whatever reaches
// pc through the task (another goroutine of the task, the task's end)
// finds both or neither. It reports whether pc is bound.
func (pc *Conn) Bind(b TaskBinder) bool {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	t, session, ok := b.BindConn(pc)
	if !ok {
		return false
	}
	pc.st.task, pc.st.mode = t, TransactionMode
	if session {
		pc.st.mode = SessionMode
	}
	return true
}

// Join makes pc, which task t's binding names (the caller looked it up),
// the connection of one more hold of t, where the task's rules let the
// hold's first operation use it (planShare; begin: the operation is
// BeginTx; session: t is in session mode on pc's Connector): joined, with
// the hold counted (Holds) under the same lock as the rules' verdict, so
// that pc cannot be let go of in between. Otherwise nothing changed, and:
//
//   - separate: the operation is to run on a connection of its own from
//     the pool instead;
//   - owner: the *sql.Tx whose transaction is open on pc keeps the
//     operation off it (another hold's, or, for BeginTx, any): the
//     operation fails with ErrSessionBusy, unless the caller waits for
//     owner to end instead (a BeginTx that nests in the task's
//     transaction: the root's nest.go);
//   - busy: pc is busy with rows of another statement, which may close
//     soon: the caller may wait for pc's claim and look again, and fails
//     with busy (ErrConnBusy inside a transaction, ErrSessionBusy
//     otherwise) once it waited long enough;
//   - none of them: pc is no longer t's, or it is lost: look again.
func (pc *Conn) Join(t TaskBinding, begin, session bool) (joined, separate bool, owner *OpenTx, busy error) {
	mode := TransactionMode
	if session {
		mode = SessionMode
	}
	pc.mu.Lock()
	defer pc.mu.Unlock()
	c := factsOf(&pc.st, nil)
	c.bound = pc.st.task == t
	switch v := planShare(begin, mode, c); v {
	case shareOK:
		pc.st.Holds++
		return true, false, nil, nil
	case shareSeparate:
		return false, true, nil, nil
	case shareGone:
		return false, false, nil, nil
	default:
		owner, busy = refusal(v, &pc.st)
		return false, false, owner, busy
	}
}

// Check applies the task's rules (planShared) to a later operation of a
// hold on pc, the task's connection, which the hold shares with other
// holds of the task: begin, the operation is BeginTx; rows, the hold's own
// rows are open on pc (then only what no operation may meet is checked:
// the caller checks again with rows once it has pc's claim, for what may
// have changed while it waited); own, the hold's *sql.Tx's transaction,
// or nil. It returns what keeps the operation off pc, if anything: lost,
// pc is lost (it broke during another statement of the task, or the
// task's end undid its transaction or session); owner and busy, as for
// Join.
func (pc *Conn) Check(begin, rows bool, own *OpenTx) (lost bool, owner *OpenTx, busy error) {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	switch v := planShared(begin, rows, factsOf(&pc.st, own)); v {
	case shareOK:
		return false, nil, nil
	case shareLost:
		return true, nil, nil
	default:
		owner, busy = refusal(v, &pc.st)
		return false, owner, busy
	}
}

// refusal is what keeps an operation off a task's connection, whose state
// st is, where the task's rules say v, a refusal (neither shareOK,
// shareSeparate, shareGone nor shareLost): the *sql.Tx whose transaction
// is open there (TxOwner: a transaction begun with BeginTx always has
// one), or the error of the open rows of another statement. The caller
// holds mu.
func refusal(v shareVerdict, st *ConnState) (owner *OpenTx, busy error) {
	switch v {
	case shareBusyConn:
		return nil, ErrConnBusy
	case shareBusySession:
		return nil, ErrSessionBusy
	}
	if st.TxOwner == nil {
		// Never so: a transaction begun with BeginTx is recorded with its
		// owner. The operation stays off pc all the same.
		return nil, ErrSessionBusy
	}
	return st.TxOwner, nil // shareOwnerBusy, shareSessionBusy
}

// connFacts is what the task's rules read of a physical connection, under
// its mutex.
type connFacts struct {
	bound   bool // bound to the operation's task
	lost    bool // its session is lost (SessionLost)
	dirty   bool // its session changed (SessionDirty)
	rows    bool // result sets are open on it
	tx      bool // a transaction is open on it
	sqlTx   bool // that transaction is a *sql.Tx's (BeginTx), not nested in a raw one
	otherTx bool // another hold's *sql.Tx has it (ConnState.TxOwner)
}

// factsOf is what the task's rules read of st, a connection's state, but
// whether it is bound to the operation's task; own is the transaction of
// the operation's hold's *sql.Tx, or nil: any other *sql.Tx's is
// another hold's. The caller holds mu.
func factsOf(st *ConnState, own *OpenTx) connFacts {
	return connFacts{
		lost:    st.Session == SessionLost,
		dirty:   st.Session == SessionDirty,
		rows:    st.Rows > 0,
		tx:      st.Tx != TxNone,
		sqlTx:   st.Tx == TxBegun,
		otherTx: st.TxOwner != nil && st.TxOwner != own,
	}
}

// shareVerdict is what the task's rules say of an operation on the task's
// connection.
type shareVerdict uint8

const (
	shareOK          shareVerdict = iota // use it
	shareGone                            // a new hold: it is no longer the task's, or it is lost; look again
	shareLost                            // a hold on it: it is lost
	shareOwnerBusy                       // a *sql.Tx of another hold has it
	shareSessionBusy                     // BeginTx where a *sql.Tx's transaction is open: ErrSessionBusy
	shareSeparate                        // a connection of its own from the pool instead
	shareBusyConn                        // another statement's rows are open in a transaction: wait (ErrConnBusy)
	shareBusySession                     // another statement's rows are open, and the task's session is there: wait (ErrSessionBusy)
)

// planShare is the task's rules for the first operation of a hold (begin:
// BeginTx) on the connection c bound to its task (mode: the task's mode),
// which other holds of the task may be using. BeginTx in a
// transaction-mode task takes it only to nest in its raw transaction; a
// statement that finds it busy with rows waits for them where another
// connection would not have the task's transaction or session, and goes to
// the pool otherwise.
func planShare(begin bool, mode Mode, c connFacts) shareVerdict {
	switch {
	case !c.bound || c.lost:
		return shareGone
	case c.otherTx:
		return shareOwnerBusy
	case begin && c.sqlTx:
		return shareSessionBusy
	case begin && !c.tx && mode == TransactionMode:
		return shareSeparate // nothing to nest in: a transaction of its own
	case c.rows && c.tx:
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

// planShared is the task's rules for a later operation of a hold (begin:
// BeginTx) on the task's connection c that the hold shares; rows: the
// hold's own rows are open there (they have its claim, and any other rows
// are its own). Check asks it with rows true, for what no operation may
// meet, before the wait for the claim and after.
func planShared(begin, rows bool, c connFacts) shareVerdict {
	switch {
	case c.lost:
		return shareLost
	case c.otherTx:
		return shareOwnerBusy
	case begin && c.sqlTx:
		return shareSessionBusy
	case rows || !c.rows:
		return shareOK
	case c.tx:
		return shareBusyConn
	}
	return shareBusySession
}
