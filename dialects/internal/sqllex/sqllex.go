// Package sqllex holds what the dialects share to read SQL text without a
// parser: the lexing steps that find where statements start and which
// keyword each starts with, skipping quoted text and comments; and three
// conservative judgements built on a lexer of PostgreSQL's and MySQL's
// quoting and comments, [ChangesSession] (may a text leave state in the
// session?), [CallsOf] (does it run code it does not show: a function
// that is not a known built-in, a procedure, SQL from a string?) and
// [TxEffectOf] (may it open or end a transaction?).
//
// They are asked after every statement pooldriver runs, so a plain SELECT
// is decided by quick scans, without lexing and without allocating, and
// Of remembers the answers per text (an INSERT's parentheses need the
// lexer once). When a text cannot be lexed with certainty (an unterminated
// quote or comment, a comment inside a MySQL executable comment, a MySQL
// "--" whose reading depends on the character set, a backslash in a string
// whose end then depends on the server's settings), they answer with what
// is safe: the session changed, the transaction state is unknown.
package sqllex

import "strings"

// IsWordByte reports whether c can be part of an unquoted SQL word.
func IsWordByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_'
}

// SkipLine returns the index after the line comment ("--" or "#") that
// starts at s[i], or len(s). MySQL ends it at '\n' only; PostgreSQL (cr)
// at '\n' or '\r': "-- x\rSET ROLE admin" runs the SET there.
func SkipLine(s string, i int, cr bool) int {
	j := strings.IndexByte(s[i:], '\n')
	if cr {
		if k := strings.IndexByte(s[i:], '\r'); k >= 0 && (j < 0 || k < j) {
			j = k
		}
	}
	if j >= 0 {
		return i + j + 1
	}
	return len(s)
}

// SkipQuoted returns the index after the quoted text starting at s[i], or -1
// if it is not terminated. A doubled quote stands for itself; a backslash
// escapes the next byte except inside backquotes (MySQL's default, and
// PostgreSQL's E'...' strings), which is why backslash reports seeing one:
// where such text ends depends on server settings.
func SkipQuoted(s string, i int) (end int, backslash bool) {
	escapes := s[i] != '`'
	end, backslash = skipString(s, i, escapes)
	return end, backslash && escapes
}
