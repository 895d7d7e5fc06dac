//go:build odbc

package integration

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pooldriver/pooldriver"
)

// TestODBCNestedTx: through ODBC too, a *sql.Tx begun in a task's raw
// transaction nests in it: BEGIN; INSERT 1; BeginTx; INSERT 2;
// tx.Rollback(); INSERT 3; COMMIT keeps 1 and 3; with tx.Commit() and an
// outer ROLLBACK nothing is kept.
func TestODBCNestedTx(t *testing.T) {
	t.Parallel()
	forEachODBCServer(t, func(t *testing.T, s odbcServer) {
		t.Parallel()
		tn := newODBCTenant(t, s)
		db, c := tn.open(t, "pool_max_conns=3")
		table := s.table(t, "nest", "id int")
		ins := "INSERT INTO " + table + " VALUES (?)"
		for _, outer := range []string{"COMMIT", "ROLLBACK"} {
			task, end := pooldriver.WithTask(ctx(t))
			_, err := db.ExecContext(task, "BEGIN")
			require.NoError(t, err)
			_, err = db.ExecContext(task, ins, 1)
			require.NoError(t, err)
			tx, err := db.BeginTx(task, nil)
			require.NoError(t, err)
			_, err = tx.ExecContext(task, ins, 2)
			require.NoError(t, err)
			if outer == "COMMIT" {
				require.NoError(t, tx.Rollback())
			} else {
				require.NoError(t, tx.Commit())
			}
			_, err = db.ExecContext(task, ins, 3)
			require.NoError(t, err)
			_, err = db.ExecContext(task, outer)
			require.NoError(t, err)
			end()
		}
		assert.EqualValues(t, 2, s.adminInt(t, "SELECT count(*) FROM "+table))
		assert.EqualValues(t, 0, s.adminInt(t, "SELECT count(*) FROM "+table+" WHERE id = 2"), "the rolled-back *sql.Tx's row is durable")
		waitFor(t, "the connection back", func() bool { return c.Stats().Active == 0 })
	})
}
