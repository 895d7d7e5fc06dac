package postgres

import (
	"errors"
	"fmt"
	"sort"
	"strings"
)

// splitDSN is the result of separating pooldriver's parameters from a DSN.
type splitDSN struct {
	driverDSN string            // what pgx parses: the DSN without pool_* parameters
	redacted  string            // driverDSN with every password replaced
	params    map[string]string // the pool_* parameters, decoded
	secrets   []string          // the passwords as written and decoded, longest first, to scrub from errors
	execMode  bool              // default_query_exec_mode is set
}

const mask = "xxxxx"

// execModeKey is pgx's parameter for the default query exec mode.
const execModeKey = "default_query_exec_mode"

// The redaction rule of this dialect: the password of a URL's user info,
// and the value of every parameter whose key, percent-decoded, is password
// or sslpassword in any letter case, are secrets. String() shows them as
// xxxxx and every error is scrubbed of them, as written and decoded.
//
// pgx matches keys exactly: to it PASSWORD is no password but a setting,
// which it sends, value and all, to the server in the startup message, and
// the server refuses every connection with "unrecognized configuration
// parameter". So such a key is an error here, before any connection.

// isSecretKey reports whether a parameter's key, decoded, names a password
// in any letter case.
func isSecretKey(k string) bool {
	return strings.EqualFold(k, "password") || strings.EqualFold(k, "sslpassword")
}

// miscasedSecret is the error for a password key that pgx would not read
// as one. The key is a spelling of password or sslpassword: safe to quote.
func miscasedSecret(key string) error {
	want := "password"
	if !strings.EqualFold(key, want) {
		want = "sslpassword"
	}
	return fmt.Errorf("pooldriver: postgres: invalid DSN: parameter %q: keys are case-sensitive, and pgx would send this one with its value to the server as a setting, which refuses it; write %s", key, want)
}

// splitDSN follows pgx's own reading of a DSN (URL when it starts with
// postgres:// or postgresql://, keyword/value otherwise) closely enough to
// find parameters and passwords; pgx remains the judge of validity.
func split(dsn string) (splitDSN, error) {
	lower := strings.ToLower(dsn)
	for _, prefix := range []string{"postgresql://", "postgres://"} {
		if strings.HasPrefix(lower, prefix) {
			// pgx only knows the lower-case scheme.
			return splitURL(prefix, dsn[len(prefix):])
		}
	}
	return splitKeywordValue(dsn)
}

var errTwoAts = errors.New("pooldriver: postgres: invalid DSN: more than one '@' before the host; percent-encode an '@' in the user name or password as %40")

// errAtInPath is for an '@' after the host's '/': an unescaped '/' in the
// password, which pgx (as libpq) ends the user info or the host at. It
// would read app:2024/x@db as host app, port 2024 and database x@db, and
// app:se@cr/et@db as password se, host cr and database et@db: String and
// the pool's name (host:port/database) would show the rest of the password.
var errAtInPath = errors.New("pooldriver: postgres: invalid DSN: an '@' after the host; percent-encode a '/' in the user name or password as %2F, an '@' in the database name as %40")

func splitURL(prefix, rest string) (splitDSN, error) {
	d := splitDSN{params: map[string]string{}}
	var user, redactedUser string
	// As in pgx and libpq: the first '@' before any '/' ends the user info.
	if i := strings.IndexAny(rest, "@/"); i >= 0 && rest[i] == '@' {
		if j := strings.IndexAny(rest[i+1:], "@/"); j >= 0 && rest[i+1+j] == '@' {
			// A second '@' before the host: an unescaped '@' in the user
			// name or password, which pgx would take for part of the host
			// and quote in its errors.
			return splitDSN{}, errTwoAts
		}
		u, pass, hasPass := strings.Cut(rest[:i], ":")
		user, redactedUser = rest[:i+1], u+"@"
		if hasPass && pass != "" {
			redactedUser = u + ":" + mask + "@"
			d.addSecret(pass)
		}
		rest = rest[i+1:]
	}
	base, query, hasQuery := strings.Cut(rest, "?")
	if strings.Contains(base, "@") {
		return splitDSN{}, errAtInPath
	}
	var kept, keptRedacted []string
	if hasQuery {
		for pair := range strings.SplitSeq(query, "&") {
			rawKey, rawValue, _ := strings.Cut(pair, "=")
			key, keyOK := uriDecode(rawKey)
			switch {
			case keyOK && strings.HasPrefix(key, "pool_"):
				v, ok := uriDecode(rawValue)
				if !ok {
					return splitDSN{}, fmt.Errorf("pooldriver: postgres: invalid DSN: parameter %s: invalid percent-encoding", key)
				}
				d.params[key] = v
			case isSecretKey(lenientDecode(rawKey)):
				// Also with a key pgx cannot decode: it refuses the DSN,
				// and its error must not quote the value either.
				if k := lenientDecode(rawKey); k != "password" && k != "sslpassword" {
					return splitDSN{}, miscasedSecret(k)
				}
				d.addSecret(rawValue)
				kept = append(kept, pair)
				keptRedacted = append(keptRedacted, rawKey+"="+mask)
			default:
				d.execMode = d.execMode || keyOK && key == execModeKey
				kept = append(kept, pair)
				keptRedacted = append(keptRedacted, pair)
			}
		}
	}
	d.driverDSN = joinURL(prefix+user+base, kept)
	d.redacted = joinURL(prefix+redactedUser+base, keptRedacted)
	d.sortSecrets()
	return d, nil
}

func joinURL(base string, pairs []string) string {
	if len(pairs) == 0 {
		return base
	}
	return base + "?" + strings.Join(pairs, "&")
}

// uriDecode percent-decodes s, ignoring leading and trailing spaces as libpq
// does. ok is false if s is not valid percent-encoding.
func uriDecode(s string) (string, bool) {
	s = strings.Trim(s, " ")
	if !strings.Contains(s, "%") {
		return s, true
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			b.WriteByte(s[i])
			continue
		}
		if i+2 >= len(s) {
			return "", false
		}
		hi, ok1 := unhex(s[i+1])
		lo, ok2 := unhex(s[i+2])
		if !ok1 || !ok2 {
			return "", false
		}
		b.WriteByte(hi<<4 | lo)
		i += 2
	}
	return b.String(), true
}

// lenientDecode percent-decodes what it can of s, trimmed of spaces as
// uriDecode is, and keeps any malformed escape as written: how a key is
// recognized even in a DSN that pgx will refuse.
func lenientDecode(s string) string {
	s = strings.Trim(s, " ")
	if !strings.Contains(s, "%") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) {
			hi, ok1 := unhex(s[i+1])
			lo, ok2 := unhex(s[i+2])
			if ok1 && ok2 {
				b.WriteByte(hi<<4 | lo)
				i += 2
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

func isSpace(c byte) bool {
	switch c {
	case ' ', '\t', '\n', '\v', '\f', '\r':
		return true
	}
	return false
}

// kvPair is one keyword/value pair; the spans index the original string.
type kvPair struct {
	key        string
	value      string // unescaped
	start, end int    // the whole pair
	valueStart int    // the value as written, quotes included
}

// splitKeywordValue tokenizes a libpq keyword/value string with the rules
// pgx applies. Its errors name positions, never values.
func splitKeywordValue(s string) (splitDSN, error) {
	pairs, err := tokenizeKeywordValue(s)
	if err != nil {
		return splitDSN{}, fmt.Errorf("pooldriver: postgres: invalid keyword/value DSN: %w", err)
	}
	d := splitDSN{params: map[string]string{}}
	var kept, keptRedacted []string
	for _, p := range pairs {
		text := s[p.start:p.end]
		switch {
		case strings.HasPrefix(p.key, "pool_"):
			d.params[p.key] = p.value
		case isSecretKey(p.key):
			if p.key != "password" && p.key != "sslpassword" {
				return splitDSN{}, miscasedSecret(p.key)
			}
			d.addSecret(s[p.valueStart:p.end])
			d.addSecret(p.value)
			kept = append(kept, text)
			keptRedacted = append(keptRedacted, s[p.start:p.valueStart]+mask)
		default:
			d.execMode = d.execMode || p.key == execModeKey
			kept = append(kept, text)
			keptRedacted = append(keptRedacted, text)
		}
	}
	d.driverDSN = strings.Join(kept, " ")
	d.redacted = strings.Join(keptRedacted, " ")
	d.sortSecrets()
	return d, nil
}

func tokenizeKeywordValue(s string) ([]kvPair, error) {
	var pairs []kvPair
	i := 0
	skipSpace := func() {
		for i < len(s) && isSpace(s[i]) {
			i++
		}
	}
	for skipSpace(); i < len(s); skipSpace() {
		start := i
		eq := strings.IndexByte(s[i:], '=')
		if eq < 0 {
			return nil, fmt.Errorf(`missing "=" after the keyword at offset %d`, start)
		}
		key := strings.TrimRight(s[i:i+eq], " \t\n\r\v\f")
		if key == "" || strings.IndexFunc(key, func(r rune) bool { return r < 0x80 && isSpace(byte(r)) }) >= 0 {
			return nil, fmt.Errorf("invalid keyword at offset %d", start)
		}
		i += eq + 1
		skipSpace()
		valueStart := i
		var b strings.Builder
		if i < len(s) && s[i] == '\'' {
			i++
			for {
				if i >= len(s) {
					return nil, fmt.Errorf("unterminated quoted value of the keyword at offset %d", start)
				}
				c := s[i]
				if c == '\'' {
					i++
					break
				}
				if c == '\\' {
					i++
					if i >= len(s) {
						return nil, fmt.Errorf("unterminated quoted value of the keyword at offset %d", start)
					}
					c = s[i]
				}
				b.WriteByte(c)
				i++
			}
		} else {
			for i < len(s) && !isSpace(s[i]) {
				c := s[i]
				if c == '\\' {
					i++
					if i >= len(s) {
						break
					}
					c = s[i]
				}
				b.WriteByte(c)
				i++
			}
		}
		pairs = append(pairs, kvPair{key: key, value: b.String(), start: start, end: i, valueStart: valueStart})
	}
	return pairs, nil
}

func (d *splitDSN) addSecret(s string) {
	if s == "" {
		return
	}
	d.secrets = append(d.secrets, s)
	if v, ok := uriDecode(s); ok && v != s && v != "" {
		d.secrets = append(d.secrets, v)
	}
}

// sortSecrets puts longer secrets first, so that scrubbing one never leaves
// part of a longer one behind.
func (d *splitDSN) sortSecrets() {
	sort.Slice(d.secrets, func(i, j int) bool { return len(d.secrets[i]) > len(d.secrets[j]) })
}
