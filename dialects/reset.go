package dialects

// StatementKeeper is implemented by a Conn whose ResetSession keeps the
// statements the driver prepared (PostgreSQL's protocol-level ones, which
// no SQL statement of a user can reach): pooldriver then keeps its cache of
// them across the reset, so the next statements are not prepared again.
// Without it, pooldriver closes every statement it cached before a reset.
type StatementKeeper interface {
	ResetKeepsStatements() bool
}

// StatementDropper is implemented by a StatementKeeper whose ResetSession
// may find that the session deallocated or replaced statements the
// driver prepared (a user's DEALLOCATE ALL, DISCARD ALL, or a PREPARE
// under one of the driver's names) and then drops them all, so that no
// later statement runs one that is gone or is not what was prepared.
// ResetDroppedStatements, asked after a ResetSession that returned nil,
// reports that it did: pooldriver then closes the statements it cached.
type StatementDropper interface {
	ResetDroppedStatements() bool
}

// ResetCarrier is implemented by a Conn that can send a session reset
// with the next statement it runs, in the same write, instead of in a
// round trip of its own (PostgreSQL's direct path).
//
// CarryReset, called in place of ResetSession on a Conn with no
// transaction open, either returns false (the Conn cannot carry it now:
// pooldriver runs ResetSession) or takes the reset on: from then on,
// ResetPending reports true until the reset has run, and every method of
// the Conn that reaches the server runs it first, either carried in front
// of a statement or on its own. A reset that fails leaves the statement
// behind it unrun: the method returns an error matching driver.ErrBadConn
// and the Conn reports itself invalid (driver.Validator), so pooldriver
// replaces it. done is called, on the goroutine of the method that ran
// it, once the reset succeeded: with true where it went out in the write
// of a statement, false where it ran on its own.
//
// What pooldriver runs on the Conn by other means (a statement prepared
// on Driver(), a transaction begun on it, Raw) it runs only after
// ResetSession, which runs a pending reset and clears it.
type ResetCarrier interface {
	CarryReset(done func(carried bool)) bool
	ResetPending() bool
}

// FullResetter is implemented by a Conn whose session reset may spare
// what a proof says the session left as it was (PostgreSQL's carried
// reset keeps the prepared statements after a call the catalog's reading
// proves only sets a setting; a reading may be seconds older than the code
// it vouches for). pooldriver calls ResetFully once, on a new connection,
// with pool_reset_always: from then on the reset spares nothing on a
// proof's word.
type FullResetter interface {
	ResetFully()
}
