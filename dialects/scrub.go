package dialects

import "strings"

// Scrub replaces every occurrence of each secret in msg with "xxxxx"; pass
// longer secrets first. A secret so short that replacing it would mangle
// the message (and could still leave it guessable) makes the whole message
// go instead.
func Scrub(msg string, secrets ...string) string {
	for _, s := range secrets {
		if s == "" || !strings.Contains(msg, s) {
			continue
		}
		if len(s) < 4 {
			return "(details withheld: they contain a password)"
		}
		msg = strings.ReplaceAll(msg, s, "xxxxx")
	}
	return msg
}
