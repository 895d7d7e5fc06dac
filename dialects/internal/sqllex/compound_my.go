package sqllex

import (
	"slices"
	"strings"
)

// SQLMode is what of a MySQL or MariaDB sql_mode changes how the reader
// reads a stored routine's body: a routine runs in the sql_mode it was
// created with (information_schema.ROUTINES.SQL_MODE), not the caller's.
type SQLMode struct {
	// ANSIQuotes: "…" quotes a name, as `…` does ("get_lock"(…) is a
	// call of GET_LOCK), not a string.
	ANSIQuotes bool
	// NoBackslashEscapes: a backslash in a string is a plain character.
	NoBackslashEscapes bool
}

// neutralModes are the sql_mode names that change nothing the reader looks
// at: how strings and names are quoted, where statements end, which words
// call what. PIPES_AS_CONCAT makes || a concatenation instead of OR, two
// operator bytes either way. IGNORE_SPACE lets a built-in's name stand
// before white space and '(': the reader takes such a call for one of a
// stored function (see CallsOf), which the catalog then has to prove
// harmless, so it reads more as a call, never less. The modes that a
// combination names (ANSI, TRADITIONAL) count when they come alone; the
// server lists each mode they stand for beside them.
var neutralModes = set(`real_as_float pipes_as_concat ignore_space only_full_group_by
	no_unsigned_subtraction no_dir_in_create no_key_options no_table_options no_field_options
	mysql323 mysql40 ansi no_auto_value_on_zero strict_trans_tables strict_all_tables
	no_zero_in_date no_zero_date invalid_dates error_for_division_by_zero traditional
	no_auto_create_user high_not_precedence no_engine_substitution pad_char_to_full_length
	empty_string_is_null simultaneous_assignment time_round_fractional`)

// ParseSQLMode reads a sql_mode as the server lists it (names separated by
// commas, in any case; "" is the empty mode). ok is false where a name is
// one the reader does not follow: ORACLE (MariaDB's PL/SQL syntax for
// routines: := assignments, AS/IS bodies, other DECLARE forms), MSSQL,
// DB2, MAXDB, POSTGRESQL, and any name it does not know. A routine read in
// a mode it does not follow is not harmless.
func ParseSQLMode(v string) (m SQLMode, ok bool) {
	for name := range strings.SplitSeq(v, ",") {
		name = strings.ToLower(strings.TrimSpace(name))
		switch {
		case name == "":
		case name == "ansi_quotes":
			m.ANSIQuotes = true
		case name == "no_backslash_escapes":
			m.NoBackslashEscapes = true
		case !inSet(neutralModes, name):
			return SQLMode{}, false
		}
	}
	return m, true
}

// Routine is what ReadRoutine finds in a stored function's or procedure's
// body. The body is harmless when its own statements are (Harmless), every
// function in Funcs and every procedure in Procs is, none of Words is a
// name that runs code unseen (a table with a trigger, a view over one, a
// stored function under a listed built-in's name), and, where Writes, no
// trigger hides from the reader: the catalog answers all but the first.
type Routine struct {
	// Harmless: every statement of the body is one the reader follows and
	// reads as leaving the session alone, its calls aside.
	Harmless bool
	// Funcs: the functions the body calls that are not on the list of
	// built-ins (the last part of the name, in lower case), each once.
	Funcs []string
	// Procs: the procedures it CALLs (likewise).
	Procs []string
	// Words: its words and quoted names, in lower case, each once.
	Words []string
	// Writes: a statement of it may write a table (INSERT, UPDATE,
	// DELETE, REPLACE, WITH), and so fire a trigger.
	Writes bool
}

// maxNesting bounds how deep the reader follows nested compound
// statements: a body nested deeper is not harmless.
const maxNesting = 64

// ReadRoutine reads body, the text of a MySQL or MariaDB stored function
// or procedure (information_schema.ROUTINES.ROUTINE_DEFINITION) created in
// sql_mode mode, with parameters params, statement by statement (see
// Routine). A body is one statement; a compound one (BEGIN … END) holds
// statements, each read as follows, anything else making it not harmless:
//
//   - DECLARE of local variables (with a DEFAULT expression), conditions,
//     cursors (each one OPENed must be CLOSEd somewhere in the body) and
//     handlers (whose statement is read);
//   - SET of local variables and parameters only, each to an expression:
//     SET of a name that is neither (a system variable), of @v, @@v,
//     SESSION, GLOBAL, NAMES, … is a change of the session;
//   - IF, CASE, LOOP, WHILE, REPEAT, labels, LEAVE, ITERATE, RETURN, DO;
//   - SELECT (… INTO local variables only), INSERT, UPDATE, DELETE,
//     REPLACE, WITH, read as a statement's text is (ChangesSession,
//     CallsOf): GET_LOCK, := and INTO @v count;
//   - CALL of a procedure (no '@' in its arguments), SIGNAL, RESIGNAL,
//     OPEN, FETCH … INTO local variables, CLOSE.
//
// A local variable or parameter is a name DECLAREd in the block or one
// around it, or in params; case does not matter.
//
// A body with a backslash in a string is read both ways, with backslashes
// escaping and without, and is harmless only where both readings are (the
// names they find joined): the server does not show a body as it was
// typed. ROUTINE_DEFINITION holds each string as the server read it,
// re-quoted: '\\' shows as '\', and the quote of 'a\'b' doubled,
// whatever the routine's sql_mode, so that the mode's reading of
// backslashes may end a string elsewhere than the server did, and hide a
// statement in it.
func ReadRoutine(body string, mode SQLMode, params []string) Routine {
	out, backslash := readRoutine(body, mode, !mode.NoBackslashEscapes, params)
	if !backslash || !out.Harmless {
		return out
	}
	other, _ := readRoutine(body, mode, mode.NoBackslashEscapes, params)
	if !other.Harmless {
		return Routine{}
	}
	for _, n := range other.Funcs {
		addName(&out.Funcs, n)
	}
	for _, n := range other.Procs {
		addName(&out.Procs, n)
	}
	out.Words = append(out.Words, other.Words...)
	slices.Sort(out.Words)
	out.Words = slices.Compact(out.Words)
	out.Writes = out.Writes || other.Writes
	return out
}

// readRoutine is one reading of ReadRoutine's, with backslashes escaping
// in strings or not; backslash reports a string that held one.
func readRoutine(body string, mode SQLMode, escapes bool, params []string) (Routine, bool) {
	r := &bodyReader{ok: true, opened: map[string]bool{}, closed: map[string]bool{}}
	r.scopes = [][]string{lowerAll(params)}
	l := newLexer(body, true, escapes)
	l.ansi = mode.ANSIQuotes
	for {
		t := l.next()
		if t.kind == kBad {
			return Routine{}, l.backslash
		}
		if t.kind == kEOF {
			break
		}
		r.toks = append(r.toks, btok{token: t, adjacent: l.i < len(body) && body[l.i] == '('})
	}
	r.statement()
	r.semi()
	if r.i < len(r.toks) {
		r.fail()
	}
	for c := range r.opened {
		if !r.closed[c] {
			r.fail()
		}
	}
	out := r.out
	out.Harmless = r.ok
	slices.Sort(out.Words)
	out.Words = slices.Compact(out.Words)
	return out, l.backslash
}

// btok is a token of a body, and whether a '(' follows it at once.
type btok struct {
	token
	adjacent bool
}

// bodyReader is ReadRoutine's state: a recursive descent over the tokens.
type bodyReader struct {
	toks   []btok
	i      int
	ok     bool
	nest   int
	scopes [][]string // the local names of each open block, scopes[0] the parameters
	opened map[string]bool
	closed map[string]bool
	out    Routine
}

// fail marks the body not harmless and stops the reading.
func (r *bodyReader) fail() {
	r.ok = false
	r.i = len(r.toks)
}

func (r *bodyReader) at(i int) btok {
	if i < len(r.toks) {
		return r.toks[i]
	}
	return btok{}
}

// word returns the current token in lower case if it is a word, else "".
func (r *bodyReader) word() string {
	if t := r.at(r.i); t.kind == kWord {
		return strings.ToLower(t.text)
	}
	return ""
}

// expect consumes the word w, or fails.
func (r *bodyReader) expect(w string) {
	if r.word() != w {
		r.fail()
		return
	}
	r.i++
}

// semi consumes a ';' if one is next.
func (r *bodyReader) semi() {
	if r.at(r.i).kind == kSemi {
		r.i++
	}
}

// label consumes the optional label after END, END LOOP, ….
func (r *bodyReader) label() {
	if k := r.at(r.i).kind; k == kWord || k == kIdent {
		r.i++
	}
}

// local reports a name in scope: a parameter or a declared variable.
func (r *bodyReader) local(t token) bool {
	if t.kind != kWord && t.kind != kIdent {
		return false
	}
	n := foldName(t.text)
	for _, s := range r.scopes {
		if slices.Contains(s, n) {
			return true
		}
	}
	return false
}

// list reads statements, each ended by ';', until one of the words stops
// starts the next.
func (r *bodyReader) list(stops ...string) {
	for r.ok && r.i < len(r.toks) && !slices.Contains(stops, r.word()) {
		r.statement()
		if r.at(r.i).kind != kSemi {
			r.fail()
			return
		}
		r.i++
	}
	if r.i >= len(r.toks) {
		r.fail() // the block never ended
	}
}

// statement reads one statement.
func (r *bodyReader) statement() {
	if !r.ok {
		return
	}
	if r.nest++; r.nest > maxNesting {
		r.fail()
		return
	}
	defer func() { r.nest-- }()
	t := r.at(r.i)
	if (t.kind == kWord || t.kind == kIdent) && r.at(r.i+1).kind == kOther && r.at(r.i+1).text == ":" {
		r.i += 2 // a label
		switch r.word() {
		case "begin", "loop", "while", "repeat":
		default:
			r.fail()
			return
		}
	}
	switch w := r.word(); w {
	case "begin":
		r.i++
		if r.word() == "not" {
			r.i++
			r.expect("atomic")
		}
		r.scopes = append(r.scopes, nil)
		r.list("end")
		r.scopes = r.scopes[:len(r.scopes)-1]
		r.expect("end")
		r.label()
	case "if":
		r.branches("elseif", "if")
	case "case":
		r.i++
		if r.word() != "when" {
			r.expr("when")
		}
		if r.word() != "when" {
			r.fail()
			return
		}
		r.branches("when", "case")
	case "loop":
		r.i++
		r.list("end")
		r.expect("end")
		r.expect("loop")
		r.label()
	case "while":
		r.i++
		r.expr("do")
		r.expect("do")
		r.list("end")
		r.expect("end")
		r.expect("while")
		r.label()
	case "repeat":
		r.i++
		r.list("until")
		r.expect("until")
		r.expr("end")
		r.expect("end")
		r.expect("repeat")
		r.label()
	case "leave", "iterate":
		r.i++
		if k := r.at(r.i).kind; k != kWord && k != kIdent {
			r.fail()
			return
		}
		r.i++
	case "return", "do":
		r.i++
		r.expr()
	case "declare":
		r.declare()
	case "set":
		r.set()
	case "select", "insert", "update", "delete", "replace", "with", "signal", "resignal":
		r.plain(w)
	case "call":
		r.call()
	case "open", "close":
		r.i++
		t := r.at(r.i)
		if t.kind != kWord && t.kind != kIdent {
			r.fail()
			return
		}
		r.i++
		if w == "open" {
			r.opened[strings.ToLower(t.text)] = true
		} else {
			r.closed[strings.ToLower(t.text)] = true
		}
	case "fetch":
		r.i++
		if r.word() == "next" {
			r.i++
		}
		if r.word() == "from" {
			r.i++
		}
		if k := r.at(r.i).kind; k != kWord && k != kIdent {
			r.fail()
			return
		}
		r.i++
		r.expect("into")
		r.targets()
	default:
		r.fail() // COMMIT, PREPARE, LOCK, FOR, GET DIAGNOSTICS, DDL, …
	}
}

// branches reads the branches of an IF or a CASE from the word that opens
// the first (IF, WHEN): each a condition, THEN and statements, the next
// opened by more (ELSEIF, WHEN); then an optional ELSE and its
// statements, and END kind.
func (r *bodyReader) branches(more, kind string) {
	for first := true; r.ok && (first || r.word() == more); first = false {
		r.i++
		r.expr("then")
		r.expect("then")
		r.list(more, "else", "end")
	}
	if r.word() == "else" {
		r.i++
		r.list("end")
	}
	r.expect("end")
	r.expect(kind)
}

// extent returns the end of the expression or statement that starts at
// r.i: the first ';' (or the end), or, with stops, the first of those
// words outside parentheses and CASE … END, or ',' outside them if comma.
// A word after a '.' is a name, whatever it spells (s.case, s.end: the
// server reads a reserved word there as a column's name), and so is an
// END that closes no CASE (END is no reserved word: a column may be
// named so): either, read as CASE or END, would shift where the
// expression ends, and hide what follows it (SET x = (SELECT s.case …),
// @v = 1 set @v).
func (r *bodyReader) extent(comma bool, stops ...string) int {
	depth, cases := 0, 0
	for j := r.i; j < len(r.toks); j++ {
		t := r.toks[j]
		switch t.kind {
		case kSemi:
			return j
		case kOpen:
			depth++
		case kClose:
			depth--
		case kComma:
			if comma && depth == 0 && cases == 0 {
				return j
			}
		case kWord:
			if afterDot(r.toks, j) {
				continue
			}
			w := strings.ToLower(t.text)
			if depth == 0 && cases == 0 && slices.Contains(stops, w) {
				return j
			}
			switch {
			case w == "case":
				cases++
			case w == "end" && cases > 0:
				cases--
			}
		}
	}
	return len(r.toks)
}

// afterDot reports a token that follows a '.': the second part of a
// qualified name.
func afterDot(toks []btok, j int) bool {
	return j > 0 && toks[j-1].kind == kOther && toks[j-1].text == "."
}

// expr reads an expression up to one of stops (or ';'), by the rules of a
// SELECT's.
func (r *bodyReader) expr(stops ...string) {
	end := r.extent(false, stops...)
	if end == r.i || len(stops) > 0 && end == len(r.toks) {
		r.fail()
		return
	}
	r.rules(r.toks[r.i:end], true)
	r.i = end
}

// plain reads a statement the rules read as a statement's text: a
// SELECT, DML, SIGNAL. A SELECT's INTO must name local variables only.
func (r *bodyReader) plain(w string) {
	end := r.extent(false)
	toks := r.toks[r.i:end]
	r.rules(toks, false)
	switch w {
	case "insert", "update", "delete", "replace", "with":
		r.out.Writes = true
	}
	if w == "select" || w == "with" {
		if into := intoAt(toks); into >= 0 {
			r.i += into + 1
			r.targets()
			if !r.ok {
				return
			}
		}
	}
	r.i = end
}

// intoAt returns the index of the INTO outside parentheses in toks, or -1
// (s.into is a column's name: see extent).
func intoAt(toks []btok) int {
	depth := 0
	for j, t := range toks {
		switch {
		case t.kind == kOpen:
			depth++
		case t.kind == kClose:
			depth--
		case depth == 0 && t.kind == kWord && eqFold(t.text, "into") && !afterDot(toks, j):
			return j
		}
	}
	return -1
}

// targets reads a list of local variables assigned (INTO a, b).
func (r *bodyReader) targets() {
	for {
		if !r.local(r.at(r.i).token) || r.at(r.i+1).kind == kOther && r.at(r.i+1).text == "." {
			r.fail() // @v, OUTFILE, a name of no local variable
			return
		}
		r.i++
		if r.at(r.i).kind != kComma {
			return
		}
		r.i++
	}
}

// declare reads a DECLARE of variables, a condition, a cursor or a
// handler.
func (r *bodyReader) declare() {
	r.i++
	switch r.word() {
	case "continue", "exit", "undo":
		r.i++
		r.expect("handler")
		r.expect("for")
		for r.ok {
			switch r.word() {
			case "sqlstate":
				r.i++
				if r.word() == "value" {
					r.i++
				}
				if r.at(r.i).kind != kString {
					r.fail()
					return
				}
			case "not":
				r.i++
				if r.word() != "found" {
					r.fail()
					return
				}
			case "":
				if r.at(r.i).kind != kIdent {
					r.fail()
					return
				}
			}
			r.i++ // SQLEXCEPTION, SQLWARNING, a condition's name, an error number
			if r.at(r.i).kind != kComma {
				break
			}
			r.i++
		}
		r.statement()
		return
	}
	var names []string
	for {
		t := r.at(r.i)
		if t.kind != kWord && t.kind != kIdent {
			r.fail()
			return
		}
		names = append(names, foldName(t.text))
		r.i++
		if r.at(r.i).kind != kComma {
			break
		}
		r.i++
	}
	switch r.word() {
	case "condition":
		r.i = r.extent(false)
		return
	case "cursor":
		r.i = r.extent(false, "for")
		r.expect("for")
		if r.word() != "select" && r.word() != "with" {
			r.fail()
			return
		}
		end := r.extent(false)
		r.rules(r.toks[r.i:end], false)
		r.i = end
		return
	}
	// A type: words, numbers, strings and parentheses (VARCHAR(64),
	// DECIMAL(10,2) UNSIGNED, ENUM('a'), CHARACTER SET x, TYPE OF t.c).
	r.i = r.extent(false, "default")
	if r.word() == "default" {
		r.i++
		r.expr()
	}
	r.scopes[len(r.scopes)-1] = append(r.scopes[len(r.scopes)-1], names...)
}

// set reads a SET of local variables: any other target changes the
// session.
func (r *bodyReader) set() {
	r.i++
	for r.ok {
		t := r.at(r.i)
		if !r.local(t.token) || r.at(r.i+1).kind == kOther && r.at(r.i+1).text == "." {
			r.fail() // @v, @@v, SESSION, GLOBAL, NAMES, a system variable, …
			return
		}
		r.i++
		if op := r.at(r.i); !(op.kind == kOther && op.text == "=" || op.kind == kAssign) {
			r.fail()
			return
		}
		r.i++
		end := r.extent(true)
		if end == r.i {
			r.fail()
			return
		}
		r.rules(r.toks[r.i:end], true)
		r.i = end
		if r.at(r.i).kind != kComma {
			return
		}
		r.i++
	}
}

// call reads CALL p or CALL p(args): p joins Procs, the arguments are read
// as expressions, and any '@' in them (a user variable an OUT parameter
// would assign) is a change.
func (r *bodyReader) call() {
	r.i++
	name := ""
	for {
		t := r.at(r.i)
		if t.kind != kWord && t.kind != kIdent {
			r.fail()
			return
		}
		name = t.text
		r.words(t.token)
		r.i++
		if d := r.at(r.i); d.kind != kOther || d.text != "." {
			break
		}
		r.i++
	}
	addName(&r.out.Procs, name)
	end := r.extent(false)
	args := r.toks[r.i:end]
	if len(args) > 0 {
		if args[0].kind != kOpen || args[len(args)-1].kind != kClose {
			r.fail()
			return
		}
		for _, a := range args {
			if a.kind == kAt {
				r.fail()
				return
			}
		}
		if len(args) > 2 {
			r.rules(args, true)
		}
	}
	r.i = end
}

// rules reads toks, one statement's or (select: behind a SELECT) one
// expression's, by the rules a statement's text is read by: ChangesSession
// and CallsOf, whose unknown calls join Funcs; and notes its words.
func (r *bodyReader) rules(toks []btok, selectLead bool) {
	ss := sessionScan{f: MySQL}
	var unknown []string
	cs := callScan{my: true, f: MySQL, withDepth: -1, unknown: &unknown}
	if selectLead {
		lead := token{kind: kWord, text: "select"}
		ss.step(lead)
		ss.prev, ss.n = lead, 1
		cs.step(lead, false)
		cs.prev, cs.n = lead, 1
	}
	for _, t := range toks {
		if ss.step(t.token) || cs.step(t.token, t.adjacent) == CallsText {
			r.fail()
			return
		}
		ss.prev = t.token
		ss.n++
		cs.prev2, cs.prev = cs.prev, t.token
		cs.n++
		r.words(t.token)
	}
	if ss.setWord == 1 || ss.call == 2 {
		r.fail()
		return
	}
	for _, n := range unknown {
		if n == "" {
			r.fail()
			return
		}
		addName(&r.out.Funcs, n)
	}
}

// words notes a word or quoted name of the body.
func (r *bodyReader) words(t token) {
	if t.kind == kWord || t.kind == kIdent {
		r.out.Words = append(r.out.Words, strings.ToLower(t.text))
	}
}

// addName adds a routine's name, as the server looks it up, to names.
func addName(names *[]string, n string) {
	n = strings.ToLower(n) // the lexer read a quoted name as the server does
	if !slices.Contains(*names, n) {
		*names = append(*names, n)
	}
}

func lowerAll(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = foldName(n)
	}
	return out
}

// foldName returns a local variable's or parameter's name with its ASCII
// letters in lower case, and every other byte as it is: two names it
// folds alike are one to the server, whose collation of names
// (utf8mb3_general_ci) folds A-Z so too. Unicode's case folding is not
// the server's: the Kelvin sign folds to k in Go's strings.ToLower and
// not in MariaDB, so a local declared as loc\u212a_wait_timeout was
// read as the target of SET lock_wait_timeout = 7, which set the
// session's variable. A name the server folds and this does not (É, é)
// reads as no local: a change.
func foldName(n string) string {
	b := []byte(n)
	for i, c := range b {
		b[i] = lowerTable[c]
	}
	return string(b)
}
