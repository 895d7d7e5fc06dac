package sqllex

import "testing"

func TestSkipQuoted(t *testing.T) {
	for _, c := range []struct {
		s         string
		end       int
		backslash bool
	}{
		{`'abc' x`, 5, false},
		{`'it''s' x`, 7, false},
		{`'a\'b' x`, 6, true},
		{"`a\\`b", 4, false},
		{`"unterminated`, -1, false},
		{`'trailing\`, -1, true},
	} {
		end, bs := SkipQuoted(c.s, 0)
		if end != c.end || bs != c.backslash {
			t.Errorf("SkipQuoted(%q) = %d, %v; want %d, %v", c.s, end, bs, c.end, c.backslash)
		}
	}
}

func TestSkipLineAndWords(t *testing.T) {
	for _, c := range []struct {
		s    string
		cr   bool
		want int
	}{
		{"-- c\nSELECT", false, 5},
		{"-- c\nSELECT", true, 5},
		{"-- no newline", false, 13},
		{"-- c\rSET\nx", false, 9}, // MySQL: '\r' is inside the comment
		{"-- c\rSET\nx", true, 5},  // PostgreSQL: '\r' ends it
		{"-- c\n\rx", true, 5},
	} {
		if got := SkipLine(c.s, 0, c.cr); got != c.want {
			t.Errorf("SkipLine(%q, cr=%v) = %d, want %d", c.s, c.cr, got, c.want)
		}
	}
	for _, c := range "azAZ09_" {
		if !IsWordByte(byte(c)) {
			t.Errorf("%q is a word byte", c)
		}
	}
	for _, c := range " ;'-(" {
		if IsWordByte(byte(c)) {
			t.Errorf("%q is not a word byte", c)
		}
	}
}
