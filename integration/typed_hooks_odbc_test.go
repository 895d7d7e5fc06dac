//go:build odbc

package integration

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"sync/atomic"
	"testing"

	aodbc "github.com/alexbrainman/odbc"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pooldriver/pooldriver"
	"github.com/pooldriver/pooldriver/dialects/odbc"
	"github.com/pooldriver/pooldriver/dialects/postgres"
)

// TestTypedHooksODBC (issue 47): the ODBC dialect's typed adapters of
// every connection hook hand the hook the driver's *odbc.Conn, on which
// it can run a statement; one of another dialect names itself.
func TestTypedHooksODBC(t *testing.T) {
	forEachODBCServer(t, func(t *testing.T, s odbcServer) {
		var connects, acquires, releases, closes atomic.Int64
		// A statement on the driver's connection: a query, read to its end.
		ping := func(ctx context.Context, c *aodbc.Conn) error {
			rows, err := c.QueryContext(ctx, "SELECT 1", nil)
			if err != nil {
				return err
			}
			dest := make([]driver.Value, 1)
			if err := rows.Next(dest); err != nil {
				_ = rows.Close()
				return err
			}
			return rows.Close()
		}
		c := pooldriver.New(s.dsn+"pool_max_conns=1",
			pooldriver.WithAfterConnect(odbc.AfterConnect(func(ctx context.Context, c *aodbc.Conn) error { connects.Add(1); return ping(ctx, c) })),
			pooldriver.WithBeforeAcquire(odbc.BeforeAcquire(func(ctx context.Context, c *aodbc.Conn) error { acquires.Add(1); return ping(ctx, c) })),
			pooldriver.WithAfterRelease(odbc.AfterRelease(func(c *aodbc.Conn) bool { releases.Add(1); return ping(context.Background(), c) == nil })),
			pooldriver.WithBeforeClose(odbc.BeforeClose(func(*aodbc.Conn) { closes.Add(1) })),
		)
		require.NoError(t, c.Err())
		db := sql.OpenDB(c)
		defer db.Close()
		for range 3 {
			var one int
			require.NoError(t, db.QueryRowContext(ctx(t), "SELECT 1").Scan(&one))
		}
		waitFor(t, "every release seen", func() bool { return releases.Load() == 3 })
		assert.EqualValues(t, 1, connects.Load())
		assert.EqualValues(t, 3, acquires.Load())
		c.Reset()
		waitFor(t, "the close seen", func() bool { return closes.Load() == 1 })

		other := sql.OpenDB(pooldriver.New(s.dsn, pooldriver.WithBeforeAcquire(postgres.BeforeAcquire(nil))))
		defer other.Close()
		_, err := other.ExecContext(ctx(t), "SELECT 1")
		require.Error(t, err)
		assert.ErrorContains(t, err, "BeforeAcquire: the connection is")
		assert.ErrorContains(t, err, "not this dialect's")
	})
}
