package postgres

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/jackc/pgx/v5/pgconn"
)

// Custom settings: a name with a dot (app.tenant) that a session sets with
// SET [LOCAL], set_config or a function's SET clause is defined in the
// session from then on, and no command takes the name back: after the
// transaction, RESET ALL or DISCARD ALL, current_setting('app.tenant',
// true) answers '' where a session that never set it answers NULL. The
// server lists such names nowhere (not pg_settings, not SHOW ALL): a
// session can only be asked about a name one knows.
//
// So the names are known on the client: every connection to a server and
// database (shared as the catalog is, by catalogKey) defines every name any
// of them defined, to '' (what a set name answers once its transaction or
// a reset ended), before its next statement: a reused session then answers
// as a new one, whoever set what. The names come from
//
//   - the text of every statement a connection runs (noteCustom): SET,
//     SET LOCAL, SET SESSION, RESET and set_config with the name as a
//     literal, wherever they stand (a function body a CREATE writes, an
//     ALTER … SET, over-counting nothing that matters: a name defined
//     on every connection is defined alike);
//   - the SET clauses of the database's functions (pg_proc.proconfig),
//     read with the reset after a session ran a user's code or DDL
//     (mustSee moved), in the reset's own message.
//
// A name no text shows and no SET clause holds (set_config with a name
// that is not a literal, in a statement or a function body) is not known:
// the idiom nullif(current_setting(name, true), '') reads alike there.
//
// A connection defines what it lacks with customSQL: in the reset's
// message where a reset runs (reset.go, carry.go), in a message of its own
// before the next statement otherwise (syncCustom), once per connection
// and new name. It sets each name it lacks with set_config(name, '', true)
// in the message's transaction: the name stays defined, its value '' once
// the transaction ends, and a name the session has (set for the session,
// or by ALTER ROLE … SET) is left alone. A server that refuses a name
// (one under a prefix an extension reserved) turns the defining off for
// its server and database (customNames.off): the names then read as before.

// customNames is the set of custom setting names that connections to one
// server and database defined.
type customNames struct {
	mu    sync.Mutex // guards names, and known's writes
	names []string   // in the order learnt, lower case
	// known: names' members, read without mu; replaced, never changed,
	// under mu (a statement that sets a name learnt already, the RLS
	// pattern's SET LOCAL, only looks).
	known atomic.Pointer[map[string]struct{}]
	n     atomic.Int64 // len(names), read without mu
	off   atomic.Bool  // the server refused a name: define none
}

// customRegistries holds a *customNames per catalogKey.
var customRegistries sync.Map

// customFor returns the names of the server and database key names.
func customFor(key string) *customNames {
	if r, ok := customRegistries.Load(key); ok {
		return r.(*customNames)
	}
	r, _ := customRegistries.LoadOrStore(key, new(customNames))
	return r.(*customNames)
}

// has reports name (lower case) among the names.
func (r *customNames) has(name string) bool {
	if m := r.known.Load(); m != nil {
		_, ok := (*m)[name]
		return ok
	}
	return false
}

// add adds the valid ones of names, and returns how many names there were
// before and are after.
func (r *customNames) add(names []string) (before, after int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	before = len(r.names)
	var next map[string]struct{}
	for _, n := range names {
		n = strings.ToLower(n)
		if r.has(n) || !customName(n) {
			continue
		}
		if _, ok := next[n]; ok {
			continue
		}
		if next == nil {
			next = make(map[string]struct{}, len(r.names)+len(names))
			if m := r.known.Load(); m != nil {
				for k := range *m {
					next[k] = struct{}{}
				}
			}
		}
		next[n] = struct{}{}
		r.names = append(r.names, n)
	}
	if next != nil {
		r.known.Store(&next)
		r.n.Store(int64(len(r.names)))
	}
	return before, len(r.names)
}

// since returns the names from the i-th on.
func (r *customNames) since(i int) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.names[i:]...)
}

// customState is what a connection knows of its custom settings.
type customState struct {
	reg *customNames // its server's and database's names; nil until first needed
	// have: the session defined reg's first have names.
	have int
	// scanned: mustSee when the session last read the functions' SET
	// clauses (see customScanDue).
	scanned uint64
	// last: the last text noteCustom read, where kept (maxLexedText).
	last string
	// pending: what the reset about to run defines (takeCustom).
	pending customDefine
}

// customDefine is what one customSQL statement defines: reg's names up to
// upto, and the functions' SET clauses where scan.
type customDefine struct {
	sql  string
	upto int
	scan bool
}

// customRows returns the first column of res[i]'s rows.
func customRows(res []*pgconn.Result, i int) []string {
	if i < 0 || i >= len(res) {
		return nil
	}
	out := make([]string, 0, len(res[i].Rows))
	for _, row := range res[i].Rows {
		if len(row) > 0 {
			out = append(out, string(row[0]))
		}
	}
	return out
}

// customSQL returns the statement that defines, where the session lacks
// them, names and, where scan, the names the database's functions set in
// their SET clauses (pg_proc.proconfig; those of the catalog's own
// functions, oids under 16384, set none); it returns each name, the
// functions' included. Everything is named in pg_catalog, and run after
// the reset's RESET ALL and DISCARD TEMP: no object of the last user's
// decides what runs.
func customSQL(names []string, scan bool) string {
	var b strings.Builder
	b.WriteString(`SELECT n, CASE WHEN pg_catalog.current_setting(n, true) IS NULL THEN pg_catalog.set_config(n, '', true) END FROM `)
	arr := `'{` + strings.Join(names, ",") + `}'::pg_catalog.text[]`
	if !scan {
		fmt.Fprintf(&b, `pg_catalog.unnest(%s) n`, arr)
		return b.String()
	}
	fmt.Fprintf(&b, `(SELECT pg_catalog.unnest(%s) UNION `+
		`SELECT pg_catalog.lower(pg_catalog.split_part(c, '=', 1)) FROM pg_catalog.pg_proc p, pg_catalog.unnest(p.proconfig) c `+
		`WHERE p.oid OPERATOR(pg_catalog.>=) '16384'::pg_catalog.oid AND p.proconfig IS NOT NULL `+
		`AND pg_catalog.strpos(pg_catalog.split_part(c, '=', 1), '.') OPERATOR(pg_catalog.>) 0) s(n)`, arr)
	return b.String()
}

// customName reports a name PostgreSQL takes for a custom setting's (two
// or more simple identifiers joined by dots), in lower case: such a name
// goes into an array literal as it is.
func customName(n string) bool {
	parts := 0
	start := true
	for i := 0; i < len(n); i++ {
		ch := n[i]
		switch {
		case ch == '.':
			if start {
				return false
			}
			parts++
			start = true
		case ch == '_' || ch >= 'a' && ch <= 'z':
			start = false
		case ch >= '0' && ch <= '9' || ch == '$':
			if start {
				return false
			}
		default:
			return false
		}
	}
	return parts > 0 && !start
}

// appendCustomNames appends to out the custom setting names, in lower
// case, that query's text names where it defines one: after SET (SESSION
// or LOCAL) or RESET, and as set_config's literal first argument.
// Comments and strings are skipped, but for set_config's argument; the
// text of dollar quotes is read as SQL (a function body's SET defines its
// name when the function runs).
func appendCustomNames(out []string, query string) []string {
	l := customLexer{s: query}
	// state: 0 nothing; 1 after SET or RESET (a name may follow, or
	// SESSION/LOCAL); 2 after set_config; 3 after set_config(.
	state := 0
	for {
		tok, kind := l.next()
		if kind == tokEOF {
			return out
		}
		switch {
		case kind == tokWord && (eqFoldASCII(tok, "set") || eqFoldASCII(tok, "reset")):
			state = 1
			continue
		case kind == tokWord && eqFoldASCII(tok, "set_config"):
			state = 2
			continue
		case state == 1 && kind == tokWord && (eqFoldASCII(tok, "session") || eqFoldASCII(tok, "local")):
			continue
		case state == 1 && (kind == tokWord || kind == tokQuoted):
			if name, ok := l.dotted(tok, kind); ok {
				out = append(out, name)
			}
		case state == 2 && kind == tokPunct && tok == "(":
			state = 3
			continue
		case state == 3 && kind == tokString:
			if n := strings.ToLower(tok); customName(n) {
				out = append(out, n)
			}
		}
		state = 0
	}
}

// Kinds of customLexer's tokens.
const (
	tokEOF = iota
	tokWord
	tokQuoted
	tokString
	tokPunct
)

// customLexer reads the tokens of SQL text that customNamesIn needs.
type customLexer struct {
	s string
	i int
}

// next returns the next token: a word (as written), a quoted identifier
// (its name), a string literal (its value, a doubled quote read as one;
// an E string's escapes are not read), or one byte of anything else.
func (l *customLexer) next() (string, int) {
	s := l.s
	for l.i < len(s) {
		ch := s[l.i]
		switch {
		case ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r' || ch == '\f' || ch == '\v':
			l.i++
		case ch == '-' && l.i+1 < len(s) && s[l.i+1] == '-':
			for l.i < len(s) && s[l.i] != '\n' && s[l.i] != '\r' {
				l.i++
			}
		case ch == '/' && l.i+1 < len(s) && s[l.i+1] == '*':
			depth := 0
			for l.i < len(s) {
				if strings.HasPrefix(s[l.i:], "/*") {
					depth++
					l.i += 2
				} else if strings.HasPrefix(s[l.i:], "*/") {
					depth--
					l.i += 2
					if depth == 0 {
						break
					}
				} else {
					l.i++
				}
			}
		case ch == '\'':
			return l.quoted('\''), tokString
		case ch == '"':
			return l.quoted('"'), tokQuoted
		case ch == '$' && l.dollar():
			// a dollar quote's delimiter: its text is read on as SQL
		case ch == '_' || ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || ch >= 0x80:
			j := l.i
			for l.i < len(s) && (s[l.i] == '_' || s[l.i] == '$' || s[l.i] >= 'a' && s[l.i] <= 'z' ||
				s[l.i] >= 'A' && s[l.i] <= 'Z' || s[l.i] >= '0' && s[l.i] <= '9' || s[l.i] >= 0x80) {
				l.i++
			}
			if (s[j] == 'e' || s[j] == 'E') && l.i == j+1 && l.i < len(s) && s[l.i] == '\'' {
				return l.quoted('\''), tokString // E'…': escapes unread; a name has none
			}
			return s[j:l.i], tokWord
		default:
			l.i++
			return s[l.i-1 : l.i], tokPunct
		}
	}
	return "", tokEOF
}

// quoted reads a quoted token from its opening quote q, a doubled q
// standing for one.
func (l *customLexer) quoted(q byte) string {
	s := l.s
	l.i++
	if k := strings.IndexByte(s[l.i:], q); k >= 0 && (l.i+k+1 >= len(s) || s[l.i+k+1] != q) {
		v := s[l.i : l.i+k] // no doubled quote: the text as it is
		l.i += k + 1
		return v
	}
	var b strings.Builder
	for l.i < len(s) {
		if s[l.i] == q {
			if l.i+1 < len(s) && s[l.i+1] == q {
				b.WriteByte(q)
				l.i += 2
				continue
			}
			l.i++
			return b.String()
		}
		b.WriteByte(s[l.i])
		l.i++
	}
	return b.String()
}

// dollar skips a dollar quote's delimiter ($$ or $tag$) at l.i, and
// reports one; a $1 parameter is not.
func (l *customLexer) dollar() bool {
	s := l.s
	j := l.i + 1
	for j < len(s) && (s[j] == '_' || s[j] >= 'a' && s[j] <= 'z' || s[j] >= 'A' && s[j] <= 'Z' || s[j] >= 0x80 ||
		j > l.i+1 && s[j] >= '0' && s[j] <= '9') {
		j++
	}
	if j < len(s) && s[j] == '$' {
		l.i = j + 1
		return true
	}
	l.i++
	return false
}

// dotted reads the rest of a dotted name whose first part is first (a
// word or a quoted identifier's name, kind): the name in lower case, if
// it is a custom setting's.
func (l *customLexer) dotted(first string, kind int) (string, bool) {
	if kind == tokWord {
		// The common case, words joined by dots alone: the text itself.
		start, j := l.i-len(first), l.i
		for j < len(l.s) && l.s[j] == '.' {
			k := j + 1
			for k < len(l.s) && (l.s[k] == '_' || l.s[k] == '$' || l.s[k] >= 'a' && l.s[k] <= 'z' ||
				l.s[k] >= 'A' && l.s[k] <= 'Z' || l.s[k] >= '0' && l.s[k] <= '9') {
				k++
			}
			if k == j+1 {
				break
			}
			j = k
		}
		if j > l.i && (j == len(l.s) || l.s[j] != '"' && l.s[j] != '.' && l.s[j] < 0x80) {
			l.i = j
			n := strings.ToLower(l.s[start:j])
			return n, customName(n)
		}
	}
	parts := []string{first}
	for {
		j := l.i
		for j < len(l.s) && (l.s[j] == ' ' || l.s[j] == '\t' || l.s[j] == '\n' || l.s[j] == '\r') {
			j++
		}
		if j >= len(l.s) || l.s[j] != '.' {
			break
		}
		l.i = j + 1
		tok, kind := l.next()
		if kind != tokWord && kind != tokQuoted {
			return "", false
		}
		parts = append(parts, tok)
	}
	n := strings.ToLower(strings.Join(parts, "."))
	return n, len(parts) > 1 && customName(n)
}

// mentionsSet reports "set" in query, in any case: SET, RESET and
// set_config all hold it.
func mentionsSet(query string) bool {
	for i := 0; i+2 < len(query); i++ {
		if query[i]|0x20 == 's' && query[i+1]|0x20 == 'e' && query[i+2]|0x20 == 't' {
			return true
		}
	}
	return false
}

// eqFoldASCII reports s equal to lower (lower case ASCII), in any case.
func eqFoldASCII(s, lower string) bool {
	if len(s) != len(lower) {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lower[i] {
			return false
		}
	}
	return true
}
