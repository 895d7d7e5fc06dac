package postgres

import (
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pooldriver/pooldriver/dialects/internal/sqllex"
)

// pathUse is what f's text does with search_path's choice of schema
// (sqllex.PathUse), a call of a user's function counted as one that may
// set it (set_config(…, true) or SET LOCAL in its body), unless the user
// vouches for their functions.
func (c *conn) pathUse(f sqllex.Facts) sqllex.PathUse {
	use := f.Path
	if !c.trust && f.Calls != sqllex.CallsKnown {
		use |= sqllex.SetsPath
	}
	return use
}

// madeInTemp reports a statement, just run, that may have made an object
// in the session's temporary schema without the word TEMP: it made one
// under a name whose schema it did not name (CREATE TABLE t, SELECT …
// INTO t) after a statement of the same transaction, or its own text, may
// have set search_path to put pg_temp first, LOCAL or not. What the path
// was is data the rules cannot read; the pair is rare, and the reset
// that follows drops what the temporary schema holds.
//
// pathSet is kept across the statements of a transaction and forgotten
// by the first statement judged outside one; one that ended unjudged
// leaves it set, which costs the next transaction's unqualified CREATE a
// reset it did not need.
func (c *conn) madeInTemp(pc *pgconn.PgConn, use sqllex.PathUse) bool {
	if pc.TxStatus() == 'I' {
		c.pathSet = false
		return use.Together()
	}
	if use&sqllex.SetsPath != 0 {
		c.pathSet = true
	}
	return use&sqllex.MakesInPath != 0 && c.pathSet
}
