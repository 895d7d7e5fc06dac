package postgres

import (
	"fmt"
	"maps"
	"strings"
	"testing"

	"github.com/pooldriver/pooldriver/dialects"
	"github.com/pooldriver/pooldriver/dialects/internal/secrettest"
)

// dsnCases feeds the parse test, the redaction test and the fuzz corpus.
var dsnCases = []struct {
	name     string
	dsn      string
	params   map[string]string
	redacted string
	user     string
	password string
	runtime  map[string]string // RuntimeParams pgx must see
	wantErr  bool
	errHas   string // what the error must say
}{
	{
		name:     "url",
		dsn:      "postgres://app:s3cret@db:5432/shop?sslmode=disable&pool_max_conns=20",
		params:   map[string]string{"pool_max_conns": "20"},
		redacted: "postgres://app:xxxxx@db:5432/shop?sslmode=disable",
		user:     "app", password: "s3cret",
	},
	{
		name:     "postgresql scheme, many params kept in order",
		dsn:      "postgresql://app:pw%40x@db/shop?pool_min_conns=1&application_name=web&connect_timeout=5&pool_mode=session&default_query_exec_mode=simple_protocol",
		params:   map[string]string{"pool_min_conns": "1", "pool_mode": "session"},
		redacted: "postgresql://app:xxxxx@db/shop?application_name=web&connect_timeout=5&default_query_exec_mode=simple_protocol",
		user:     "app", password: "pw@x",
		runtime: map[string]string{"application_name": "web"},
	},
	{
		name:     "upper-case scheme",
		dsn:      "POSTGRES://app@db/shop?pool_max_conns=3",
		params:   map[string]string{"pool_max_conns": "3"},
		redacted: "postgres://app@db/shop",
		user:     "app",
	},
	{
		name:     "url without user info or params",
		dsn:      "postgres://db:5433/shop",
		params:   map[string]string{},
		redacted: "postgres://db:5433/shop",
	},
	{
		name:     "url multi host",
		dsn:      "postgres://app:pw1234@h1:5432,h2:5433/shop?target_session_attrs=read-write&pool_max_conn_lifetime=1h",
		params:   map[string]string{"pool_max_conn_lifetime": "1h"},
		redacted: "postgres://app:xxxxx@h1:5432,h2:5433/shop?target_session_attrs=read-write",
		user:     "app", password: "pw1234",
	},
	{
		name:     "url password in query",
		dsn:      "postgres://db/shop?user=app&password=qu3ry&pool_max_conns=2",
		params:   map[string]string{"pool_max_conns": "2"},
		redacted: "postgres://db/shop?user=app&password=xxxxx",
		user:     "app", password: "qu3ry",
	},
	{
		name:     "url escaped pool key",
		dsn:      "postgres://app:pw9999@db/shop?pool%5Fmax_conns=7&search_path=a%2Cb",
		params:   map[string]string{"pool_max_conns": "7"},
		redacted: "postgres://app:xxxxx@db/shop?search_path=a%2Cb",
		user:     "app", password: "pw9999",
		runtime: map[string]string{"search_path": "a,b"},
	},
	{
		name:     "url password in query, percent-encoded",
		dsn:      "postgres://app@db/shop?password=s%33cr%2Ft%20x",
		params:   map[string]string{},
		redacted: "postgres://app@db/shop?password=xxxxx",
		user:     "app", password: "s3cr/t x",
	},
	{
		name:     "url key percent-encoded",
		dsn:      "postgres://app@db/shop?pass%77ord=qu3ry99",
		params:   map[string]string{},
		redacted: "postgres://app@db/shop?pass%77ord=xxxxx",
		user:     "app", password: "qu3ry99",
	},
	{
		name:     "url sslpassword",
		dsn:      "postgres://app:pw9999@db/shop?sslpassword=k3yp4ss",
		params:   map[string]string{},
		redacted: "postgres://app:xxxxx@db/shop?sslpassword=xxxxx",
		user:     "app", password: "pw9999",
	},
	// pgx reads only the lower-case keys; any other case would go to the
	// server as a setting, value and all.
	{name: "url PASSWORD", dsn: "postgres://app@db/shop?PASSWORD=qu3ry99&pool_max_conns=2", wantErr: true, password: "qu3ry99", errHas: `"PASSWORD"`},
	{name: "url Password", dsn: "postgres://app@db/shop?sslmode=disable&Password=qu3ry99", wantErr: true, password: "qu3ry99", errHas: `"Password"`},
	{name: "url PASSWORD percent-encoded key", dsn: "postgres://app@db/shop?PASS%57ORD=qu3ry99", wantErr: true, password: "qu3ry99", errHas: `"PASSWORD"`},
	{name: "url PASSWORD malformed key", dsn: "postgres://app@db/shop?PASSWORD%zz=qu3ry99", wantErr: true, password: "qu3ry99"},
	{name: "url SSLPassword", dsn: "postgres://app@db/shop?SSLPassword=qu3ry99", wantErr: true, password: "qu3ry99", errHas: "write sslpassword"},
	{name: "keyword/value PASSWORD", dsn: "host=db user=app PASSWORD=s3cret99 dbname=shop", wantErr: true, password: "s3cret99", errHas: "write password"},
	{name: "keyword/value Password quoted", dsn: "host=db user=app Password='s3c ret99'", wantErr: true, password: "s3c ret99", errHas: `"Password"`},
	{name: "keyword/value sslPassword", dsn: "host=db sslPassword=s3cret99", wantErr: true, password: "s3cret99", errHas: `"sslPassword"`},
	{
		name:     "keyword/value",
		dsn:      "host=db user=app password=s3cret dbname=shop pool_max_conns=4 sslmode=disable",
		params:   map[string]string{"pool_max_conns": "4"},
		redacted: "host=db user=app password=xxxxx dbname=shop sslmode=disable",
		user:     "app", password: "s3cret",
	},
	{
		name:     "keyword/value quoted",
		dsn:      `  host = db  user=app password='it''s' pool_mode = 'session'  application_name='my app' `,
		wantErr:  true, // '' is not an escape in libpq: the value ends, then "s'" is garbage
		password: "it",
	},
	{
		name:     "keyword/value quoted with escapes",
		dsn:      `host = db  user=app password='a b\'c' pool_mode = 'session'  application_name='my app'`,
		params:   map[string]string{"pool_mode": "session"},
		redacted: `host = db user=app password=xxxxx application_name='my app'`,
		user:     "app", password: "a b'c",
		runtime: map[string]string{"application_name": "my app"},
	},
	{
		name:    "keyword/value missing =",
		dsn:     "host=db password=hunter22 bogus",
		wantErr: true, password: "hunter22",
	},
	{
		name:    "keyword/value unterminated",
		dsn:     "host=db password='hunter22",
		wantErr: true, password: "hunter22",
	},
	{
		name:    "url bad port",
		dsn:     "postgres://app:hunter22@db:notaport/shop",
		wantErr: true, password: "hunter22",
	},
	{
		name:    "url password in port position",
		dsn:     "postgres://app:hunter22:more@db/shop?sslmode=bogus",
		wantErr: true, password: "hunter22:more",
	},
	{
		name:    "url bad percent encoding in pool param",
		dsn:     "postgres://app:hunter22@db/shop?pool_max_conns=%zz",
		wantErr: true, password: "hunter22",
	},
	{
		name:    "url bad sslmode",
		dsn:     "postgres://app:hunter22@db/shop?sslmode=hunter22",
		wantErr: true, password: "hunter22",
	},
}

func TestParse(t *testing.T) {
	t.Setenv("PGPASSFILE", "/nonexistent")
	t.Setenv("PGPASSWORD", "")
	for _, tc := range dsnCases {
		t.Run(tc.name, func(t *testing.T) {
			tmpl, params, err := Dialect.Parse(tc.dsn)
			if tc.wantErr {
				if err == nil {
					t.Fatalf("Parse succeeded, want error")
				}
				if tc.password != "" && strings.Contains(err.Error(), tc.password) {
					t.Fatalf("error shows the password: %v", err)
				}
				if !strings.HasPrefix(err.Error(), "pooldriver: postgres:") {
					t.Errorf("error %q lacks the pooldriver: postgres: prefix", err)
				}
				if !strings.Contains(err.Error(), tc.errHas) {
					t.Errorf("error %q does not say %q", err, tc.errHas)
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
			if tc.password != "" && strings.Contains(tmpl.String(), tc.password) {
				t.Errorf("String() shows the password")
			}
			creds := tmpl.Credentials()
			if tc.user != "" && creds.User != tc.user {
				t.Errorf("user = %q, want %q", creds.User, tc.user)
			}
			if creds.Password != tc.password {
				t.Errorf("password = %q, want %q", creds.Password, tc.password)
			}
			cfg := tmpl.(*template).cfg
			for k := range cfg.RuntimeParams {
				if strings.HasPrefix(k, "pool_") {
					t.Errorf("pgx received %s", k)
				}
			}
			for k, v := range tc.runtime {
				if cfg.RuntimeParams[k] != v {
					t.Errorf("RuntimeParams[%s] = %q, want %q", k, cfg.RuntimeParams[k], v)
				}
			}
		})
	}
}

func TestRegistered(t *testing.T) {
	for _, s := range []string{"postgres", "postgresql"} {
		d, err := dialects.Lookup(s)
		if err != nil || d != Dialect {
			t.Errorf("Lookup(%q) = %v, %v", s, d, err)
		}
	}
}

func TestOpenErrorHidesPassword(t *testing.T) {
	tmpl, _, err := Dialect.Parse("postgres://app@127.0.0.1:1/shop?connect_timeout=1&sslmode=disable")
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
// whatever surrounds it. The password goes where it is unambiguous: the user
// info of a URL, or the last keyword/value pair.
func FuzzParse(f *testing.F) {
	for _, tc := range dsnCases {
		if _, tail, ok := strings.Cut(tc.dsn, "@"); ok {
			f.Add(tail, "hunter22", true)
		}
		f.Add(tc.dsn, "hunter22", false)
	}
	f.Add("db/shop?password=x&pool_max_conns=1", `p@ss/w:rd?x`, true)
	f.Add("127.0.0.1:5432/db", "sec@ret9", true)
	f.Add("host=h x=", `a\ 'b`, false)
	f.Fuzz(func(t *testing.T, rest, password string, asURL bool) {
		if len(password) < 4 || strings.ContainsRune(password, 0) {
			return
		}
		var dsn, escaped string
		if asURL {
			escaped = percentEncode(password)
			dsn = "postgres://app:" + escaped + "@" + rest
		} else {
			escaped = strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(password)
			dsn = rest + " password='" + escaped + "'"
		}
		skeleton := strings.Replace(dsn, escaped, "xxxxx", 1)
		if strings.Contains(strings.ToLower(skeleton), strings.ToLower(password)) {
			return // the password also occurs outside its place
		}
		t.Setenv("PGPASSWORD", "")
		// What may show: the DSN without its password, and whatever
		// parsing that says (an error message's own words).
		allowed := skeleton
		if ref, _, err := Dialect.Parse(skeleton); err != nil {
			allowed += " " + err.Error()
		} else {
			allowed += " " + ref.String()
		}
		tp, _, err := Dialect.Parse(dsn)
		if err != nil {
			if strings.Contains(err.Error(), password) || len(escaped) >= 4 && strings.Contains(err.Error(), escaped) {
				t.Fatalf("Parse(%q) error shows the password: %v", dsn, err)
			}
			if p := secrettest.LeakedPiece(err.Error(), password, allowed); p != "" {
				t.Fatalf("Parse(%q) error shows %q of the password: %v", dsn, p, err)
			}
			return
		}
		if tp.Credentials().Password != password {
			return // rest changed what the password is, e.g. a later password=
		}
		if s := tp.String(); strings.Contains(s, password) || strings.Contains(s, escaped) {
			t.Fatalf("Parse(%q).String() = %q shows the password", dsn, s)
		}
		if p := secrettest.LeakedPiece(tp.String(), password, allowed); p != "" {
			t.Fatalf("Parse(%q).String() = %q shows %q of the password", dsn, tp.String(), p)
		}
	})
}

func percentEncode(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

// TestParseUnescapedPasswordDoesNotShow: a password written in a URL
// without percent-encoding, with the characters that split a URL, is not
// quoted by the error or String(), whatever pgx makes of the DSN.
func TestParseUnescapedPasswordDoesNotShow(t *testing.T) {
	t.Setenv("PGPASSWORD", "")
	// "2024/Spring9": digits before the '/' make a valid port, so pgx
	// reads app:2024 as the host and the rest as the database name; in
	// "se@cr/et9" the first '@' ends the user info, and "et9@…" is the
	// database name.
	for _, pw := range []string{"se/cret9", "s?ecret9", "se#cret9", "sec@ret9", "s/e:c@r?t#9", "2024/Spring9", "se@cr/et9"} {
		for _, dsn := range []string{
			"postgres://app:" + pw + "@127.0.0.1:5432",
			"postgres://app:" + pw + "@127.0.0.1:5432/db?sslmode=disable",
			"postgres://app:" + pw + "@h1:5432,h2:5433/db",
		} {
			skeleton := strings.Replace(dsn, pw, "xxxxx", 1)
			allowed := skeleton
			if ref, _, err := Dialect.Parse(skeleton); err != nil {
				allowed += " " + err.Error()
			} else {
				allowed += " " + ref.String()
			}
			tp, _, err := Dialect.Parse(dsn)
			out := ""
			if err != nil {
				out = err.Error()
			} else {
				out = tp.String()
			}
			if p := secrettest.LeakedPiece(out, pw, allowed); p != "" {
				t.Errorf("Parse(%q) shows %q of the password: %s", dsn, p, out)
			}
			if err == nil {
				// The pool's default name (and so metrics, spans, logs).
				a := tp.(dialects.AddressedTemplate).Address().String()
				if p := secrettest.LeakedPiece(a, pw, allowed); p != "" {
					t.Errorf("Parse(%q).Address() = %q shows %q of the password", dsn, a, p)
				}
			}
			if pw == "sec@ret9" && (err == nil || !strings.Contains(err.Error(), "%40")) {
				t.Errorf("Parse(%q): %v; want the error saying to percent-encode '@'", dsn, err)
			}
		}
	}
}

// FuzzParseSecretKey checks the redaction rule over the key's spelling: a
// password given under any letter case of password or sslpassword (a URL
// key percent-encoded or not, a keyword/value pair quoted or not) shows
// neither in Parse's error nor in String(), whatever surrounds it.
func FuzzParseSecretKey(f *testing.F) {
	for _, key := range []string{"password", "PASSWORD", "Password", "sslpassword", "SSLPassword", "pass%77ord", "PASS%57ORD", "passWORD%zz"} {
		f.Add("db/shop?sslmode=disable", key, "hunter22", true, false)
		f.Add("host=db user=app", key, "hunter22", false, true)
		f.Add("host=db", key, "hunter22", false, false)
	}
	f.Add("db/shop", "Password", `p@ss w%rd&x=y`, true, false)
	f.Add("dbname=x", "PASSWORD", `a\ 'b c`, false, true)
	f.Fuzz(func(t *testing.T, rest, key, password string, asURL, quoted bool) {
		if !asURL && strings.ContainsRune(key, '%') {
			return // keys are percent-decoded in URLs only
		}
		if len(password) < 4 || strings.ContainsRune(password, 0) || !isSecretKey(lenientDecode(key)) {
			return
		}
		var dsn, escaped string
		switch {
		case asURL:
			escaped = percentEncode(password)
			sep := "?"
			if strings.Contains(rest, "?") {
				sep = "&"
			}
			dsn = "postgres://app@" + rest + sep + key + "=" + escaped
		case quoted:
			escaped = "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(password) + "'"
			dsn = rest + " " + key + "=" + escaped
		default:
			escaped = strings.NewReplacer(`\`, `\\`, ` `, `\ `, "\t", "\\\t", "\n", "\\\n", "\r", "\\\r", "\v", "\\\v", "\f", "\\\f").Replace(password)
			dsn = rest + " " + key + "=" + escaped
		}
		skeleton := strings.Replace(dsn, escaped, "xxxxx", 1)
		if strings.Contains(strings.ToLower(skeleton), strings.ToLower(password)) {
			return // the password also occurs outside its place
		}
		t.Setenv("PGPASSWORD", "")
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
			// Did Parse read key=value as a pair? Under the key password,
			// the same DSN must give that very password.
			probe := strings.Replace(dsn, key+"="+escaped, "password="+escaped, 1)
			if pt, _, err := Dialect.Parse(probe); err != nil || pt.Credentials().Password != password {
				return // rest made it part of something else, e.g. another key's value
			}
			out = tp.String()
		}
		if p := secrettest.LeakedPiece(out, password, allowed); p != "" {
			t.Fatalf("Parse(%q) shows %q of the password: %s", dsn, p, out)
		}
	})
}
