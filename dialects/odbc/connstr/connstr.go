// Package connstr reads and writes ODBC connection strings
// ("Driver={PostgreSQL Unicode};Server=db;UID=app;PWD={p;w}}d};") the way
// unixODBC's driver manager and the common drivers read them, and refuses
// whatever they would read differently. It is pure Go, so that it can be
// tested and fuzzed without cgo.
//
// A value is written either plain (everything up to the next ';') or in
// braces, where a '}' is doubled. Every reader agrees on those two forms
// only for some values; [Braced] and [Plain] return an error, never an
// altered string, for the others:
//
//   - unixODBC 2.3 finds DSN and DRIVER in a copy of the string that keeps
//     only the low byte of each UTF-16 code unit, so a character such as
//     U+017D ('Ž', low byte '}') or U+013B ('Ļ', low byte ';') would end a
//     value there early, and the rest would be read as more attributes;
//   - the drivers receive UTF-16, so a value must be valid UTF-8;
//   - C strings cannot hold NUL.
//
// Errors never quote the string or any value: a connection string holds a
// password.
package connstr

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// Attr is one keyword=value pair of a connection string.
type Attr struct {
	Key   string
	Value string // decoded: braces removed, "}}" turned into "}"
	Raw   string // as written, "Key=Value" with any braces; set by Parse only
}

// ErrSyntax is matched (errors.Is) by every error Parse returns.
var ErrSyntax = errors.New("invalid ODBC connection string")

// ErrValue is matched by every error Braced, Plain and Build return.
var ErrValue = errors.New("value cannot be written safely in an ODBC connection string")

// Parse splits s into its attributes, in order. It reads as unixODBC's
// driver manager does (attributes separated by ';', spaces before a keyword
// skipped, a value in braces may hold ';' and a doubled '}'), but strictly:
// text that readers could take apart differently is an error rather than a
// guess, namely a keyword that is empty, ends in a space or holds a brace; a
// braced value that is not closed or is followed by anything but ';'; a
// plain value that starts with spaces and then '{'; and a character that
// unixODBC would misread (see the package documentation). Errors say which
// attribute (counting from 1) is wrong, never what it holds.
func Parse(s string) ([]Attr, error) {
	if !utf8.ValidString(s) {
		return nil, fmt.Errorf("%w: not valid UTF-8", ErrSyntax)
	}
	if strings.IndexByte(s, 0) >= 0 {
		return nil, fmt.Errorf("%w: NUL character", ErrSyntax)
	}
	var attrs []Attr
	i := 0
	for n := 1; ; n++ {
		for i < len(s) && (s[i] == ';' || isSpace(s[i])) {
			i++
		}
		if i == len(s) {
			return attrs, nil
		}
		start := i
		eq := strings.IndexByte(s[i:], '=')
		if eq < 0 {
			return nil, fmt.Errorf("%w: attribute %d has no '='", ErrSyntax, n)
		}
		key := s[i : i+eq]
		if err := checkKey(key); err != nil {
			return nil, fmt.Errorf("%w: attribute %d: %v", ErrSyntax, n, err)
		}
		i += eq + 1
		var value string
		braced := i < len(s) && s[i] == '{'
		if braced {
			var b strings.Builder
			j := i + 1
			for {
				if j == len(s) {
					return nil, fmt.Errorf("%w: attribute %d (%s): '{' is never closed", ErrSyntax, n, key)
				}
				if s[j] == '}' {
					if j+1 < len(s) && s[j+1] == '}' {
						b.WriteByte('}')
						j += 2
						continue
					}
					j++
					break
				}
				b.WriteByte(s[j])
				j++
			}
			if j < len(s) && s[j] != ';' {
				return nil, fmt.Errorf("%w: attribute %d (%s): text after the closing '}'", ErrSyntax, n, key)
			}
			value, i = b.String(), j
		} else {
			end := strings.IndexByte(s[i:], ';')
			if end < 0 {
				end = len(s) - i
			}
			value = s[i : i+end]
			if strings.HasPrefix(strings.TrimLeft(value, " \t\r\n\v\f"), "{") {
				// unixODBC reads a plain value, a driver that trims first
				// (MariaDB's) a braced one.
				return nil, fmt.Errorf("%w: attribute %d (%s): spaces before '{'", ErrSyntax, n, key)
			}
			i += end
		}
		if msg := narrowingProblem(value, braced); msg != "" {
			return nil, fmt.Errorf("%w: attribute %d (%s): %s", ErrSyntax, n, key, msg)
		}
		attrs = append(attrs, Attr{Key: key, Value: value, Raw: s[start:i]})
	}
}

func checkKey(key string) error {
	switch {
	case key == "":
		return errors.New("empty keyword")
	case isSpace(key[len(key)-1]):
		return errors.New("space before '='")
	case strings.ContainsAny(key, "{};"):
		return errors.New("brace or ';' in the keyword")
	}
	for i := 0; i < len(key); i++ {
		if key[i] < ' ' || key[i] == 0x7f {
			return errors.New("control character in the keyword")
		}
	}
	if !utf8.ValidString(key) {
		return errors.New("keyword not valid UTF-8")
	}
	if msg := narrowingProblem(key, false); msg != "" {
		return errors.New("keyword: " + msg)
	}
	return nil
}

// Braced returns v in braces with every '}' doubled: the form every reader
// decodes back to v. It fails if v is not valid UTF-8 or holds a character
// that unixODBC would misread.
func Braced(v string) (string, error) {
	if err := checkValue(v, true); err != nil {
		return "", err
	}
	return "{" + strings.ReplaceAll(v, "}", "}}") + "}", nil
}

// Plain returns v unchanged if it can be written without braces: for
// drivers that do not remove braces from some attributes (psqlODBC keeps
// them in UID). It fails if v holds ';', starts with '{' (after spaces),
// is not valid UTF-8, or holds a character that unixODBC would misread.
func Plain(v string) (string, error) {
	if err := checkValue(v, false); err != nil {
		return "", err
	}
	switch {
	case strings.ContainsRune(v, ';'):
		return "", fmt.Errorf("%w: ';' needs braces, which this driver does not remove", ErrValue)
	case strings.HasPrefix(strings.TrimLeft(v, " \t\r\n\v\f"), "{"):
		return "", fmt.Errorf("%w: a leading '{' needs braces, which this driver does not remove", ErrValue)
	}
	return v, nil
}

func checkValue(v string, braced bool) error {
	if !utf8.ValidString(v) {
		return fmt.Errorf("%w: not valid UTF-8", ErrValue)
	}
	if strings.IndexByte(v, 0) >= 0 {
		return fmt.Errorf("%w: it holds a NUL character", ErrValue)
	}
	if msg := narrowingProblem(v, braced); msg != "" {
		return fmt.Errorf("%w: %s", ErrValue, msg)
	}
	return nil
}

// narrowingProblem reports a character of s that unixODBC's driver
// manager would misread. Before looking for DSN and DRIVER it narrows the
// UTF-16 string it was given to one byte per code unit, keeping the low
// byte, so a code unit above 0x7F whose low byte is NUL ends the string,
// and one whose low byte is '}' ends a braced value (';' and '=' a plain
// value or a keyword, '{' starts a braced one).
func narrowingProblem(s string, braced bool) string {
	for _, r := range s {
		if r < 0x80 {
			continue
		}
		units := []uint16{uint16(r)}
		if r > 0xFFFF {
			a, b := utf16.EncodeRune(r)
			units = []uint16{uint16(a), uint16(b)}
		}
		for _, u := range units {
			switch byte(u) {
			case 0:
				return "it holds a character that unixODBC misreads as NUL (a code unit ending in 0x00, such as U+0100)"
			case '}':
				return "it holds a character that unixODBC misreads as '}' (a code unit ending in 0x7D, such as U+017D)"
			case ';', '=', '{':
				if !braced {
					return "it holds a character that unixODBC misreads as ';', '=' or '{' (a code unit ending in 0x3B, 0x3D or 0x7B)"
				}
			}
		}
	}
	return ""
}

func isSpace(c byte) bool {
	switch c {
	case ' ', '\t', '\n', '\v', '\f', '\r':
		return true
	}
	return false
}

// Build writes attrs as a connection string, each value in braces when it
// needs them (it is empty, holds ';', a brace or '=', or starts or ends
// with a space), plain otherwise, and each attribute followed by ';'. It
// fails if a keyword is not one Parse accepts or a value cannot be written.
// Parse(Build(attrs)) returns attrs.
func Build(attrs []Attr) (string, error) {
	var b strings.Builder
	for i, a := range attrs {
		if err := checkKey(a.Key); err != nil || strings.ContainsRune(a.Key, '=') || isSpace(a.Key[0]) {
			if err == nil {
				err = errors.New("'=' or a leading space in the keyword")
			}
			return "", fmt.Errorf("%w: attribute %d: %v", ErrValue, i+1, err)
		}
		v, err := Quote(a.Value)
		if err != nil {
			return "", fmt.Errorf("attribute %d (%s): %w", i+1, a.Key, err)
		}
		b.WriteString(a.Key)
		b.WriteByte('=')
		b.WriteString(v)
		b.WriteByte(';')
	}
	return b.String(), nil
}

// Quote returns v as Build writes it: plain when nothing in it needs
// braces, in braces otherwise. Plain suits drivers that do not remove braces
// from every attribute; braces are the only way to write the rest.
func Quote(v string) (string, error) {
	if needsBraces(v) {
		return Braced(v)
	}
	return Plain(v)
}

func needsBraces(v string) bool {
	return v == "" || strings.ContainsAny(v, ";{}=") || isSpace(v[0]) || isSpace(v[len(v)-1]) ||
		narrowingProblem(v, false) != ""
}
