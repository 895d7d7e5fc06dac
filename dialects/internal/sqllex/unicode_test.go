package sqllex

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// unicodeCases feeds the decoding test and the fuzz corpus: the text
// between the quotes of a U&"…" identifier (q '"') or U&'…' string, the
// escape character, and the decoded text; ok false where PostgreSQL
// refuses the literal.
var unicodeCases = []struct {
	raw  string
	q    byte
	esc  byte
	want string
	ok   bool
}{
	{`set_config`, '"', '\\', "set_config", true},
	{`set\005fconfig`, '"', '\\', "set_config", true},
	{`pg\005fadvisory\005flock`, '"', '\\', "pg_advisory_lock", true},
	{`\0073\0065\0074\005F\0063onfig`, '"', '\\', "set_config", true}, // upper-case hex
	{`set\+00005fconfig`, '"', '\\', "set_config", true},
	{`set!005fconfig`, '"', '!', "set_config", true},
	{`set\005fconfig`, '"', '!', `set\005fconfig`, true}, // the backslash is plain
	{`a!!b`, '"', '!', "a!b", true},
	{`a\\b`, '"', '\\', `a\b`, true},
	{`a""b`, '"', '\\', `a"b`, true},
	{`it''s`, '\'', '\\', "it's", true},
	{`\0022`, '"', '\\', `"`, true},
	{`d\0061t\+000061`, '\'', '\\', "data", true},
	{`\00e9t\00E9`, '"', '\\', "été", true},
	{`\D83D\DE00`, '"', '\\', "\U0001F600", true}, // a surrogate pair
	{`\+01F600`, '"', '\\', "\U0001F600", true},
	{`\+10FFFF`, '"', '\\', "\U0010FFFF", true},
	{``, '"', '\\', "", true},

	// Malformed: PostgreSQL reports an error.
	{`\`, '"', '\\', "", false},
	{`a\`, '"', '\\', "", false},
	{`\00`, '"', '\\', "", false},
	{`\005`, '"', '\\', "", false},
	{`\005g`, '"', '\\', "", false},
	{`\x41`, '"', '\\', "", false},
	{`\+`, '"', '\\', "", false},
	{`\+00005`, '"', '\\', "", false},
	{`\+00005g`, '"', '\\', "", false},
	{`\+110000`, '"', '\\', "", false},
	{`\+FFFFFF`, '"', '\\', "", false},
	{`\0000`, '"', '\\', "", false},
	{`\+000000`, '"', '\\', "", false},
	{`\D83D`, '"', '\\', "", false},      // a first surrogate alone
	{`\D83Dx`, '"', '\\', "", false},     // followed by no second one
	{`\D83D\0041`, '"', '\\', "", false}, // followed by no second one
	{`\D83D\\`, '"', '\\', "", false},
	{`\DE00`, '"', '\\', "", false}, // a second surrogate alone
	{`\D83D\D83D`, '"', '\\', "", false},
	{`\""`, '"', '\\', "", false},
	{`a!b`, '"', '!', "", false},
}

func TestDecodeUnicode(t *testing.T) {
	for _, tc := range unicodeCases {
		got, ok := decodeUnicode(tc.raw, tc.q, tc.esc)
		if got != tc.want || ok != tc.ok {
			t.Errorf("decodeUnicode(%q, %q, %q) = %q, %v; want %q, %v", tc.raw, tc.q, tc.esc, got, ok, tc.want, tc.ok)
		}
	}
}

// TestDecodeUnicodeNoAlloc: a literal without escapes or doubled quotes
// costs no allocation.
func TestDecodeUnicodeNoAlloc(t *testing.T) {
	if n := testing.AllocsPerRun(100, func() { _, _ = decodeUnicode("set_config", '"', '\\') }); n != 0 {
		t.Errorf("%v allocations", n)
	}
}

func TestUnicodeLexer(t *testing.T) {
	for _, tc := range []struct{ s, want string }{
		{`SELECT U&"set\005fconfig"('a', 'b', false)`, "SELECT <ident set_config> ( <str> , <str> , false )"},
		{`SELECT u&"set\005fconfig"`, "SELECT <ident set_config>"},
		{`SELECT U&"set!005fconfig" UESCAPE '!'(1)`, "SELECT <ident set_config> ( 1 )"},
		{`SELECT U&"set!005fconfig"uescape'!'`, "SELECT <ident set_config>"},
		{"SELECT U&\"set!005fconfig\" /* c */ -- c\n UEscape /* c */ '!' x", "SELECT <ident set_config> x"},
		{`SELECT U&"a" UESCAPE '!', 1`, "SELECT <ident a> , 1"},
		{`SELECT U&"a""b"`, `SELECT <ident a"b>`},
		{`SELECT U&'\0041', 1`, "SELECT <str> , 1"},
		{`SELECT U&'a\\'; SET x = 1; --'`, "SELECT <str> ; SET x = 1 ;"}, // no backslash escapes the quote
		{`SELECT U&'a\'; SET x = 1; --'`, "SELECT <bad>"},                // a\ is a malformed escape
		{`SELECT U&'a!0041' UESCAPE '!'; SELECT 1`, "SELECT <str> ; SELECT 1"},
		{`SELECT U&'it''s' uescape '!'`, "SELECT <str>"},
		{`SELECT fu&"x"`, `SELECT fu & <ident x>`}, // fu, then &, then a plain identifier
		{`SELECT U & "x"`, `SELECT U & <ident x>`},
		{`SELECT U&"a" uescapes`, `SELECT <ident a> uescapes`},

		// Refused by PostgreSQL.
		{`SELECT U&"a\00" x`, "SELECT <bad>"},
		{`SELECT U&"a`, "SELECT <bad>"},
		{`SELECT U&'a`, "SELECT <bad>"},
		{`SELECT U&"a" UESCAPE`, "SELECT <bad>"},
		{`SELECT U&"a" UESCAPE x`, "SELECT <bad>"},
		{`SELECT U&"a" UESCAPE ''`, "SELECT <bad>"},
		{`SELECT U&"a" UESCAPE '!!'`, "SELECT <bad>"},
		{`SELECT U&"a" UESCAPE ''''`, "SELECT <bad>"},
		{`SELECT U&"a" UESCAPE 'a'`, "SELECT <bad>"},
		{`SELECT U&"a" UESCAPE '+'`, "SELECT <bad>"},
		{`SELECT U&"a" UESCAPE ' '`, "SELECT <bad>"},
		{`SELECT U&"a" UESCAPE '"'`, "SELECT <bad>"},
		{`SELECT U&"a" UESCAPE '\'`, "SELECT <bad>"}, // read either way by the settings
		{`SELECT U&"a" UESCAPE E'!'`, "SELECT <bad>"},
		{`SELECT U&"a" UESCAPE /* '!'`, "SELECT <bad>"},
		{`SELECT U&"a!x" UESCAPE '!'`, "SELECT <bad>"},
	} {
		if got := lexString(tc.s, false); got != tc.want {
			t.Errorf("lex(%q) = %q, want %q", tc.s, got, tc.want)
		}
	}
	// MySQL has no such literals: u, &, a string, whose backslash leaves
	// its end in doubt (a name under ANSI_QUOTES, where it escapes nothing).
	if got, want := lexString(`SELECT U&"set\005fconfig"`, true), "SELECT U & <bad>"; got != want {
		t.Errorf("lex MySQL = %q, want %q", got, want)
	}
}

// unicodeSessionCases are the texts with Unicode escapes whose session
// facts the rules must read as the server does; they join the session
// cases' fuzz corpus.
var unicodeSessionCases = []struct {
	query         string
	pg, my, anyDB bool
}{
	{`SELECT U&"set\005fconfig"('x.y','leak',false)`, true, false, true},
	{`SELECT U&"pg\005fadvisory\005flock"(777001)`, true, false, true},
	{`SELECT U&"set\005fconfig"('x.y', 'v', true)`, false, false, true}, // Any: the MySQL reading is in doubt (a backslash in "…")
	{`SELECT U&"set!005fconfig" UESCAPE '!' ('x.y', 'v', false)`, true, false, true},
	{`SELECT U&"set\+00005fconfig"('x.y', 'v', false)`, true, false, true},
	{`SELECT pg_catalog.U&"pg\005Fadvisory\005Flock"(1)`, true, false, true},
	{`SELECT U&"pg\005fadvisory\005fxact\005flock"(1)`, false, false, true}, // Any: the MySQL reading is in doubt (a backslash in "…")
	{`CREATE TABLE U&"pg\005ftemp".t (a int)`, true, false, true},
	{`SELECT U&"\0070\0067\005f\0061dvisory\005flock"(1)`, true, false, true},
	{`SELECT U&'set_config(1)', U&"col"`, false, false, false},
	{`SELECT U&"a\00"; SET x = 1`, true, true, true},  // the lexer gives up
	{`SELECT U&"set\005fconfig"`, false, false, true}, // Any: the MySQL reading is in doubt (a backslash in "…")
}

func TestChangesSessionUnicode(t *testing.T) {
	for _, tc := range unicodeSessionCases {
		for _, f := range []struct {
			name string
			f    Flavor
			want bool
		}{{"Postgres", Postgres, tc.pg}, {"MySQL", MySQL, tc.my}, {"Any", Any, tc.anyDB}} {
			if got := ChangesSession(tc.query, f.f); got != f.want {
				t.Errorf("ChangesSession(%q, %s) = %v, want %v", tc.query, f.name, got, f.want)
			}
			if got := Of(tc.query, f.f).ChangesSession; got != f.want {
				t.Errorf("Of(%q, %s).ChangesSession = %v, want %v", tc.query, f.name, got, f.want)
			}
		}
	}
}

// TestPrefilterSendsUnicodeToTheLexer: a &" makes the quick scan lex a
// PostgreSQL text that it would pass otherwise, whether or not a U comes
// before it; other uses of & do not.
func TestPrefilterSendsUnicodeToTheLexer(t *testing.T) {
	for _, tc := range []struct {
		q    string
		want bool
	}{
		{`SELECT U&"x"`, true},
		{`SELECT u&"x"`, true},
		{`SELECT U&'x'`, false},
		{`SELECT a & b FROM t`, false},
		{`SELECT 1&2`, false},
		{`SELECT a&"b" FROM t`, true},
		{`&"x"`, true},
		{`SELECT U&`, false},
	} {
		if got := mayChangeSession(tc.q, Postgres); got != tc.want {
			t.Errorf("mayChangeSession(%q, Postgres) = %v, want %v", tc.q, got, tc.want)
		}
		if got := mayChangeSession(tc.q, Any); got != tc.want {
			t.Errorf("mayChangeSession(%q, Any) = %v, want %v", tc.q, got, tc.want)
		}
		if mayChangeSession(tc.q, MySQL) {
			t.Errorf("mayChangeSession(%q, MySQL) = true", tc.q)
		}
	}
}

// FuzzDecodeUnicode: decoding never panics, never makes invalid UTF-8 of
// a valid literal, and lexing it inside a statement never panics.
func FuzzDecodeUnicode(f *testing.F) {
	for _, tc := range unicodeCases[:8] {
		f.Add(tc.raw, tc.esc)
	}
	f.Fuzz(func(t *testing.T, raw string, esc byte) {
		for _, q := range []byte{'"', '\''} {
			// Between the quotes of a literal, every quote is doubled.
			lit := strings.ReplaceAll(raw, string(q), string([]byte{q, q}))
			got, ok := decodeUnicode(lit, q, esc)
			if ok && esc < utf8.RuneSelf && utf8.ValidString(raw) && !utf8.ValidString(got) {
				t.Fatalf("decodeUnicode(%q, %q, %q) = %q: invalid UTF-8", lit, q, esc, got)
			}
			if !ok && got != "" {
				t.Fatalf("decodeUnicode(%q, %q, %q) = %q with ok false", lit, q, esc, got)
			}
		}
		// Lexed inside a statement: no panic, and the text is read to its end.
		for _, q := range []string{`"`, `'`} {
			s := "SELECT U&" + q + strings.ReplaceAll(raw, q, q+q) + q + " UESCAPE '" + string(rune(esc&0x7f)) + "', 1"
			for _, fl := range []Flavor{Postgres, Any} {
				_ = ChangesSession(s, fl)
				_ = TxEffectOf(s, fl)
			}
		}
	})
}
