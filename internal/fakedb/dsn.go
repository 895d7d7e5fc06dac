package fakedb

import (
	"context"
	"net/url"
	"strconv"
	"strings"

	"github.com/pooldriver/pooldriver/dialects"
)

// template is a parsed fake DSN: fake://[user[:password]@]server[?app=name].
type template struct {
	server   string
	user     string
	password string
	app      string
}

var _ dialects.Template = (*template)(nil)

// parseDSN parses a fake DSN, returning the pool_* parameters apart.
// Errors show the DSN with its password redacted and never quote any part
// of the password.
func parseDSN(dsn string) (*template, map[string]string, error) {
	red := redact(dsn)
	u, err := url.Parse(dsn)
	if err != nil {
		// Report what is wrong with the redacted DSN; if that parses, the
		// fault lies in the password, which must not be quoted.
		if _, err := url.Parse(red); err != nil {
			if ue, ok := err.(*url.Error); ok {
				err = ue.Err // without the input it quotes
			}
			return nil, nil, errString("fakedb: invalid DSN " + strconv.Quote(red) + ": " + err.Error())
		}
		return nil, nil, errString("fakedb: invalid DSN " + strconv.Quote(red) + ": malformed user or password")
	}
	switch {
	case !strings.EqualFold(u.Scheme, "fake"):
		return nil, nil, errString("fakedb: DSN " + strconv.Quote(red) + " does not start with fake://")
	case u.Opaque != "":
		return nil, nil, errString("fakedb: DSN " + strconv.Quote(red) + ": want fake://[user[:password]@]server")
	case u.Host == "":
		return nil, nil, errString("fakedb: DSN " + strconv.Quote(red) + " names no server")
	case u.Path != "" && u.Path != "/":
		return nil, nil, errString("fakedb: DSN " + strconv.Quote(red) + ": unexpected path " + strconv.Quote(u.Path))
	case u.Fragment != "":
		return nil, nil, errString("fakedb: DSN " + strconv.Quote(red) + ": unexpected fragment")
	}
	t := &template{server: u.Host}
	if u.User != nil {
		t.user = u.User.Username()
		t.password, _ = u.User.Password()
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return nil, nil, errString("fakedb: DSN " + strconv.Quote(red) + ": bad query: " + err.Error())
	}
	params := map[string]string{}
	for k, vs := range q {
		if len(vs) != 1 {
			return nil, nil, errString("fakedb: DSN parameter " + strconv.Quote(k) + " given more than once")
		}
		switch {
		case strings.HasPrefix(k, "pool_"):
			params[k] = vs[0]
		case k == "app":
			t.app = vs[0]
		default:
			return nil, nil, errString("fakedb: unknown DSN parameter " + strconv.Quote(k))
		}
	}
	return t, params, nil
}

// redact replaces the password of a URL-shaped DSN with "xxxxx". It works
// on the raw text, so it also redacts DSNs that url.Parse rejects: the
// password is taken to run from the first ':' after "://" (or the start)
// to the last '@',
// which over-redacts rather than leaks when the DSN is malformed.
func redact(dsn string) string {
	start := 0
	if i := strings.Index(dsn, "://"); i >= 0 {
		start = i + 3
	}
	rest := dsn[start:]
	at := strings.LastIndexByte(rest, '@')
	if at < 0 {
		return dsn
	}
	colon := strings.IndexByte(rest[:at], ':')
	if colon < 0 {
		return dsn
	}
	return dsn[:start+colon+1] + "xxxxx" + rest[at:]
}

// Credentials returns the DSN's user and password.
func (t *template) Credentials() dialects.Credentials {
	return dialects.Credentials{User: t.user, Password: t.password}
}

// String returns the DSN without pool parameters, password redacted.
func (t *template) String() string {
	var b strings.Builder
	b.WriteString("fake://")
	if t.user != "" || t.password != "" {
		if t.password != "" {
			b.WriteString(url.UserPassword(t.user, "xxxxx").String())
		} else {
			b.WriteString(url.User(t.user).String())
		}
		b.WriteByte('@')
	}
	b.WriteString(t.server)
	if t.app != "" {
		b.WriteString("?app=")
		b.WriteString(url.QueryEscape(t.app))
	}
	return b.String()
}

// Open connects to the server named in the DSN, logging in with c.
func (t *template) Open(ctx context.Context, c dialects.Credentials) (dialects.Conn, error) {
	s, err := lookupServer(t.server)
	if err != nil {
		return nil, err
	}
	fc, err := s.connect(ctx, c.User, c.Password, true, t.app)
	if err != nil {
		return nil, err
	}
	return &dialectConn{c: fc}, nil
}
