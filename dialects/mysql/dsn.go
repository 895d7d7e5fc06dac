package mysql

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"sort"
	"strconv"
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
	dsn, err := fromURLForm(dsn)
	if err != nil {
		return splitDSN{}, err
	}
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

// The forms of a DSN after "mysql://", as an error shows them.
const dsnForms = "mysql://user:password@host:3306/db?param=value, or go-sql-driver's mysql://user:password@tcp(host:3306)/db or mysql://user:password@unix(/path/to/socket)/db"

// fromURLForm rewrites a DSN written as a URL, user:password@host:port/db
// (the form of every other database's DSN, and the one a user types
// first), into go-sql-driver's user:password@tcp(host:port)/db, the user
// and password percent-decoded as in any URL. A DSN whose address (between
// the last '@' and the last '/', as the driver reads it) is empty, is
// net(address) or a bare network name (tcp, unix, ...) is go-sql-driver's
// already and comes back as it is. An address that is neither host,
// host:port nor [ipv6]:port is an error that shows the forms and quotes
// nothing (without an '@' it could be a password).
func fromURLForm(dsn string) (string, error) {
	slash := strings.LastIndexByte(dsn, '/')
	if slash < 0 {
		return dsn, nil // the driver reports the missing slash
	}
	at := strings.LastIndexByte(dsn[:slash], '@')
	addr := dsn[at+1 : slash]
	switch addr {
	case "", "tcp", "tcp4", "tcp6", "unix":
		return dsn, nil
	}
	if strings.ContainsAny(addr, "()") {
		return dsn, nil
	}
	if !hostPorts(addr) {
		if at < 0 && strings.Contains(addr, ":") {
			// user:password/db, no '@': go-sql-driver's reading (a
			// network named so) reports it without quoting it.
			return dsn, nil
		}
		return "", fmt.Errorf("pooldriver: mysql: invalid DSN: the address is neither host:port nor net(address); want %s", dsnForms)
	}
	userinfo := ""
	if at >= 0 {
		user, password, hasPassword := strings.Cut(dsn[:at], ":")
		u, err1 := url.PathUnescape(user)
		p, err2 := url.PathUnescape(password)
		if err := errors.Join(err1, err2); err != nil {
			return "", fmt.Errorf("pooldriver: mysql: invalid DSN: the user or password is not valid percent-encoding, as a URL-form DSN (host:port) needs; want %s", dsnForms)
		}
		userinfo = u
		if hasPassword {
			userinfo += ":" + p
		}
		userinfo += "@"
	}
	return userinfo + "tcp(" + addr + ")" + dsn[slash:], nil
}

// hostPorts reports whether addr is hostPort, or a comma-separated list of
// them (several servers, see hosts.go).
func hostPorts(addr string) bool {
	for h := range strings.SplitSeq(addr, ",") {
		if !hostPort(strings.TrimSpace(h)) {
			return false
		}
	}
	return true
}

// hostPort reports whether addr is host, host:port or [ipv6]:port, with
// a port from 1 to 65535.
func hostPort(addr string) bool {
	host, port := addr, ""
	if strings.HasPrefix(addr, "[") || strings.Count(addr, ":") == 1 {
		h, p, err := net.SplitHostPort(addr)
		if err != nil {
			if !strings.HasPrefix(addr, "[") || !strings.HasSuffix(addr, "]") {
				return false
			}
			h, p = addr[1:len(addr)-1], ""
		}
		host, port = h, p
	}
	if host == "" || strings.ContainsAny(host, "@/?# ") || !strings.HasPrefix(addr, "[") && strings.Contains(host, ":") {
		return false
	}
	if port != "" {
		n, err := strconv.Atoi(port)
		return err == nil && n > 0 && n < 65536
	}
	return true
}
