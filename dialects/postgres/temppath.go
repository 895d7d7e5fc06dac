package postgres

import (
	"github.com/pooldriver/pooldriver/dialects/internal/sqllex"
)

// pathUse is what f's text does with search_path's choice of schema
// (sqllex.PathUse), a call of a user's function counted as one that may
// set it (set_config(…, true) or SET LOCAL in its body), unless the user
// vouches for their functions (trust).
func pathUse(f sqllex.Facts, trust bool) sqllex.PathUse {
	use := f.Path
	if !trust && f.Calls != sqllex.CallsKnown {
		use |= sqllex.SetsPath
	}
	return use
}

// tempPath follows, across the statements of a transaction, whether one
// may have set search_path (see made).
type tempPath struct {
	set bool
}

// made reports a statement, just run with use (pathUse), that may have
// made an object in the session's temporary schema without the word
// TEMP: it made one under a name whose schema it did not name (CREATE
// TABLE t, SELECT … INTO t) after a statement of the same transaction, or
// its own text, may have set search_path to put pg_temp first, LOCAL or
// not; txOpen says a transaction is still open after it. What the path
// was is data the rules cannot read; the pair is rare, and the reset that
// follows drops what the temporary schema holds.
//
// What was set is kept across the statements of a transaction and
// forgotten by the first statement judged outside one; a transaction
// that ended unjudged leaves it set, which costs the next transaction's
// unqualified CREATE a reset it did not need.
func (p *tempPath) made(txOpen bool, use sqllex.PathUse) bool {
	if !txOpen {
		p.set = false
		return use.Together()
	}
	if use&sqllex.SetsPath != 0 {
		p.set = true
	}
	return use&sqllex.MakesInPath != 0 && p.set
}
