package integration

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pooldriver/pooldriver"
	"github.com/pooldriver/pooldriver/dialects/mysql"
	"github.com/pooldriver/pooldriver/dialects/postgres"
)

// TestTypedHooks (issue 47): every connection hook has a typed adapter in
// each dialect, which hands the hook the driver's own connection (pgx's
// *pgx.Conn, go-sql-driver's driver.Conn), on which it can run a
// statement; an adapter of another dialect fails with an error that names
// it and what to use it with.
func TestTypedHooks(t *testing.T) {
	t.Parallel()
	forEachServer(t, func(t *testing.T, s server) {
		t.Parallel()
		var connects, acquires, releases, closes atomic.Int64
		var opts []pooldriver.Option
		var wrong pooldriver.Option
		switch s.name {
		case "postgres":
			ping := func(ctx context.Context, c *pgx.Conn) error { return c.Ping(ctx) }
			opts = []pooldriver.Option{
				pooldriver.WithAfterConnect(postgres.AfterConnect(func(ctx context.Context, c *pgx.Conn) error { connects.Add(1); return ping(ctx, c) })),
				pooldriver.WithBeforeAcquire(postgres.BeforeAcquire(func(ctx context.Context, c *pgx.Conn) error { acquires.Add(1); return ping(ctx, c) })),
				pooldriver.WithAfterRelease(postgres.AfterRelease(func(c *pgx.Conn) bool { releases.Add(1); return !c.IsClosed() })),
				pooldriver.WithBeforeClose(postgres.BeforeClose(func(*pgx.Conn) { closes.Add(1) })),
			}
			wrong = pooldriver.WithBeforeAcquire(mysql.BeforeAcquire(func(context.Context, driver.Conn) error { return nil }))
		case "mysql":
			ping := func(ctx context.Context, c driver.Conn) error { return c.(driver.Pinger).Ping(ctx) }
			opts = []pooldriver.Option{
				pooldriver.WithAfterConnect(mysql.AfterConnect(func(ctx context.Context, c driver.Conn) error { connects.Add(1); return ping(ctx, c) })),
				pooldriver.WithBeforeAcquire(mysql.BeforeAcquire(func(ctx context.Context, c driver.Conn) error { acquires.Add(1); return ping(ctx, c) })),
				pooldriver.WithAfterRelease(mysql.AfterRelease(func(c driver.Conn) bool { releases.Add(1); return c.(driver.Validator).IsValid() })),
				pooldriver.WithBeforeClose(mysql.BeforeClose(func(driver.Conn) { closes.Add(1) })),
			}
			wrong = pooldriver.WithBeforeAcquire(postgres.BeforeAcquire(func(context.Context, *pgx.Conn) error { return nil }))
		}
		tn := newTenant(t, s)
		db, c := tn.open(t, "pool_max_conns=1", opts...)
		checkHooksRan(t, db, c, &connects, &acquires, &releases, &closes)
		other, _ := newTenant(t, s).open(t, "", wrong)
		checkWrongDialectHook(t, other)
	})
}

// checkHooksRan runs three statements on db, a pool of one connection
// whose hooks count into the counters, then Resets c: one connect, three
// acquires and releases, one close.
func checkHooksRan(t *testing.T, db *sql.DB, c *pooldriver.Connector, connects, acquires, releases, closes *atomic.Int64) {
	t.Helper()
	for range 3 {
		var one int
		require.NoError(t, db.QueryRowContext(ctx(t), "SELECT 1").Scan(&one))
	}
	waitFor(t, "every release seen", func() bool { return releases.Load() == 3 })
	assert.EqualValues(t, 1, connects.Load(), "stats %+v", c.Stats())
	assert.EqualValues(t, 3, acquires.Load())
	c.Reset()
	waitFor(t, "the close seen", func() bool { return closes.Load() == 1 })
}

// checkWrongDialectHook: db's BeforeAcquire hook is another dialect's
// adapter, which says so.
func checkWrongDialectHook(t *testing.T, db *sql.DB) {
	t.Helper()
	_, err := db.ExecContext(ctx(t), "SELECT 1")
	require.Error(t, err)
	assert.ErrorContains(t, err, "BeforeAcquire: the connection is")
	assert.ErrorContains(t, err, "not this dialect's")
}
