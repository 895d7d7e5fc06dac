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
