package mysql

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/url"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/pooldriver/pooldriver/dialects"
	"github.com/pooldriver/pooldriver/dialects/internal/secrettest"
)

// dsnCases feeds the parse test and the fuzz corpus.
var dsnCases = []struct {
	name     string
	dsn      string
	params   map[string]string
	redacted string
	user     string
	password string
	check    func(t *testing.T, tm *template)
	wantErr  bool
}{
	{
		name:     "basic",
		dsn:      "mysql://app:s3cret@tcp(db:3306)/shop?parseTime=true&pool_max_conns=4",
		params:   map[string]string{"pool_max_conns": "4"},
		redacted: "mysql://app:xxxxx@tcp(db:3306)/shop?parseTime=true",
		user:     "app", password: "s3cret",
		check: func(t *testing.T, tm *template) {
			if !tm.cfg.ParseTime {
				t.Error("parseTime lost")
			}
		},
	},
	{
		name:     "upper-case scheme, many params",
		dsn:      "MYSQL://app:p@ss/w:rd@tcp(db)/shop?pool_mode=session&interpolateParams=true&readTimeout=5s&sql_mode=%27ANSI%27&charset=utf8mb4&pool_min_conns=1",
		params:   map[string]string{"pool_mode": "session", "pool_min_conns": "1"},
		redacted: "mysql://app:xxxxx@tcp(db:3306)/shop?charset=utf8mb4&interpolateParams=true&readTimeout=5s&sql_mode=%27ANSI%27",
		user:     "app", password: "p@ss/w:rd",
		check: func(t *testing.T, tm *template) {
			if !tm.cfg.InterpolateParams || tm.cfg.ReadTimeout.String() != "5s" || tm.cfg.Params["sql_mode"] != "'ANSI'" {
				t.Errorf("params not passed through: %+v", tm.cfg)
			}
			if len(tm.charsets) != 1 || tm.charsets[0] != "utf8mb4" {
				t.Errorf("charsets = %v", tm.charsets)
			}
			if tm.noRawReset != "" {
				t.Errorf("noRawReset = %q", tm.noRawReset)
			}
		},
	},
	{
		name:     "no password, no params",
		dsn:      "mysql://root@tcp(127.0.0.1:3306)/test",
		params:   map[string]string{},
		redacted: "mysql://root@tcp(127.0.0.1:3306)/test",
		user:     "root",
	},
	{
		name:     "escaped pool value",
		dsn:      "mysql://u:hunter22@unix(/run/mysqld.sock)/db?pool_acquire_timeout=1m%2B",
		params:   map[string]string{"pool_acquire_timeout": "1m+"},
		redacted: "mysql://u:xxxxx@unix(/run/mysqld.sock)/db",
		user:     "u", password: "hunter22",
	},
	{
		name:     "tls: no raw reset",
		dsn:      "mysql://u:hunter22@tcp(db:3306)/db?tls=skip-verify",
		params:   map[string]string{},
		redacted: "mysql://u:xxxxx@tcp(db:3306)/db?tls=skip-verify",
		user:     "u", password: "hunter22",
		check: func(t *testing.T, tm *template) {
			if tm.noRawReset == "" {
				t.Error("raw reset allowed with TLS")
			}
		},
	},
	{
		name:     "compression: no raw reset",
		dsn:      "mysql://u:hunter22@tcp(db:3306)/db?compress=true",
		params:   map[string]string{},
		redacted: "mysql://u:xxxxx@tcp(db:3306)/db?compress=true",
		user:     "u", password: "hunter22",
		check: func(t *testing.T, tm *template) {
			if tm.noRawReset == "" {
				t.Error("raw reset allowed with compression")
			}
		},
	},
	// The URL form every other database's DSN has, rewritten to the
	// driver's net(address): the user and password percent-decoded.
	{
		name: "url form", dsn: "mysql://root@127.0.0.1:3306/test?pool_max_conns=3",
		params: map[string]string{"pool_max_conns": "3"}, redacted: "mysql://root@tcp(127.0.0.1:3306)/test", user: "root",
	},
	{
		name: "url form, password percent-encoded", dsn: "mysql://app:p%40ss%2Fw%3A@db.example.com:3307/shop?parseTime=true",
		params: map[string]string{}, redacted: "mysql://app:xxxxx@tcp(db.example.com:3307)/shop?parseTime=true", user: "app", password: "p@ss/w:",
	},
	{
		name: "url form, host only", dsn: "mysql://app:pw@db/shop",
		params: map[string]string{}, redacted: "mysql://app:xxxxx@tcp(db:3306)/shop", user: "app", password: "pw",
	},
	{
		name: "url form, ipv6", dsn: "mysql://app:pw@[::1]:3306/shop",
		params: map[string]string{}, redacted: "mysql://app:xxxxx@tcp([::1]:3306)/shop", user: "app", password: "pw",
	},
	{
		name: "url form, no user", dsn: "mysql://db:3306/shop",
		params: map[string]string{}, redacted: "mysql://tcp(db:3306)/shop",
	},
	{
		name: "unix socket stays", dsn: "mysql://app:pw@unix(/run/mysqld/mysqld.sock)/shop",
		params: map[string]string{}, redacted: "mysql://app:xxxxx@unix(/run/mysqld/mysqld.sock)/shop", user: "app", password: "pw",
	},
	{name: "url form, bad port", dsn: "mysql://u:hunter22@db:99999/x", wantErr: true, password: "hunter22"},
	{name: "url form, port not a number", dsn: "mysql://u:hunter22@db:port/x", wantErr: true, password: "hunter22"},
	{name: "url form, bad escaping", dsn: "mysql://u:hun%zzter22@db:3306/x", wantErr: true, password: "hun%zzter22"},
	// The driver reads no password from a parameter: it would run it as
	// SET password = <value>, whose error quotes the value.
	{name: "password parameter", dsn: "mysql://u@tcp(db)/db?password=hunter22", wantErr: true, password: "hunter22"},
	{name: "PASSWORD parameter", dsn: "mysql://u@tcp(db)/db?parseTime=true&PASSWORD=hunter22&pool_max_conns=2", wantErr: true, password: "hunter22"},
	{name: "Password parameter, percent-encoded", dsn: "mysql://u@tcp(db)/db?Password=hun%74er22", wantErr: true, password: "hunter22"},
	{name: "password parameter, key percent-encoded", dsn: "mysql://u:pw@tcp(db)/db?pass%77ord=hunter22", wantErr: true, password: "hunter22"},
	{name: "bad bool", dsn: "mysql://u:hunter22@tcp(db)/db?parseTime=hunter22", wantErr: true, password: "hunter22"},
	{name: "no slash", dsn: "mysql://u:hunter22@tcp(db)", wantErr: true, password: "hunter22"},
	{name: "no at", dsn: "mysql://u:hunter22/db", wantErr: true, password: "hunter22"},
	{name: "unterminated address", dsn: "mysql://u:hunter22@tcp(db/db", wantErr: true, password: "hunter22"},
	{name: "bad pool escaping", dsn: "mysql://u:hunter22@tcp(db)/db?pool_max_conns=%zz", wantErr: true, password: "hunter22"},
	{name: "bad dbname", dsn: "mysql://u:hunter22@tcp(db)/%zzhunter22", wantErr: true, password: "hunter22"},
	{name: "wrong scheme", dsn: "postgres://u:hunter22@db/x", wantErr: true, password: "hunter22"},
}

func TestParse(t *testing.T) {
	for _, tc := range dsnCases {
		t.Run(tc.name, func(t *testing.T) {
			tmpl, params, err := Dialect.Parse(tc.dsn)
			if tc.wantErr {
				if err == nil {
					t.Fatal("Parse succeeded, want error")
				}
				if strings.Contains(err.Error(), tc.password) {
					t.Fatalf("error shows the password: %v", err)
				}
				if !strings.HasPrefix(err.Error(), "pooldriver: mysql:") {
					t.Errorf("error %q lacks the pooldriver: mysql: prefix", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if !maps.Equal(params, tc.params) {
				t.Errorf("params = %v, want %v", params, tc.params)
			}
			if got := tmpl.String(); got != tc.redacted {
				t.Errorf("String() = %q, want %q", got, tc.redacted)
			}
			if c := tmpl.Credentials(); c.User != tc.user || c.Password != tc.password {
				t.Errorf("Credentials() = %q/%q, want %q/%q", c.User, c.Password, tc.user, tc.password)
			}
			tm := tmpl.(*template)
			for k := range tm.cfg.Params {
				if strings.HasPrefix(k, "pool_") {
					t.Errorf("the driver received %s", k)
				}
			}
			if tc.check != nil {
				tc.check(t, tm)
			}
		})
	}
}

// TestDSNErrorShowsForms: an address the driver could not read (before,
// "default addr for network '127.0.0.1:xxxxx' unknown": the port masked as
// if it were a password) is an error that shows the forms a DSN takes.
func TestDSNErrorShowsForms(t *testing.T) {
	for _, dsn := range []string{"mysql://root:hunter22@127.0.0.1:port/test", "mysql://root:hunter22@db:0/test", "mysql://root:hunter22@a b/test"} {
		_, _, err := Dialect.Parse(dsn)
		if err == nil || !strings.Contains(err.Error(), "user:password@host:3306/db") || !strings.Contains(err.Error(), "tcp(host:3306)") || strings.Contains(err.Error(), "hunter22") {
			t.Errorf("%s: %v, want an error showing both forms and not the password", dsn, err)
		}
	}
}

func TestRegistered(t *testing.T) {
	d, err := dialects.Lookup("mysql")
	if err != nil || d != Dialect {
		t.Errorf("Lookup(mysql) = %v, %v", d, err)
	}
}

func TestOpenErrorHidesPassword(t *testing.T) {
	tmpl, _, err := Dialect.Parse("mysql://app@tcp(127.0.0.1:1)/shop?timeout=1s")
	if err != nil {
		t.Fatal(err)
	}
	_, err = tmpl.Open(t.Context(), dialects.Credentials{User: "app", Password: "hunter22"})
	if err == nil {
		t.Fatal("Open on a closed port succeeded")
	}
	if strings.Contains(err.Error(), "hunter22") {
		t.Fatalf("error shows the password: %v", err)
	}
}

// FuzzParse checks that Parse never panics and never shows a password,
// whatever follows it. The password goes in the user info.
func FuzzParse(f *testing.F) {
	for _, tc := range dsnCases {
		if _, tail, ok := strings.Cut(tc.dsn, "@"); ok {
			f.Add(tail, "hunter22")
		}
	}
	f.Add("tcp(db)/x?y=hunter22", "p@ss/w:rd?x")
	// A '/' in the password of a DSN without "/dbname": the driver splits
	// at the last '/', and its error used to quote the password's start.
	f.Add("tcp(127.0.0.1:3306)", "se/cret")
	f.Add("tcp(127.0.0.1:3306)?pool_max_conns=3", "sec/ret99")
	f.Add("tcp(127.0.0.1:3306", "s/ecret")
	f.Add("tcp(127.0.0.1:3306)", "secret/")
	f.Fuzz(func(t *testing.T, rest, password string) {
		if len(password) < 4 || len(password) > 64 {
			return
		}
		dsn := "mysql://app:" + password + "@" + rest
		// What may show: the DSN without its password, and whatever
		// parsing it says (an error message's own words).
		redacted := "mysql://app:xxxxx@" + rest
		if ref, _, err := Dialect.Parse(redacted); err != nil {
			redacted += " " + err.Error()
		} else {
			redacted += " " + ref.String()
		}
		tp, _, err := Dialect.Parse(dsn)
		if err != nil {
			if p := secrettest.LeakedPiece(err.Error(), password, redacted); p != "" {
				t.Fatalf("Parse(%q) error shows %q of the password: %v", dsn, p, err)
			}
			return
		}
		if tp.Credentials().Password != password {
			return // rest changed what the password is
		}
		if p := secrettest.LeakedPiece(tp.String(), password, redacted); p != "" {
			t.Fatalf("Parse(%q).String() = %q shows %q of the password", dsn, tp.String(), p)
		}
	})
}

// TestParseHidesPasswordOfMalformedDSN: a '/' in the password of a DSN
// without "/dbname" made the driver read part of the password as the
// network, and quote it in its error.
func TestParseHidesPasswordOfMalformedDSN(t *testing.T) {
	for _, c := range []struct{ dsn, secret string }{
		{"mysql://root:se/cret@tcp(127.0.0.1:3306)", "se/cret"},
		{"mysql://root:sec/ret@tcp(127.0.0.1:3306)?pool_max_conns=3", "sec/ret"},
		{"mysql://root:s/ecret@tcp(127.0.0.1:3306", "s/ecret"},
		{"mysql://root:secret/@tcp(127.0.0.1:3306)", "secret/"},
	} {
		_, _, err := Dialect.Parse(c.dsn)
		if err == nil {
			t.Errorf("Parse(%q) accepted a DSN without /dbname", c.dsn)
			continue
		}
		if p := secrettest.LeakedPiece(err.Error(), c.secret, "mysql://root:xxxxx@tcp(127.0.0.1:3306) pooldriver: mysql: invalid dsn"); p != "" {
			t.Errorf("Parse(%q): the error shows %q of the password: %v", c.dsn, p, err)
		}
		if !strings.Contains(err.Error(), "missing the slash") {
			t.Errorf("Parse(%q): %v; want the driver's real complaint (missing the slash)", c.dsn, err)
		}
	}
	// An '@' in the database name or a parameter still parses.
	for _, dsn := range []string{"mysql://u:pw@tcp(h:3306)/d@b", "mysql://u:p/w@tcp(h:3306)/db?x=a@b"} {
		tp, _, err := Dialect.Parse(dsn)
		if err != nil {
			t.Errorf("Parse(%q): %v", dsn, err)
			continue
		}
		if pw := tp.Credentials().Password; pw != "pw" && pw != "p/w" {
			t.Errorf("Parse(%q): password %q", dsn, pw)
		}
	}
}

// FuzzParseSecretParam checks that a password given as a parameter named
// password, in any letter case, percent-encoded or not, shows neither in
// Parse's error nor in String(), whatever surrounds it.
func FuzzParseSecretParam(f *testing.F) {
	for _, key := range []string{"password", "PASSWORD", "Password", "pass%77ord", " password"} {
		f.Add("tcp(db:3306)/shop?parseTime=true", key, "hunter22", false)
		f.Add("/shop", key, "hunter22", true)
	}
	f.Add("tcp(db)/x?y=1", "PASSWORD", "p@ss/w:rd?x&y=z", true)
	f.Fuzz(func(t *testing.T, rest, key, password string, encode bool) {
		if len(password) < 4 || len(password) > 64 || !isPasswordParam(key) {
			return
		}
		escaped := password
		if encode {
			escaped = url.QueryEscape(password)
		}
		sep := "?"
		if strings.Contains(rest[strings.LastIndexByte(rest, '/')+1:], "?") {
			sep = "&"
		}
		dsn := "mysql://app@" + rest + sep + key + "=" + escaped
		skeleton := strings.Replace(dsn, escaped, "xxxxx", 1)
		if strings.Contains(strings.ToLower(skeleton), strings.ToLower(password)) {
			return // the password also occurs outside its place
		}
		// Is key=value read as a parameter? As pool_probe it must be.
		probe := strings.Replace(dsn, key+"="+escaped, "pool_probe="+escaped, 1)
		if d, err := split(probe[len("mysql://"):]); err != nil || d.params["pool_probe"] == "" {
			return // rest made it part of something else: the database name, say
		}
		allowed := skeleton
		if ref, _, err := Dialect.Parse(skeleton); err != nil {
			allowed += " " + err.Error()
		} else {
			allowed += " " + ref.String()
		}
		var out string
		if tp, _, err := Dialect.Parse(dsn); err != nil {
			out = err.Error()
		} else {
			out = tp.String()
		}
		if p := secrettest.LeakedPiece(out, password, allowed); p != "" {
			t.Fatalf("Parse(%q) shows %q of the password: %s", dsn, p, out)
		}
	})
}

// TestOpenErrorUnwrapsToNoSecret: a connect error whose text holds the
// password is scrubbed, and so is everything it unwraps to: a
// *mysql.MySQLError is rebuilt without it (errors.As still finds its
// number), a net or context error under a dirty wrapper is kept, and a
// clean-looking wrapper of a dirty error is passed by. An error with
// nothing to hide is the driver's own.
func TestOpenErrorUnwrapsToNoSecret(t *testing.T) {
	const secret = "hunter22"
	tmpl, _, err := Dialect.Parse("mysql://app@tcp(127.0.0.1:1)/shop")
	if err != nil {
		t.Fatal(err)
	}
	tm := tmpl.(*template)
	opErr := &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}
	for _, tc := range []struct {
		name  string
		err   error
		check func(t *testing.T, got error)
	}{
		{"MySQLError", &mysql.MySQLError{Number: 1045, SQLState: [5]byte{'2', '8', '0', '0', '0'}, Message: "Access denied for 'app' using " + secret}, func(t *testing.T, got error) {
			var me *mysql.MySQLError
			if !errors.As(got, &me) || me.Number != 1045 || me.SQLState != [5]byte{'2', '8', '0', '0', '0'} {
				t.Errorf("errors.As finds %v", me)
			}
		}},
		{"wrapped MySQLError", fmt.Errorf("login as %s: %w", secret, &mysql.MySQLError{Number: 1045, Message: "denied " + secret}), func(t *testing.T, got error) {
			var me *mysql.MySQLError
			if !errors.As(got, &me) || me.Number != 1045 {
				t.Errorf("errors.As finds %v", me)
			}
		}},
		{"context error", fmt.Errorf("dialing with %s: %w", secret, context.DeadlineExceeded), func(t *testing.T, got error) {
			if !errors.Is(got, context.DeadlineExceeded) {
				t.Error("not context.DeadlineExceeded")
			}
		}},
		{"net error", fmt.Errorf("tunnel %s: %w", secret, opErr), func(t *testing.T, got error) {
			var ne *net.OpError
			if !errors.As(got, &ne) || ne != opErr {
				t.Errorf("errors.As finds %v", ne)
			}
		}},
		{"clean wrapper of a dirty error", fmt.Errorf("outer %s: %w", secret, &redactedError{msg: "clean", cause: fmt.Errorf("inner %s: %w", secret, io.ErrUnexpectedEOF)}), func(t *testing.T, got error) {
			if !errors.Is(got, io.ErrUnexpectedEOF) {
				t.Error("not io.ErrUnexpectedEOF")
			}
		}},
		{"joined", fmt.Errorf("%s: %w", secret, errors.Join(io.EOF, errors.New("x "+secret))), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tm.openError(tc.err, secret)
			n := 0
			for e := got; e != nil; e = errors.Unwrap(e) {
				for _, text := range []string{e.Error(), fmt.Sprintf("%+v", e), fmt.Sprintf("%#v", e)} {
					if strings.Contains(text, secret) {
						t.Errorf("link %d (%T) shows the password: %s", n, e, text)
					}
				}
				n++
			}
			if tc.check != nil {
				tc.check(t, got)
			}
		})
	}
	// Nothing to hide: the error itself.
	if got := tm.openError(opErr, secret); got != opErr {
		t.Errorf("a clean error came back as %v", got)
	}
}
