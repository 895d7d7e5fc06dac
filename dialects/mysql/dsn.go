package mysql

import (
	"fmt"
	"net/url"
	"sort"
	"strings"
)

// splitDSN is a go-sql-driver DSN with pooldriver's parameters taken out.
type splitDSN struct {
	driverDSN string            // the DSN without "mysql://" and pool_* parameters
	params    map[string]string // the pool_* parameters, unescaped
	charsets  []string          // the charset parameter, which the driver keeps private
	compress  bool              // the compress parameter, likewise
}

// split removes the pool_* parameters from a go-sql-driver DSN
// (user:pass@tcp(host:3306)/db?k=v&...). Like the driver, it takes the
// parameters to start at the first '?' after the last '/'; every other
// parameter stays exactly as written.
func split(dsn string) (splitDSN, error) {
	d := splitDSN{driverDSN: dsn, params: map[string]string{}}
	slash := strings.LastIndexByte(dsn, '/')
	if slash < 0 {
		return d, nil // the driver reports the missing slash
	}
	q := strings.IndexByte(dsn[slash:], '?')
	if q < 0 {
		return d, nil
	}
	q += slash
	var kept []string
	for pair := range strings.SplitSeq(dsn[q+1:], "&") {
		key, value, _ := strings.Cut(pair, "=")
		if isPasswordParam(key) {
			return splitDSN{}, fmt.Errorf("pooldriver: mysql: invalid DSN: parameter %q: the driver would run it as SET %s = <value> on every connection, which fails with an error quoting the value, or sets the account's password; put the password before the '@' (user:password@tcp(host)/db) or use WithCredentials", key, key)
		}
		switch {
		case strings.HasPrefix(key, "pool_"):
			v, err := url.QueryUnescape(value)
			if err != nil {
				return splitDSN{}, fmt.Errorf("pooldriver: mysql: invalid DSN: parameter %s: invalid escaping", key)
			}
			d.params[key] = v
			continue
		case key == "charset":
			d.charsets = strings.Split(value, ",")
		case key == "compress":
			d.compress = value == "1" || strings.EqualFold(value, "true")
		}
		kept = append(kept, pair)
	}
	d.driverDSN = dsn[:q]
	if len(kept) > 0 {
		d.driverDSN += "?" + strings.Join(kept, "&")
	}
	return d, nil
}

// The redaction rule of this dialect: the password is the text the driver
// reads between the user's ':' and the address's '@'; String() shows it as
// xxxxx and errors are scrubbed of every text that could be it
// (passwordCandidates). The driver reads no password from a parameter: it
// runs every parameter it does not know as SET key = value, so a parameter
// named password, in any letter case, would quote the value in the
// server's syntax error (or set the account's password): split refuses it.

// isPasswordParam reports whether a DSN parameter's key, as the driver
// reads it (raw) or as a reader might decode it, is password in any case.
// Keys are not secrets: the error may quote it.
func isPasswordParam(key string) bool {
	k := strings.TrimSpace(key)
	if u, err := url.QueryUnescape(k); err == nil {
		k = strings.TrimSpace(u)
	}
	return strings.EqualFold(k, "password")
}

// passwordCandidates returns every substring of dsn that the driver could
// take for the password, longest first: for each '@', the text between the
// first ':' and it, and, without any '@', the text between the first ':'
// and each '/'. A malformed DSN can put a password anywhere in the driver's
// reading, so its errors are scrubbed of all of them.
func passwordCandidates(dsn string) []string {
	colon := strings.IndexByte(dsn, ':')
	if colon < 0 {
		return nil
	}
	var out []string
	sep := byte('@')
	if !strings.Contains(dsn[colon:], "@") {
		sep = '/'
	}
	for i := colon + 1; i < len(dsn); i++ {
		if dsn[i] == sep && i > colon+1 {
			out = append(out, dsn[colon+1:i])
		}
	}
	sort.Slice(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out
}
