package integration

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pooldriver/pooldriver"
)

// TestConnectErrorsLeadWithTheCause (issue 47): the error of a statement
// whose connection cannot be opened starts with the cause, the server's or
// the dial's, within its first 100 characters, says "pooldriver" once, has
// the same shape on both dialects ("pooldriver: <dialect>: <cause> (...)"),
// and still matches ErrServerRefused and the driver's error type.
func TestConnectErrorsLeadWithTheCause(t *testing.T) {
	t.Parallel()
	forEachServer(t, func(t *testing.T, s server) {
		t.Parallel()
		cases := map[string]struct {
			dsn   string
			cause string
		}{}
		switch s.name {
		case "postgres":
			// The server trusts loopback: an unknown role stands for a
			// wrong password (both FATAL at login).
			u, err := url.Parse(s.dsn)
			require.NoError(t, err)
			role, db, port := *u, *u, *u
			role.User = url.User("pd_no_such_role")
			db.Path = "/pd_no_such_db"
			port.Host = "127.0.0.1:1"
			cases["unknown role"] = struct{ dsn, cause string }{role.String(), `FATAL: role "pd_no_such_role" does not exist`}
			cases["unknown database"] = struct{ dsn, cause string }{db.String(), `FATAL: database "pd_no_such_db" does not exist`}
			cases["refused port"] = struct{ dsn, cause string }{port.String(), "connect: connection refused"}
		case "mysql":
			tn := newTenant(t, s)
			wrong := strings.Replace(tn.base, "pw-"+tn.name, "wrong-password", 1)
			require.NotEqual(t, tn.base, wrong, "the tenant's DSN has its password")
			cases["wrong password"] = struct{ dsn, cause string }{wrong, "Access denied for user"}
			cases["unknown database"] = struct{ dsn, cause string }{strings.Replace(s.dsn, "/"+serverDatabase(t, s), "/pd_no_such_db", 1), "Unknown database 'pd_no_such_db'"}
			refused := regexp.MustCompile(`tcp\([^)]*\)`).ReplaceAllString(s.dsn, "tcp(127.0.0.1:1)")
			require.NotEqual(t, s.dsn, refused, "the DSN names a TCP address")
			cases["refused port"] = struct{ dsn, cause string }{refused, "connect: connection refused"}
		}
		// An unknown host (a typo): the resolver says it does not exist.
		const nowhere = "pd-no-such-host.invalid"
		if _, err := net.LookupHost(nowhere); isNotFound(err) {
			host := regexp.MustCompile(`127\.0\.0\.1|localhost`).ReplaceAllString(cases["refused port"].dsn, nowhere)
			cases["unknown host"] = struct{ dsn, cause string }{host, "no such host"}
		} else {
			t.Logf("no unknown-host case: the resolver does not answer that %s does not exist (%v)", nowhere, err)
		}
		for name, tc := range cases {
			t.Run(name, func(t *testing.T) {
				db := sql.OpenDB(pooldriver.New(tc.dsn))
				defer db.Close()
				_, err := db.ExecContext(context.Background(), "SELECT 1")
				require.Error(t, err)
				msg := err.Error()
				t.Log(msg)
				assert.True(t, strings.HasPrefix(msg, "pooldriver: "+s.name+": "), "the shape: %s", msg)
				i := strings.Index(msg, tc.cause)
				assert.True(t, i >= 0 && i < 100, "the cause at %d: %s", i, msg)
				assert.Equal(t, 1, strings.Count(msg, "pooldriver"), msg)
				assert.ErrorIs(t, err, pooldriver.ErrServerRefused)
				if name != "refused port" && name != "unknown host" {
					var pe *pgconn.PgError
					var me *mysql.MySQLError
					assert.True(t, errors.As(err, &pe) || errors.As(err, &me), "the server's error, reachable: %T", err)
				}
			})
		}
	})
}

// isNotFound reports the resolver's answer that a name does not exist.
func isNotFound(err error) bool {
	var dns *net.DNSError
	return errors.As(err, &dns) && dns.IsNotFound
}

// TestConnectErrorWrongPasswordPostgres: a wrong password (SQLSTATE 28P01)
// reads as the other connect errors do, cause first. The shared server
// trusts loopback, so a cluster of the test's own asks for passwords.
func TestConnectErrorWrongPasswordPostgres(t *testing.T) {
	skipShort(t)
	pg := startLocalPG(t)
	pg.sql(t, "CREATE ROLE pd_pw LOGIN PASSWORD 'right-password'")
	hba := "host all postgres 127.0.0.1/32 trust\nhost all all 127.0.0.1/32 scram-sha-256\nlocal all all trust\n"
	require.NoError(t, os.WriteFile(filepath.Join(pg.data(), "pg_hba.conf"), []byte(hba), 0o600))
	pg.sql(t, "SELECT pg_reload_conf()")
	dsn := fmt.Sprintf("postgres://pd_pw:wrong-password@127.0.0.1:%d/postgres?sslmode=disable", pg.port)
	var err error
	waitFor(t, "the server to ask for a password", func() bool {
		db := sql.OpenDB(pooldriver.New(dsn))
		defer db.Close()
		_, err = db.ExecContext(context.Background(), "SELECT 1")
		return err != nil
	})
	msg := err.Error()
	t.Log(msg)
	if pool, err := pgxpool.New(context.Background(), dsn); err == nil { // for README's table, beside ours
		_, err = pool.Exec(context.Background(), "SELECT 1")
		t.Logf("pgxpool: %v", err)
		pool.Close()
	}
	const cause = `FATAL: password authentication failed for user "pd_pw"`
	assert.True(t, strings.HasPrefix(msg, "pooldriver: postgres: "), "the shape: %s", msg)
	i := strings.Index(msg, cause)
	assert.True(t, i >= 0 && i < 100, "the cause at %d: %s", i, msg)
	assert.Equal(t, 1, strings.Count(msg, "pooldriver"), msg)
	assert.NotContains(t, msg, "wrong-password")
	assert.ErrorIs(t, err, pooldriver.ErrServerRefused)
	var pe *pgconn.PgError
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, "28P01", pe.Code)
}
