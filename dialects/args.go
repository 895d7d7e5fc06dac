package dialects

// ArgumentsAsIs is implemented by a Conn whose driver takes every statement
// argument as it is: its driver.NamedValueChecker accepts each one unchanged
// (pgx's stdlib does: pgx encodes any Go value it has a codec for, and
// driver.Valuer and sql.Scanner natively). When ArgumentsAsIs reports true,
// pooldriver hands the arguments database/sql gave it straight to the
// driver instead of asking the checker once per argument, which would
// change nothing.
//
// A Conn whose driver converts or refuses some arguments does not
// implement it, or reports false: pooldriver then runs the driver's checker
// and database/sql's default conversion, as database/sql itself would.
type ArgumentsAsIs interface {
	ArgumentsAsIs() bool
}
