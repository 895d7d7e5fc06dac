package connstr

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// parseCases feeds TestParse and the fuzz corpus.
var parseCases = []struct {
	in   string
	want []Attr // Key and Value only
	err  bool
}{
	{in: "", want: nil},
	{in: ";;  ;", want: nil},
	{in: "DSN=pg", want: []Attr{{Key: "DSN", Value: "pg"}}},
	{
		in: "Driver={PostgreSQL Unicode};Server=127.0.0.1;Port=5432;Database=test;",
		want: []Attr{
			{Key: "Driver", Value: "PostgreSQL Unicode"}, {Key: "Server", Value: "127.0.0.1"},
			{Key: "Port", Value: "5432"}, {Key: "Database", Value: "test"},
		},
	},
	{in: "PWD={a}}b;c{d=e f'g\"hé};UID=x", want: []Attr{{Key: "PWD", Value: "a}b;c{d=e f'g\"hé"}, {Key: "UID", Value: "x"}}},
	{in: " UID = x ;", err: true}, // space before '='
	{in: "UID=x; PWD=y", want: []Attr{{Key: "UID", Value: "x"}, {Key: "PWD", Value: "y"}}},
	{in: "PWD=a=b", want: []Attr{{Key: "PWD", Value: "a=b"}}},
	{in: "PWD={}", want: []Attr{{Key: "PWD", Value: ""}}},
	{in: "PWD=", want: []Attr{{Key: "PWD", Value: ""}}},
	{in: "PWD={}}}", want: []Attr{{Key: "PWD", Value: "}"}}},
	{in: "PWD={ a }", want: []Attr{{Key: "PWD", Value: " a "}}},
	{in: "PWD=x}y", want: []Attr{{Key: "PWD", Value: "x}y"}}},
	{in: "Database=日本", want: []Attr{{Key: "Database", Value: "日本"}}},
	{in: "PWD={abc", err: true},
	{in: "PWD={abc}x;", err: true},
	{in: "PWD= {abc}", err: true},
	{in: "justaname", err: true},
	{in: "=x", err: true},
	{in: "a{b=x", err: true},
	{in: "UID=x;PWD={Ž}", err: true}, // U+017D: unixODBC reads '}'
	{in: "UID=x;PWD={👽}", err: true}, // D83D DC7D: the low surrogate ends in 0x7D
	{in: "UID=x;PWD=Ļ", err: true},   // U+013B: ';' outside braces
	{in: "UID=x;PWD={Ļ}", want: []Attr{{Key: "UID", Value: "x"}, {Key: "PWD", Value: "Ļ"}}},
	{in: "UID=x;PWD={Ā}", err: true},    // U+0100: NUL
	{in: "UID=x;PWD=\xff", err: true},   // not UTF-8
	{in: "UID=x;PWD=a\x00b", err: true}, // NUL
	{in: "UI\x01D=x", err: true},
}

func keyValues(attrs []Attr) []Attr {
	out := make([]Attr, len(attrs))
	for i, a := range attrs {
		out[i] = Attr{Key: a.Key, Value: a.Value}
	}
	return out
}

func TestParse(t *testing.T) {
	for _, tc := range parseCases {
		got, err := Parse(tc.in)
		if tc.err {
			if err == nil {
				t.Errorf("Parse(%q) = %q, want an error", tc.in, got)
			} else if !errors.Is(err, ErrSyntax) {
				t.Errorf("Parse(%q) error %v is not ErrSyntax", tc.in, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("Parse(%q): %v", tc.in, err)
			continue
		}
		if !slices.Equal(keyValues(got), tc.want) {
			t.Errorf("Parse(%q) = %q, want %q", tc.in, got, tc.want)
		}
		// Raw reproduces the input, attribute by attribute.
		for _, a := range got {
			if !strings.Contains(tc.in, a.Raw) || !strings.HasPrefix(a.Raw, a.Key+"=") {
				t.Errorf("Parse(%q): Raw %q", tc.in, a.Raw)
			}
		}
		// And Build writes what Parse reads back.
		s, err := Build(got)
		if err != nil {
			t.Errorf("Build(Parse(%q)): %v", tc.in, err)
			continue
		}
		again, err := Parse(s)
		if err != nil || !slices.Equal(keyValues(again), keyValues(got)) {
			t.Errorf("Parse(Build(Parse(%q))) = %q, %v", tc.in, again, err)
		}
	}
}

func TestBraced(t *testing.T) {
	for in, want := range map[string]string{
		"":         "{}",
		"p;w}d":    "{p;w}}d}",
		"}}":       "{}}}}}",
		"{":        "{{}",
		" x ":      "{ x }",
		"é日本Ļ":     "{é日本Ļ}",
		"a'b\"c=d": "{a'b\"c=d}",
	} {
		if got, err := Braced(in); err != nil || got != want {
			t.Errorf("Braced(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"a\x00b", "\xc3", "Ž", "x👽", "一"} {
		if got, err := Braced(in); !errors.Is(err, ErrValue) {
			t.Errorf("Braced(%q) = %q, %v; want ErrValue", in, got, err)
		} else if strings.Contains(err.Error(), in) {
			t.Errorf("Braced(%q) error shows the value: %v", in, err)
		}
	}
}

func TestPlain(t *testing.T) {
	for _, in := range []string{"app", "pd}x", "a b", "x{", "é", "a=b", " lead", "\"q'"} {
		if got, err := Plain(in); err != nil || got != in {
			t.Errorf("Plain(%q) = %q, %v", in, got, err)
		}
	}
	for _, in := range []string{"a;b", "{x", "  {x", "a\x00", "Ļ", "Ž"} {
		if _, err := Plain(in); !errors.Is(err, ErrValue) {
			t.Errorf("Plain(%q) = %v, want ErrValue", in, err)
		}
	}
}

func TestBuildRejectsBadKeys(t *testing.T) {
	for _, k := range []string{"", "a=b", " a", "a ", "a;b", "a{", "a\x00"} {
		if _, err := Build([]Attr{{Key: k, Value: "v"}}); !errors.Is(err, ErrValue) {
			t.Errorf("Build with key %q: %v, want ErrValue", k, err)
		}
	}
}

// FuzzBuild checks that Build never panics, that what it writes Parse
// reads back unchanged, and that its errors never show the value.
func FuzzBuild(f *testing.F) {
	for _, tc := range parseCases {
		attrs, _ := Parse(tc.in)
		for _, a := range attrs {
			f.Add(a.Key, a.Value)
		}
	}
	for _, pw := range []string{"p;w}d{x=y", "}}{{;;", " x ", "Ž", "日本語", "a\x00b", "\xff\xfe"} {
		f.Add("PWD", pw)
	}
	f.Fuzz(func(t *testing.T, key, value string) {
		attrs := []Attr{{Key: "Driver", Value: "x"}, {Key: key, Value: value}, {Key: "UID", Value: "u"}}
		s, err := Build(attrs)
		if err != nil {
			if !errors.Is(err, ErrValue) {
				t.Fatalf("Build error %v is not ErrValue", err)
			}
			if len(value) >= 4 && strings.Contains(err.Error(), value) {
				t.Fatalf("Build error shows the value: %v", err)
			}
			return
		}
		got, err := Parse(s)
		if err != nil {
			t.Fatalf("Parse(Build(%q)) = %v", attrs, err)
		}
		if !slices.Equal(keyValues(got), attrs) {
			t.Fatalf("Parse(Build(%q)) = %q", attrs, got)
		}
		if b, err := Braced(value); err == nil {
			got, err := Parse("PWD=" + b + ";UID=u")
			if err != nil || len(got) != 2 || got[0].Value != value || got[1].Value != "u" {
				t.Fatalf("Braced(%q) = %q reads back as %q, %v", value, b, got, err)
			}
		}
	})
}

// FuzzParse checks that Parse never panics and never shows a braced
// value in an error, whatever surrounds it.
func FuzzParse(f *testing.F) {
	for _, tc := range parseCases {
		f.Add(tc.in, "hunter22")
	}
	f.Fuzz(func(t *testing.T, s, secret string) {
		if len(secret) < 4 || strings.Contains(s, secret) {
			return
		}
		b, err := Braced(secret)
		if err != nil {
			return
		}
		in := s + ";PWD=" + b + ";" + s
		attrs, err := Parse(in)
		if err != nil {
			if strings.Contains(err.Error(), secret) {
				t.Fatalf("Parse(%q) error shows the secret: %v", in, err)
			}
			return
		}
		for _, a := range attrs {
			if strings.Contains(a.Key, secret) {
				t.Fatalf("Parse(%q): the secret ended up in a keyword: %q", in, attrs)
			}
		}
	})
}
