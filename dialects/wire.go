package dialects

// WriteCounter is implemented by a Conn that sees every byte its driver
// writes to the server (the PostgreSQL dialect reads pgx's framing, the
// MySQL dialect owns the driver's socket). pooldriver reads Written before
// and after each statement: once any byte of a statement reached the
// socket the server may have run it, so the statement's error is never
// driver.ErrBadConn, which would let database/sql run it a second time on
// another connection. A Conn that cannot see its bytes does not implement
// it, and its driver's own judgement stands.
type WriteCounter interface {
	// Written returns a count that moves whenever bytes may have been
	// written to the server on this connection: the bytes themselves where
	// the dialect sees them, or a coarser count (the PostgreSQL dialect,
	// for a connection of Wrap's, counts the connection's closing: pgx
	// sends a statement and fails it "safe to retry" only by closing).
	// It is called between statements only, never while one runs.
	Written() uint64
}

// Interrupter is implemented by a Conn whose driver has calls that ignore
// their context and wait on the network (go-sql-driver/mysql's Commit and
// Rollback take none). pooldriver calls Interrupt from another goroutine
// when the context of such a call ends: the blocked I/O fails at once, and
// the connection is unusable afterwards (pooldriver destroys it). Interrupt
// is safe to call concurrently with any call of the driver, and more than
// once.
type Interrupter interface {
	Interrupt()
}

// RoleLossDetector is implemented by a Conn whose DSN asks for a server in
// a role (PostgreSQL's target_session_attrs=read-write or primary) and
// that can tell from a statement's error that its server has left it: the
// statement was refused as a write on a read-only server, and the server
// says it is read-only or a standby for every session, not for this
// transaction alone. pooldriver then retires every connection opened so
// far (Connector.Reset): new ones go where the DSN's hosts now have the
// role. Asked after a failed statement only; server is the address the
// connection reached (of a multi-host DSN's hosts, the one it is on), for
// the log line.
type RoleLossDetector interface {
	LostRole(err error) (server string, lost bool)
}

// RoleLostError is what a StatementObserver's Observe returns once its
// server reported, with a statement that succeeded, that it left the role
// the DSN asks for (a standby now, or read-only for every session): a
// reader learns it as early as a writer. pooldriver then retires every
// connection opened so far, as for RoleLossDetector, this one first.
type RoleLostError struct {
	Server string // the address the connection reached
}

func (e *RoleLostError) Error() string {
	return "the server " + e.Server + " reports it left the role the DSN asks for (target_session_attrs)"
}

// Cutter is implemented by a Conn whose work can be stopped from another
// goroutine while a call of its driver runs (Connector.Shutdown, past its
// deadline): Cut stops what the server runs for it where the dialect can
// ask, closes its socket, and returns; the call under way fails at once,
// and the connection is unusable afterwards (pooldriver destroys it). Cut
// is safe to call concurrently with any call of the driver.
type Cutter interface {
	Cut()
}
