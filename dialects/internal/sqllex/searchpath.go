package sqllex

// PathUse tells, of a PostgreSQL text, what it does with the schema that
// search_path chooses: an object made without naming its schema lands in
// the first schema of the path, which a LOCAL setting may have made
// pg_temp (SET LOCAL search_path = pg_temp, set_config(…, true)): a table
// there outlives the transaction, and the next user of the session finds
// it. A path's value is data the rules cannot read, so neither use alone
// is a session change; together, in one transaction, they are (see
// PathUse.Together).
type PathUse uint8

const (
	// SetsPath: the text may set search_path for the rest of its
	// transaction: SET [LOCAL] search_path or SCHEMA, or any call of
	// set_config (whose name and scope may be arguments).
	SetsPath PathUse = 1 << iota
	// MakesInPath: the text makes an object under a name whose schema it
	// does not name: CREATE TABLE t, CREATE VIEW v, SELECT … INTO t, ...
	MakesInPath
)

// Together reports a text that does both: the object it makes may land
// where its own setting put the path.
func (u PathUse) Together() bool { return u == SetsPath|MakesInPath }

// PathUseOf returns what query, read as PostgreSQL, does with
// search_path's choice of schema.
func PathUseOf(query string) PathUse {
	if !containsFold(query, "create") && !containsFold(query, "into") &&
		!containsFold(query, "set") {
		return 0
	}
	var use PathUse
	l := newLexer(query, false, false)
	st := pathScan{}
	for {
		t := l.next()
		switch t.kind {
		case kBad:
			return SetsPath | MakesInPath
		case kSemi, kEOF:
			use |= st.end()
			if t.kind == kEOF {
				return use
			}
			st = pathScan{}
			continue
		}
		use |= st.step(t)
		st.prev = t
		st.n++
	}
}

// pathScan reads one statement for PathUseOf.
type pathScan struct {
	n     int
	first string
	prev  token
	depth int // parentheses open

	// set: after SET (1) or SET LOCAL/SESSION (2), where the setting's
	// name comes next.
	set int
	// made: 1 after CREATE (its modifiers and kind may follow), 2 after
	// the kind, or after INTO in a SELECT (IF NOT EXISTS, TABLE,
	// UNLOGGED may follow), 3 after the name, where only a '.' says that
	// a schema was named.
	made int
}

// end is the use of a statement cut short at its end: a name that no '.'
// followed.
func (st *pathScan) end() PathUse {
	if st.made == 3 {
		return MakesInPath
	}
	return 0
}

// step reads t, the next token of the statement.
func (st *pathScan) step(t token) PathUse {
	word := t.kind == kWord
	if st.n == 0 && word {
		st.first = t.text
	}
	switch st.set {
	case 1:
		st.set = 0
		if word && (eqFold(t.text, "local") || eqFold(t.text, "session")) {
			st.set = 2
			return 0
		}
		if pathName(t) {
			return SetsPath
		}
	case 2:
		st.set = 0
		if pathName(t) {
			return SetsPath
		}
	}
	if st.made != 0 {
		if made := st.readMade(t); made {
			return MakesInPath
		}
	}
	switch t.kind {
	case kOpen:
		st.depth++
		if st.prev.kind == kWord && eqFold(st.prev.text, "set_config") {
			return SetsPath
		}
	case kClose:
		if st.depth > 0 {
			st.depth--
		}
	case kWord:
		switch {
		case st.n == 0 && eqFold(t.text, "set"):
			st.set = 1
		case eqFold(t.text, "set") && st.prev.kind == kWord && eqFold(st.prev.text, "reset"):
		case eqFold(t.text, "create"):
			st.made = 1
		case eqFold(t.text, "into") && st.depth == 0 && (eqFold(st.first, "select") || eqFold(st.first, "with")) &&
			!(st.prev.kind == kWord && (eqFold(st.prev.text, "insert") || eqFold(st.prev.text, "merge"))):
			st.made = 2 // SELECT … INTO t makes a table; INSERT INTO and MERGE INTO do not
		}
	}
	return 0
}

// pathName reports the setting name search_path, or SCHEMA (SET SCHEMA is
// SET search_path).
func pathName(t token) bool {
	return (t.kind == kWord || t.kind == kIdent) && (eqFold(t.text, "search_path") || t.kind == kWord && eqFold(t.text, "schema"))
}

// readMade follows the name of an object the statement makes (see made).
// It reports one made where search_path puts it.
func (st *pathScan) readMade(t token) bool {
	word := t.kind == kWord
	switch st.made {
	case 1:
		switch {
		case !word:
			st.made = 0
		case madeModifier(t.text):
		case madeElsewhere(t.text):
			st.made = 0 // an index, a trigger, a role: not an object search_path places
		default:
			st.made = 2 // TABLE, VIEW, SEQUENCE, FUNCTION, TYPE, … and any kind not listed
		}
	case 2:
		switch {
		case word && (eqFold(t.text, "if") || eqFold(t.text, "not") || eqFold(t.text, "exists") ||
			eqFold(t.text, "table") || eqFold(t.text, "unlogged") || eqFold(t.text, "strict")):
		case word || t.kind == kIdent:
			st.made = 3
		default:
			st.made = 0
		}
	case 3:
		st.made = 0
		return t.kind != kOther || t.text != "."
	}
	return false
}

// madeModifier reports a word that may stand between CREATE and the kind
// of what it makes.
func madeModifier(w string) bool {
	for _, m := range [...]string{"or", "replace", "unlogged", "materialized", "recursive", "foreign", "trusted",
		"procedural", "default", "global", "local"} {
		if eqFold(w, m) {
			return true
		}
	}
	return false
}

// madeElsewhere reports the kind of a CREATE whose object search_path does
// not place: one that belongs to a table (an index, a trigger, a rule, a
// policy) or to the cluster or database, and a schema, named by itself.
func madeElsewhere(w string) bool {
	for _, k := range [...]string{"index", "unique", "trigger", "constraint", "rule", "policy", "schema", "database", "role",
		"user", "group", "extension", "event", "publication", "subscription", "server", "tablespace", "cast", "language",
		"access", "transform", "temp", "temporary"} {
		if eqFold(w, k) {
			return true
		}
	}
	return false
}
