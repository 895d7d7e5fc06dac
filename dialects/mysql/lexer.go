package mysql

import (
	"strings"

	"github.com/pooldriver/pooldriver/dialects/internal/sqllex"
)

// plainKeywords start statements that can neither open nor end a
// transaction while autocommit is on, nor commit one implicitly.
var plainKeywords = map[string]bool{
	"SELECT": true, "INSERT": true, "UPDATE": true, "DELETE": true,
	"REPLACE": true, "WITH": true, "VALUES": true, "TABLE": true,
	"SHOW": true, "DESC": true, "DESCRIBE": true, "EXPLAIN": true,
	"HELP": true, "DO": true, "USE": true,
}

// mayChangeTx reports whether the statements in query can open, end or
// implicitly commit a transaction, or change autocommit, when autocommit is
// on: true unless every statement starts with a plain keyword (SELECT,
// INSERT, UPDATE, DELETE, ...). It is conservative: executable comments
// (/*! ... */), unknown keywords, text it cannot lex with certainty and
// an empty statement list all count as changing.
func mayChangeTx(query string) bool {
	keywords, ok := statementKeywords(query)
	if !ok || len(keywords) == 0 {
		return true
	}
	for _, k := range keywords {
		if !plainKeywords[k] {
			return true
		}
	}
	return false
}

// statementKeywords returns the first keyword, upper-cased, of every
// statement in query (statements are separated by ';'; a statement opened
// by '(' yields "SELECT"). ok is false when the text cannot be split with
// certainty: an executable comment, an unterminated quote or comment, "--"
// before a byte that the character set decides is a space or not, or a
// ';' anywhere in a text with a backslash inside a quoted string (where that
// string ends depends on the server's sql_mode).
func statementKeywords(query string) (keywords []string, ok bool) {
	heads, ok := statementHeads(query)
	if !ok {
		return nil, false
	}
	for _, h := range heads {
		if h.first == "" {
			return nil, false // not a keyword
		}
		keywords = append(keywords, h.first)
	}
	return keywords, true
}

// stmtHead is how one statement starts.
type stmtHead struct {
	first   string // the first keyword, upper-cased; "" if the statement starts with a quoted name
	second  string // the second word, upper-cased; "" if the next token is not a word
	label   bool   // the first token is followed by ':': the label of a compound statement
	userVar bool   // an '@' outside quotes and comments, after the first token: a variable
}

// statementHeads returns how every statement in query starts, with
// statementKeywords' rules; ok is false when the text cannot be split with
// certainty, or a statement starts with something other than a word, a
// quoted name or '('.
func statementHeads(query string) (heads []stmtHead, ok bool) {
	s := query
	i := 0
	const (
		atFirst  = iota // no token seen yet in the current statement
		atSecond        // after the first token
		inside          // after the second
	)
	at := atFirst
	sawBackslash := false
	for i < len(s) {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v':
			i++
		case c == '#':
			i = sqllex.SkipLine(s, i, false)
		case c == '-' && strings.HasPrefix(s[i:], "--") && (i+2 == len(s) || s[i+2] <= ' '):
			i = sqllex.SkipLine(s, i, false)
		case c == '-' && strings.HasPrefix(s[i:], "--") && s[i+2] >= 0x7f:
			return nil, false // a comment or not, by the character set
		case c == '/' && strings.HasPrefix(s[i:], "/*"):
			if strings.HasPrefix(s[i:], "/*!") || strings.HasPrefix(s[i:], "/*M!") {
				return nil, false // executed by the server
			}
			end := strings.Index(s[i+2:], "*/")
			if end < 0 {
				return nil, false
			}
			i += 2 + end + 2
		case c == '\'' || c == '"' || c == '`':
			j, backslash := sqllex.SkipQuoted(s, i)
			if j < 0 {
				return nil, false
			}
			sawBackslash = sawBackslash || backslash
			if at == atFirst {
				heads = append(heads, stmtHead{})
				at = atSecond
			} else {
				at = inside
			}
			i = j
		case c == ';':
			at = atFirst
			i++
		case at == atFirst && c == '(':
			heads = append(heads, stmtHead{first: "SELECT"})
			at = inside
			i++
		case at == atFirst || at == atSecond && sqllex.IsWordByte(c):
			j := i
			for j < len(s) && sqllex.IsWordByte(s[j]) {
				j++
			}
			if j == i {
				return nil, false // not a keyword
			}
			w := strings.ToUpper(s[i:j])
			if at == atFirst {
				heads = append(heads, stmtHead{first: w})
				at = atSecond
			} else {
				heads[len(heads)-1].second = w
				at = inside
			}
			i = j
		case at == atSecond && c == ':':
			heads[len(heads)-1].label = true
			at = inside
			i++
		case at != atFirst && c == '@':
			heads[len(heads)-1].userVar = true
			at = inside
			i++
		default:
			at = inside
			i++
		}
	}
	if sawBackslash && strings.IndexByte(s, ';') >= 0 {
		// Where the strings end, and so where statements start, depends on
		// NO_BACKSLASH_ESCAPES.
		return nil, false
	}
	return heads, true
}

// hidesChanges reports statements whose effect on the session the server
// may not report (see the package doc): SQL built at run time (EXECUTE,
// EXECUTE IMMEDIATE), compound statements run outside a stored program
// (BEGIN NOT ATOMIC ... END, IF, CASE, LOOP, WHILE, REPEAT, FOR, a labelled
// block), and CALL or LOAD with a variable ('@') in their text. The first
// may take a GET_LOCK or assign a user variable with SELECT ... INTO, which
// MariaDB's session tracker does not report, under any text; CALL assigns
// the user variables given for OUT and INOUT parameters, and LOAD DATA
// those named in its column list, which the tracker does not report
// either. Conservative: a text that cannot be split with certainty counts,
// and so does any '@' in a CALL (an IN parameter or a system variable
// too).
func hidesChanges(query string) bool {
	heads, ok := statementHeads(query)
	if !ok {
		return true
	}
	for _, h := range heads {
		if h.label {
			return true
		}
		switch h.first {
		case "EXECUTE", "IF", "CASE", "LOOP", "WHILE", "REPEAT", "FOR":
			return true
		case "BEGIN":
			if h.second == "NOT" {
				return true
			}
		case "CALL", "LOAD":
			if h.userVar {
				return true
			}
		}
	}
	return false
}

// readKeywords start the statements that write no table: a trigger
// cannot fire.
var readKeywords = map[string]bool{
	"SELECT": true, "VALUES": true, "TABLE": true, "SHOW": true, "DESC": true,
	"DESCRIBE": true, "EXPLAIN": true, "HELP": true, "DO": true, "USE": true,
}

// writes reports a text with a statement that may write a table, and so
// fire a trigger: any statement that does not start with a keyword of
// readKeywords (a text that cannot be split with certainty counts).
// WITH counts, since MySQL 8 lets it start an UPDATE or a DELETE, and so
// does MariaDB's ANALYZE, which runs the statement it explains.
func writes(query string) bool {
	keywords, ok := statementKeywords(query)
	if !ok {
		return true
	}
	for _, k := range keywords {
		if !readKeywords[k] {
			return true
		}
	}
	return false
}

// textFacts is what the dialect's own rules read in a text (see
// mayChangeTx, hidesChanges and writes).
type textFacts struct {
	mayChangeTx  bool
	hidesChanges bool
	writes       bool
}

// textMemo remembers textFacts for the texts seen recently: they are asked
// of every statement.
var textMemo = sqllex.NewMemo(func(query string) textFacts {
	return textFacts{mayChangeTx: mayChangeTx(query), hidesChanges: hidesChanges(query), writes: writes(query)}
})
