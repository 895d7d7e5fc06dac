package odbc

import (
	"strings"

	"github.com/pooldriver/pooldriver/dialects/internal/sqllex"
)

// statements returns the first words, upper-cased, of every statement in
// query (at most five per statement; a statement opened by '(' yields
// "SELECT"). ok is false when the text cannot be split with certainty: an
// unterminated quote or comment, a nested or executable comment (MySQL's
// /*! ... */), a dollar-quoted string, or a backslash inside a quoted string
// in a text with a ';' (where that string ends depends on server settings).
func statements(query string, s server) (stmts [][]string, ok bool) {
	i := 0
	atStart := true     // no word of the current statement seen yet
	collecting := false // the words so far are all keywords
	var cur []string
	sawBackslash := false
	flush := func() {
		if len(cur) > 0 {
			stmts = append(stmts, cur)
		}
		cur = nil
		atStart, collecting = true, false
	}
	for i < len(query) {
		c := query[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v':
			i++
		case c == '#' && s == mysql:
			i = sqllex.SkipLine(query, i, false)
		case c == '-' && strings.HasPrefix(query[i:], "--"):
			if s == mysql && i+2 < len(query) && query[i+2] >= 0x7f {
				return nil, false // a comment or not, by the character set
			}
			if s == mysql && i+2 < len(query) && query[i+2] > ' ' {
				if atStart {
					return nil, false
				}
				i++ // MySQL needs a space after "--"; this is a minus
				atStart, collecting = false, false
				continue
			}
			// PostgreSQL ends the comment at '\r' too, MySQL does not; a
			// generic server's line that holds a '\r' is read both ways.
			end := sqllex.SkipLine(query, i, s != mysql)
			if s == generic && end != sqllex.SkipLine(query, i, false) {
				return nil, false
			}
			i = end
		case c == '/' && strings.HasPrefix(query[i:], "/*"):
			if strings.HasPrefix(query[i:], "/*!") || strings.HasPrefix(query[i:], "/*M!") {
				return nil, false // MySQL runs it
			}
			end := strings.Index(query[i+2:], "*/")
			if end < 0 || strings.Contains(query[i+2:i+2+end], "/*") {
				return nil, false // unterminated, or nested (PostgreSQL nests, MySQL does not)
			}
			i += 2 + end + 2
		case c == '$' && s != mysql && isDollarTag(query[i:]):
			return nil, false
		case c == '\'' || c == '"' || c == '`':
			j, backslash := sqllex.SkipQuoted(query, i)
			if j < 0 {
				return nil, false
			}
			sawBackslash = sawBackslash || backslash
			atStart, collecting = false, false
			i = j
		case c == ';':
			flush()
			i++
		case sqllex.IsWordByte(c):
			j := i
			for j < len(query) && sqllex.IsWordByte(query[j]) {
				j++
			}
			if atStart || collecting && len(cur) < 5 {
				cur = append(cur, strings.ToUpper(query[i:j]))
				collecting = true
			}
			atStart = false
			i = j
		case atStart && c == '(':
			cur = append(cur, "SELECT")
			atStart, collecting = false, false
			i++
		case atStart:
			return nil, false // a statement that does not start with a word
		default:
			collecting = false // words after punctuation are not keywords
			i++
		}
	}
	flush()
	if sawBackslash && strings.IndexByte(query, ';') >= 0 {
		return nil, false
	}
	return stmts, true
}

// isDollarTag reports whether s starts with a PostgreSQL dollar-quote tag
// ($$ or $name$); $1 is a parameter.
func isDollarTag(s string) bool {
	for j := 1; j < len(s); j++ {
		c := s[j]
		switch {
		case c == '$':
			return true
		case c >= '0' && c <= '9':
			if j == 1 {
				return false
			}
		case sqllex.IsWordByte(c):
		default:
			return false
		}
	}
	return false
}

// effect is what a statement does to the transaction state when it
// succeeds, with autocommit on.
type effect int

const (
	noEffect effect = iota // opens and ends nothing
	begins                 // opens a transaction (or keeps one open: COMMIT AND CHAIN)
	ends                   // ends the open transaction, if any
	unknown                // may do either: ask the server
)

// mysqlPlain start statements that neither open, end nor implicitly commit
// a transaction in MySQL while autocommit is on.
var mysqlPlain = map[string]bool{
	"SELECT": true, "INSERT": true, "UPDATE": true, "DELETE": true,
	"REPLACE": true, "WITH": true, "VALUES": true, "TABLE": true,
	"SHOW": true, "DESC": true, "DESCRIBE": true, "EXPLAIN": true,
	"HELP": true, "DO": true, "USE": true,
}

// effectOf classifies one statement by its first words.
func effectOf(words []string, s server) effect {
	w := func(i int) string {
		if i < len(words) {
			return words[i]
		}
		return ""
	}
	chained := func() bool {
		for i, x := range words {
			if x == "CHAIN" && (i == 0 || words[i-1] != "NO") {
				return true
			}
		}
		return false
	}
	switch first := w(0); {
	case first == "BEGIN" || first == "START" && w(1) == "TRANSACTION":
		return begins
	case first == "COMMIT" || first == "END" && s != mysql:
		if w(1) == "PREPARED" {
			return noEffect // PostgreSQL: runs outside a transaction
		}
		if chained() {
			return begins
		}
		return ends
	case first == "ROLLBACK" || first == "ABORT" && s != mysql:
		if w(1) == "PREPARED" || w(1) == "TO" || w(2) == "TO" {
			return noEffect // ROLLBACK [WORK] TO SAVEPOINT keeps the transaction
		}
		if chained() {
			return begins
		}
		return ends
	case first == "PREPARE" && w(1) == "TRANSACTION":
		return ends
	case s == mysql:
		if mysqlPlain[first] {
			return noEffect
		}
		return unknown // SET autocommit, DDL (implicit commit), LOCK, XA, CALL, ...
	case first == "CALL" || first == "DO" && s == postgres:
		return unknown // procedures and DO blocks may COMMIT
	}
	return noEffect
}
