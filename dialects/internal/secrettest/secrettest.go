// Package secrettest holds what the dialects' tests use to prove that an
// error or a String never shows part of a password.
package secrettest

import "strings"

// LeakedPiece returns a 4-byte piece of password that out shows although
// allowed (what may show: the DSN without its password, and what parsing
// that says) does not, or "". Letters compare without case, ASCII only:
// strings.ToLower would turn invalid UTF-8 into U+FFFD.
func LeakedPiece(out, password, allowed string) string {
	out, allowed, pw := lower(out), lower(allowed), lower(password)
	for i := 0; i+4 <= len(pw); i++ {
		if p := pw[i : i+4]; strings.Contains(out, p) && !strings.Contains(allowed, p) {
			return p
		}
	}
	return ""
}

func lower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}
