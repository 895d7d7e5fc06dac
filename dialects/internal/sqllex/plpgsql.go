package sqllex

// PL/pgSQL bodies, read statement by statement: the structure (blocks,
// declarations, IF, CASE, loops, EXIT, RETURN, RAISE, ASSERT, GET
// DIAGNOSTICS, NULL) by a reader of PL/pgSQL's grammar, and every
// expression and SQL statement in it by the rules a statement's text is
// read by (see bodyPart), as a LANGUAGE sql body is. What the reader does
// not know, or knows to leave state behind, makes the body a change:
// EXECUTE (SQL from a string), OPEN, FETCH, MOVE, CLOSE and a declared
// cursor (a cursor may outlive the call), CALL, COMMIT and ROLLBACK, any
// SQL statement but a query or a write (SET, SET LOCAL, RESET, LISTEN,
// PREPARE, DDL, ...), set_config however called, and any text the reader
// is unsure of.

// maxPLNesting bounds how deep blocks and control structures nest in a
// body the reader reads: deeper is a change, not a deep recursion.
const maxPLNesting = 64

// plTok is a token of a body and where it ends in the body.
type plTok struct {
	token
	end int
}

// plReader reads one PL/pgSQL body.
type plReader struct {
	body  string
	toks  []plTok
	i     int
	nest  int
	s     *Shadows
	calls []string
}

// PLpgSQLBody reads body, the text of a PL/pgSQL function, against s. ok
// reports a body that, as read, leaves the session alone but for the
// calls it makes of functions not on the list; calls names them (as
// UnknownCalls does), for the catalog to prove in turn. A body not read
// with certainty, or that does anything that may outlive the call, is not
// ok.
func PLpgSQLBody(body string, s *Shadows) (calls []string, ok bool) {
	if s == nil {
		return nil, false
	}
	r := &plReader{body: body, s: s}
	if !r.lex() || !r.function() {
		return nil, false
	}
	return r.calls, true
}

// SQLBody reads body, the text of a LANGUAGE sql function, against s, as
// PLpgSQLBody reads a PL/pgSQL one: ok where it changes nothing its words
// show, runs no SQL from a string, runs no DDL and names nothing s says
// runs user code; calls are the functions it calls that are not on the
// list. An empty body (PostgreSQL 14's BEGIN ATOMIC bodies are stored
// parsed, not as text) is not read.
func SQLBody(body string, s *Shadows) (calls []string, ok bool) {
	if s == nil || isBlank(body) {
		return nil, false
	}
	return bodyPart(body, s, nil)
}

// SQLSettingsBody reads body as SQLBody does, but that changes to the
// session's settings (OnlySettings: SET, RESET, set_config) are allowed:
// ok where such changes are all the body may leave behind but for the
// calls it makes of functions not on the list, which calls names.
func SQLSettingsBody(body string, s *Shadows) (calls []string, ok bool) {
	if s == nil || isBlank(body) {
		return nil, false
	}
	if !OnlySettings(body) {
		return nil, false
	}
	return bodyPartAs(body, s, nil, true)
}

// bodyPart reads text, one or more SQL statements of a body, by the rules
// a statement's text is read by, and adds the unknown calls it makes to
// calls.
func bodyPart(text string, s *Shadows, calls []string) ([]string, bool) {
	return bodyPartAs(text, s, calls, false)
}

// bodyPartAs is bodyPart; with settings, the text may change settings
// (the caller checked it changes nothing else: OnlySettings).
func bodyPartAs(text string, s *Shadows, calls []string, settings bool) ([]string, bool) {
	if !settings && ChangesSession(text, Postgres) {
		return nil, false
	}
	names, ok := UnknownCalls(text)
	if !ok {
		return nil, false
	}
	if r := RefsOf(text, Postgres); r.DDL || r.Meets(s) {
		return nil, false
	}
	for _, n := range names {
		calls = appendOnce(calls, n)
	}
	return calls, true
}

func appendOnce(list []string, n string) []string {
	for _, m := range list {
		if m == n {
			return list
		}
	}
	return append(list, n)
}

func isBlank(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c != ' ' && c != '\t' && c != '\n' && c != '\r' && c != '\f' && c != '\v' {
			return false
		}
	}
	return true
}

// lex splits the body into tokens. Text the lexer cannot read with
// certainty, a string whose end depends on standard_conforming_strings,
// or set_config in any form is a change.
func (r *plReader) lex() bool {
	l := newLexer(r.body, false, false)
	for {
		t := l.next()
		switch t.kind {
		case kBad:
			return false
		case kEOF:
			return !l.backslash
		case kWord, kIdent:
			if eqFold(t.text, "set_config") {
				return false
			}
		}
		r.toks = append(r.toks, plTok{token: t, end: l.i})
	}
}

// tok returns the token at i, kEOF past the end.
func (r *plReader) tok(i int) plTok {
	if i < len(r.toks) {
		return r.toks[i]
	}
	return plTok{end: len(r.body)}
}

// word reports whether the token at i is the unquoted word lw.
func (r *plReader) word(i int, lw string) bool {
	t := r.tok(i)
	return t.kind == kWord && eqFold(t.text, lw)
}

// other reports whether the token at i is the single byte c.
func (r *plReader) other(i int, c byte) bool {
	t := r.tok(i)
	return t.kind == kOther && t.text[0] == c
}

// expect consumes the word lw, or reports false.
func (r *plReader) expect(lw string) bool {
	if !r.word(r.i, lw) {
		return false
	}
	r.i++
	return true
}

// semi consumes a ';', or reports false.
func (r *plReader) semi() bool {
	if r.tok(r.i).kind != kSemi {
		return false
	}
	r.i++
	return true
}

// text returns the body's text of the tokens [a, b).
func (r *plReader) text(a, b int) string {
	if a >= b {
		return ""
	}
	start := 0
	if a > 0 {
		start = r.toks[a-1].end
	}
	return r.body[start:r.toks[b-1].end]
}

// read reads the tokens [a, b) as SQL (prefix "SELECT " for an
// expression); empty is not ok.
func (r *plReader) read(prefix string, a, b int) bool {
	if a >= b {
		return false
	}
	calls, ok := bodyPart(prefix+r.text(a, b), r.s, r.calls)
	r.calls = calls
	return ok
}

// expr reads the tokens [a, b) as an expression.
func (r *plReader) expr(a, b int) bool { return r.read("SELECT ", a, b) }

// until returns the index of the first token from r.i that is one of the
// words stops outside parentheses, brackets and SQL CASE expressions, or
// a ';' there where semi; -1 where a ';' or the end comes first.
func (r *plReader) until(semi bool, stops ...string) int {
	depth, cases := 0, 0
	for i := r.i; i < len(r.toks); i++ {
		t := r.toks[i]
		switch t.kind {
		case kSemi:
			if semi && depth == 0 && cases == 0 {
				return i
			}
			return -1
		case kOpen:
			depth++
		case kClose:
			depth--
		case kOther:
			switch t.text[0] {
			case '[':
				depth++
			case ']':
				depth--
			}
		case kWord:
			if depth != 0 {
				continue
			}
			if cases == 0 {
				for _, w := range stops {
					if eqFold(t.text, w) {
						return i
					}
				}
			}
			if eqFold(t.text, "case") {
				cases++
			} else if eqFold(t.text, "end") && cases > 0 {
				cases--
			}
		}
		if depth < 0 {
			return -1
		}
	}
	return -1
}

// exprTo reads an expression from r.i to the word stop, and consumes
// both.
func (r *plReader) exprTo(stop string) bool {
	j := r.until(false, stop)
	if j < 0 || !r.expr(r.i, j) {
		return false
	}
	r.i = j + 1
	return true
}

// restTo reads the tokens from r.i to the next ';' with prefix (see
// read), and consumes both.
func (r *plReader) restTo(prefix string) bool {
	j := r.until(true)
	if j < 0 || !r.read(prefix, r.i, j) {
		return false
	}
	r.i = j + 1
	return true
}

// sqlTo reads the SQL statement from r.i to the next ';' and consumes
// both, as restTo(""), and reads it a second time as the server runs it:
// PL/pgSQL takes INTO [STRICT] target out of a statement wherever it
// stands, so SELECT INTO key f() runs SELECT f(), where the rules read
// f( after the word key as a column list, not a call.
func (r *plReader) sqlTo() bool {
	j := r.until(true)
	if j < 0 || !r.sql(r.i, j) {
		return false
	}
	r.i = j + 1
	return true
}

// sql reads the tokens [a, b) as a SQL statement, with and without its
// INTO targets (see sqlTo).
func (r *plReader) sql(a, b int) bool {
	if !r.read("", a, b) {
		return false
	}
	var text string
	from, stripped := a, false
	for k := a; k < b; k++ {
		if !r.word(k, "into") || k > a && (r.word(k-1, "insert") || r.word(k-1, "merge")) {
			continue
		}
		text += r.text(from, k) + " "
		from, stripped = r.intoTarget(k+1, b), true
		k = from - 1
	}
	if !stripped {
		return true
	}
	text += r.text(from, b)
	calls, ok := bodyPart(text, r.s, r.calls)
	r.calls = calls
	return ok
}

// intoTarget returns the index after the INTO target that starts at i
// (before b): [STRICT] name[.name...] [, name[.name...] ...], as much as
// the server may take for one.
func (r *plReader) intoTarget(i, b int) int {
	if i < b && r.word(i, "strict") {
		i++
	}
	for i < b {
		if k := r.tok(i).kind; k != kWord && k != kIdent {
			return i
		}
		i++
		if i+1 < b && (r.other(i, '.') || r.tok(i).kind == kComma) {
			i++
			continue
		}
		return i
	}
	return i
}

// function reads a whole body: directives, one block, an optional ';'.
func (r *plReader) function() bool {
	if !r.directives() || !r.block() {
		return false
	}
	if r.tok(r.i).kind == kSemi {
		r.i++
	}
	return r.i == len(r.toks)
}

// directives reads the compiler options that may open a body:
// #variable_conflict, #print_strict_params, #option dump.
func (r *plReader) directives() bool {
	for r.tok(r.i).kind == kHash {
		name, arg := r.tok(r.i+1), r.tok(r.i+2)
		if name.kind != kWord || arg.kind != kWord {
			return false
		}
		switch {
		case eqFold(name.text, "variable_conflict"):
			if !eqFold(arg.text, "error") && !eqFold(arg.text, "use_variable") && !eqFold(arg.text, "use_column") {
				return false
			}
		case eqFold(name.text, "print_strict_params"):
			if !eqFold(arg.text, "on") && !eqFold(arg.text, "off") {
				return false
			}
		case eqFold(name.text, "option"):
			if !eqFold(arg.text, "dump") {
				return false
			}
		default:
			return false
		}
		r.i += 3
	}
	return true
}

// label consumes a <<label>> if one is at r.i, and reports false for a
// malformed one.
func (r *plReader) label() bool {
	if !r.other(r.i, '<') || !r.other(r.i+1, '<') {
		return true
	}
	if k := r.tok(r.i + 2).kind; k != kWord && k != kIdent || !r.other(r.i+3, '>') || !r.other(r.i+4, '>') {
		return false
	}
	r.i += 5
	return true
}

// endLabel consumes the label that may follow an END.
func (r *plReader) endLabel() {
	if k := r.tok(r.i).kind; k == kWord || k == kIdent {
		r.i++
	}
}

// enter counts one more level of nesting; false past maxPLNesting.
func (r *plReader) enter() bool {
	r.nest++
	return r.nest <= maxPLNesting
}

func (r *plReader) leave() { r.nest-- }

// block reads [<<label>>] [DECLARE decls] BEGIN stmts [EXCEPTION
// handlers] END [label], without the ';' after it.
func (r *plReader) block() bool {
	if !r.enter() {
		return false
	}
	defer r.leave()
	if !r.label() {
		return false
	}
	if r.word(r.i, "declare") {
		r.i++
		for !r.word(r.i, "begin") {
			if !r.decl() {
				return false
			}
		}
	}
	if !r.expect("begin") || !r.stmts("end", "exception") {
		return false
	}
	if r.word(r.i, "exception") {
		r.i++
		for r.word(r.i, "when") {
			// Conditions: names, OR, SQLSTATE '…'; nothing runs.
			j := r.until(false, "then")
			if j < 0 {
				return false
			}
			for k := r.i + 1; k < j; k++ {
				if t := r.toks[k]; t.kind != kWord && t.kind != kString {
					return false
				}
			}
			r.i = j + 1
			if !r.stmts("when", "end") {
				return false
			}
		}
	}
	if !r.expect("end") {
		return false
	}
	r.endLabel()
	return true
}

// decl reads one declaration: DECLARE again, a <<label>>, name ALIAS FOR
// …, or name [CONSTANT] type [COLLATE c] [NOT NULL] [{DEFAULT | := | =}
// expr]. A cursor is a change.
func (r *plReader) decl() bool {
	if r.word(r.i, "declare") {
		r.i++
		return true
	}
	if r.other(r.i, '<') {
		start := r.i
		return r.label() && r.i > start
	}
	j := r.until(true)
	if j < 0 {
		return false
	}
	for m := r.i + 1; m < j; m++ {
		if t := r.toks[m]; t.kind == kWord && (eqFold(t.text, "cursor") || eqFold(t.text, "refcursor")) {
			return false
		}
	}
	k := r.i + 1
	for ; k < j; k++ {
		if t := r.toks[k]; t.kind == kAssign || t.kind == kOther && t.text == "=" || t.kind == kWord && eqFold(t.text, "default") {
			break
		}
	}
	// The name and type: a domain's check or default runs on assignment.
	typ := r.text(r.i, k)
	if ChangesSession(typ, Postgres) {
		return false
	}
	if refs := RefsOf(typ, Postgres); refs.Meets(r.s) {
		return false
	}
	if k < j && !r.expr(k+1, j) {
		return false
	}
	r.i = j + 1
	return true
}

// stmts reads statements up to one of the words ends (not consumed).
func (r *plReader) stmts(ends ...string) bool {
	for {
		t := r.tok(r.i)
		if t.kind == kEOF {
			return false
		}
		if t.kind == kWord {
			for _, e := range ends {
				if eqFold(t.text, e) {
					return true
				}
			}
		}
		if !r.stmt() {
			return false
		}
	}
}

// sqlStarts are the first words of the SQL statements a body may run:
// queries and writes.
var sqlStarts = set(`select insert update delete with merge values table`)

// stmt reads one statement.
func (r *plReader) stmt() bool {
	if !r.enter() {
		return false
	}
	defer r.leave()
	if r.other(r.i, '<') {
		if !r.label() {
			return false
		}
		t := r.tok(r.i)
		if t.kind != kWord || !inSet(labelled, t.text) {
			return false
		}
	}
	if is, ok := r.assignment(); is {
		return ok
	}
	t := r.tok(r.i)
	if t.kind != kWord {
		return false
	}
	switch w := t.text; {
	case eqFold(w, "begin") || eqFold(w, "declare"):
		return r.block() && r.semi()
	case eqFold(w, "if"):
		return r.ifStmt()
	case eqFold(w, "case"):
		return r.caseStmt()
	case eqFold(w, "loop"):
		r.i++
		return r.loopBody()
	case eqFold(w, "while"):
		r.i++
		return r.exprTo("loop") && r.loopBody()
	case eqFold(w, "for"):
		return r.forStmt()
	case eqFold(w, "foreach"):
		return r.foreachStmt()
	case eqFold(w, "exit") || eqFold(w, "continue"):
		r.i++
		if !r.word(r.i, "when") && r.tok(r.i).kind != kSemi {
			r.endLabel()
		}
		if r.word(r.i, "when") {
			r.i++
			return r.restTo("SELECT ")
		}
		return r.semi()
	case eqFold(w, "return"):
		r.i++
		switch {
		case r.tok(r.i).kind == kSemi:
			r.i++
			return true
		case r.word(r.i, "next"):
			r.i++
			if r.tok(r.i).kind == kSemi {
				r.i++
				return true
			}
			return r.restTo("SELECT ")
		case r.word(r.i, "query"):
			r.i++
			if t := r.tok(r.i); t.kind != kWord || !inSet(sqlStarts, t.text) {
				return false // RETURN QUERY EXECUTE, or what is not read
			}
			return r.sqlTo()
		}
		return r.restTo("SELECT ")
	case eqFold(w, "raise"):
		return r.raise()
	case eqFold(w, "assert") || eqFold(w, "perform"):
		r.i++
		return r.restTo("SELECT ")
	case eqFold(w, "null"):
		r.i++
		return r.semi()
	case eqFold(w, "get"):
		return r.diagnostics()
	case inSet(sqlStarts, w):
		return r.sqlTo()
	}
	return false
}

// labelled are the statements a <<label>> may stand before.
var labelled = set(`begin declare loop while for foreach`)

// assignment reads target := expr or target = expr where one is at r.i:
// a name, qualified or subscripted (the subscripts are read as
// expressions). is reports one there (nothing is consumed where not), ok
// that it reads as harmless.
func (r *plReader) assignment() (is, ok bool) {
	i := r.i
	if k := r.tok(i).kind; k != kWord && k != kIdent {
		return false, false
	}
	i++
	for {
		switch {
		case r.other(i, '.'):
			if k := r.tok(i + 1).kind; k != kWord && k != kIdent {
				return false, false
			}
			i += 2
			continue
		case r.other(i, '['):
			depth := 0
			for ; i < len(r.toks); i++ {
				if r.other(i, '[') {
					depth++
				} else if r.other(i, ']') {
					depth--
					if depth == 0 {
						break
					}
				} else if r.toks[i].kind == kSemi {
					return false, false
				}
			}
			i++
			continue
		}
		break
	}
	if t := r.tok(i); t.kind != kAssign && !(t.kind == kOther && t.text == "=") {
		return false, false
	}
	start := r.i
	r.i = i + 1
	return true, r.expr(start, i) && r.restTo("SELECT ")
}

// ifStmt reads IF expr THEN stmts {ELSIF expr THEN stmts} [ELSE stmts]
// END IF;
func (r *plReader) ifStmt() bool {
	r.i++
	if !r.exprTo("then") || !r.stmts("elsif", "elseif", "else", "end") {
		return false
	}
	for r.word(r.i, "elsif") || r.word(r.i, "elseif") {
		r.i++
		if !r.exprTo("then") || !r.stmts("elsif", "elseif", "else", "end") {
			return false
		}
	}
	if r.word(r.i, "else") {
		r.i++
		if !r.stmts("end") {
			return false
		}
	}
	return r.expect("end") && r.expect("if") && r.semi()
}

// caseStmt reads CASE [expr] WHEN exprs THEN stmts ... [ELSE stmts] END
// CASE;
func (r *plReader) caseStmt() bool {
	r.i++
	if r.word(r.i, "when") {
		r.i++
	} else {
		// CASE x WHEN a runs x IN (a): the operator = resolved against
		// their types, which reading x as a CASE's operand counts.
		j := r.until(false, "when")
		if j < 0 || !r.read("SELECT CASE ", r.i, j) {
			return false
		}
		r.i = j + 1
	}
	for {
		if !r.exprTo("then") || !r.stmts("when", "else", "end") {
			return false
		}
		if !r.word(r.i, "when") {
			break
		}
		r.i++
	}
	if r.word(r.i, "else") {
		r.i++
		if !r.stmts("end") {
			return false
		}
	}
	return r.expect("end") && r.expect("case") && r.semi()
}

// loopBody reads stmts END LOOP [label]; after a loop's LOOP.
func (r *plReader) loopBody() bool {
	if !r.stmts("end") || !r.expect("end") || !r.expect("loop") {
		return false
	}
	r.endLabel()
	return r.semi()
}

// target consumes a loop's target, names separated by commas, up to one
// of the words stops (not consumed).
func (r *plReader) target(stops ...string) bool {
	start := r.i
	for ; r.i < len(r.toks); r.i++ {
		t := r.toks[r.i]
		if t.kind == kWord {
			for _, s := range stops {
				if eqFold(t.text, s) {
					return r.i > start
				}
			}
		}
		if t.kind != kWord && t.kind != kIdent && t.kind != kComma && !(t.kind == kOther && t.text == ".") {
			return false
		}
	}
	return false
}

// forStmt reads FOR target IN [REVERSE] expr .. expr [BY expr] LOOP, or
// FOR target IN query LOOP, and the loop's body. FOR … IN EXECUTE and a
// loop over a cursor are changes.
func (r *plReader) forStmt() bool {
	r.i++
	if !r.target("in") {
		return false
	}
	r.i++
	j := r.until(false, "loop")
	if j < 0 || j == r.i {
		return false
	}
	a := r.i
	dots := -1
	depth := 0
	for k := a; k+1 < j; k++ {
		switch r.toks[k].kind {
		case kOpen:
			depth++
		case kClose:
			depth--
		}
		if depth == 0 && r.other(k, '.') && r.other(k+1, '.') && r.toks[k+1].end == r.toks[k].end+1 {
			dots = k
			break
		}
	}
	if dots < 0 {
		if t := r.toks[a]; t.kind != kWord || !inSet(sqlStarts, t.text) {
			return false
		}
		if !r.sql(a, j) {
			return false
		}
	} else {
		if r.word(a, "reverse") {
			a++
		}
		by := j
		for k := dots + 2; k < j; k++ {
			if r.word(k, "by") {
				by = k
				break
			}
		}
		if !r.expr(a, dots) || !r.expr(dots+2, by) || by < j && !r.expr(by+1, j) {
			return false
		}
	}
	r.i = j + 1
	return r.loopBody()
}

// foreachStmt reads FOREACH target [SLICE n] IN ARRAY expr LOOP and the
// loop's body.
func (r *plReader) foreachStmt() bool {
	r.i++
	if !r.target("slice", "in") {
		return false
	}
	if r.word(r.i, "slice") {
		if r.tok(r.i+1).kind != kWord {
			return false
		}
		r.i += 2
	}
	return r.expect("in") && r.expect("array") && r.exprTo("loop") && r.loopBody()
}

// raiseLevels are RAISE's levels.
var raiseLevels = set(`debug log info notice warning exception`)

// raise reads RAISE [level] ['format' [, expr ...] | SQLSTATE '…' |
// condition] [USING option = expr [, ...]];
func (r *plReader) raise() bool {
	r.i++
	if r.tok(r.i).kind == kSemi {
		r.i++
		return true // re-raise in a handler
	}
	if t := r.tok(r.i); t.kind == kWord && inSet(raiseLevels, t.text) {
		r.i++
	}
	switch t := r.tok(r.i); {
	case t.kind == kString:
		r.i++
		if r.tok(r.i).kind == kComma {
			r.i++
			j := r.until(true, "using")
			if j < 0 || !r.expr(r.i, j) {
				return false
			}
			r.i = j
		}
	case r.word(r.i, "sqlstate"):
		if r.tok(r.i+1).kind != kString {
			return false
		}
		r.i += 2
	case r.word(r.i, "using"):
	case t.kind == kWord || t.kind == kIdent:
		r.i++ // a condition's name
	}
	if r.word(r.i, "using") {
		r.i++
		return r.restTo("SELECT ")
	}
	return r.semi()
}

// diagnostics reads GET [CURRENT | STACKED] DIAGNOSTICS var = item [,
// ...]; which runs nothing.
func (r *plReader) diagnostics() bool {
	r.i++
	if r.word(r.i, "current") || r.word(r.i, "stacked") {
		r.i++
	}
	if !r.expect("diagnostics") {
		return false
	}
	j := r.until(true)
	if j < 0 {
		return false
	}
	for k := r.i; k < j; k++ {
		switch t := r.toks[k]; t.kind {
		case kWord, kIdent, kComma, kAssign:
		case kOther:
			if t.text != "=" && t.text != "." {
				return false
			}
		default:
			return false
		}
	}
	r.i = j + 1
	return true
}
