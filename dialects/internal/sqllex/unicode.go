package sqllex

import (
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// PostgreSQL's Unicode escapes: in a U&"…" identifier or a U&'…' string,
// \hhhh and \+hhhhhh (h a hex digit) stand for a code point, \\ for a backslash, and a
// UESCAPE 'c' clause after the closing quote makes c the escape character
// instead. The rules match names, so an identifier is decoded before they
// see it: U&"set\005fconfig"(…) calls set_config. Text that PostgreSQL
// refuses (a malformed escape, a UESCAPE clause it does not accept) is
// kBad: the server runs none of a text it cannot parse, and the rules then
// answer what is safe.

// unicode reads the U&"…" identifier or U&'…' string that starts at s[i]
// and whose opening quote is s[q], with its UESCAPE clause if any. Between
// the quotes a doubled quote stands for one and a backslash is plain, as in
// a standard string, whatever the settings.
func (l *lexer) unicode(i, q int) token {
	s := l.s
	end, _ := skipString(s, q, false)
	if end < 0 || s[q] == '\'' && continuedAt(s, end) >= 0 {
		return l.bad() // a continued U&'…' string: not followed here
	}
	esc, next, ok := uescape(s, end)
	if !ok {
		return l.bad()
	}
	text, ok := decodeUnicode(s[q+1:end-1], s[q], esc)
	if !ok {
		return l.bad()
	}
	l.i = next
	if s[q] == '\'' {
		return token{kind: kString, text: s[i:next]}
	}
	return token{kind: kIdent, text: text}
}

// uescape reads what follows a Unicode literal that ends before s[end]: a
// UESCAPE 'c' clause gives the escape character c and the index after the
// clause; without one it is the backslash, and end. ok is false for a
// clause PostgreSQL refuses, and for one whose reading would depend on the
// server's settings (a backslash in its string).
func uescape(s string, end int) (esc byte, next int, ok bool) {
	const kw = "uescape"
	k := skipSpaceAndComments(s, end)
	if len(s)-k < len(kw) || !eqFold(s[k:k+len(kw)], kw) || k+len(kw) < len(s) && isWordCont(s[k+len(kw)]) {
		return '\\', end, true
	}
	k = skipSpaceAndComments(s, k+len(kw))
	if k+3 > len(s) || s[k] != '\'' || s[k+2] != '\'' || k+3 < len(s) && s[k+3] == '\'' {
		return 0, 0, false // not a string of exactly one byte
	}
	c := s[k+1]
	switch {
	case isHex(c), c == '+', c == '\'', c == '"', c == '\\', c >= 0x80,
		c == ' ', c == '\t', c == '\n', c == '\r', c == '\f', c == '\v':
		return 0, 0, false
	}
	return c, k + 3, true
}

// skipSpaceAndComments returns the index of the first byte at or after
// s[i] that is neither white space nor inside a comment (PostgreSQL's: --
// and nested /* */). An unterminated comment stops it where it starts, so
// that the lexer finds it and gives up.
func skipSpaceAndComments(s string, i int) int {
	for i < len(s) {
		switch c := s[i]; {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v':
			i++
		case c == '-' && i+1 < len(s) && s[i+1] == '-':
			i = SkipLine(s, i, true)
		case c == '/' && i+1 < len(s) && s[i+1] == '*':
			end := skipBlockComment(s, i, true)
			if end < 0 {
				return i
			}
			i = end
		default:
			return i
		}
	}
	return i
}

// decodeUnicode returns the text of a Unicode literal whose quote is q,
// from raw, what lies between its quotes, with escape character esc: a
// doubled quote becomes one, esc esc becomes esc, esc with four hex digits or + and six
// the code point, UTF-16 surrogate pairs one code point. ok is false where
// PostgreSQL reports an error: any other use of esc, a code point of 0 or
// past U+10FFFF, a surrogate without its pair. It allocates only when raw
// holds esc or a quote.
func decodeUnicode(raw string, q, esc byte) (text string, ok bool) {
	if strings.IndexByte(raw, esc) < 0 && strings.IndexByte(raw, q) < 0 {
		return raw, true
	}
	out := make([]byte, 0, len(raw))
	var high rune // a first surrogate, waiting for the second
	for i := 0; i < len(raw); {
		c := raw[i]
		if c != esc || i+1 < len(raw) && raw[i+1] == esc {
			if high != 0 {
				return "", false
			}
			out = append(out, c)
			if c == q || c == esc {
				i += 2 // a doubled quote, or esc esc
			} else {
				i++
			}
			continue
		}
		var r rune
		if i+1 < len(raw) && raw[i+1] == '+' {
			r, ok = hexRune(raw[i+2:], 6)
			i += 8
		} else {
			r, ok = hexRune(raw[i+1:], 4)
			i += 5
		}
		if !ok || r <= 0 || r > utf8.MaxRune {
			return "", false
		}
		switch {
		case high != 0:
			if !isSurrogate(r, 0xdc00) {
				return "", false
			}
			r, high = utf16.DecodeRune(high, r), 0
		case isSurrogate(r, 0xdc00):
			return "", false
		case isSurrogate(r, 0xd800):
			high = r
			continue
		}
		out = utf8.AppendRune(out, r)
	}
	if high != 0 {
		return "", false
	}
	return string(out), true
}

// isSurrogate reports whether r is a UTF-16 surrogate of the block that
// starts at base: 0xd800 for first ones, 0xdc00 for second ones.
func isSurrogate(r, base rune) bool { return base <= r && r < base+0x400 }

// hexRune reads the n hexadecimal digits s starts with.
func hexRune(s string, n int) (r rune, ok bool) {
	if len(s) < n {
		return 0, false
	}
	for i := 0; i < n; i++ {
		c := s[i]
		switch {
		case '0' <= c && c <= '9':
			r = r<<4 | rune(c-'0')
		case 'a' <= c && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case 'A' <= c && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

func isHex(c byte) bool { return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F' }
