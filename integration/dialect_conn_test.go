package integration

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pooldriver/pooldriver/dialects"
)

func TestConnRawTransaction(t *testing.T) {
	forEachServer(t, func(t *testing.T, s server) {
		c := open(t, s.template(t, ""))
		require.Equal(t, dialects.TxIdle, txStatus(t, c, ""))

		for _, begin := range []string{"BEGIN", "START TRANSACTION", "  /* c */ begin"} {
			exec(t, c, begin)
			assert.Equal(t, dialects.TxActive, txStatus(t, c, begin), begin)
			q := "SELECT 1 + " + s.placeholder(1)
			require.Equal(t, "2", queryString(t, c, q, int64(1)))
			assert.Equal(t, dialects.TxActive, txStatus(t, c, q))
			exec(t, c, "COMMIT")
			assert.Equal(t, dialects.TxIdle, txStatus(t, c, "COMMIT"))
		}

		exec(t, c, "BEGIN")
		require.Equal(t, dialects.TxActive, txStatus(t, c, "BEGIN"))
		require.NoError(t, c.Rollback(ctx(t)))
		assert.Equal(t, dialects.TxIdle, txStatus(t, c, ""))

		// Rollback outside a transaction is harmless.
		require.NoError(t, c.Rollback(ctx(t)))
		assert.Equal(t, dialects.TxIdle, txStatus(t, c, ""))
		require.NoError(t, c.Ping(ctx(t)))
	})
}

func TestConnFailedTransaction(t *testing.T) {
	forServer(t, "postgres", func(t *testing.T, s server) { // only PostgreSQL has failed transactions
		c := open(t, s.template(t, ""))
		exec(t, c, "BEGIN")
		require.Error(t, execErr(t, c, "SELECT 1/0"))
		assert.Equal(t, dialects.TxFailed, txStatus(t, c, "SELECT 1/0"))
		require.NoError(t, c.Rollback(ctx(t)))
		assert.Equal(t, dialects.TxIdle, txStatus(t, c, "ROLLBACK"))
	})
}

func TestConnMySQLImplicitTransactions(t *testing.T) {
	forServer(t, "mysql", func(t *testing.T, s server) {
		tmpl := s.template(t, "")
		c := open(t, tmpl)
		table := unique("tx")
		exec(t, c, "CREATE TABLE "+table+" (a int) ENGINE=InnoDB")
		t.Cleanup(func() { _ = execErr(t, open(t, tmpl), "DROP TABLE "+table) })

		// Plain statements outside a transaction: no round trip needed, idle.
		ins := "INSERT INTO " + table + " VALUES (?)"
		exec(t, c, ins, int64(1))
		assert.Equal(t, dialects.TxIdle, txStatus(t, c, ins))

		// A transaction opened by a stored procedure's caller.
		exec(t, c, "SET autocommit = 0")
		assert.Equal(t, dialects.TxIdle, txStatus(t, c, "SET autocommit = 0"))
		exec(t, c, ins, int64(2))
		assert.Equal(t, dialects.TxActive, txStatus(t, c, ins), "a DML statement with autocommit off opens a transaction")
		exec(t, c, "SET autocommit = 1") // commits
		assert.Equal(t, dialects.TxIdle, txStatus(t, c, "SET autocommit = 1"))

		// DDL commits implicitly.
		exec(t, c, "BEGIN")
		require.Equal(t, dialects.TxActive, txStatus(t, c, "BEGIN"))
		exec(t, c, ins, int64(3))
		require.Equal(t, dialects.TxActive, txStatus(t, c, ins))
		ddl := "CREATE TEMPORARY TABLE " + unique("t") + " (a int)" // does not commit
		exec(t, c, ddl)
		assert.Equal(t, dialects.TxActive, txStatus(t, c, ddl))
		ddl = "ALTER TABLE " + table + " ADD COLUMN b int"
		exec(t, c, ddl)
		assert.Equal(t, dialects.TxIdle, txStatus(t, c, ddl))

		// Executable comments are taken seriously.
		q := "/*!40101 START TRANSACTION */"
		exec(t, c, q)
		assert.Equal(t, dialects.TxActive, txStatus(t, c, q))
		require.NoError(t, c.Rollback(ctx(t)))
		assert.Equal(t, dialects.TxIdle, txStatus(t, c, ""))
	})
}

func TestConnResetSession(t *testing.T) {
	forEachServer(t, func(t *testing.T, s server) {
		tmpl := s.template(t, "")
		c := open(t, tmpl)
		other := open(t, tmpl)
		lock := unique("lock")
		temp := unique("tmp")
		stmt := unique("stmt")
		argQuery := "SELECT " + s.placeholder(1) + " || ''"
		if s.name == "mysql" {
			argQuery = "SELECT CONCAT(?, '')"
		}

		// Dirty the session in every way a task may.
		exec(t, c, s.setVar)
		exec(t, c, s.setSetting)
		exec(t, c, "CREATE TEMPORARY TABLE "+temp+" (a int)")
		exec(t, c, s.lock, lock)
		exec(t, c, fmt.Sprintf(s.prepare, stmt))
		require.Equal(t, "x", queryString(t, c, argQuery, "x")) // caches a prepared statement in pgx
		exec(t, c, "BEGIN")
		require.Equal(t, dialects.TxActive, txStatus(t, c, "BEGIN"))
		exec(t, c, "INSERT INTO "+temp+" VALUES (1)")
		require.Equal(t, dialects.TxActive, txStatus(t, c, "INSERT INTO "+temp+" VALUES (1)"))
		require.Equal(t, "1", queryString(t, c, s.getVar))
		require.Contains(t, queryString(t, c, s.getSetting), s.settingVal)
		require.Contains(t, []string{"0", "false"}, queryString(t, other, s.lockIsFree, lock))

		require.NoError(t, c.ResetSession(ctx(t)))

		assert.Equal(t, dialects.TxIdle, txStatus(t, c, ""))
		assert.Equal(t, "", queryString(t, c, s.getVar), "variable survived")
		assert.NotContains(t, queryString(t, c, s.getSetting), s.settingVal, "setting survived")
		assert.Error(t, execErr(t, c, "SELECT * FROM "+temp), "temporary table survived")
		assert.Error(t, execErr(t, c, fmt.Sprintf(s.execute, stmt)), "prepared statement survived")
		free := queryString(t, other, s.lockIsFree, lock)
		assert.Contains(t, []string{"1", "true"}, free, "lock survived")
		if s.name == "postgres" {
			exec(t, other, s.unlock, lock) // pg_try_advisory_lock took it
		}
		// pgx must not use the statement the server forgot.
		assert.Equal(t, "y", queryString(t, c, argQuery, "y"))
		assert.Equal(t, "z", queryString(t, c, argQuery, "z"))
		require.NoError(t, c.Ping(ctx(t)))

		// A second reset on a clean session works too.
		require.NoError(t, c.ResetSession(ctx(t)))
		assert.Equal(t, "w", queryString(t, c, argQuery, "w"))
	})
}

// TestConnResetKeepsConnectSettings checks that a reset returns to the
// session as the DSN configured it, not to the server's defaults.
func TestConnResetKeepsConnectSettings(t *testing.T) {
	forEachServer(t, func(t *testing.T, s server) {
		var extra, check, want, change string
		if s.name == "postgres" {
			extra, check, want, change = "application_name=pooldriver_it", "SHOW application_name", "pooldriver_it", "SET application_name = 'other'"
		} else {
			extra, check, want, change = "time_zone=%27%2B03%3A00%27", "SELECT @@SESSION.time_zone", "+03:00", "SET time_zone = '+01:00'"
		}
		c := open(t, s.template(t, extra))
		require.Equal(t, want, queryString(t, c, check))
		exec(t, c, change)
		require.NotEqual(t, want, queryString(t, c, check))
		require.NoError(t, c.ResetSession(ctx(t)))
		assert.Equal(t, want, queryString(t, c, check))

		if s.name == "mysql" {
			db := queryString(t, c, "SELECT DATABASE()")
			exec(t, c, "SET NAMES latin1")
			exec(t, c, "USE mysql")
			require.NoError(t, c.ResetSession(ctx(t)))
			assert.Equal(t, "utf8mb4", queryString(t, c, "SELECT @@character_set_client"))
			assert.Equal(t, "utf8mb4", queryString(t, c, "SELECT @@character_set_results"))
			assert.Equal(t, db, queryString(t, c, "SELECT DATABASE()"))
			assert.Equal(t, "é", queryString(t, c, "SELECT CONCAT(?, '')", "é"))
		}
	})
}

func TestConnOpenBadPassword(t *testing.T) {
	forEachServer(t, func(t *testing.T, s server) {
		tmpl := s.template(t, "")
		creds := tmpl.Credentials()
		creds.User = unique("nobody")
		creds.Password = "Secr3t-" + unique("pw")
		_, err := tmpl.Open(ctx(t), creds)
		if err == nil {
			t.Skip("the server accepts any password (trust authentication)")
		}
		assert.NotContains(t, err.Error(), creds.Password)
		if s.name == "mysql" {
			// The server's refusal itself, as the plain driver returns it.
			var me *mysql.MySQLError
			// 1045 access denied; 1698 the same where the server has no
			// password for the user at that host (the Docker image's).
			assert.True(t, errors.As(err, &me) && (me.Number == 1045 || me.Number == 1698), "%#v", err)
		} else {
			assert.True(t, strings.HasPrefix(err.Error(), "pooldriver: "+s.name), err.Error())
		}
	})
}
