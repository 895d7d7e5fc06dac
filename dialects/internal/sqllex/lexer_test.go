package sqllex

import (
	"strings"
	"testing"
)

// lexString renders the tokens of s: words as they are, other tokens as
// their kind in brackets.
func lexString(s string, my bool) string {
	l := newLexer(s, my, my)
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
		case kExec:
			out = append(out, "<exec>")
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
		{"SELECT \"a\"\"b\"", false, "SELECT <ident a\"\"b>"},
		{"SELECT 1 -- x\n/* a /* b */ c */ 2", false, "SELECT 1 2"},
		{"SELECT /* a /* b */", false, "SELECT <bad>"},
		{"SELECT $a$ x", false, "SELECT <bad>"},
		{"SELECT `a``b`, 'a\\'b', \"c\\\"d\"", true, "SELECT <ident a``b> , <str> , <str>"},
		{"SELECT 1 # x\n--\tx\n-- x\n2--3", true, "SELECT 1 2 - - 3"},
		{"SELECT /* a /* b */ 1", true, "SELECT 1"},
		{"SELECT /*!1 */ 1", true, "SELECT <exec>"},
		{"SELECT @x := $y", true, "SELECT @ x := $y"},
		{"SELECT 1 # x", false, "SELECT 1 # x"},
		{"SELECT 'open", true, "SELECT <bad>"},
	} {
		if got := lexString(tc.s, tc.my); got != tc.want {
			t.Errorf("lex(%q, mysql=%v) = %q, want %q", tc.s, tc.my, got, tc.want)
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
