package integration

import (
	"database/sql/driver"
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/pooldriver/pooldriver/dialects"
	"github.com/pooldriver/pooldriver/dialects/postgres"
)

// TestReadsDialectPostgres proves on a private primary and its streaming
// standby what the PostgreSQL dialect offers for reads on standbys
// (dialects/replicas.go): the standby templates of a multi-host DSN, the
// log position of each server, and a commit that returns its position,
// which the standby then reaches with the commit visible.
func TestReadsDialectPostgres(t *testing.T) {
	skipShort(t)
	primary := startLocalPG(t)
	standby := primary.startStandby(t)
	dsn := fmt.Sprintf("postgres://postgres@127.0.0.1:%d,127.0.0.1:%d/postgres?sslmode=disable&target_session_attrs=read-write", primary.port, standby.port)
	tmpl, _, err := postgres.Dialect.Parse(dsn)
	require.NoError(t, err)
	standbys := tmpl.(dialects.StandbyTemplates).Standbys()
	require.Len(t, standbys, 2)

	pc := open(t, tmpl)
	require.Equal(t, fmt.Sprint(primary.port), queryString(t, pc, "SELECT inet_server_port()"))
	table := unique("reads_dialect")
	exec(t, pc, "CREATE TABLE "+table+" (k int PRIMARY KEY)")
	count := func(c dialects.Conn, k int) string {
		t.Helper()
		return queryString(t, c, fmt.Sprintf("SELECT count(*) FROM %s WHERE k = %d", table, k))
	}
	position := func(c dialects.Conn) (dialects.Position, bool) {
		t.Helper()
		pos, sb, err := c.(dialects.Positioner).LogPosition(ctx(t))
		require.NoError(t, err)
		return pos, sb
	}
	begin := func(c dialects.Conn) driver.Tx {
		t.Helper()
		tx, err := c.(driver.ConnBeginTx).BeginTx(ctx(t), driver.TxOptions{})
		require.NoError(t, err)
		return tx
	}

	t.Run("StandbyTemplates", func(t *testing.T) {
		require.Equal(t, fmt.Sprintf("127.0.0.1:%d/postgres", primary.port), standbys[0].(dialects.AddressedTemplate).Address().String())
		require.Equal(t, fmt.Sprintf("127.0.0.1:%d/postgres", standby.port), standbys[1].(dialects.AddressedTemplate).Address().String())
		c, err := standbys[0].Open(ctx(t), standbys[0].Credentials())
		if c != nil {
			_ = c.Close()
		}
		require.ErrorIs(t, err, dialects.ErrNotStandby, "the primary's host")
		t.Logf("the primary's host: %v", err)
		sc := open(t, standbys[1])
		require.Equal(t, fmt.Sprint(standby.port), queryString(t, sc, "SELECT inet_server_port()"))
		require.Equal(t, "true", queryString(t, sc, "SELECT pg_is_in_recovery()"))
	})

	sc := open(t, standbys[1])

	t.Run("LogPosition", func(t *testing.T) {
		before, sb := position(pc)
		require.False(t, sb, "the primary")
		require.NotZero(t, before)
		exec(t, pc, "INSERT INTO "+table+" VALUES (100)")
		after, _ := position(pc)
		require.Greater(t, after, before, "after a write")
		replayed, sb := position(sc)
		require.True(t, sb, "the standby")
		require.NotZero(t, replayed)
		require.Equal(t, dialects.TxIdle, txStatus(t, pc, ""))
		require.Equal(t, dialects.TxIdle, txStatus(t, sc, ""))
	})

	t.Run("StandbyConnKeptOnRefusedWrite", func(t *testing.T) {
		// A standby template asks for no writable server: a write the
		// standby refuses is not a lost role, which would close the
		// connection to follow a primary.
		err := execErr(t, sc, "INSERT INTO "+table+" VALUES (200)")
		var pe *pgconn.PgError
		require.True(t, errors.As(err, &pe), "%v", err)
		require.Equal(t, "25006", pe.Code)
		_, lost := sc.(dialects.RoleLossDetector).LostRole(err)
		require.False(t, lost)
		changed, _, err := sc.(dialects.StatementObserver).Observe(ctx(t), "INSERT INTO "+table+" VALUES (200)", true)
		require.NoError(t, err, "no dialects.RoleLostError")
		require.False(t, changed)
	})

	t.Run("CommitAtOnStandby", func(t *testing.T) {
		// A read-only transaction on a standby commits; its position is
		// the standby's replayed one.
		begin(sc)
		count(sc, 1)
		pos, err := sc.(dialects.PositionCommitter).CommitAt(ctx(t))
		require.NoError(t, err)
		require.NotZero(t, pos)
		require.Equal(t, dialects.TxIdle, txStatus(t, sc, "COMMIT"))
	})

	t.Run("CommitAt", func(t *testing.T) {
		begin(pc)
		exec(t, pc, "INSERT INTO "+table+" VALUES (1)")
		pos, err := pc.(dialects.PositionCommitter).CommitAt(ctx(t))
		require.NoError(t, err)
		require.NotZero(t, pos)
		require.Equal(t, dialects.TxIdle, txStatus(t, pc, "COMMIT"))
		other := open(t, tmpl)
		require.Equal(t, "1", count(other, 1), "committed, seen by another session")
		now, _ := position(pc)
		require.GreaterOrEqual(t, now, pos)
		waitForSaying(t, "the standby to replay the commit", func() bool {
			replayed, _ := position(sc)
			return replayed >= pos
		}, func() string {
			replayed, _ := position(sc)
			return fmt.Sprintf("replayed %s, commit at %s", replayed, pos)
		})
		require.Equal(t, "1", count(sc, 1), "on the standby once it replayed the commit's position")
	})

	t.Run("CommitAtFailedTransaction", func(t *testing.T) {
		begin(pc)
		exec(t, pc, "INSERT INTO "+table+" VALUES (2)")
		require.Error(t, execErr(t, pc, "SELECT 1/0"))
		require.Equal(t, dialects.TxFailed, txStatus(t, pc, "SELECT 1/0"))
		pos, err := pc.(dialects.PositionCommitter).CommitAt(ctx(t))
		require.ErrorIs(t, err, pgx.ErrTxCommitRollback)
		require.Zero(t, pos)
		require.Equal(t, dialects.TxIdle, txStatus(t, pc, "COMMIT"))
		require.Equal(t, "0", count(pc, 2), "rolled back")

		// The connection goes on as after the stdlib's Commit.
		tx := begin(pc)
		exec(t, pc, "INSERT INTO "+table+" VALUES (3)")
		require.NoError(t, tx.Commit())
		require.Equal(t, dialects.TxIdle, txStatus(t, pc, "COMMIT"))
		require.Equal(t, "1", count(pc, 3))
	})

	t.Run("CommitAtFailingCommit", func(t *testing.T) {
		// A deferred unique constraint fails at COMMIT: the same error as
		// the stdlib's Commit, the transaction gone, the connection kept.
		deferred := unique("reads_deferred")
		exec(t, pc, "CREATE TABLE "+deferred+" (k int UNIQUE DEFERRABLE INITIALLY DEFERRED)")
		commitErr := func(commit func(tx driver.Tx) error) *pgconn.PgError {
			t.Helper()
			tx := begin(pc)
			exec(t, pc, "INSERT INTO "+deferred+" VALUES (1), (1)")
			err := commit(tx)
			var pe *pgconn.PgError
			require.True(t, errors.As(err, &pe), "%v", err)
			require.Equal(t, dialects.TxIdle, txStatus(t, pc, "COMMIT"))
			require.Equal(t, "0", queryString(t, pc, "SELECT count(*) FROM "+deferred))
			return pe
		}
		viaStdlib := commitErr(func(tx driver.Tx) error { return tx.Commit() })
		viaCommitAt := commitErr(func(driver.Tx) error {
			_, err := pc.(dialects.PositionCommitter).CommitAt(ctx(t))
			return err
		})
		require.Equal(t, viaStdlib.Code, viaCommitAt.Code)
		require.Equal(t, "23505", viaCommitAt.Code)
		require.True(t, pc.(driver.Validator).IsValid())
	})
}
