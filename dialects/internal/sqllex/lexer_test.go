package sqllex

import (
	"strings"
	"testing"
)

// lexString renders the tokens of s: words as they are, other tokens as
// their kind in brackets.
func lexString(s string, my bool) string { return lexWith(s, my, my) }

// lexWith is lexString under the backslash setting escapes.
func lexWith(s string, my, escapes bool) string {
	l := newLexer(s, my, escapes)
	var out []string
	for {
		t := l.next()
		switch t.kind {
		case kEOF:
			return strings.Join(out, " ")
		case kWord, kOther:
			out = append(out, t.text)
		case kIdent:
			out = append(out, "<ident "+t.text+">")
		case kString:
			out = append(out, "<str>")
		case kBad:
			out = append(out, "<bad>")
		default:
			out = append(out, t.text)
		}
	}
}

func TestLexer(t *testing.T) {
	for _, tc := range []struct {
		s    string
		my   bool
		want string
	}{
		{"SELECT a, b FROM t;", false, "SELECT a , b FROM t ;"},
		{"SELECT 'it''s' || E'\\'' || 'a\\'", false, "SELECT <str> | | <str> | | <str>"},
		{"SELECT $$a'b$$, $x$ $$ $x$, $1", false, "SELECT <str> , <str> , $ 1"},
		{"SELECT $é$x$é$", false, "SELECT <str>"},
		{"SELECT a$b$c", false, "SELECT a$b$c"},
		{"SELECT \"a\"\"b\"", false, "SELECT <ident a\"b>"}, // the name the server reads
		{"SELECT 1 -- x\n/* a /* b */ c */ 2", false, "SELECT 1 2"},
		{"SELECT /* a /* b */", false, "SELECT <bad>"},
		{"SELECT $a$ x", false, "SELECT <bad>"},
		{"SELECT `a``b`, 'a\\'b', \"c\\\"d\"", true, "SELECT <ident a`b> , <str> , <bad>"}, // a backslash in "…": a name under ANSI_QUOTES
		{"SELECT 1 # x\n--\tx\n-- x\n2--3", true, "SELECT 1 2 - - 3"},
		{"SELECT /* a /* b */ 1", true, "SELECT 1"},
		{"SELECT /*!1 */ 1", true, "SELECT 1 1"},
		{"SELECT @x := $y", true, "SELECT @ x := $y"},
		{"SELECT 1 # x", false, "SELECT 1 # x"},
		{"SELECT 'open", true, "SELECT <bad>"},
	} {
		if got := lexString(tc.s, tc.my); got != tc.want {
			t.Errorf("lex(%q, mysql=%v) = %q, want %q", tc.s, tc.my, got, tc.want)
		}
	}
}

// TestLexerFollowsServers: the lexical rules issue 35 lists, each read as
// the server reads it (PostgreSQL 15's scan.l, MariaDB's sql_lex.cc).
// escapes is the backslash setting the text is read under.
func TestLexerFollowsServers(t *testing.T) {
	for _, tc := range []struct {
		s       string
		my      bool
		escapes bool
		want    string
	}{
		// PostgreSQL: -- ends at '\r' as at '\n'.
		{"-- x\rSET ROLE admin", false, false, "SET ROLE admin"},
		{"SELECT 1 -- x\r\nSET x", false, false, "SELECT 1 SET x"},
		// MySQL: # and "-- " end at '\n' only.
		{"-- x\rSET ROLE admin", true, true, ""},
		{"# x\rSET ROLE admin\nSELECT", true, true, "SELECT"},
		{"SELECT 1 -- x\rSET\n2", true, true, "SELECT 1 2"},
		// MySQL: "--" before a space or control byte only; before a byte
		// whose class is the character set's, it cannot be told.
		{"SELECT 1--\x01x\n2", true, true, "SELECT 1 2"},
		{"SELECT 1--2", true, true, "SELECT 1 - - 2"},
		{"SELECT 1 --\x7f'\nSET @x = 1; -- '", true, true, "SELECT 1 <bad>"},
		{"SELECT 1 --\xc2\xa0'\nSET", true, true, "SELECT 1 <bad>"},
		{"SELECT 1 --\x7f'\nSET", false, false, "SELECT 1 SET"},
		// PostgreSQL: nested comments.
		{"/* a /* b */ SET x */ SELECT 1", false, false, "SELECT 1"},
		{"/* a /* b */ SET x */ SELECT 1", true, true, "SET x * / SELECT 1"},
		{"/* /*/ */ x", false, false, "<bad>"}, // "/*/" opens a second level
		// PostgreSQL: dollar quotes; a number ends before '$'.
		{"SELECT $a$ $b$ x $b$ $a$ y", false, false, "SELECT <str> y"},
		{"SELECT 1$a$ $a$; SET ROLE admin; SELECT $a$", false, false, "SELECT 1 <str> ; SET ROLE admin ; SELECT <bad>"},
		{"SELECT 1.5$a$x$a$ y", false, false, "SELECT 1 . 5 <str> y"},
		{"SELECT a1$a$ x", false, false, "SELECT a1$a$ x"},
		{"SELECT $1$a$x$a$ y", false, false, "SELECT $ 1 <str> y"},
		// PostgreSQL: E'…' escapes and B'…'/X'…' never do, whatever the
		// setting; a string continued after a newline keeps its mode.
		{"SELECT E'\\'' x", false, false, "SELECT <str> x"},
		{"SELECT B'\\', '\\'; SET x; --'", false, true, "SELECT <str> , <str>"},
		{"SELECT X'\\' y", false, true, "SELECT <str> y"},
		{"SELECT E'a'\n'\\'' x", false, false, "SELECT <str> x"},
		{"SELECT E'a' -- c\n  '\\'' y", false, false, "SELECT <str> y"},
		{"SELECT E'a' '\\'' x'", false, false, "SELECT <str> <str>"}, // no newline: no continuation
		{"SELECT B'1'\n'\\'; SET x", false, true, "SELECT <str> ; SET x"},
		{"SELECT 'a'\n'b' c", false, false, "SELECT <str> c"},
		// PostgreSQL: U&'…' strings; one continued is not followed.
		{"SELECT U&'\\0041''x' y", false, false, "SELECT <str> y"},
		{"SELECT U&'a'\n'b'", false, false, "SELECT <bad>"},
		// MySQL: backslash escapes, NO_BACKSLASH_ESCAPES both read.
		{"SELECT 'a\\'b' c", true, true, "SELECT <str> c"},
		{"SELECT 'a\\'b' c", true, false, "SELECT <str> b <bad>"},
		// MySQL: executable comments are statement text.
		{"/*!40101 SET NAMES utf8 */ SELECT", true, true, "SET NAMES utf8 SELECT"},
		{"/*!50000SET @x = 1*/", true, true, "SET @ x = 1"},
		{"/*M!100100 SET x */", true, true, "SET x"},
		{"/*!SET x*/", true, true, "SET x"},
		{"/*!123 x*/", true, true, "123 x"},
		{"/*!1000001 x*/", true, true, "1 x"},
		{"SELECT /*! '*/' */ 1", true, true, "SELECT <str> 1"},
		{"SELECT /*! 1 # */\n, 2 */ x", true, true, "SELECT 1 , 2 x"},
		{"SELECT /*! 1 /* c */ 2 */", true, true, "SELECT 1 <bad>"},
		{"SELECT /*! 1", true, true, "SELECT 1 <bad>"},
		{"SELECT 2*/*!3*/1", true, true, "SELECT 2 * 3 1"},
		{"SELECT /*!40101 1 */", false, false, "SELECT"}, // PostgreSQL: a comment
	} {
		if got := lexWith(tc.s, tc.my, tc.escapes); got != tc.want {
			t.Errorf("lex(%q, mysql=%v, escapes=%v) = %q, want %q", tc.s, tc.my, tc.escapes, got, tc.want)
		}
	}
}

func TestFold(t *testing.T) {
	if !eqFold("SeT", "set") || eqFold("sets", "set") || eqFold("se_", "set") {
		t.Error("eqFold")
	}
	if !hasPrefixFold("PG_TEMP_3", "pg_temp") || hasPrefixFold("pg", "pg_temp") {
		t.Error("hasPrefixFold")
	}
	if !containsFold("PG_TRY_ADVISORY_LOCK", "advisory") || containsFold("advisor", "advisory") {
		t.Error("containsFold")
	}
}
