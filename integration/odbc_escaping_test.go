//go:build odbc

package integration

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pooldriver/pooldriver"
	"github.com/pooldriver/pooldriver/dialects"
	"github.com/pooldriver/pooldriver/dialects/odbc/connstr"
)

// odbcTrickyValues are user names and passwords that need escaping in a
// connection string, and can be expressed there.
var odbcTrickyValues = []string{
	"semi;colon",
	"close}brace",
	"open{brace",
	"}}{{",
	"{braced}",
	"equals=sign",
	"with space",
	`quote'double"`,
	"PWD=x;UID=root;DRIVER=/tmp/evil.so",
	`back\slash`,
	"unicode é 日本語 Ļ 🎉",
	"--;/*",
	"%41+",
}

// odbcUnsafeValues cannot be written so that unixODBC and the driver read
// the same value: the connection must fail before connecting, without
// showing the value.
var odbcUnsafeValues = []struct {
	value  string
	server string // "" for both
}{
	{value: "U+017D Ž reads as }"},
	{value: "alien 👽 (low surrogate DC7D)"},
	{value: "nul\x00byte"},
	{value: "bad \xff utf8"},
	{value: " leading space", server: "mysql"},
	{value: "trailing space ", server: "mysql"},
}

// TestODBCTrickyCredentials connects for real with credentials full of
// characters that need escaping. MariaDB checks passwords: a user is created
// with each tricky password, logs in with it, and is refused with a wrong
// one. PostgreSQL here authenticates by trust (pg_hba.conf), so it cannot
// check a password without a server configuration change: there a role is
// created with each tricky name (the server checks the name; psqlODBC gets
// UID unbraced), and the tricky password must still be read without
// breaking the connection string.
func TestODBCTrickyCredentials(t *testing.T) {
	t.Parallel()
	forEachODBCServer(t, func(t *testing.T, s odbcServer) {
		t.Parallel()
		base := odbcWithoutCredentials(t, s.dsn) + "pool_max_conns=1"
		tmpl := odbcTemplate(t, base)

		for i, v := range odbcTrickyValues {
			t.Run(strings.Fields(v)[0], func(t *testing.T) {
				user, password := unique("pd_odbc_x"), v
				if s.name == "postgres" {
					// psqlODBC reads UID without braces: only a name that
					// can be written so goes in it.
					if _, err := connstr.Plain(v); err == nil {
						user += " " + v
						password = "pw:" + unique("x")
					}
					s.adminExec(t, "CREATE ROLE "+pgIdent(user)+" LOGIN")
					t.Cleanup(func() { s.adminExec(t, "DROP ROLE "+pgIdent(user)) })
				} else {
					s.adminExec(t, "CREATE USER '"+user+"'@'%' IDENTIFIED BY "+mysqlString(password))
					s.adminExec(t, "GRANT SELECT ON `"+odbcDSNDatabase(s.dsn)+"`.* TO '"+user+"'@'%'")
					t.Cleanup(func() { s.adminExec(t, "DROP USER '"+user+"'@'%'") })
				}

				// Through the dialect, as pooldriver opens connections.
				c, err := tmpl.Open(ctx(t), dialects.Credentials{User: user, Password: password})
				require.NoError(t, err)
				defer c.Close()

				// And through pooldriver, once with the credentials in the
				// DSN, escaped as a user would write them.
				dsn := base + ";UID=" + odbcBraced(t, user) + ";PWD=" + odbcBraced(t, password)
				db, err := sql.Open("pooldriver", dsn)
				require.NoError(t, err)
				defer db.Close()
				pc := pooldriver.New(dsn)
				require.NoError(t, pc.Err())
				assert.NotContains(t, pc.String(), password)
				require.NoError(t, pc.Close())
				var who string
				q := "SELECT current_user"
				if s.name == "mysql" {
					q = "SELECT SUBSTRING_INDEX(CURRENT_USER(), '@', 1)"
				}
				require.NoError(t, db.QueryRowContext(ctx(t), q).Scan(&who))
				assert.Equal(t, user, who)

				if s.name == "mysql" {
					wrong := password + "x"
					if i%2 == 0 {
						wrong = "x" + password
					}
					_, err := tmpl.Open(ctx(t), dialects.Credentials{User: user, Password: wrong})
					require.Error(t, err, "a wrong password was accepted")
					assert.NotContains(t, err.Error(), wrong)
					assert.NotContains(t, err.Error(), password)
					assert.Contains(t, err.Error(), "Access denied")
				}
			})
		}

		t.Run("unsafe", func(t *testing.T) {
			for _, u := range odbcUnsafeValues {
				if u.server != "" && u.server != s.name {
					continue
				}
				_, err := tmpl.Open(ctx(t), dialects.Credentials{User: "nobody", Password: u.value})
				require.Error(t, err, "%q", u.value)
				assert.ErrorIs(t, err, connstr.ErrValue)
				assert.NotContains(t, err.Error(), u.value)
				assert.True(t, strings.HasPrefix(err.Error(), "pooldriver: odbc: the password"), err.Error())
			}
			if s.name == "postgres" {
				_, err := tmpl.Open(ctx(t), dialects.Credentials{User: "a;b", Password: "x"})
				assert.ErrorIs(t, err, connstr.ErrValue, "';' in a psqlODBC user name")
			}
		})
	})
}

// odbcWithoutCredentials returns dsn without its user and password, ending
// in ';'.
func odbcWithoutCredentials(t *testing.T, dsn string) string {
	t.Helper()
	attrs, err := connstr.Parse(strings.TrimPrefix(dsn, "odbc://"))
	require.NoError(t, err)
	var b strings.Builder
	b.WriteString("odbc://")
	for _, a := range attrs {
		switch strings.ToUpper(a.Key) {
		case "UID", "USER", "USERNAME", "PWD", "PASSWORD":
		default:
			b.WriteString(a.Raw + ";")
		}
	}
	return b.String()
}

func odbcBraced(t *testing.T, v string) string {
	t.Helper()
	b, err := connstr.Braced(v)
	require.NoError(t, err)
	return b
}

func odbcTemplate(t *testing.T, dsn string) dialects.Template {
	t.Helper()
	d, err := dialects.Lookup("odbc")
	require.NoError(t, err)
	tmpl, _, err := d.Parse(dsn)
	require.NoError(t, err)
	return tmpl
}

// TestODBCCloseEndsTheSession proves there is no third pool: closing a
// physical connection ends its server session, and every connection opened
// is a new session.
func TestODBCCloseEndsTheSession(t *testing.T) {
	t.Parallel()
	forEachODBCServer(t, func(t *testing.T, s odbcServer) {
		t.Parallel()
		tn := newODBCTenant(t, s)
		tmpl := odbcTemplate(t, s.dsn)
		seen := map[int64]bool{}
		for range 3 {
			c, err := tmpl.Open(ctx(t), dialects.Credentials{User: tn.user, Password: tn.password})
			require.NoError(t, err)
			ids := tn.backends(t)
			require.Len(t, ids, 1)
			assert.False(t, seen[ids[0]], "a session came back: the driver manager pooled it")
			seen[ids[0]] = true
			require.NoError(t, c.Close())
			tn.waitConns(t, 0)
		}

		// And through pooldriver: connections past their lifetime are
		// closed on the server.
		db, c := tn.open(t, "pool_max_conns=2;pool_max_conn_lifetime=1ms;pool_health_check_period=10ms")
		for range 3 {
			_, err := db.ExecContext(ctx(t), "SELECT 1")
			require.NoError(t, err)
		}
		odbcWaitFor(t, "expired connections closed", func() bool { return c.Stats().Total == 0 })
		tn.waitConns(t, 0)
		assert.Equal(t, c.Stats().Created, c.Stats().Destroyed)
	})
}

// TestODBCRefusesDriverManagerPooling: with unixODBC's pooling on for the
// driver (odbcinst.ini: [ODBC] Pooling=Yes and CPTimeout), closing would
// leave the session open in unixODBC's pool; the dialect refuses to
// connect. The configuration comes from a directory of its own
// (ODBCSYSINI), so the test is not parallel. The driver manager itself
// read its configuration when the process started and keeps it: only the
// dialect's check sees the new one, which is what is tested here.
func TestODBCRefusesDriverManagerPooling(t *testing.T) {
	forEachODBCServer(t, func(t *testing.T, s odbcServer) {
		dir := t.TempDir()
		ini := "[ODBC]\nPooling=Yes\n\n[PD Pooled]\nDriver=" + s.name + ".so\nCPTimeout=60\n\n[PD Not Pooled]\nDriver=" + s.name + ".so\nCPTimeout=0\n"
		require.NoError(t, os.WriteFile(filepath.Join(dir, "odbcinst.ini"), []byte(ini), 0o600))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "odbc.ini"), nil, 0o600))
		t.Setenv("ODBCSYSINI", dir)

		for _, driver := range []string{"PD Pooled", "PD Not Pooled"} {
			tmpl := odbcTemplate(t, "odbc://Driver={"+driver+"};Server=127.0.0.1")
			_, err := tmpl.Open(context.Background(), dialects.Credentials{User: "u", Password: "Secr3t"})
			require.Error(t, err)
			if driver == "PD Pooled" {
				assert.Contains(t, err.Error(), "unixODBC connection pooling is on")
				assert.Contains(t, err.Error(), "CPTimeout=60")
			} else {
				assert.NotContains(t, err.Error(), "pooling", "CPTimeout=0 does not pool")
			}
			assert.NotContains(t, err.Error(), "Secr3t")
		}
	})
}

// TestODBCOpenErrorHidesPassword: a connection refused by the server or
// by the driver never shows the password, whichever form it was written in.
func TestODBCOpenErrorHidesPassword(t *testing.T) {
	t.Parallel()
	forEachODBCServer(t, func(t *testing.T, s odbcServer) {
		t.Parallel()
		tmpl := odbcTemplate(t, strings.TrimSuffix(s.dsn, ";")+";Port=1")
		_, err := tmpl.Open(ctx(t), dialects.Credentials{User: "nobody", Password: "Secr3t;}pw"})
		require.Error(t, err)
		for _, form := range []string{"Secr3t;}pw", "Secr3t;}}pw", "{Secr3t;}}pw}"} {
			assert.NotContains(t, err.Error(), form)
			for e := errors.Unwrap(err); e != nil; e = errors.Unwrap(e) {
				assert.NotContains(t, e.Error(), form)
			}
		}
		assert.True(t, strings.HasPrefix(err.Error(), "pooldriver: odbc:"), err.Error())
	})
}

// TestODBCConnTxStatus: the dialect's view of raw transactions, including
// the statements after which it must ask the server.
func TestODBCConnTxStatus(t *testing.T) {
	t.Parallel()
	forEachODBCServer(t, func(t *testing.T, s odbcServer) {
		t.Parallel()
		tmpl := odbcTemplate(t, s.dsn)
		c, err := tmpl.Open(ctx(t), tmpl.Credentials())
		require.NoError(t, err)
		defer c.Close()
		table := s.table(t, "txst", "id int")
		implicit := unique("implicit")
		t.Cleanup(func() { _, _ = s.admin(t).ExecContext(context.Background(), "DROP TABLE IF EXISTS "+implicit) })

		type step struct {
			query string
			want  dialects.TxStatus
		}
		steps := []step{
			{"BEGIN", dialects.TxActive},
			{"INSERT INTO " + table + " VALUES (1)", dialects.TxActive},
			{"SAVEPOINT a", dialects.TxActive},
			{"ROLLBACK TO SAVEPOINT a", dialects.TxActive},
			{"COMMIT", dialects.TxIdle},
			{"START TRANSACTION", dialects.TxActive},
			{"ROLLBACK", dialects.TxIdle},
		}
		rows := int64(1)
		if s.name == "postgres" {
			// DO and CALL may commit: the dialect asks the server.
			steps = append(steps,
				step{"DO $$ BEGIN PERFORM 1; END $$", dialects.TxIdle},
				step{"BEGIN", dialects.TxActive},
				step{"DO $$ BEGIN PERFORM 1; END $$", dialects.TxActive},
				step{"END", dialects.TxIdle},
			)
		} else {
			steps = append(steps,
				step{"SET autocommit = 0", dialects.TxIdle},
				step{"INSERT INTO " + table + " VALUES (2)", dialects.TxActive},
				step{"SET autocommit = 1", dialects.TxIdle}, // commits
				step{"/*!40101 START TRANSACTION */", dialects.TxActive},
				step{"CREATE TABLE " + implicit + " (a int)", dialects.TxIdle}, // commits
			)
			rows = 2
		}
		execer := c.Driver().(driver.ExecerContext)
		for _, st := range steps {
			_, err := execer.ExecContext(ctx(t), st.query, nil)
			require.NoError(t, err, st.query)
			got, err := c.TxStatus(ctx(t), st.query)
			require.NoError(t, err)
			assert.Equal(t, st.want, got, st.query)
		}
		_, err = execer.ExecContext(ctx(t), "BEGIN", nil)
		require.NoError(t, err)
		got, err := c.TxStatus(ctx(t), "BEGIN")
		require.NoError(t, err)
		require.Equal(t, dialects.TxActive, got)
		require.NoError(t, c.Rollback(ctx(t)))
		got, err = c.TxStatus(ctx(t), "")
		require.NoError(t, err)
		assert.Equal(t, dialects.TxIdle, got)
		require.NoError(t, c.Ping(ctx(t)))
		assert.Equal(t, rows, s.adminInt(t, "SELECT count(*) FROM "+table))
	})
}
