package integration

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pooldriver/pooldriver"
)

// TestRawCommitAfterFailedStatement holds docs/tasks.md to what it says of
// a raw COMMIT after a statement of the transaction failed. On PostgreSQL
// the server ends the transaction as a ROLLBACK and the COMMIT returns nil
// (as with plain pgx's Exec("COMMIT")); the ways it names to tell are that
// a *sql.Tx's Commit fails with pgx.ErrTxCommitRollback, and that the
// transaction's status read through RawConn is 'E' (failed) before the
// COMMIT. On MariaDB the transaction goes on, and COMMIT keeps the rest.
func TestRawCommitAfterFailedStatement(t *testing.T) {
	forEachServer(t, func(t *testing.T, s server) {
		table := unique("tr56_commit")
		admin := s.admin(t)
		_, err := admin.ExecContext(ctx(t), "CREATE TABLE "+table+" (id int)")
		require.NoError(t, err)
		t.Cleanup(func() { _, _ = admin.ExecContext(context.Background(), "DROP TABLE "+table) })
		db, err := pooldriver.Open(s.dsn)
		require.NoError(t, err)
		defer db.Close()
		count := func() int {
			var n int
			require.NoError(t, db.QueryRowContext(ctx(t), "SELECT count(*) FROM "+table).Scan(&n))
			return n
		}

		// A raw transaction of a task: COMMIT returns nil, nothing is kept.
		tctx, end := pooldriver.WithTask(ctx(t))
		_, err = db.ExecContext(tctx, "BEGIN")
		require.NoError(t, err)
		_, err = db.ExecContext(tctx, "INSERT INTO "+table+" VALUES (1)")
		require.NoError(t, err)
		_, err = db.ExecContext(tctx, "SELECT * FROM tr56_no_such_table")
		require.Error(t, err)
		_, err = db.ExecContext(tctx, "COMMIT")
		assert.NoError(t, err, "the raw COMMIT of a failed transaction")
		end()
		if s.name == "mysql" {
			assert.Equal(t, 1, count(), "rows kept by the COMMIT after a failed statement")
			return
		}
		assert.Zero(t, count(), "rows kept by the COMMIT of a failed transaction")

		// How to tell, 1: the transaction's status through RawConn.
		conn, err := db.Conn(ctx(t))
		require.NoError(t, err)
		_, err = conn.ExecContext(ctx(t), "BEGIN")
		require.NoError(t, err)
		_, err = conn.ExecContext(ctx(t), "SELECT 1/0")
		require.Error(t, err)
		var status byte
		require.NoError(t, conn.Raw(func(dc any) error {
			return pooldriver.RawConn(ctx(t), dc, func(raw any) error {
				status = raw.(*pgx.Conn).PgConn().TxStatus()
				return nil
			})
		}))
		assert.Equal(t, byte('E'), status, "the status of a failed transaction")
		_, err = conn.ExecContext(ctx(t), "ROLLBACK")
		require.NoError(t, err)
		require.NoError(t, conn.Close())

		// How to tell, 2: a *sql.Tx's Commit says it rolled back.
		tx, err := db.BeginTx(ctx(t), nil)
		require.NoError(t, err)
		_, err = tx.ExecContext(ctx(t), "INSERT INTO "+table+" VALUES (2)")
		require.NoError(t, err)
		_, err = tx.ExecContext(ctx(t), "SELECT 1/0")
		require.Error(t, err)
		err = tx.Commit()
		assert.True(t, errors.Is(err, pgx.ErrTxCommitRollback), "the *sql.Tx's Commit: %v, want pgx.ErrTxCommitRollback", err)
		assert.Zero(t, count())
	})
}
