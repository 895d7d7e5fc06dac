package sqllex

import "strings"

// Flavor says whose SQL a text is: which quotes and comments the lexer
// knows, and which statements count as changing a session or a transaction.
type Flavor uint8

const (
	// Postgres is PostgreSQL: '…' strings in which a backslash is literal
	// (standard_conforming_strings, on since 9.1), E'…' strings in which it
	// escapes, B'…' and X'…' strings in which it never does, a string
	// continued by another after white space holding a newline ('a'\n'b',
	// in the first one's mode), "…" identifiers, U&"…" identifiers and
	// U&'…' strings with Unicode escapes (decoded, see unicode.go), $$…$$
	// and $tag$…$tag$ strings (a number ends before a '$': 1$a$ is 1 and a
	// tag), -- comments, which end at '\n' or '\r', and /* */ comments,
	// which nest.
	Postgres Flavor = 1 << iota
	// MySQL is MySQL and MariaDB: '…' and "…" strings in which a backslash
	// escapes (unless NO_BACKSLASH_ESCAPES), but a "…" before '(' is a
	// name called (ANSI_QUOTES), `…` identifiers, # and "-- "
	// comments, which end at '\n' ("--" wants white space or a control
	// byte after it), /* */ comments, which do not nest, and executable
	// comments /*! … */, /*!50000 … */ and /*M!100000 … */, whose text is
	// lexed as statement text whatever the version (the server may run it).
	MySQL
	// others stands for the rules of other databases (SQLite, SQL Server,
	// Oracle) that Any adds.
	others
	// Any is a database of unknown kind, behind a driver pooldriver does not
	// know. A text is lexed both as PostgreSQL and as MySQL, and the rules
	// of both apply, plus a few of other databases'.
	Any = Postgres | MySQL | others
)

// kind is the kind of a token.
type kind uint8

const (
	kEOF    kind = iota
	kWord        // an unquoted word: keyword, name or number
	kIdent       // a quoted identifier; text is what is between the quotes, U&"…" decoded
	kString      // a string literal of any kind
	kSemi        // ';'
	kOpen        // '('
	kClose       // ')'
	kComma       // ','
	kAt          // '@' (MySQL variables)
	kAssign      // ":=" (MySQL assignment)
	kHash        // '#' where it is no comment (SQL Server temporary tables)
	kBad         // text that cannot be lexed with certainty
	kOther       // any other byte; text is that byte
)

type token struct {
	kind kind
	text string
}

// lexer splits a text into tokens, skipping white space and comments.
type lexer struct {
	s  string
	i  int
	my bool // MySQL's rules; PostgreSQL's otherwise

	// escapes: a backslash escapes the next byte in plain strings, as in
	// MySQL by default and in PostgreSQL with standard_conforming_strings
	// off. backslash: a plain string held a backslash, so where it ends,
	// and with it everything after, depends on that setting.
	escapes   bool
	backslash bool

	// exec: inside a MySQL executable comment, whose "*/" ends it.
	exec bool

	// ansi: MySQL under ANSI_QUOTES, where "…" quotes a name, not a
	// string (see SQLMode).
	ansi bool
}

func newLexer(s string, my, escapes bool) lexer {
	return lexer{s: s, my: my, escapes: escapes}
}

// next returns the next token; kEOF at the end, forever.
func (l *lexer) next() token {
	s := l.s
	for l.i < len(s) {
		i := l.i
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v':
			l.i++
		case c == '-' && i+1 < len(s) && s[i+1] == '-' && !l.my:
			l.i = SkipLine(s, i, true)
		case c == '-' && i+1 < len(s) && s[i+1] == '-' && l.my && (i+2 == len(s) || s[i+2] <= ' '):
			// MySQL wants white space or a control byte after "--".
			l.i = SkipLine(s, i, false)
		case c == '-' && i+2 < len(s) && s[i+1] == '-' && l.my && s[i+2] >= 0x7f:
			// Whether that byte is white space or a control byte depends
			// on the connection's character set.
			return l.bad()
		case c == '#' && l.my:
			l.i = SkipLine(s, i, false)
		case c == '*' && l.exec && i+1 < len(s) && s[i+1] == '/':
			l.i, l.exec = i+2, false
		case c == '/' && i+1 < len(s) && s[i+1] == '*':
			if l.my && (l.exec || strings.HasPrefix(s[i+2:], "!") || strings.HasPrefix(s[i+2:], "M!")) {
				if l.exec {
					// MySQL refuses it; MariaDB skips one nested comment
					// in an executable comment it does not run.
					return l.bad()
				}
				l.i, l.exec = execText(s, i), true
				continue
			}
			end := skipBlockComment(s, i, !l.my)
			if end < 0 {
				return l.bad()
			}
			l.i = end
		default:
			return l.token(i, c)
		}
	}
	if l.exec {
		return l.bad() // an executable comment left open
	}
	return token{}
}

func (l *lexer) bad() token {
	l.i, l.exec = len(l.s), false
	return token{kind: kBad}
}

// execText returns the index where the text of the MySQL executable
// comment that starts at s[i] ("/*!" or "/*M!") begins: after its version,
// five or six digits (MariaDB reads six, MySQL five: a sixth digit is left
// out either way, which only ever shows more text than the server runs).
func execText(s string, i int) int {
	j := i + 3
	if s[i+2] == 'M' {
		j++
	}
	n := 0
	for n < 6 && j+n < len(s) && '0' <= s[j+n] && s[j+n] <= '9' {
		n++
	}
	if n >= 5 {
		j += n
	}
	return j
}

// token reads the token that starts with c = l.s[i], which is neither
// white space nor a comment.
func (l *lexer) token(i int, c byte) token {
	s := l.s
	switch {
	case isWordStart(c, l.my):
		// PostgreSQL: a number ends before a '$', which may start a tag.
		number := !l.my && '0' <= c && c <= '9'
		j := i + 1
		for j < len(s) && isWordCont(s[j]) && !(number && s[j] == '$') {
			j++
		}
		if !l.my && j == i+1 && j < len(s) && s[j] == '\'' {
			switch c {
			case 'E', 'e':
				// E'…': a backslash escapes, whatever the settings.
				end, _ := pgString(s, j, true)
				return l.end(i, end, kString)
			case 'B', 'b', 'X', 'x':
				// Bit strings: a backslash is plain, whatever the settings.
				end, _ := pgString(s, j, false)
				return l.end(i, end, kString)
			}
		}
		if !l.my && j == i+1 && (c == 'U' || c == 'u') && j+1 < len(s) && s[j] == '&' && (s[j+1] == '"' || s[j+1] == '\'') {
			return l.unicode(i, j+1)
		}
		l.i = j
		return token{kind: kWord, text: s[i:j]}
	case c == '\'' || c == '"' && l.my && !l.ansi:
		var end int
		var backslash bool
		if l.my {
			end, backslash = skipString(s, i, l.escapes)
			if c == '"' && end > 0 && !backslash && opensCall(s, end) {
				// A string cannot be called: "f"(…) is a call of f
				// under ANSI_QUOTES, which the session may have on,
				// and no valid text otherwise.
				l.i = end
				return token{kind: kIdent, text: s[i+1 : end-1]}
			}
			if c == '"' && backslash {
				// Under ANSI_QUOTES "…" is a name, in which a backslash
				// escapes nothing, while '…' still escapes: a third
				// reading, which neither of the two the lexer tries
				// covers. Where such a text's strings end is in doubt.
				return l.bad()
			}
		} else {
			end, backslash = pgString(s, i, l.escapes)
		}
		l.backslash = l.backslash || backslash
		return l.end(i, end, kString)
	case c == '"' || c == '`' && l.my:
		end, _ := skipString(s, i, false)
		if end < 0 {
			return l.bad()
		}
		l.i = end
		// The name the server reads: a doubled quote is one.
		text := s[i+1 : end-1]
		if q := s[i : i+1]; strings.Contains(text, q+q) {
			text = strings.ReplaceAll(text, q+q, q)
		}
		return token{kind: kIdent, text: text}
	case c == '$' && !l.my:
		if tag := dollarTag(s, i); tag != "" {
			end := strings.Index(s[i+len(tag):], tag)
			if end < 0 {
				return l.bad()
			}
			return l.end(i, i+len(tag)+end+len(tag), kString)
		}
	case c == ':' && i+1 < len(s) && s[i+1] == '=':
		l.i = i + 2
		return token{kind: kAssign, text: s[i : i+2]}
	}
	l.i = i + 1
	k := kOther
	switch c {
	case ';':
		k = kSemi
	case '(':
		k = kOpen
	case ')':
		k = kClose
	case ',':
		k = kComma
	case '@':
		k = kAt
	case '#':
		k = kHash
	}
	return token{kind: k, text: s[i : i+1]}
}

// opensCall reports a '(' at s[i] or after white space.
func opensCall(s string, i int) bool {
	for ; i < len(s); i++ {
		switch s[i] {
		case ' ', '\t', '\n', '\r', '\f', '\v':
		case '(':
			return true
		default:
			return false
		}
	}
	return false
}

// end returns the token of kind k that spans s[i:end], or kBad if end < 0.
func (l *lexer) end(i, end int, k kind) token {
	if end < 0 {
		return l.bad()
	}
	l.i = end
	return token{kind: k, text: l.s[i:end]}
}

// skipString returns the index after the string or quoted identifier whose
// opening quote is s[i], or -1 if it is not terminated. A doubled quote
// stands for itself; with escapes, a backslash escapes the next byte.
// backslash reports a backslash seen without escapes, or one that escaped.
func skipString(s string, i int, escapes bool) (end int, backslash bool) {
	q := s[i]
	for j := i + 1; j < len(s); j++ {
		switch s[j] {
		case '\\':
			backslash = true
			if escapes {
				j++
			}
		case q:
			if j+1 < len(s) && s[j+1] == q {
				j++
				continue
			}
			return j + 1, backslash
		}
	}
	return -1, backslash
}

// pgString is skipString for a PostgreSQL string whose opening quote is
// s[i], with the strings that continue it: a quote after white space (and
// -- comments) holding a newline continues the string in the same mode.
func pgString(s string, i int, escapes bool) (end int, backslash bool) {
	for {
		end, bs := skipString(s, i, escapes)
		backslash = backslash || bs
		if end < 0 {
			return -1, backslash
		}
		if i = continuedAt(s, end); i < 0 {
			return end, backslash
		}
	}
}

// continuedAt returns the index of the quote that continues a PostgreSQL
// string ending before s[end], or -1 if none does.
func continuedAt(s string, end int) int {
	newline := false
	for k := end; k < len(s); {
		switch c := s[k]; {
		case c == '\n' || c == '\r':
			newline = true
			k++
		case c == ' ' || c == '\t' || c == '\f' || c == '\v':
			k++
		case c == '-' && k+1 < len(s) && s[k+1] == '-':
			k = SkipLine(s, k, true)
			newline = newline || k < len(s) // it ended at a newline
		case c == '\'' && newline:
			return k
		default:
			return -1
		}
	}
	return -1
}

// skipBlockComment returns the index after the /* */ comment that starts at
// s[i], or -1 if it is not terminated. PostgreSQL nests them; MySQL ends the
// comment at the first */.
func skipBlockComment(s string, i int, nested bool) int {
	if !nested {
		if end := strings.Index(s[i+2:], "*/"); end >= 0 {
			return i + 2 + end + 2
		}
		return -1
	}
	depth := 0
	for j := i; j+1 < len(s); {
		switch {
		case s[j] == '/' && s[j+1] == '*':
			depth++
			j += 2
		case s[j] == '*' && s[j+1] == '/':
			depth--
			j += 2
			if depth == 0 {
				return j
			}
		default:
			j++
		}
	}
	return -1
}

// dollarTag returns the PostgreSQL dollar-quote delimiter ($$ or $tag$) that
// starts at s[i], or "" if s[i] starts none ($1 is a parameter).
func dollarTag(s string, i int) string {
	for j := i + 1; j < len(s); j++ {
		c := s[j]
		switch {
		case c == '$':
			return s[i : j+1]
		case c >= '0' && c <= '9':
			if j == i+1 {
				return ""
			}
		case c == '_' || isLetter(c) || c >= 0x80:
		default:
			return ""
		}
	}
	return ""
}

func isLetter(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }

// isWordStart: PostgreSQL words start with a letter, '_', a digit (numbers)
// or a non-ASCII byte; MySQL's may also start with '$'.
func isWordStart(c byte, my bool) bool {
	return IsWordByte(c) || c >= 0x80 || my && c == '$'
}

// isWordCont: both continue words with '$' and non-ASCII bytes.
func isWordCont(c byte) bool { return IsWordByte(c) || c >= 0x80 || c == '$' }

// isName reports whether w is made of ASCII word bytes only, as every name
// the rules look for is: a word with '$' or non-ASCII bytes is none of them.
func isName(w string) bool {
	for i := 0; i < len(w); i++ {
		if !IsWordByte(w[i]) {
			return false
		}
	}
	return true
}

// lowerTable maps ASCII upper-case letters to lower case, and every other
// byte to itself.
var lowerTable = func() (t [256]byte) {
	for i := range t {
		t[i] = byte(i)
	}
	for c := 'A'; c <= 'Z'; c++ {
		t[c] = byte(c) + 'a' - 'A'
	}
	return t
}()

// eqFold reports whether w equals lw, which is in lower case, ignoring
// ASCII case.
func eqFold(w, lw string) bool {
	if len(w) != len(lw) {
		return false
	}
	for i := 0; i < len(w); i++ {
		if lowerTable[w[i]] != lw[i] {
			return false
		}
	}
	return true
}

// hasPrefixFold is strings.HasPrefix ignoring ASCII case; lp is in lower
// case.
func hasPrefixFold(w, lp string) bool { return len(w) >= len(lp) && eqFold(w[:len(lp)], lp) }

// containsFold is strings.Contains ignoring ASCII case; ls is in lower case
// and not empty.
func containsFold(w, ls string) bool {
	for i := 0; i+len(ls) <= len(w); i++ {
		if lowerTable[w[i]] == ls[0] && eqFold(w[i:i+len(ls)], ls) {
			return true
		}
	}
	return false
}
