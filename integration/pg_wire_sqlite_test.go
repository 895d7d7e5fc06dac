package integration

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	_ "modernc.org/sqlite"

	"github.com/pooldriver/pooldriver"
)

// driverConnector is a driver.Connector over a driver that has none of
// its own (modernc.org/sqlite).
type driverConnector struct {
	d    driver.Driver
	name string
}

func (c driverConnector) Connect(context.Context) (driver.Conn, error) { return c.d.Open(c.name) }
func (c driverConnector) Driver() driver.Driver                        { return c.d }

// sqliteConnector returns a connector of modernc.org/sqlite for a database
// file of the test's own.
func sqliteConnector(t *testing.T) (driver.Connector, string) {
	t.Helper()
	name := "file:" + filepath.Join(t.TempDir(), "pd.db") + "?_pragma=busy_timeout(5000)"
	db, err := sql.Open("sqlite", name)
	require.NoError(t, err)
	d := db.Driver()
	require.NoError(t, db.Close())
	return driverConnector{d: d, name: name}, name
}

// TestPgWireSQLiteSavepoint (issue 21, item 4): in SQLite, SAVEPOINT
// outside a transaction opens one. On a pool of one, the plain driver
// hands the connection on with it open, and the next user's INSERT returns
// nil inside it, never committed; through pooldriver.Wrap the INSERT is
// durable (or fails).
func TestPgWireSQLiteSavepoint(t *testing.T) {
	for _, f := range []flavour{plainFlavour, wrapFlavour} {
		t.Run(string(f), func(t *testing.T) {
			c, name := sqliteConnector(t)
			var db *sql.DB
			if f == plainFlavour {
				db = sql.OpenDB(c)
				db.SetMaxOpenConns(1)
			} else {
				pc := pooldriver.Wrap(c, pooldriver.WithMaxConns(1))
				require.NoError(t, pc.Err())
				db = sql.OpenDB(pc)
			}
			t.Cleanup(func() { _ = db.Close() })
			reader, err := sql.Open("sqlite", name)
			require.NoError(t, err)
			t.Cleanup(func() { _ = reader.Close() })

			_, err = db.ExecContext(ctx(t), "CREATE TABLE t (v text)")
			require.NoError(t, err)
			_, err = db.ExecContext(ctx(t), "SAVEPOINT a")
			require.NoError(t, err)
			_, insertErr := db.ExecContext(ctx(t), "INSERT INTO t VALUES ('x')")
			var n int
			require.NoError(t, reader.QueryRowContext(ctx(t), "SELECT count(*) FROM t").Scan(&n))
			t.Logf("%s: INSERT: %v; rows another connection sees: %d", f, insertErr, n)
			if f == plainFlavour {
				// The fault pooldriver must not have.
				assert.NoError(t, insertErr)
				assert.Zero(t, n, "plain: the INSERT ran outside the open SAVEPOINT")
				return
			}
			if insertErr == nil {
				assert.Equal(t, 1, n, "the INSERT returned nil but is not durable: it ran inside the SAVEPOINT's transaction")
			}
		})
	}
}
