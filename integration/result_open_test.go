package integration

import (
	"database/sql"
	"database/sql/driver"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pooldriver/pooldriver"
)

// TestResultOpenInTx (issue 47): inside a *sql.Tx whose rows are still
// open, a second statement is refused (the server sends one result at a
// time) and the transaction goes on: the rows read to their end, the next
// statements run, and the commit keeps what they wrote. pooldriver's error
// says what happened (ErrResultOpen), and is not driver.ErrBadConn or
// ErrConnLost. The plain drivers refuse it with driver.ErrBadConn; pgx's
// stdlib leaves the transaction as it was, go-sql-driver breaks the
// connection (the rows end with "invalid connection") and the transaction
// is gone.
func TestResultOpenInTx(t *testing.T) {
	t.Parallel()
	forEachServer(t, func(t *testing.T, s server) {
		t.Parallel()
		for _, tc := range []struct {
			name string
			db   func(t *testing.T) *sql.DB
		}{
			{"plain", func(t *testing.T) *sql.DB {
				tn := newTenant(t, s)
				db := sql.OpenDB(plainConnector(t, s, tn.base))
				t.Cleanup(func() { _ = db.Close() })
				return db
			}},
			{"pooldriver", func(t *testing.T) *sql.DB {
				db, _ := newTenant(t, s).open(t, "")
				return db
			}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				db := tc.db(t)
				table := s.table(t, "resopen", "id int")
				tx, err := db.BeginTx(ctx(t), nil)
				require.NoError(t, err)
				defer func() { _ = tx.Rollback() }()
				_, err = tx.ExecContext(ctx(t), "INSERT INTO "+table+" VALUES (1)")
				require.NoError(t, err)
				rows, err := tx.QueryContext(ctx(t), "SELECT id FROM "+table)
				require.NoError(t, err)
				require.True(t, rows.Next())

				_, err = tx.ExecContext(ctx(t), "INSERT INTO "+table+" VALUES (2)")
				require.Error(t, err, "a statement while the rows are open")
				_, qerr := tx.QueryContext(ctx(t), "SELECT count(*) FROM "+table)
				require.Error(t, qerr, "a query while the rows are open")
				if tc.name == "pooldriver" {
					for _, e := range []error{err, qerr} {
						assert.ErrorIs(t, e, pooldriver.ErrResultOpen)
						assert.NotErrorIs(t, e, pooldriver.ErrConnLost)
						assert.False(t, errors.Is(e, driver.ErrBadConn), "%v", e)
					}
				}
				if tc.name == "plain" && s.name == "mysql" {
					assert.False(t, rows.Next())
					assert.Error(t, rows.Err(), "go-sql-driver broke the connection")
					return
				}
				require.False(t, rows.Next())
				require.NoError(t, rows.Err())
				require.NoError(t, rows.Close())

				_, err = tx.ExecContext(ctx(t), "INSERT INTO "+table+" VALUES (3)")
				require.NoError(t, err, "the transaction goes on")
				require.NoError(t, tx.Commit())
				assert.EqualValues(t, 2, s.adminInt(t, "SELECT count(*) FROM "+table))
			})
		}
	})
}
