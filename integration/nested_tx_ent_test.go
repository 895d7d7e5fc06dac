package integration

import (
	"context"
	"database/sql"
	"sort"
	"testing"

	"entgo.io/ent/dialect"
	entsql "entgo.io/ent/dialect/sql"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// ent's generated clients run every statement and transaction through its
// SQL driver, entgo.io/ent/dialect/sql: the generated client.Tx(ctx) is
// (*entsql.Driver).Tx, a BeginTx on the *sql.DB the driver wraps. The tests
// here use that driver directly, with no generated code, to prove what the
// README says of ent's Tx (issue 36): begun inside a task's raw
// transaction, it belongs to that transaction.

// entOn hands e.db to ent's SQL driver, in the server's dialect.
func entOn(e *nestEnv) *entsql.Driver {
	if e.s.name == "mysql" {
		return entsql.OpenDB(dialect.MySQL, e.db)
	}
	return entsql.OpenDB(dialect.Postgres, e.db)
}

// entExec runs query through ent's Exec and returns its result.
func entExec(t *testing.T, x dialect.ExecQuerier, c context.Context, query string, args ...any) sql.Result {
	t.Helper()
	var res sql.Result
	require.NoError(t, x.Exec(c, query, args, &res), query)
	require.NotNil(t, res, query)
	return res
}

// entBackend returns the server's id of the session x runs on, through
// ent's Query.
func entBackend(t *testing.T, x dialect.ExecQuerier, c context.Context, s server) int64 {
	t.Helper()
	var rows entsql.Rows
	require.NoError(t, x.Query(c, s.backendID, []any{}, &rows))
	defer func() { _ = rows.Close() }()
	require.True(t, rows.Next(), s.backendID)
	var id int64
	require.NoError(t, rows.Scan(&id))
	require.NoError(t, rows.Close())
	return id
}

// entNames returns the names in table through ent's Query, sorted.
func entNames(t *testing.T, x dialect.ExecQuerier, c context.Context, table string) []string {
	t.Helper()
	var rows entsql.Rows
	require.NoError(t, x.Query(c, "SELECT name FROM "+table, []any{}, &rows))
	defer func() { _ = rows.Close() }()
	names := []string{}
	for rows.Next() {
		var n string
		require.NoError(t, rows.Scan(&n))
		names = append(names, n)
	}
	require.NoError(t, rows.Err())
	require.NoError(t, rows.Close())
	sort.Strings(names)
	return names
}

// TestNestedTxEnt: ent's Tx inside a task's raw transaction belongs to it:
// it sees the task's uncommitted row, runs on the task's connection, its
// Rollback undoes only its own insert, and the task's ROLLBACK undoes what
// it committed while the task's COMMIT keeps it. Outside any task an ent Tx
// is an ordinary transaction: invisible to others until its Commit, on a
// connection of its own, beside another one open at the same time.
func TestNestedTxEnt(t *testing.T) {
	forEachServer(t, func(t *testing.T, s server) {
		forBoth(t, s, func(t *testing.T, e *nestEnv) {
			drv := entOn(e)
			ins := "INSERT INTO " + e.table + " (name) VALUES (" + s.placeholder(1) + ")"

			want := map[string][]string{"ROLLBACK": {}, "COMMIT": {"ent", "task"}}
			for _, outer := range []string{"ROLLBACK", "COMMIT"} {
				c, end := e.task(t)
				entExec(t, drv, c, "BEGIN")
				entExec(t, drv, c, ins, "task")

				task := entBackend(t, drv, c, s)
				tx, err := drv.Tx(c)
				require.NoError(t, err)
				if e.pooled {
					// By the server's session id, not by the pool's
					// count of connections in use: the catalog's
					// reading after the table's DDL may hold another one
					// for a moment, off the callers' paths.
					assert.Equal(t, task, entBackend(t, tx, c, s), "ent's Tx on the task's connection")
				}
				n, err := entExec(t, tx, c, ins, "ent").RowsAffected()
				require.NoError(t, err)
				assert.EqualValues(t, 1, n, "rows ent's insert affected")
				e.check(t, "ent's Tx sees the task's uncommitted row", []string{"ent", "task"}, entNames(t, tx, c, e.table))
				require.NoError(t, tx.Commit())

				// A second ent Tx, rolled back: only its own insert is undone.
				tx, err = drv.Tx(c)
				require.NoError(t, err)
				entExec(t, tx, c, ins, "ent-rolled-back")
				require.NoError(t, tx.Rollback())
				e.check(t, "the task after ent's Commit and ent's Rollback", []string{"ent", "task"}, entNames(t, drv, c, e.table))

				entExec(t, drv, c, outer)
				end()
				e.check(t, "ent Tx committed, outer "+outer+": durable", want[outer], e.durable(t))
				e.clear(t)
			}
			if e.pooled {
				waitFor(t, "the connection back", func() bool { return e.c.Stats().Active == 0 })
			}

			// Outside any task: ordinary transactions, under pooldriver as
			// under the plain driver.
			c := timeout(t, hangTimeout)
			a, err := drv.Tx(c)
			require.NoError(t, err)
			b, err := drv.Tx(c)
			require.NoError(t, err, "a second ent Tx beside the first")
			entExec(t, a, c, ins, "a")
			entExec(t, b, c, ins, "b")
			if e.pooled {
				assert.Equal(t, 2, e.c.Stats().Active, "each ent Tx on a connection of its own")
			}
			assert.Equal(t, []string{"a"}, entNames(t, a, c, e.table), "ent Tx a sees its own row, not b's")
			assert.Equal(t, []string{}, e.durable(t), "ent Txs open: durable")
			require.NoError(t, b.Rollback())
			require.NoError(t, a.Commit())
			assert.Equal(t, []string{"a"}, e.durable(t), "ent Tx a committed, b rolled back: durable")
			if e.pooled {
				waitFor(t, "the connections back", func() bool { return e.c.Stats().Active == 0 })
			}
		})
	})
}
