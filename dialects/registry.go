package dialects

import (
	"fmt"
	"sort"
	"strings"
	"sync"
)

var (
	mu       sync.RWMutex // protects registry
	registry = map[string]Dialect{}
)

// knownImports names the package that provides each scheme, so that an error
// about a scheme whose dialect was not imported can say what to import.
var knownImports = map[string]string{
	"postgres":   "github.com/pooldriver/pooldriver/dialects/postgres",
	"postgresql": "github.com/pooldriver/pooldriver/dialects/postgres",
	"mysql":      "github.com/pooldriver/pooldriver/dialects/mysql",
	"odbc":       "github.com/pooldriver/pooldriver/dialects/odbc",
}

// Register makes d the dialect for the given DSN schemes (without "://").
// Registering the same dialect again for a scheme is a no-op; registering a
// different one for a scheme already taken is an error.
func Register(d Dialect, schemes ...string) error {
	if d == nil {
		return fmt.Errorf("pooldriver: dialects.Register: nil dialect")
	}
	if len(schemes) == 0 {
		return fmt.Errorf("pooldriver: dialects.Register(%s): no scheme given", d.Name())
	}
	mu.Lock()
	defer mu.Unlock()
	for _, s := range schemes {
		s = strings.ToLower(s)
		if old, ok := registry[s]; ok && old != d {
			return fmt.Errorf("pooldriver: scheme %q is already registered by dialect %s", s, old.Name())
		}
	}
	for _, s := range schemes {
		registry[strings.ToLower(s)] = d
	}
	return nil
}

// Lookup returns the dialect registered for scheme. If there is none, the
// error says which import would provide it, or that the scheme is unknown.
func Lookup(scheme string) (Dialect, error) {
	s := strings.ToLower(scheme)
	mu.RLock()
	d, ok := registry[s]
	mu.RUnlock()
	if ok {
		return d, nil
	}
	if path, known := knownImports[s]; known {
		return nil, fmt.Errorf("pooldriver: the %s dialect is not registered: add the import _ %q", s, path)
	}
	return nil, fmt.Errorf("pooldriver: unknown DSN scheme %q (known: %s)", scheme, strings.Join(knownSchemes(), ", "))
}

func knownSchemes() []string {
	seen := map[string]bool{}
	for s := range knownImports {
		seen[s] = true
	}
	mu.RLock()
	for s := range registry {
		seen[s] = true
	}
	mu.RUnlock()
	out := make([]string, 0, len(seen))
	for s := range seen {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

// SchemeOf returns the scheme a DSN names and whether it has one. A DSN
// without "scheme://" that is made of key=value pairs (a PostgreSQL
// keyword/value string such as "host=db user=app") is taken as "postgres".
func SchemeOf(dsn string) (string, bool) {
	if i := strings.Index(dsn, "://"); i > 0 && isScheme(dsn[:i]) {
		return strings.ToLower(dsn[:i]), true
	}
	if isKeywordValue(dsn) {
		return "postgres", true
	}
	return "", false
}

// isKeywordValue reports whether dsn reads as a PostgreSQL keyword/value
// string: it has a '=', and no ';' outside a single-quoted value, where
// an ODBC connection string would separate its pairs. A value is quoted
// when its first character, after the '=' and any spaces, is a quote, and
// inside it a backslash escapes the next character (password='a\';b' is
// one value), as pgx and libpq read it. Outside quotes a backslash escapes
// nothing here: an ODBC path ends with one (DefaultDir=C:\data\;...).
// An unterminated quote is left to pgx to report.
func isKeywordValue(dsn string) bool {
	if !strings.Contains(dsn, "=") {
		return false
	}
	for i := 0; i < len(dsn); i++ {
		switch dsn[i] {
		case ';':
			return false
		case '=':
			j := i + 1
			for j < len(dsn) && strings.IndexByte(" \t\n\r\v\f", dsn[j]) >= 0 {
				j++
			}
			if j == len(dsn) || dsn[j] != '\'' {
				continue
			}
			for j++; j < len(dsn) && dsn[j] != '\''; j++ {
				if dsn[j] == '\\' {
					j++
				}
			}
			i = j // the closing quote, or past the end
		}
	}
	return true
}

func isScheme(s string) bool {
	for i, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z':
		case i > 0 && (r >= '0' && r <= '9' || r == '+' || r == '-' || r == '.'):
		default:
			return false
		}
	}
	return true
}
