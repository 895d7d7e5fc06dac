package dialects

// StatementKeeper is implemented by a Conn whose ResetSession keeps the
// statements the driver prepared (PostgreSQL's protocol-level ones, which
// no SQL statement of a user can reach): pooldriver then keeps its cache of
// them across the reset, so the next statements are not prepared again.
// Without it, pooldriver closes every statement it cached before a reset.
type StatementKeeper interface {
	ResetKeepsStatements() bool
}
