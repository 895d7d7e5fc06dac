//go:build odbc

package integration

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"sync/atomic"
	"testing"

	aodbc "github.com/alexbrainman/odbc"
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
		checkHooksRan(t, db, c, &connects, &acquires, &releases, &closes)
		other := sql.OpenDB(pooldriver.New(s.dsn, pooldriver.WithBeforeAcquire(postgres.BeforeAcquire(nil))))
		defer other.Close()
		checkWrongDialectHook(t, other)
	})
}
