package sqllex

import (
	"slices"
	"strings"
	"unicode/utf8"
)

// Refs are what a text names, for a dialect to compare with what the
// server's catalog says runs code nobody's call shows (see Shadows): a
// listed function that a user's function of the same name overloads or
// shadows, a table with a trigger, a policy, a default or a rule, a view
// over one, a user's operator. The text alone cannot tell; the catalog
// can, and a dialect reads it once for many statements.
type Refs struct {
	// Words are the text's words and quoted names, in lower case, each
	// once (a number too: it costs nothing to look up and is never a
	// name).
	Words []string
	// Ops are the text's runs of operator characters (PostgreSQL's
	// + - * / < > = ~ ! @ # % ^ & | ` ?), each once.
	Ops []string
	// Casts: the text casts (::, CAST, CONVERT, TREAT), where a user's cast
	// may run a function.
	Casts bool
	// DDL: a statement of the text starts with CREATE, ALTER, DROP,
	// COMMENT, GRANT, REVOKE, IMPORT or SECURITY: it may change what the
	// catalog says (see Shadows).
	DDL bool
	// AfterDDL: a statement of the text follows one that starts with a
	// DDL word, and runs with what that one changed.
	AfterDDL bool
	// Makes: a DDL statement of the text may make or change what runs
	// code, or rename what the catalog names: any but one that only
	// removes or labels (DROP, COMMENT, GRANT, REVOKE) and a CREATE
	// [UNLOGGED] TABLE that names no partition, exclusion constraint or
	// access method (USING), where an operator class of a user's may
	// stand unnamed by any reading. Such a table runs only code its text
	// names, which the reading before it vouches for or not.
	Makes bool
	// Code: a statement of the text starts with DO, whose code may do
	// anything, DDL included, that no text shows.
	Code bool
	// Named: a word of the text may name a user's object where it stands
	// (see namesNothing): what Meets counts where nothing was read.
	Named bool
}

// Shadows is what a server's catalog says of the names a text may use:
// which of them run code no call in the text shows, or code other than
// the built-in a list vouches for. A dialect builds it from the catalog
// and shares it between the connections to one database; it is never
// changed once built.
type Shadows struct {
	// Names, in lower case: listed built-ins that a user's function
	// overloads or shadows, or that the server lacks; relations whose
	// reads or writes run such code (triggers, rules, policies, defaults,
	// checks, domains, views over them); functions callable by attribute
	// notation (t.f); domains whose checks run such code.
	Names map[string]struct{}
	// Ops: operators whose function is such code.
	Ops []string
	// Casts: a cast that runs such a function exists; any cast may be it.
	Casts bool
	// All: such a cast may run without being written (an implicit or
	// assignment cast): every statement may run it.
	All bool
	// Harmless, in lower case: names under which every function the
	// catalog has is a user's function whose body the rules read as
	// leaving the session alone (PostgreSQL: a LANGUAGE sql function,
	// SQLBody, or a PL/pgSQL one, PLpgSQLBody, calling only names proved
	// so in turn; MySQL: a stored function that returns an expression,
	// HarmlessReturn): a call of one is no session change (Vouched).
	Harmless map[string]struct{}
	// Reads, as Harmless: names under which every function the catalog
	// has is Harmless and one that a standby runs as the primary would
	// (PostgreSQL: STABLE or IMMUTABLE, whose statements the server runs
	// read-only, naming no built-in that writes or answers for the
	// session, calling only names proved so in turn): a SELECT that
	// calls only these and built-ins only reads (ReadsVouched).
	Reads map[string]struct{}
	// Static, in lower case (PostgreSQL): names under which every
	// function the catalog has runs nothing that may change the catalog
	// (no DDL, no SQL from a string), calling only names proved so in
	// turn; it may still change the session. A call of only these and
	// built-ins leaves the reading true (RunsStatic).
	Static map[string]struct{}
	// Settings, as Harmless (PostgreSQL): names under which every
	// function the catalog has is Harmless, or a LANGUAGE sql one whose
	// body changes nothing but settings (SQLSettingsBody), calling only
	// names proved so in turn: a call of only these leaves nothing a reset
	// of the settings does not undo (SetsOnly).
	Settings map[string]struct{}
	// Standby, in lower case: names of relations a standby does not
	// answer as the primary does, by what the catalog says of them (an
	// unlogged or temporary relation, a sequence, a foreign table, a
	// view or a table whose reads reach a user's function or a volatile
	// built-in, however deep). A text that names one is no standby's
	// read (ReadsOnStandby).
	Standby map[string]struct{}
}

// Vouched reports whether s proves every one of names harmless; false for
// none (a call that names no function) or a nil s.
func (s *Shadows) Vouched(names []string) bool {
	return s != nil && allIn(s.Harmless, names)
}

// RunsStatic reports whether s proves that none of names, functions of
// the user's, may change the catalog (Static); false for none or a nil s.
func (s *Shadows) RunsStatic(names []string) bool {
	return s != nil && allIn(s.Static, names)
}

// SetsOnly reports whether s proves that none of names, functions of the
// user's, changes more than settings (Settings); false for none or a nil
// s.
func (s *Shadows) SetsOnly(names []string) bool {
	return s != nil && allIn(s.Settings, names)
}

// allIn reports whether names, one or more, are all in set.
func allIn(set map[string]struct{}, names []string) bool {
	if len(names) == 0 {
		return false
	}
	for _, n := range names {
		if _, ok := set[n]; !ok {
			return false
		}
	}
	return true
}

// HarmlessBody reports whether body, the text of a PostgreSQL LANGUAGE
// sql function, leaves the session alone as the rules read it, calling
// only listed built-ins (SQLBody, with no call of a user's function).
func HarmlessBody(body string, s *Shadows) bool {
	calls, ok := SQLBody(body, s)
	return ok && len(calls) == 0
}

// HarmlessReturn reports whether body, the text of a MySQL or MariaDB
// stored function, leaves the session alone as the rules read it: it is
// one RETURN of an expression that, read as a SELECT's, changes nothing
// its words show, calls only listed built-ins (not another stored
// function: no chain is followed), and names nothing s says runs user
// code (a table with a trigger, a stored function, a view over one). A
// body of several statements (BEGIN ... END) is not read.
func HarmlessReturn(body string, s *Shadows) bool {
	body = strings.TrimSpace(body)
	if s == nil || len(body) < len("return ") || !strings.EqualFold(body[:len("return")], "return") {
		return false
	}
	if c := body[len("return")]; c != ' ' && c != '\t' && c != '\n' && c != '\r' && c != '(' {
		return false
	}
	expr := "SELECT " + body[len("return"):]
	if ChangesSession(expr, MySQL) || CallsOf(expr, MySQL) != CallsKnown {
		return false
	}
	r := RefsOf(expr, MySQL)
	return !r.DDL && !r.Meets(s)
}

// Meets reports whether a text with refs r may run code that s names.
// A nil s (nothing read, or no reading that vouches) meets every text
// that may name a user's object (Named), runs an operator (any may be a
// user's, found by the session's search_path) or casts (any cast may be
// a user's): SELECT 1, BEGIN or SELECT $1 name nothing and meet nothing.
func (r *Refs) Meets(s *Shadows) bool {
	if r == nil {
		return false
	}
	if s == nil {
		return r.Named || len(r.Ops) > 0 || r.Casts
	}
	if s.All || s.Casts && r.Casts {
		return true
	}
	for _, w := range r.Words {
		if _, ok := s.Names[w]; ok {
			return true
		}
	}
	for _, run := range r.Ops {
		for _, op := range s.Ops {
			// A run may hold several operators (=-1 is = then -): any
			// part of it may be the user's.
			if strings.Contains(run, op) {
				return true
			}
		}
	}
	return false
}

// NamesAny reports whether r names one of names.
func (r *Refs) NamesAny(names map[string]struct{}) bool {
	if r == nil || len(names) == 0 {
		return false
	}
	for _, w := range r.Words {
		if _, ok := names[w]; ok {
			return true
		}
	}
	return false
}

// RefsOf returns what query names, read as flavor f (PostgreSQL's
// quoting for Any). A string holding a backslash is read both ways, and
// the names of both readings count.
func RefsOf(query string, f Flavor) *Refs {
	my := f&Postgres == 0
	r := &Refs{}
	backslash := refsScan(r, query, my, my)
	if backslash {
		refsScan(r, query, my, !my)
	}
	slices.Sort(r.Words)
	r.Words = slices.Compact(r.Words)
	slices.Sort(r.Ops)
	r.Ops = slices.Compact(r.Ops)
	return r
}

// impliedOps are the operators PostgreSQL runs for a word, by name and
// resolved against the operands' types as if written (a user's = for
// (text, int) is the one a IN (1) runs): IN and NOT IN, LIKE, ILIKE,
// SIMILAR TO, BETWEEN and NOT BETWEEN, IS [NOT] DISTINCT FROM, NULLIF, a
// simple CASE, JOIN … USING and NATURAL JOIN.
var impliedOps = map[string][]string{
	"in":       {"=", "<>"},
	"like":     {"~~", "!~~"},
	"ilike":    {"~~*", "!~~*"},
	"similar":  {"~", "!~"},
	"between":  {">=", "<=", "<", ">"},
	"distinct": {"="},
	"nullif":   {"="},
	"case":     {"="},
	"using":    {"="},
	"natural":  {"="},
}

// castWords are the words that cast, in either flavor.
var castWords = set(`cast convert treat`)

// ddlWords start the statements that may change what Shadows holds.
var ddlWords = set(`create alter drop comment grant revoke import security`)

// refsScan adds to r what query names, lexed as said, and reports a
// string holding a backslash.
func refsScan(r *Refs, query string, my, escapes bool) bool {
	l := newLexer(query, my, escapes)
	first := true
	dot := false       // the token before is a '.'
	ddl := false       // a statement before started with a DDL word
	var stmt [3]string // the statement's first words
	words := 0         // how many of its words stmt holds
	endStmt := func() {
		if words > 0 && inSet(ddlWords, stmt[0]) && !removesOnly(stmt) {
			r.Makes = true
		}
		words = 0
	}
	var op strings.Builder
	opEnd := -1 // where the run in op ends in query
	flush := func() {
		if op.Len() > 0 {
			run := op.String()
			r.Ops = append(r.Ops, run)
			if !my && strings.Contains(run, "!=") {
				r.Ops = append(r.Ops, strings.ReplaceAll(run, "!=", "<>")) // the server's name for !=
			}
			op.Reset()
		}
	}
	for {
		t := l.next()
		if first && ddl && t.kind != kSemi && t.kind != kEOF {
			r.AfterDDL = true
		}
		switch t.kind {
		case kEOF, kBad:
			flush()
			endStmt()
			if t.kind == kBad && r.DDL {
				r.Makes = true
			}
			return l.backslash
		case kSemi:
			flush()
			first, dot = true, false
			endStmt()
			continue
		case kWord, kIdent:
			flush()
			w := strings.ToLower(t.text)
			r.Words = append(r.Words, w)
			if t.kind == kWord && words < len(stmt) && (words > 0 || first) {
				stmt[words] = w
				words++
			}
			if t.kind == kWord && (w == "exclude" || w == "partition" || w == "using") && words > 0 && stmt[0] == "create" {
				stmt[1] = "" // no plain table
			}
			if !r.Named && (t.kind == kIdent || !namesNothing(w, my, first, dot)) {
				r.Named = true
			}
			if !my && (len(t.text) > maxPGName || !isASCII(t.text)) {
				r.Words = append(r.Words, pgCatalogNames(t.text)...)
			}
			if first && t.kind == kWord && inSet(ddlWords, w) {
				r.DDL, ddl = true, true
			}
			if first && t.kind == kWord && w == "do" {
				r.Code = true
			}
			if t.kind == kWord && inSet(castWords, w) {
				r.Casts = true
			}
			if ops, ok := lookup(impliedOps, w); ok && !my && t.kind == kWord {
				r.Ops = append(r.Ops, ops...)
			}
		case kOther, kAt, kHash:
			c := t.text[0]
			if c == '.' {
				first, dot = false, true
				flush()
				continue
			}
			if c == ':' && l.i < len(query) && query[l.i] == ':' {
				r.Casts = true
			}
			if isOperatorByte(c) {
				// Where the token starts: white space or a comment ends
				// a run.
				tokStart := l.i - 1
				if op.Len() > 0 && opEnd != tokStart {
					flush()
				}
				op.WriteByte(c)
				opEnd = l.i
			} else {
				flush()
			}
		default:
			flush()
		}
		first, dot = false, false
	}
}

// removesOnly reports a DDL statement, by its first words, that removes
// or labels what the catalog holds (see Refs.Makes).
func removesOnly(stmt [3]string) bool {
	switch stmt[0] {
	case "drop", "comment", "grant", "revoke":
		return true
	case "create":
		return stmt[1] == "table" || stmt[1] == "unlogged" && stmt[2] == "table"
	}
	return false
}

// namesNothing reports whether w, an unquoted word in lower case, can
// name no user's object where it stands: a number (PostgreSQL: digits,
// '_' and an exponent's 'e', all one literal or a literal and an alias;
// MySQL: digits only, since a name may start with a digit there), and on
// PostgreSQL the first word of a statement (every statement opens with a
// keyword) or a reserved keyword not after a '.' (after one, any keyword
// may name a column or, schema-qualified, a function: s.select()).
// MySQL's reserved words are kept: several are built-ins a stored
// function's call may stand for (LEFT, INSERT, REPLACE, DATABASE), and
// its readings list names as written. Where it is unsure a word stays a
// name: a keyword that is not reserved (key, value, name) may name a
// table or a function.
func namesNothing(w string, my, first, dot bool) bool {
	if number(w, my) {
		return true
	}
	return !my && (first || !dot && inSet(pgReserved, w))
}

// number reports whether w, a word, is a numeric literal (see
// namesNothing).
func number(w string, my bool) bool {
	if w == "" || w[0] < '0' || w[0] > '9' {
		return false
	}
	for i := 1; i < len(w); i++ {
		switch c := w[i]; {
		case '0' <= c && c <= '9':
		case !my && (c == '_' || c == 'e'):
		default:
			return false
		}
	}
	return true
}

// pgReserved are the keywords that no object can be named unquoted in
// any PostgreSQL from 12 on: the reserved ones (catcode R of
// pg_get_keywords, but system_user, reserved from 16 only) and those
// that may name a column but no function, type or relation (catcode C,
// but normalize, from 13, and the JSON ones, from 16: a name on older
// servers). The type_func_name keywords (left, join, like, ...) may name
// a function and are not here.
var pgReserved = set(`all analyse analyze and any array as asc asymmetric both case cast check collate column
	constraint create current_catalog current_date current_role current_time current_timestamp current_user
	default deferrable desc distinct do else end except false fetch for foreign from grant group having in
	initially intersect into lateral leading limit localtime localtimestamp not null offset on only or order
	placing primary references returning select session_user some symmetric table then to trailing true
	union unique user using variadic when where window with
	between bigint bit boolean char character coalesce dec decimal exists extract float greatest grouping
	inout int integer interval least national nchar none nullif numeric out overlay position precision
	real row setof smallint substring time timestamp treat trim values varchar`)

// maxPGName is the longest name PostgreSQL keeps (NAMEDATALEN - 1): a
// longer one, quoted or not, is cut to it, and names the relation, type
// or function of the name cut.
const maxPGName = 63

// pgCatalogNames returns the forms in which the catalog's names (see
// Shadows: lower() over a name, whose collation "C" lowers ASCII letters
// only) may hold the name PostgreSQL looks up for text, which the
// Unicode lower case of text may miss: text with its ASCII letters in
// lower case (the server folds no other letter of an unquoted word, and
// lower() none of a name), cut to maxPGName bytes where longer, at a
// character's start (UTF-8) and at the byte (a single-byte encoding).
func pgCatalogNames(text string) []string {
	b := []byte(text)
	for i, c := range b {
		b[i] = lowerTable[c]
	}
	name := string(b)
	if len(name) <= maxPGName {
		return []string{name}
	}
	cut := maxPGName
	for cut > 0 && !utf8.RuneStart(name[cut]) {
		cut--
	}
	return []string{name[:maxPGName], name[:cut]}
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// isOperatorByte reports a byte PostgreSQL's operators are made of.
func isOperatorByte(c byte) bool {
	return strings.IndexByte("+-*/<>=~!@#%^&|`?", c) >= 0
}
