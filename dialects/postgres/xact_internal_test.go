package postgres

import (
	"strconv"
	"testing"
)

// TestDecimal: decimal answers as strconv.ParseUint does, for the texts a
// transaction's id and a timeline come as and for those around the
// limits.
func TestDecimal(t *testing.T) {
	texts := []string{"", "0", "7", "42", "00012", "-1", "+1", "1a", " 1", "4294967295", "4294967296",
		"18446744073709551615", "18446744073709551616", "99999999999999999999", "123456789012345678901",
		"1844674407370955161", "18446744073709551610"}
	for i := uint64(1); i < 1<<63; i = i*7 + 3 {
		texts = append(texts, strconv.FormatUint(i, 10))
	}
	for _, s := range texts {
		for _, bits := range []uint{32, 64} {
			want, err := strconv.ParseUint(s, 10, int(bits))
			ok := err == nil && s != "" && s[0] != '+'
			got, gotOK := decimal([]byte(s), bits)
			if gotOK != ok || ok && got != want {
				t.Errorf("decimal(%q, %d) = %d, %v; want %d, %v", s, bits, got, gotOK, want, ok)
			}
		}
	}
}
