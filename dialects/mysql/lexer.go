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

// txMemo remembers mayChangeTx for the texts seen recently: it is asked of
// every statement.
var txMemo = sqllex.NewMemo(mayChangeTx)

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
// certainty: an executable comment, an unterminated quote or comment, or a
// ';' anywhere in a text with a backslash inside a quoted string (where that
// string ends depends on the server's sql_mode).
func statementKeywords(query string) (keywords []string, ok bool) {
	s := query
	i := 0
	atStart := true // no keyword seen yet in the current statement
	sawBackslash := false
	for i < len(s) {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v':
			i++
		case c == '#':
			i = sqllex.SkipLine(s, i)
		case c == '-' && strings.HasPrefix(s[i:], "--") && (i+2 == len(s) || s[i+2] <= ' '):
			i = sqllex.SkipLine(s, i)
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
			atStart = false
			i = j
		case c == ';':
			atStart = true
			i++
		default:
			if atStart {
				atStart = false
				if c == '(' {
					keywords = append(keywords, "SELECT")
					i++
					continue
				}
				j := i
				for j < len(s) && sqllex.IsWordByte(s[j]) {
					j++
				}
				if j == i {
					return nil, false // not a keyword
				}
				keywords = append(keywords, strings.ToUpper(s[i:j]))
				i = j
				continue
			}
			i++
		}
	}
	if sawBackslash && strings.IndexByte(s, ';') >= 0 {
		// Where the strings end, and so where statements start, depends on
		// NO_BACKSLASH_ESCAPES.
		return nil, false
	}
	return keywords, true
}
