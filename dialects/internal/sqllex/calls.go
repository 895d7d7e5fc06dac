package sqllex

import (
	"slices"
	"strings"
)

// Calls is what a text runs that its own words do not show: code of a
// function or procedure, or SQL the server takes from a string. The
// session rules (ChangesSession) read the text only; what such code does
// to the session nothing reads, and PostgreSQL and MySQL report only part
// of it. Tracking is default-deny: a text counts as changing the session
// unless it calls nothing but the built-ins known to leave the session
// alone (see builtins.go).
type Calls uint8

const (
	// CallsKnown: the text calls only built-ins on the flavor's list, if
	// anything.
	CallsKnown Calls = iota
	// CallsUnknown: the text calls a function not on the list (a user's,
	// one qualified with a schema other than pg_catalog, a quoted name in
	// MySQL, a built-in name followed by white space in MySQL, where a
	// stored function may answer to it), or a procedure (CALL). A user who
	// vouches for their functions may trust these.
	CallsUnknown
	// CallsText: the text hands the server SQL it does not show, which no
	// one's word vouches for: a string run as a statement (PostgreSQL
	// query_to_xml, query_to_xml_and_xmlschema, query_to_xmlschema, the
	// dblink and crosstab functions; EXECUTE, EXEC), a write to
	// pg_settings (whose rule calls set_config), or text the lexer cannot
	// read with certainty.
	CallsText
)

// Changes reports whether a statement with these facts counts as changing
// the session: by the session rules, by SQL it runs unseen, or, unless
// trustFunctions (the user vouches for their functions), by a call of a
// function the flavor does not know.
func (f Facts) Changes(trustFunctions bool) bool {
	return Verdict(f.Session(trustFunctions))
}

// CallsOf reports what the statements in query call (see Calls), read as
// flavor f; for Any, read both as PostgreSQL and as MySQL, with both
// lists. A call is a name (a word, a quoted name, or either qualified
// with a schema) followed by '(' where it is not SQL syntax: a keyword
// that takes parentheses (IN, VALUES, EXISTS, ANY, ARRAY, CAST, OVER,
// PRIMARY KEY, ...), a type's modifiers (varchar(64), numeric(10,2), after
// "::", in a column definition), or a name that owns a list: a table's
// columns (INSERT INTO t (...), CREATE TABLE t (...), REFERENCES t (...),
// CREATE INDEX ... ON t (...)), a common table expression's or an alias's
// columns (WITH c (a, b) AS, AS g (n), f(x) g (n)), a function being
// defined or named (CREATE FUNCTION f (...), DROP FUNCTION f (int)). So
// is CALL, EXECUTE and EXEC first in a statement, and any mention of
// pg_settings in a statement that does not start with SELECT. Whatever
// the rules are unsure of is a call.
//
// Not seen: code the server runs for a statement without its text naming
// it (a trigger, a rule, a view's functions, a column default, a user
// operator or cast, a function called by attribute notation t.f). A text
// without '(' and without the words CALL, EXEC and pg_settings calls
// nothing, which a quick scan decides without lexing.
func CallsOf(query string, f Flavor) Calls {
	if !mayCall(query, f) {
		return CallsKnown
	}
	var c Calls
	if f&Postgres != 0 {
		c = callsTwice(query, false, f)
	}
	if f&MySQL != 0 && c != CallsText {
		c = max(c, callsTwice(query, true, f))
	}
	return c
}

// mayCall is CallsOf's quick scan: a call needs a '(', CALL, EXEC or
// EXECUTE, or pg_settings; PostgreSQL may spell the last with Unicode
// escapes (U&"…").
func mayCall(q string, f Flavor) bool {
	if strings.IndexByte(q, '(') >= 0 {
		return true
	}
	pg := f&Postgres != 0
	for i := 0; i < len(q); i++ {
		switch lowerTable[q[i]] {
		case 'c':
			if hasPrefixFold(q[i:], "call") {
				return true
			}
		case 'e':
			if hasPrefixFold(q[i:], "exec") {
				return true
			}
		case 'p':
			if pg && hasPrefixFold(q[i:], "pg_settings") {
				return true
			}
		case '&':
			if pg && i+1 < len(q) && q[i+1] == '"' {
				return true
			}
		}
	}
	return false
}

// callsTwice runs the call rules over query lexed as PostgreSQL (my false)
// or MySQL, and again with the other backslash setting when a string held a
// backslash.
func callsTwice(query string, my bool, f Flavor) Calls {
	c, backslash := scanCalls(query, my, my, f)
	if c != CallsText && backslash {
		c2, _ := scanCalls(query, my, !my, f)
		c = max(c, c2)
	}
	return c
}

// callScan is the state of the call rules within one statement.
type callScan struct {
	my bool // MySQL's reading
	f  Flavor

	first token // the statement's first token
	n     int   // tokens of the statement seen
	depth int   // parentheses open
	prev  token // the token before the current one
	prev2 token // the one before that

	// The dotted name that ended with the last token, if it was a word or
	// a quoted name: its parts, its first part, the two tokens before it,
	// the index (n) of its last part, and whether a '(' follows that
	// part without white space.
	parts    int
	head     token
	before   token
	before2  token
	lastN    int
	adjacent bool

	createIndex bool // a CREATE ... INDEX statement
	withDepth   int  // the depth of the WITH list being read, or -1

	// PostgreSQL's DISTINCT ON (…): the depth inside its list plus one
	// while it is open (0: none), and the index (n) plus one of the ')'
	// that closed it, after which the select list starts: a name and '('
	// there are a call, not an alias's columns.
	distinctOn, distinctOnEnd int

	// unknown, where not nil, collects the calls judged CallsUnknown: the
	// name called (its last part, as the server looks it up), or "" for a
	// call that names no function (CALL).
	unknown *[]string
}

// scanCalls runs the call rules over query lexed as said. backslash reports
// a string holding a backslash, whose end depends on the server's settings.
func scanCalls(query string, my, escapes bool, f Flavor) (c Calls, backslash bool) {
	return scanCallsInto(query, my, escapes, f, nil)
}

// scanCallsInto is scanCalls, collecting the unknown calls into unknown
// where it is not nil (see callScan.unknown).
func scanCallsInto(query string, my, escapes bool, f Flavor, unknown *[]string) (c Calls, backslash bool) {
	l := newLexer(query, my, escapes)
	st := callScan{my: my, f: f, withDepth: -1, unknown: unknown}
	for {
		t := l.next()
		switch t.kind {
		case kBad:
			return CallsText, l.backslash
		case kEOF:
			return c, l.backslash
		case kSemi:
			st = callScan{my: my, f: f, withDepth: -1, unknown: unknown}
			continue
		}
		adjacent := l.i < len(query) && query[l.i] == '('
		c = max(c, st.step(t, adjacent))
		if c == CallsText {
			return c, l.backslash
		}
		st.prev2, st.prev = st.prev, t
		st.n++
	}
}

// step applies the rules to t, the next token of the statement.
func (st *callScan) step(t token, adjacent bool) Calls {
	if st.n == 0 {
		st.first = t
	}
	switch t.kind {
	case kWord, kIdent:
		if st.prev.kind == kOther && st.prev.text == "." && st.parts > 0 && st.lastN == st.n-2 {
			st.parts++
		} else {
			st.parts, st.head, st.before, st.before2 = 1, t, st.prev, st.prev2
		}
		st.lastN, st.adjacent = st.n, adjacent
		if t.kind == kIdent {
			if st.f&Postgres != 0 && t.text == "pg_settings" && !st.firstIs("select") {
				return CallsText
			}
			return CallsKnown
		}
		return st.word(t.text)
	case kOpen:
		c := CallsKnown
		if (st.prev.kind == kWord || st.prev.kind == kIdent) && st.parts > 0 && st.lastN == st.n-1 {
			c = st.call()
		}
		if st.withDepth == st.depth && st.prev.kind == kClose {
			// WITH x AS (…) (SELECT …) ORDER BY f(…): the statement the
			// list is for, in parentheses.
			st.withDepth = -1
		}
		if st.prev.kind == kWord && eqFold(st.prev.text, "on") && st.prev2.kind == kWord && eqFold(st.prev2.text, "distinct") {
			st.distinctOn = st.depth + 1
		}
		st.depth++
		return c
	case kClose:
		if st.depth > 0 {
			st.depth--
		}
		if st.distinctOn == st.depth+1 {
			st.distinctOn, st.distinctOnEnd = 0, st.n+1
		}
		if st.withDepth > st.depth {
			st.withDepth = -1 // the subquery that held the list ended
		}
	}
	return CallsKnown
}

// word applies the rules for an unquoted word.
func (st *callScan) word(w string) Calls {
	if st.n == 0 {
		switch {
		case eqFold(w, "call"):
			st.noteUnknown("")
			return CallsUnknown
		case eqFold(w, "execute") || eqFold(w, "exec"):
			return CallsText
		}
	}
	switch {
	case eqFold(w, "with") && (st.n == 0 || st.prev.kind == kOpen):
		st.withDepth = st.depth
	case st.withDepth == st.depth && (eqFold(w, "select") || eqFold(w, "insert") || eqFold(w, "update") ||
		eqFold(w, "delete") || eqFold(w, "values") || eqFold(w, "merge") || eqFold(w, "table")):
		st.withDepth = -1 // the statement the list is for
	case eqFold(w, "index") && st.firstIs("create"):
		st.createIndex = true
	case st.f&Postgres != 0 && eqFold(w, "pg_settings") && !st.firstIs("select"):
		return CallsText
	}
	return CallsKnown
}

func (st *callScan) firstIs(lw string) bool {
	return st.first.kind == kWord && eqFold(st.first.text, lw)
}

// call judges the name before a '(' that is not part of one.
func (st *callScan) call() Calls {
	name := st.prev
	if st.parts == 1 && name.kind == kWord && st.syntax(name.text) {
		return CallsKnown
	}
	if st.ownsList() {
		return CallsKnown
	}
	if st.f&Postgres != 0 && runsText(name.text) {
		return CallsText
	}
	if st.builtin(name) {
		return CallsKnown
	}
	st.noteUnknown(serverName(name))
	return CallsUnknown
}

// serverName is the name PostgreSQL looks up for t: a word with its ASCII
// letters in lower case (PostgreSQL folds no other letter in UTF-8), a
// quoted name as it is.
func serverName(t token) string {
	if t.kind == kIdent {
		return t.text
	}
	b := []byte(t.text)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// noteUnknown records an unknown call of name ("": of no function's name).
func (st *callScan) noteUnknown(name string) {
	if st.unknown != nil {
		*st.unknown = append(*st.unknown, name)
	}
}

// UnknownCalls is UnknownCallsOf for PostgreSQL.
func UnknownCalls(query string) (names []string, ok bool) {
	return UnknownCallsOf(query, Postgres)
}

// UnknownCallsOf returns the names (the last part, as the server looks it
// up: serverName; in lower case for MySQL, whose function names are
// case-insensitive, quoted or not) of the functions query, read as flavor
// f (Postgres or MySQL), calls that are not on the list (what makes
// CallsOf say CallsUnknown), each once; ok is false where a call names no
// function (CALL) or the text's calls are not all known by name (a string
// whose end depends on the server's settings). A catalog that proves
// every one of them harmless vouches for the text (Shadows.Vouched).
func UnknownCallsOf(query string, f Flavor) (names []string, ok bool) {
	my := f&Postgres == 0
	var all []string
	c, backslash := scanCallsInto(query, my, false, f, &all)
	if c == CallsText || backslash {
		return nil, false
	}
	for _, n := range all {
		if n == "" {
			return nil, false
		}
		if my {
			n = strings.ToLower(n) // the lexer read a quoted name as the server does
		}
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	return names, true
}

// syntax reports a word that is SQL syntax before a '(', where it stands.
func (st *callScan) syntax(w string) bool {
	if st.my && inSet(mySyntax, w) || !st.my && inSet(pgSyntax, w) {
		return true
	}
	if st.n == 1 && inSet(leadingSyntax, w) {
		return true
	}
	if !st.my && inSet(pgOperandSyntax, w) && st.afterOperand() {
		return true
	}
	if after, ok := lookup(syntaxAfter, w); ok && st.before.kind == kWord {
		for _, a := range after {
			// BY: PARTITION BY RANGE (a) in a definition, not ORDER BY range(a)
			if eqFold(st.before.text, a) && (a != "by" || st.firstIs("create") || st.firstIs("alter")) {
				return true
			}
		}
	}
	// MySQL's INSERT ... VALUE (...)
	return st.my && eqFold(w, "value") && (st.firstIs("insert") || st.firstIs("replace"))
}

// afterOperand reports a name that follows the end of an operand.
func (st *callScan) afterOperand() bool {
	switch b := st.before; b.kind {
	case kIdent, kString, kClose:
		return true
	case kWord:
		return !inSet(pgSyntax, b.text)
	case kOther:
		return b.text == "?"
	}
	return false
}

// ownsList reports a name whose '(' opens a list of columns, parameters or
// a type's modifiers, not arguments: see CallsOf.
func (st *callScan) ownsList() bool {
	if st.withDepth == st.depth {
		return true // WITH c (a, b) AS (...), d AS MATERIALIZED (...)
	}
	b := st.before
	switch b.kind {
	case kClose:
		// An alias's columns: f(x) g (n), (SELECT ...) d (a, b); but not
		// after DISTINCT ON (a), where the select list starts.
		return st.distinctOnEnd != st.n-1
	case kOther:
		return b.text == ":" && st.before2.kind == kOther && st.before2.text == ":" // x::numeric(10,2)
	case kWord:
		if inSet(namePositions, b.text) || st.my && inSet(myNamePositions, b.text) {
			return true
		}
		if st.firstIs("create") {
			// CREATE INDEX i ON [ONLY] t USING btree (a), EXCLUDE USING gist (...)
			return eqFold(b.text, "using") || st.createIndex && (eqFold(b.text, "on") || eqFold(b.text, "only"))
		}
	}
	return false
}

// builtin reports a name on the flavor's list, as the server would resolve
// it to the built-in: PostgreSQL, a word or a quoted name in lower case,
// alone or qualified with pg_catalog; MySQL, a word alone followed by '('
// without white space (otherwise a stored function of that name may be
// the one called).
func (st *callScan) builtin(name token) bool {
	switch {
	case st.parts == 1:
	case st.parts == 2 && !st.my && (st.head.kind == kWord && eqFold(st.head.text, "pg_catalog") ||
		st.head.kind == kIdent && st.head.text == "pg_catalog"):
	default:
		return false
	}
	if name.kind == kIdent {
		if st.my || !isLowerName(name.text) {
			return false
		}
	} else if st.my && !st.adjacent {
		return false
	}
	return st.f&Postgres != 0 && (inSet(pgFunctions, name.text) || inSet(pgSessionRuled, name.text)) ||
		st.f&MySQL != 0 && (inSet(myFunctions, name.text) || inSet(mySessionRuled, name.text))
}

// runsText reports a PostgreSQL function that runs SQL given as a string,
// in whatever schema and however quoted.
func runsText(w string) bool {
	return eqFold(w, "query_to_xml") || eqFold(w, "query_to_xml_and_xmlschema") || eqFold(w, "query_to_xmlschema") ||
		hasPrefixFold(w, "dblink") || hasPrefixFold(w, "crosstab")
}

// isLowerName reports a name of ASCII lower-case letters, digits and '_'.
func isLowerName(w string) bool {
	for i := 0; i < len(w); i++ {
		if c := w[i]; !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '_') {
			return false
		}
	}
	return w != ""
}

// maxNameLen is the longest name in the tables, and then some.
const maxNameLen = 48

// inSet reports whether w, in any ASCII case, is in m, whose keys are in
// lower case. It does not allocate.
func inSet(m map[string]struct{}, w string) bool {
	if len(w) > maxNameLen {
		return false
	}
	var buf [maxNameLen]byte
	for i := 0; i < len(w); i++ {
		buf[i] = lowerTable[w[i]]
	}
	_, ok := m[string(buf[:len(w)])]
	return ok
}

// lookup is inSet for a map with values.
func lookup[V any](m map[string]V, w string) (V, bool) {
	if len(w) > maxNameLen {
		var zero V
		return zero, false
	}
	var buf [maxNameLen]byte
	for i := 0; i < len(w); i++ {
		buf[i] = lowerTable[w[i]]
	}
	v, ok := m[string(buf[:len(w)])]
	return v, ok
}
