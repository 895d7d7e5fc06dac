package fakedb

import (
	"context"
	"errors"
	"maps"
	"strings"
	"testing"

	"github.com/pooldriver/pooldriver/dialects"
)

// dsnCases feeds the parser test, the round-trip test and the fuzz corpus.
// str is the template's String() ("" when the DSN is invalid); errHas is a
// substring of the error.
var dsnCases = []struct {
	dsn    string
	server string
	user   string
	pass   string
	app    string
	params map[string]string
	str    string
	errHas string
}{
	{dsn: "fake://srv", server: "srv", str: "fake://srv"},
	{dsn: "FAKE://srv/", server: "srv", str: "fake://srv"},
	{dsn: "fake://bob@srv", server: "srv", user: "bob", str: "fake://bob@srv"},
	{dsn: "fake://bob:s3cr3t@srv", server: "srv", user: "bob", pass: "s3cr3t", str: "fake://bob:xxxxx@srv"},
	{dsn: "fake://b%40b:p%2Fw@srv", server: "srv", user: "b@b", pass: "p/w", str: "fake://b%40b:xxxxx@srv"},
	{dsn: "fake://:pw@srv", server: "srv", pass: "pw", str: "fake://:xxxxx@srv"},
	{
		dsn:    "fake://bob:s3cr3t@srv?pool_max_conns=3&app=api&pool_mode=session",
		server: "srv", user: "bob", pass: "s3cr3t", app: "api",
		params: map[string]string{"pool_max_conns": "3", "pool_mode": "session"},
		str:    "fake://bob:xxxxx@srv?app=api",
	},
	{dsn: "fake://srv?pool_whatever=x", server: "srv", params: map[string]string{"pool_whatever": "x"}, str: "fake://srv"},
	{dsn: "fake://srv?sslmode=off", errHas: `unknown DSN parameter "sslmode"`},
	{dsn: "fake://srv?app=a&app=b", errHas: `"app" given more than once`},
	{dsn: "fake://bob:s3cr3t@", errHas: "names no server"},
	{dsn: "fake:///x", errHas: "names no server"},
	{dsn: "fake://srv/db", errHas: `unexpected path "/db"`},
	{dsn: "fake://srv#frag", errHas: "unexpected fragment"},
	{dsn: "postgres://bob:s3cr3t@srv", errHas: "does not start with fake://"},
	{dsn: "fake:bob:s3cr3t@srv", errHas: "want fake://"},
	{dsn: "fake://bob:s3%zzcr3t@srv", errHas: "malformed user or password"},
	{dsn: "fake://bob:s3cr3t@srv%zz", errHas: "invalid URL escape"},
	{dsn: "fake://bob:s3/cr3t@srv", errHas: "invalid DSN"},
	{dsn: "fake://bob:s3cr3t@srv?app=%zz", errHas: "bad query"},
	{dsn: "fake://bob:s3cr3t@sr v", errHas: "invalid DSN"},
}

func TestParseDSN(t *testing.T) {
	for _, tc := range dsnCases {
		tmpl, params, err := Dialect{}.Parse(tc.dsn)
		if tc.errHas != "" {
			if err == nil || !strings.Contains(err.Error(), tc.errHas) {
				t.Errorf("%s: error %v, want one containing %q", tc.dsn, err, tc.errHas)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.dsn, err)
			continue
		}
		tt := tmpl.(*template)
		if tt.server != tc.server || tt.user != tc.user || tt.password != tc.pass || tt.app != tc.app {
			t.Errorf("%s: parsed %+v", tc.dsn, *tt)
		}
		if c := tmpl.Credentials(); c.User != tc.user || c.Password != tc.pass {
			t.Errorf("%s: credentials %q", tc.dsn, c)
		}
		want := tc.params
		if want == nil {
			want = map[string]string{}
		}
		if !maps.Equal(params, want) {
			t.Errorf("%s: params %v, want %v", tc.dsn, params, want)
		}
		if got := tmpl.String(); got != tc.str {
			t.Errorf("%s: String() = %q, want %q", tc.dsn, got, tc.str)
		}
	}
}

// TestDSNRoundTrip: String() of a template without a password parses back
// to the same template.
func TestDSNRoundTrip(t *testing.T) {
	for _, tc := range dsnCases {
		if tc.errHas != "" || tc.pass != "" {
			continue
		}
		a, _, _ := Dialect{}.Parse(tc.dsn)
		b, _, err := Dialect{}.Parse(a.String())
		if err != nil || *a.(*template) != *b.(*template) {
			t.Errorf("%s: round trip via %q gave %v, %v", tc.dsn, a.String(), b, err)
		}
	}
}

// TestNoPasswordInErrors: no error or String() shows the password.
func TestNoPasswordInErrors(t *testing.T) {
	const pw = "s3cr3t"
	for _, tc := range dsnCases {
		tmpl, _, err := Dialect{}.Parse(tc.dsn)
		if err != nil && strings.Contains(err.Error(), "cr3") {
			t.Errorf("%s: error shows the password: %v", tc.dsn, err)
		}
		if err == nil && strings.Contains(tmpl.String(), pw) {
			t.Errorf("%s: String() shows the password", tc.dsn)
		}
	}
	s := newServer(t)
	s.SetPassword("bob", "right")
	tmpl, _, err := Dialect{}.Parse("fake://bob:" + pw + "@" + s.Name())
	if err != nil {
		t.Fatal(err)
	}
	_, err = tmpl.Open(context.Background(), tmpl.Credentials())
	wantErr(t, err, ErrAuthFailed)
	if want := `fakedb: authentication failed for user "bob"`; err.Error() != want {
		t.Fatalf("error %q, want %q", err, want)
	}
	_, err = tmpl.Open(context.Background(), dialects.Credentials{User: "eve", Password: pw})
	if err == nil || strings.Contains(err.Error(), pw) {
		t.Fatalf("unknown user: %v", err)
	}
}

func FuzzParseDSN(f *testing.F) {
	for _, tc := range dsnCases {
		f.Add(tc.dsn)
	}
	f.Fuzz(func(t *testing.T, dsn string) {
		tmpl, params, err := Dialect{}.Parse(dsn)
		if err != nil {
			return
		}
		for k := range params {
			if !strings.HasPrefix(k, "pool_") {
				t.Fatalf("non-pool parameter %q returned", k)
			}
		}
		other := *tmpl.(*template)
		other.password += "-other"
		if tmpl.Credentials().Password != "" && tmpl.String() != other.String() {
			t.Fatalf("String() %q depends on the password", tmpl.String())
		}
	})
}

func TestDialectRegistered(t *testing.T) {
	d, err := dialects.Lookup("fake")
	if err != nil || d.Name() != "fake" {
		t.Fatalf("Lookup: %v, %v", d, err)
	}
}

func TestDialectOpen(t *testing.T) {
	tmpl, _, err := Dialect{}.Parse("fake://bob:pw@" + t.Name() + "?app=api")
	if err != nil {
		t.Fatal(err)
	}
	// Parse needs no server; Open does.
	_, err = tmpl.Open(context.Background(), tmpl.Credentials())
	wantErr(t, err, ErrNoServer)

	s := newServer(t)
	s.SetPassword("bob", "pw")
	dc, err := tmpl.Open(context.Background(), tmpl.Credentials())
	if err != nil {
		t.Fatal(err)
	}
	defer dc.Close()
	c := dc.Raw().(*Conn)
	if dc.Driver() != c || c.User() != "bob" || c.App() != "api" {
		t.Fatal("Raw/Driver/User/App")
	}
	ctx := context.Background()
	if st, err := dc.TxStatus(ctx, ""); err != nil || st != dialects.TxIdle {
		t.Fatalf("TxStatus %v %v", st, err)
	}
	exec(t, c, "BEGIN")
	exec(t, c, "SET x 1")
	if st, _ := dc.TxStatus(ctx, "BEGIN"); st != dialects.TxActive {
		t.Fatalf("TxStatus %v", st)
	}
	if err := dc.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if err := dc.ResetSession(ctx); err != nil {
		t.Fatal(err)
	}
	if _, ok := c.Session("x"); ok {
		t.Fatal("ResetSession kept x")
	}
	if err := dc.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	st := s.Stats()
	if st.TxStatusCalls != 2 || st.Resets != 1 || st.Rollbacks != 1 || st.Pings != 1 || st.Overlaps != 0 {
		t.Fatalf("stats %+v", st)
	}
	dc.Close()
	if s.Stats().Open != 0 {
		t.Fatal("Close")
	}

	// Connector logins skip the password check.
	connect(t, s)
	boom := errors.New("boom")
	s.FailConnects(1, boom)
	_, err = tmpl.Open(ctx, tmpl.Credentials())
	wantErr(t, err, boom)
}
