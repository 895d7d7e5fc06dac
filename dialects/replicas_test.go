package dialects

import "testing"

// TestPosition: a position is written as PostgreSQL writes an LSN and read
// back, in either case; anything else is an error.
func TestPosition(t *testing.T) {
	for _, c := range []struct {
		p Position
		s string
	}{{0, "0/0"}, {0x16B3748, "0/16B3748"}, {0x1_0000_0000, "1/0"}, {0xFFFFFFFF_FFFFFFFF, "FFFFFFFF/FFFFFFFF"}} {
		if got := c.p.String(); got != c.s {
			t.Errorf("%#x: %q, want %q", uint64(c.p), got, c.s)
		}
		if got, err := ParsePosition(c.s); err != nil || got != c.p {
			t.Errorf("%q: %v, %v", c.s, got, err)
		}
	}
	if got, err := ParsePosition("a/bc"); err != nil || got != 0xA_0000_00BC {
		t.Errorf("lower case: %v, %v", got, err)
	}
	for _, bad := range []string{"", "0", "/", "0/", "/0", "x/1", "1/-1", "123456789/0", "0/123456789", "+1/0"} {
		if _, err := ParsePosition(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}
