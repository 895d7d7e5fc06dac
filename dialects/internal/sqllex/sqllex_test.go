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
	if got := SkipLine("-- c\nSELECT", 0); got != 5 {
		t.Errorf("SkipLine = %d", got)
	}
	if got := SkipLine("-- no newline", 3); got != 13 {
		t.Errorf("SkipLine at end = %d", got)
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
