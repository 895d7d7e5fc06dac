package odbc

import (
	"database/sql/driver"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/pooldriver/pooldriver/dialects"
)

func TestChangesSessionByServer(t *testing.T) {
	for _, tc := range []struct {
		query             string
		pg, my, otherwise bool
	}{
		{"SELECT a FROM t WHERE id = ?", false, false, false},
		{"SELECT 'SET x = 1'", false, false, false},
		{"SET search_path = a", true, true, true},
		{"SET LOCAL search_path = a", false, true, true},
		// Another server's built-in is a user's function there, unknown.
		{"SELECT set_config('a.b', 'c', true)", false, true, false},
		{"SELECT set_config('a.b', 'c', false)", true, true, true},
		{"SELECT pg_advisory_xact_lock(1)", false, true, false},
		{"SELECT pg_advisory_lock(1)", true, true, true},
		{"SELECT GET_LOCK('x', 1)", true, true, true},
		{"SELECT my_func(1)", true, true, true},
		{"CALL p()", true, true, true},
		{"SELECT lower(a), count(*) FROM t", false, false, false},
		{"SELECT $$;SET x = 1$$", false, true, true},
		{"SELECT 1 # ; SET x.y = 1", true, false, true},
		{"LISTEN c", true, false, true},
		{"USE db", false, true, true},
		{"PRAGMA foreign_keys = ON", false, false, true},
	} {
		for _, s := range []struct {
			server server
			want   bool
		}{{postgres, tc.pg}, {mysql, tc.my}, {generic, tc.otherwise}} {
			c := &conn{d: &drvConn{server: s.server}}
			if got := c.ChangesSession(tc.query); got != s.want {
				t.Errorf("ChangesSession(%q) for a %s server = %v, want %v", tc.query, s.server, got, s.want)
			}
		}
	}
}

// TestChangesSessionOnServers opens a connection to each test server
// through its ODBC driver, to check that the server is recognized and its
// rules apply.
func TestChangesSessionOnServers(t *testing.T) {
	for _, tc := range []struct {
		env, dsn, port string
		server         server
		changes        string // changes the session on this server
		plain          string // would change it, read as the other server's SQL
	}{
		{
			"POOLDRIVER_ODBC_POSTGRES_DSN", "odbc://Driver={PostgreSQL Unicode};Server=127.0.0.1;Port=5432;Database=test;UID=postgres;", "5432",
			postgres, "SELECT pg_advisory_lock(42)", "SELECT $$ ; SET x.y = 1 $$",
		},
		{
			"POOLDRIVER_ODBC_MYSQL_DSN", "odbc://Driver={MariaDB Unicode};Server=127.0.0.1;Port=3306;Database=test;UID=root;", "3306",
			mysql, "SELECT GET_LOCK('pooldriver_x', 0)", "SELECT 1 # ; SET x.y = 1",
		},
	} {
		t.Run(tc.server.String(), func(t *testing.T) {
			dsn := os.Getenv(tc.env)
			if dsn == "" {
				dsn = tc.dsn
			}
			tmpl, _, err := Dialect.Parse(dsn)
			if err != nil {
				t.Fatal(err)
			}
			needServer(t, tmpl.(*template), tc.port)
			c, err := tmpl.Open(t.Context(), tmpl.Credentials())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			oc := c.(*conn)
			if oc.d.server != tc.server {
				t.Fatalf("server = %s, want %s", oc.d.server, tc.server)
			}
			for _, q := range []string{tc.changes, tc.plain} {
				if _, err := oc.Driver().(driver.ExecerContext).ExecContext(t.Context(), q, nil); err != nil {
					t.Fatalf("%s: %v", q, err)
				}
			}
			st := c.(dialects.SessionTracker)
			if !st.ChangesSession(tc.changes) {
				t.Errorf("ChangesSession(%q) = false", tc.changes)
			}
			if st.ChangesSession(tc.plain) {
				t.Errorf("ChangesSession(%q) = true", tc.plain)
			}
		})
	}
}

// needServer skips the test, unless under CI, when the server's port is
// closed or its ODBC driver is not installed.
func needServer(t *testing.T, tmpl *template, port string) {
	t.Helper()
	skip := func(format string, args ...any) {
		t.Helper()
		if os.Getenv("CI") == "true" {
			t.Fatalf(format, args...)
		}
		t.Skipf(format, args...)
	}
	host := "127.0.0.1"
	for _, a := range tmpl.d.attrs {
		switch strings.ToLower(a.Key) {
		case "server":
			host = a.Value
		case "port":
			port = a.Value
		}
	}
	nc, err := net.DialTimeout("tcp", net.JoinHostPort(host, port), 2*time.Second)
	if err != nil {
		skip("no server: %v", err)
	}
	nc.Close()
	if tmpl.d.driver != "" && tmpl.ini.driverEntry(tmpl.d.driver, "Driver") == "" {
		skip("ODBC driver %q is not installed", tmpl.d.driver)
	}
}
