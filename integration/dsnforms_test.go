package integration

import (
	"database/sql"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pooldriver/pooldriver"
)

// TestMySQLDSNForms: the URL form a MySQL user types first,
// mysql://user@host:port/db, opens and runs beside go-sql-driver's
// mysql://user@tcp(host:port)/db (before: "default addr for network
// '127.0.0.1:xxxxx' unknown").
func TestMySQLDSNForms(t *testing.T) {
	forServer(t, "mysql", func(t *testing.T, s server) {
		urlForm := regexp.MustCompile(`@tcp\(([^)]*)\)/`).ReplaceAllString(s.dsn, "@$1/")
		require.NotEqual(t, s.dsn, urlForm, "the test's DSN is not in go-sql-driver's tcp(host:port) form: %s", s.dsn)
		for _, dsn := range []string{s.dsn, urlForm} {
			c := pooldriver.New(withParams(dsn, "pool_max_conns=2"))
			require.NoError(t, c.Err(), "the form %s", c)
			db := sql.OpenDB(c)
			var one int
			require.NoError(t, db.QueryRowContext(ctx(t), "SELECT 1").Scan(&one), "through %s", c)
			require.Equal(t, 1, one)
			require.NoError(t, db.Close())
		}
	})
}
