package odbc

import (
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/pooldriver/pooldriver/dialects"
	"github.com/pooldriver/pooldriver/dialects/internal/secrettest"
	"github.com/pooldriver/pooldriver/dialects/odbc/connstr"
)

// dsnCases feeds the parse test and the fuzz corpus.
var dsnCases = []struct {
	name     string
	dsn      string
	params   map[string]string
	base     string // what reaches the driver, before UID and PWD
	redacted string
	user     string
	password string
	driver   string
	dsnName  string
	wantErr  bool
}{
	{
		name:     "connection string",
		dsn:      "odbc://Driver={PostgreSQL Unicode};Server=127.0.0.1;Port=5432;Database=test;UID=app;PWD={s;cr}}t};pool_max_conns=4",
		params:   map[string]string{"pool_max_conns": "4"},
		base:     "Driver={PostgreSQL Unicode};Server=127.0.0.1;Port=5432;Database=test;",
		redacted: "odbc://Driver={PostgreSQL Unicode};Server=127.0.0.1;Port=5432;Database=test;UID=app;PWD=xxxxx;",
		user:     "app", password: "s;cr}t", driver: "PostgreSQL Unicode",
	},
	{
		name:     "data source name and attributes",
		dsn:      "ODBC://shop; Pool_Mode=session;user=app;Password=hunter22;ConnSettings={SET a=1;SET b=2}",
		params:   map[string]string{"pool_mode": "session"},
		base:     "DSN=shop;ConnSettings={SET a=1;SET b=2};",
		redacted: "odbc://DSN=shop;ConnSettings={SET a=1;SET b=2};UID=app;PWD=xxxxx;",
		user:     "app", password: "hunter22", dsnName: "shop",
	},
	{
		name:     "bare data source name",
		dsn:      "odbc://shop",
		params:   map[string]string{},
		base:     "DSN=shop;",
		redacted: "odbc://DSN=shop;",
		dsnName:  "shop",
	},
	{
		name:     "no credentials, no driver",
		dsn:      "odbc://Server=db;Database=x",
		params:   map[string]string{},
		base:     "Server=db;Database=x;",
		redacted: "odbc://Server=db;Database=x;",
	},
	{
		name:     "user name that needs braces",
		dsn:      "odbc://DSN=x;UID={a;b};PWD=hunter22",
		params:   map[string]string{},
		base:     "DSN=x;",
		redacted: "odbc://DSN=x;UID={a;b};PWD=xxxxx;",
		user:     "a;b", password: "hunter22", dsnName: "x",
	},
	{
		name:     "pwd lower case, braced",
		dsn:      "odbc://DSN=x;uid=app;pwd={hun;ter}}22}",
		params:   map[string]string{},
		base:     "DSN=x;",
		redacted: "odbc://DSN=x;UID=app;PWD=xxxxx;",
		user:     "app", password: "hun;ter}22", dsnName: "x",
	},
	{
		name:     "Pwd mixed case",
		dsn:      "odbc://DSN=x;Uid=app;Pwd=hunter22",
		params:   map[string]string{},
		base:     "DSN=x;",
		redacted: "odbc://DSN=x;UID=app;PWD=xxxxx;",
		user:     "app", password: "hunter22", dsnName: "x",
	},
	{
		name:     "PASSWORD upper case, braced",
		dsn:      "odbc://Driver={MariaDB};USER=app;PASSWORD={ hunter 22 }",
		params:   map[string]string{},
		base:     "Driver={MariaDB};",
		redacted: "odbc://Driver={MariaDB};UID=app;PWD=xxxxx;",
		user:     "app", password: " hunter 22 ", driver: "MariaDB",
	},
	{
		name:     "other attributes that hold a password",
		dsn:      "odbc://Driver={MySQL ODBC 8.0 Unicode Driver};UID=app;PWD=hunter22;password2={f;actor2};Pwd3=factor3x;SSLKeyPassword=k3ypass;pqopt={sslmode=require password=libpqpw};pqopt2={a=b};NoPasswordPrompt=1",
		params:   map[string]string{},
		base:     "Driver={MySQL ODBC 8.0 Unicode Driver};password2={f;actor2};Pwd3=factor3x;SSLKeyPassword=k3ypass;pqopt={sslmode=require password=libpqpw};pqopt2={a=b};NoPasswordPrompt=1;",
		redacted: "odbc://Driver={MySQL ODBC 8.0 Unicode Driver};password2=xxxxx;Pwd3=xxxxx;SSLKeyPassword=xxxxx;pqopt=xxxxx;pqopt2={a=b};NoPasswordPrompt=xxxxx;UID=app;PWD=xxxxx;",
		user:     "app", password: "hunter22", driver: "MySQL ODBC 8.0 Unicode Driver",
	},
	{name: "two passwords, cases differ", dsn: "odbc://DSN=x;pwd=hunter22;Password=hunter22", wantErr: true, password: "hunter22"},
	{name: "wrong scheme", dsn: "mysql://u:hunter22@tcp(x)/y", wantErr: true, password: "hunter22"},
	{name: "unclosed brace", dsn: "odbc://DSN=x;PWD={hunter22", wantErr: true, password: "hunter22"},
	{name: "text after brace", dsn: "odbc://DSN=x;PWD={hunter22}x", wantErr: true, password: "hunter22"},
	{name: "two users", dsn: "odbc://DSN=x;UID=a;USER=b;PWD=hunter22", wantErr: true, password: "hunter22"},
	{name: "two passwords", dsn: "odbc://DSN=x;PWD=hunter22;PASSWORD=hunter22", wantErr: true, password: "hunter22"},
	{name: "driver and dsn", dsn: "odbc://DSN=x;Driver=y;PWD=hunter22", wantErr: true, password: "hunter22"},
	{name: "filedsn", dsn: "odbc://FILEDSN=/tmp/x.dsn;PWD=hunter22", wantErr: true, password: "hunter22"},
	{name: "savefile", dsn: "odbc://DSN=x;SAVEFILE=/tmp/x.dsn;PWD=hunter22", wantErr: true, password: "hunter22"},
	{name: "misread character", dsn: "odbc://DSN=x;PWD={hunter22Ž}", wantErr: true, password: "hunter22Ž"},
	{name: "no equals", dsn: "odbc://DSN=x;hunter22", wantErr: true, password: "hunter22"},
	{name: "bad data source name", dsn: "odbc://{hunter22", wantErr: true, password: "hunter22"},
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
				if !strings.HasPrefix(err.Error(), "pooldriver: odbc:") {
					t.Errorf("error %q lacks the pooldriver: odbc: prefix", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if !maps.Equal(params, tc.params) {
				t.Errorf("params = %v, want %v", params, tc.params)
			}
			tm := tmpl.(*template)
			if got := tm.d.base(); got != tc.base {
				t.Errorf("base = %q, want %q", got, tc.base)
			}
			if got := tmpl.String(); got != tc.redacted {
				t.Errorf("String() = %q, want %q", got, tc.redacted)
			}
			if c := tmpl.Credentials(); c.User != tc.user || c.Password != tc.password {
				t.Errorf("Credentials() = %q/%q, want %q/%q", c.User, c.Password, tc.user, tc.password)
			}
			if tm.d.driver != tc.driver || tm.d.dsn != tc.dsnName {
				t.Errorf("driver, dsn = %q, %q; want %q, %q", tm.d.driver, tm.d.dsn, tc.driver, tc.dsnName)
			}
			for _, a := range tm.d.attrs {
				if isSecretAttr(a) && !slices.Contains(tm.d.secrets, a.Value) {
					t.Errorf("secrets %q lack the value of %s", tm.d.secrets, a.Key)
				}
			}
		})
	}
}

func TestRegistered(t *testing.T) {
	d, err := dialects.Lookup("odbc")
	if err != nil || d != Dialect {
		t.Errorf("Lookup(odbc) = %v, %v", d, err)
	}
}

// credentialCases: how each driver gets the user and password.
var credentialCases = []struct {
	server         server
	user, password string
	want           string
	wantErr        bool
}{
	{server: postgres, user: "app", password: "p;w}d{x", want: "UID=app;PWD={p;w}}d{x};"},
	{server: postgres, user: "pd}x=y 'q\"é", want: "UID=pd}x=y 'q\"é;"},
	{server: postgres, user: "a;b", wantErr: true},
	{server: postgres, user: "{ab", wantErr: true},
	{server: mysql, user: "a;b}", password: " pw", wantErr: true},
	{server: mysql, user: "a;b}", password: "p w", want: "UID={a;b}}};PWD={p w};"},
	{server: mysql, user: "app ", wantErr: true},
	{server: generic, user: "app", password: " pw ", want: "UID=app;PWD={ pw };"},
	{server: generic, user: "a;b", password: "%41+", want: "UID={a;b};PWD=%41+;"},
	{server: postgres, user: "app", password: "%41+", want: "UID=app;PWD={%41+};"},
	{server: generic, password: "Ž", wantErr: true},
	{server: generic, password: "a\x00b", wantErr: true},
	{server: generic, want: ""},
}

func TestCredentials(t *testing.T) {
	for _, tc := range credentialCases {
		got, err := credentials(tc.server, tc.user, tc.password)
		if tc.wantErr {
			if !errors.Is(err, connstr.ErrValue) {
				t.Errorf("credentials(%s, %q, %q) = %q, %v; want ErrValue", tc.server, tc.user, tc.password, got, err)
			} else if tc.password != "" && strings.Contains(err.Error(), tc.password) {
				t.Errorf("error shows the password: %v", err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("credentials(%s, %q, %q) = %q, %v; want %q", tc.server, tc.user, tc.password, got, err, tc.want)
		}
	}
}

// FuzzCredentials checks that the credential attributes never panic, read
// back through connstr.Parse as exactly the user and password, and that
// errors never show the password.
func FuzzCredentials(f *testing.F) {
	for _, tc := range credentialCases {
		f.Add(int(tc.server), tc.user, tc.password)
	}
	f.Fuzz(func(t *testing.T, s int, user, password string) {
		srv := server(uint(s) % 3)
		got, err := credentials(srv, user, password)
		if err != nil {
			if len(password) >= 4 && strings.Contains(err.Error(), password) {
				t.Fatalf("error shows the password: %v", err)
			}
			return
		}
		attrs, err := connstr.Parse("Driver={x};" + got)
		if err != nil {
			t.Fatalf("credentials(%s, %q, %q) = %q, which does not parse: %v", srv, user, password, got, err)
		}
		var u, p string
		for _, a := range attrs[1:] {
			switch a.Key {
			case "UID":
				u = a.Value
				if srv == postgres && a.Raw != "UID="+user {
					t.Fatalf("psqlODBC user written with braces: %q", a.Raw)
				}
				if q, _ := connstr.Quote(user); srv == generic && a.Raw != "UID="+q {
					t.Fatalf("generic user written as %q, want %q", a.Raw, "UID="+q)
				}
			case "PWD":
				p = a.Value
			default:
				t.Fatalf("credentials(%s, %q, %q) = %q: stray attribute %q", srv, user, password, got, a.Key)
			}
		}
		if u != user || p != password {
			t.Fatalf("credentials(%s, %q, %q) = %q reads back as %q/%q", srv, user, password, got, u, p)
		}
	})
}

// FuzzParse checks that Parse never panics and never shows the password,
// whatever surrounds it.
func FuzzParse(f *testing.F) {
	for _, tc := range dsnCases {
		f.Add(tc.dsn, "hunter22")
	}
	f.Fuzz(func(t *testing.T, rest, password string) {
		if len(password) < 4 || strings.Contains(rest, password) {
			return
		}
		b, err := connstr.Braced(password)
		if err != nil {
			return
		}
		dsn := "odbc://" + rest + ";PWD=" + b
		tp, _, err := Dialect.Parse(dsn)
		if err != nil {
			if strings.Contains(err.Error(), password) {
				t.Fatalf("Parse(%q) error shows the password: %v", dsn, err)
			}
			return
		}
		if tp.Credentials().Password != password {
			return // rest changed what the password is
		}
		if other, _, err := Dialect.Parse("odbc://" + rest + ";PWD=zzzz"); err == nil && strings.Contains(other.String(), password) {
			return // the password also occurs outside its place
		}
		if s := tp.String(); strings.Contains(s, password) {
			t.Fatalf("Parse(%q).String() = %q shows the password", dsn, s)
		}
		if tp.(*template).d.base() != "" && strings.Contains(tp.(*template).d.base(), b) {
			t.Fatalf("Parse(%q): the password stayed in the attributes", dsn)
		}
	})
}

type fakeIni struct {
	dsns    map[string]string            // data source → Driver
	drivers map[string]map[string]string // driver → key → value
	pool    string
}

func (f fakeIni) dsnDriver(dsn string) string { return f.dsns[dsn] }
func (f fakeIni) driverEntry(driver, key string) string {
	return f.drivers[driver][key]
}
func (f fakeIni) pooling() string { return f.pool }

func TestConfig(t *testing.T) {
	ini := fakeIni{
		dsns: map[string]string{"pg": "PostgreSQL Unicode", "maria": "/usr/lib/libmaodbc.so", "other": "Other", "DEFAULT": "PostgreSQL Unicode"},
		drivers: map[string]map[string]string{
			"PostgreSQL Unicode": {"Driver": "psqlodbcw.so", "CPTimeout": "60"},
			"Other":              {"Driver": "libother.so", "CPTimeout": "0"},
			"Custom":             {"Driver": "/opt/lib/libmyodbc8w.so"},
		},
	}
	for _, tc := range []struct {
		dsn     string
		pooling string
		want    server
		wantErr bool
	}{
		{dsn: "odbc://pg", want: postgres},
		{dsn: "odbc://Driver={PostgreSQL Unicode};Server=x", want: postgres},
		{dsn: "odbc://Server=x", want: postgres}, // the DEFAULT data source
		{dsn: "odbc://maria", want: mysql},
		{dsn: "odbc://Driver=Custom", want: mysql},
		{dsn: "odbc://other", want: generic},
		{dsn: "odbc://missing", want: generic},
		{dsn: "odbc://pg", pooling: "Yes", wantErr: true},
		{dsn: "odbc://pg", pooling: "on", wantErr: true},
		{dsn: "odbc://pg", pooling: "1", wantErr: true},
		{dsn: "odbc://pg", pooling: "No", want: postgres},
		{dsn: "odbc://other", pooling: "Yes", want: generic}, // CPTimeout=0: no pooling
	} {
		tmpl, _, err := Dialect.Parse(tc.dsn)
		if err != nil {
			t.Fatal(err)
		}
		tm := tmpl.(*template)
		ini.pool = tc.pooling
		tm.ini = ini
		got, err := tm.config()
		if tc.wantErr {
			if err == nil || !strings.Contains(err.Error(), "CPTimeout") {
				t.Errorf("%s with Pooling=%s: %v, want an error about unixODBC pooling", tc.dsn, tc.pooling, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s with Pooling=%s: %s, %v; want %s", tc.dsn, tc.pooling, got, err, tc.want)
		}
	}
}

func TestCPTimeout(t *testing.T) {
	for in, want := range map[string]int{"": 0, "0": 0, "60": 60, " 120x": 120, "-1": -1, "abc": 0} {
		if got := cpTimeout(in); got != want {
			t.Errorf("cpTimeout(%q) = %d, want %d", in, got, want)
		}
	}
}

// FuzzParseMalformed checks that no 4-byte piece of a password shows in
// Parse's error or String(), wherever the password sits and however the
// DSN around it is malformed: unbraced with ';' or '}' in it, a brace never
// closed, text after the closing brace, under PASSWORD=, before other
// attributes, twice. What may show is what the same DSN with the password
// replaced shows (its own words, and whatever rest holds).
func FuzzParseMalformed(f *testing.F) {
	for _, tc := range dsnCases {
		f.Add(strings.TrimPrefix(strings.ToLower(tc.dsn[:min(len(tc.dsn), 7)]), "odbc://")+tc.dsn[min(len(tc.dsn), 7):], "hunter22", uint8(0))
	}
	for form := range uint8(len(passwordForms)) {
		f.Add("DSN=x", "se;cr}et", form)
		f.Add("Driver={PostgreSQL Unicode};Server=db", "p{w}d=x;y", form)
		f.Add("DSN=x;UID=app", "hunter22", form)
	}
	f.Fuzz(func(t *testing.T, rest, password string, form uint8) {
		if len(password) < 4 || len(password) > 64 {
			return
		}
		place := passwordForms[int(form)%len(passwordForms)]
		dsn := "odbc://" + place(rest, password)
		allowed := "odbc://" + place(rest, "xxxxx") + " " + rest
		if ref, _, err := Dialect.Parse("odbc://" + place(rest, "xxxxx")); err != nil {
			allowed += " " + err.Error()
		} else {
			allowed += " " + ref.String()
		}
		tp, _, err := Dialect.Parse(dsn)
		if err != nil {
			if p := secrettest.LeakedPiece(err.Error(), password, allowed); p != "" {
				t.Fatalf("Parse(%q) error shows %q of the password: %v", dsn, p, err)
			}
			return
		}
		if strings.Count(dsn, password) > 1 || tp.Credentials().Password != password {
			return // the same text elsewhere may be another attribute's, which String shows
		}
		if p := secrettest.LeakedPiece(tp.String(), password, allowed); p != "" {
			t.Fatalf("Parse(%q).String() = %q shows %q of the password", dsn, tp.String(), p)
		}
	})
}

// passwordForms put a password into a DSN, well formed or not.
var passwordForms = []func(rest, pw string) string{
	func(rest, pw string) string { return rest + ";PWD=" + pw },
	func(rest, pw string) string { return rest + ";PWD={" + pw + "}" },
	func(rest, pw string) string { return rest + ";PWD={" + pw },
	func(rest, pw string) string { return rest + ";PWD={" + pw + "}x" },
	func(rest, pw string) string { return rest + ";Password=" + pw + ";Server=db" },
	func(rest, pw string) string { return "PWD=" + pw + ";" + rest },
	func(rest, pw string) string { return rest + ";PWD=" + pw + ";PWD=" + pw },
	func(rest, pw string) string { return rest + ";" + pw },
}

// FuzzParseSecretAttr checks the redaction rule over the keyword: a
// password under PWD or PASSWORD in any letter case, or under any other
// keyword that holds one of them, plain or in braces, shows neither in
// Parse's error nor in String(), whatever surrounds it.
func FuzzParseSecretAttr(f *testing.F) {
	for _, key := range []string{"PWD", "pwd", "Pwd", "PASSWORD", "Password", "PWD2", "password3", "SSLKeyPassword"} {
		f.Add("DSN=x;UID=app", key, "hunter22", true)
		f.Add("Driver={PostgreSQL Unicode};Server=db", key, "se;cr}et", true)
		f.Add("DSN=x", key, "hunter22", false)
	}
	f.Fuzz(func(t *testing.T, rest, key, password string, braced bool) {
		k := strings.ToUpper(key)
		if len(password) < 4 || len(password) > 64 || !strings.Contains(k, "PWD") && !strings.Contains(k, "PASSWORD") {
			return
		}
		v := password
		if braced {
			b, err := connstr.Braced(password)
			if err != nil {
				return
			}
			v = b
		}
		dsn := "odbc://" + rest + ";" + key + "=" + v
		skeleton := "odbc://" + rest + ";" + key + "=xxxxx"
		if strings.Contains(strings.ToLower(skeleton), strings.ToLower(password)) {
			return // the password also occurs outside its place
		}
		allowed := skeleton
		if ref, _, err := Dialect.Parse(skeleton); err != nil {
			allowed += " " + err.Error()
		} else {
			allowed += " " + ref.String()
		}
		tp, _, err := Dialect.Parse(dsn)
		if err != nil {
			if p := secrettest.LeakedPiece(err.Error(), password, allowed); p != "" {
				t.Fatalf("Parse(%q) error shows %q of the password: %v", dsn, p, err)
			}
			return
		}
		read := tp.Credentials().Password == password
		for _, a := range tp.(*template).d.attrs {
			read = read || a.Key == key && a.Value == password
		}
		if !read {
			return // rest made it part of something else
		}
		if p := secrettest.LeakedPiece(tp.String(), password, allowed); p != "" {
			t.Fatalf("Parse(%q).String() = %q shows %q of the password", dsn, tp.String(), p)
		}
	})
}
