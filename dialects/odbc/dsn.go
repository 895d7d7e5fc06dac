package odbc

import (
	"fmt"
	"strings"

	"github.com/pooldriver/pooldriver/dialects/odbc/connstr"
)

const scheme = "odbc://"

// splitDSN is an odbc:// DSN taken apart: the attributes that reach the
// driver as written, the credentials, and pooldriver's parameters.
type splitDSN struct {
	attrs    []connstr.Attr    // everything but credentials and pool_* attributes, in order
	user     string            // UID, USER or USERNAME
	password string            // PWD or PASSWORD
	params   map[string]string // the pool_* attributes, keys lower-cased
	driver   string            // the DRIVER attribute, or ""
	dsn      string            // the DSN attribute, or ""
	secrets  []string          // the values of attrs that hold a password (isSecretAttr), as written and decoded
}

// isUserKey and isPasswordKey name the attributes drivers take the
// credentials from: UID and PWD everywhere, USER (MariaDB), USERNAME
// (psqlODBC), PASSWORD (both).
func isUserKey(k string) bool {
	return strings.EqualFold(k, "UID") || strings.EqualFold(k, "USER") || strings.EqualFold(k, "USERNAME")
}

func isPasswordKey(k string) bool {
	return strings.EqualFold(k, "PWD") || strings.EqualFold(k, "PASSWORD")
}

// The redaction rule of this dialect: the value of PWD or PASSWORD, in any
// letter case, plain or in braces, is the password pooldriver logs in
// with; the value of any other attribute whose keyword holds PWD or
// PASSWORD (PWD1..3 and PASSWORD1..3 of MySQL Connector/ODBC, a key
// store's password, ...), and of psqlODBC's pqopt when it mentions a
// password (libpq reads password= there), go to the driver as written but
// are secrets too. String() shows each as xxxxx.

// isSecretAttr reports whether an attribute other than the credentials
// holds a password.
func isSecretAttr(a connstr.Attr) bool {
	k := strings.ToUpper(a.Key)
	return strings.Contains(k, "PWD") || strings.Contains(k, "PASSWORD") ||
		k == "PQOPT" && strings.Contains(strings.ToUpper(a.Value), "PASSWORD")
}

// split reads "odbc://" followed by a connection string, or by a data
// source name and optionally ";" and more attributes.
func split(dsn string) (splitDSN, error) {
	if len(dsn) < len(scheme) || !strings.EqualFold(dsn[:len(scheme)], scheme) {
		return splitDSN{}, fmt.Errorf("pooldriver: odbc: DSN must start with %s", scheme)
	}
	rest := dsn[len(scheme):]
	var d splitDSN
	first, tail, _ := strings.Cut(rest, ";")
	if strings.TrimSpace(first) != "" && !strings.Contains(first, "=") {
		// A bare data source name.
		name, err := connstr.Plain(strings.TrimSpace(first))
		if err != nil {
			return splitDSN{}, fmt.Errorf("pooldriver: odbc: invalid data source name: %v", err)
		}
		d.attrs = append(d.attrs, connstr.Attr{Key: "DSN", Value: name, Raw: "DSN=" + name})
		rest = tail
	}
	attrs, err := connstr.Parse(rest)
	if err != nil {
		return splitDSN{}, fmt.Errorf("pooldriver: odbc: %v", err)
	}
	d.params = map[string]string{}
	var userKey, passwordKey string
	for _, a := range attrs {
		lower := strings.ToLower(a.Key)
		switch {
		case strings.HasPrefix(lower, "pool_"):
			d.params[lower] = a.Value
			continue
		case isUserKey(a.Key):
			if userKey != "" {
				return splitDSN{}, fmt.Errorf("pooldriver: odbc: the user is given twice (%s and %s)", userKey, a.Key)
			}
			userKey, d.user = a.Key, a.Value
			continue
		case isPasswordKey(a.Key):
			if passwordKey != "" {
				return splitDSN{}, fmt.Errorf("pooldriver: odbc: the password is given twice (%s and %s)", passwordKey, a.Key)
			}
			passwordKey, d.password = a.Key, a.Value
			continue
		case lower == "filedsn" || lower == "savefile":
			return splitDSN{}, fmt.Errorf("pooldriver: odbc: %s is not supported: use DSN= or DRIVER=", a.Key)
		case isSecretAttr(a):
			d.secrets = append(d.secrets, a.Raw[len(a.Key)+1:], a.Value)
		}
		d.attrs = append(d.attrs, a)
	}
	for _, a := range d.attrs {
		switch strings.ToLower(a.Key) {
		case "driver":
			if d.driver != "" || d.dsn != "" {
				return splitDSN{}, fmt.Errorf("pooldriver: odbc: give one DRIVER or one DSN, not several")
			}
			d.driver = a.Value
		case "dsn":
			if d.driver != "" || d.dsn != "" {
				return splitDSN{}, fmt.Errorf("pooldriver: odbc: give one DRIVER or one DSN, not several")
			}
			d.dsn = a.Value
		}
	}
	return d, nil
}

// base returns the attributes as written, joined, with a trailing ';'
// unless there are none.
func (d *splitDSN) base() string {
	var b strings.Builder
	for _, a := range d.attrs {
		b.WriteString(a.Raw)
		b.WriteByte(';')
	}
	return b.String()
}

// redacted returns the DSN as pooldriver shows it: the attributes as
// written, those that hold a password as KEY=xxxxx, then UID and, if there
// is a password, PWD=xxxxx.
func (d *splitDSN) redacted() string {
	var b strings.Builder
	b.WriteString(scheme)
	for _, a := range d.attrs {
		if isSecretAttr(a) {
			b.WriteString(a.Key + "=xxxxx;")
			continue
		}
		b.WriteString(a.Raw)
		b.WriteByte(';')
	}
	s := b.String()
	if d.user != "" {
		if u, err := connstr.Build([]connstr.Attr{{Key: "UID", Value: d.user}}); err == nil {
			s += u
		} else {
			s += "UID=?;"
		}
	}
	if d.password != "" {
		s += "PWD=xxxxx;"
	}
	return s
}

// credentials returns the UID and PWD attributes for user and password,
// written as the server's driver reads them; empty ones are left out, so
// that a data source's own settings apply. psqlODBC removes braces from PWD
// only, and URL-decodes a PWD without them: UID goes plain, PWD in braces.
// MariaDB's driver removes braces from both, but trims spaces even inside
// them. Other drivers get each value plain when it needs no braces (not
// every driver removes them from every attribute), in braces otherwise. A
// value the driver would read differently is an error, which never contains
// the value.
func credentials(s server, user, password string) (string, error) {
	var b strings.Builder
	if user != "" {
		var v string
		var err error
		switch s {
		case postgres:
			v, err = connstr.Plain(user)
		case mysql:
			v, err = trimmedBraced(user)
		default:
			v, err = connstr.Quote(user)
		}
		if err != nil {
			return "", fmt.Errorf("pooldriver: odbc: the user name cannot be given to the %s driver: %w", s, err)
		}
		b.WriteString("UID=" + v + ";")
	}
	if password != "" {
		var v string
		var err error
		switch s {
		case postgres:
			v, err = connstr.Braced(password)
		case mysql:
			v, err = trimmedBraced(password)
		default:
			v, err = connstr.Quote(password)
		}
		if err != nil {
			return "", fmt.Errorf("pooldriver: odbc: the password cannot be given to the %s driver: %w", s, err)
		}
		b.WriteString("PWD=" + v + ";")
	}
	return b.String(), nil
}

// trimmedBraced is connstr.Braced, refusing leading or trailing spaces,
// which MariaDB Connector/ODBC removes even inside braces.
func trimmedBraced(v string) (string, error) {
	if v != strings.TrimSpace(v) {
		return "", fmt.Errorf("%w: the driver removes leading and trailing spaces", connstr.ErrValue)
	}
	return connstr.Braced(v)
}
