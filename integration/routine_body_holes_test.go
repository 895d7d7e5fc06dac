package integration

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Stored routines whose bodies the reader once took for harmless while
// the server ran a change hidden from it: each is called through
// pooldriver at the defaults in a pool of one, and its next user must
// find the session clean. Objects are named rvm54_… and dropped after.

// hiddenLockCase creates a procedure, in the default sql_mode, whose body
// is body with {change} standing for a statement that takes a named lock (which
// MariaDB's session tracker does not report), and checks that the
// connection is reset before its next user.
func hiddenLockCase(t *testing.T, s server, body string) {
	t.Helper()
	lock := unique("rvm54_lock")
	proc := unique("rvm54_proc")
	d := newDDL(t, s)
	d.add("CREATE PROCEDURE "+proc+"() "+strings.Replace(body, "{change}", "DO GET_LOCK('"+lock+"', 0);", 1), "DROP PROCEDURE "+proc)
	d.apply()
	checkDenied(t, s, s.dsn, denyCase{
		dirty:   execAll("CALL " + proc + "()"),
		observe: myLockFree(s, lock),
		want:    "free: true",
	})
}

// TestNeverDirtyMariaDBRoutineBackslash: ROUTINE_DEFINITION shows a
// body's '\\' as '\': read with backslashes escaping (the default
// sql_mode's reading), that string ran on to the quote of the statement
// after the hidden one, and the lock it took was no change.
func TestNeverDirtyMariaDBRoutineBackslash(t *testing.T) {
	forServer(t, "mysql", func(t *testing.T, s server) {
		hiddenLockCase(t, s, "BEGIN DECLARE x VARCHAR(9);\nSET x = '\\\\';\n{change}\nSET x = ';#';\nEND")
	})
}

// TestNeverDirtyMariaDBRoutineQualifiedKeyword: s.end is a column's name,
// not the END of a CASE; read as one, the reader took the rest of a SET,
// `, @v = 3`, for part of the expression before it: a comparison, where
// the server assigned the user variable.
func TestNeverDirtyMariaDBRoutineQualifiedKeyword(t *testing.T) {
	forServer(t, "mysql", func(t *testing.T, s server) {
		variable := unique("rvm54_v")
		proc := unique("rvm54_proc")
		d := newDDL(t, s)
		d.add("CREATE PROCEDURE "+proc+"() BEGIN DECLARE x INT; SET x = (SELECT s.end FROM (SELECT 1 AS `end`) s), @"+variable+" = 3; END",
			"DROP PROCEDURE "+proc)
		d.apply()
		checkDenied(t, s, s.dsn, denyCase{
			dirty:    execAll("CALL " + proc + "()"),
			observe:  asks("SELECT coalesce(@" + variable + ", '')"),
			want:     "",
			reported: true,
		})
	})
}

// TestNeverDirtyMariaDBRoutineKelvinLocal: a local declared with the
// Kelvin sign in its name is, to Go's Unicode case folding, the system
// variable lock_wait_timeout; to MariaDB another name, whose SET set the
// session's variable.
func TestNeverDirtyMariaDBRoutineKelvinLocal(t *testing.T) {
	forServer(t, "mysql", func(t *testing.T, s server) {
		var want string
		require.NoError(t, s.admin(t).QueryRowContext(ctx(t), "SELECT @@global.lock_wait_timeout").Scan(&want))
		proc := unique("rvm54_proc")
		d := newDDL(t, s)
		d.add("CREATE PROCEDURE "+proc+"() BEGIN DECLARE loc\u212a_wait_timeout INT; SET lock_wait_timeout = 7; END",
			"DROP PROCEDURE "+proc)
		d.apply()
		checkDenied(t, s, s.dsn, denyCase{
			dirty:    execAll("CALL " + proc + "()"),
			observe:  asks("SELECT @@session.lock_wait_timeout"),
			want:     want,
			reported: true,
		})
	})
}

// TestNeverDirtyMariaDBRoutineDatabaseCase: two procedures, one with a
// parameter time_zone, whose SET time_zone sets that parameter, one
// without, whose SET time_zone sets the session's variable: the second
// was read with the first one's parameters where their databases' names
// differ in case only (two databases), and where a '.' in a name made
// the two spell alike (`a.b`.c and a.`b.c`).
func TestNeverDirtyMariaDBRoutineDatabaseCase(t *testing.T) {
	forServer(t, "mysql", func(t *testing.T, s server) {
		var want string
		require.NoError(t, s.admin(t).QueryRowContext(ctx(t), "SELECT @@global.time_zone").Scan(&want))
		upper := unique("RVM54_DB")
		proc := unique("rvm54_zone")
		for name, c := range map[string]struct{ withDB, withProc, withoutDB, withoutProc string }{
			"case":  {upper, proc, strings.ToLower(upper), proc},
			"a dot": {upper + ".b", proc, upper, "b." + proc},
		} {
			t.Run(name, func(t *testing.T) {
				d := newDDL(t, s)
				for _, db := range []string{c.withDB, c.withoutDB} {
					d.add("CREATE DATABASE `"+db+"`", "DROP DATABASE `"+db+"`")
				}
				d.add("CREATE PROCEDURE `" + c.withDB + "`.`" + c.withProc + "`(time_zone VARCHAR(20)) SET time_zone = '+01:00'")
				d.add("CREATE PROCEDURE `" + c.withoutDB + "`.`" + c.withoutProc + "`() SET time_zone = '+05:00'")
				d.apply()
				checkDenied(t, s, s.dsn, denyCase{
					dirty:    execAll("CALL `" + c.withoutDB + "`.`" + c.withoutProc + "`()"),
					observe:  asks("SELECT @@session.time_zone"),
					want:     want,
					reported: true,
				})
			})
		}
	})
}

// TestNeverDirtyMariaDBRoutineAccentedName: MariaDB finds a routine by its
// name in utf8mb3_general_ci, where rvm54_fk() calls the current
// database's function rvm54_fķ: another database's harmless rvm54_fk,
// under the same key to Go's case folding, vouched for the call, and the
// lock rvm54_fķ took reached the next user.
func TestNeverDirtyMariaDBRoutineAccentedName(t *testing.T) {
	forServer(t, "mysql", func(t *testing.T, s server) {
		lock := unique("rvm54_lock")
		fn := unique("rvm54_fk")
		accented := strings.Replace(fn, "fk", "f\u0137", 1)
		other := unique("rvm54_db")
		d := newDDL(t, s)
		d.add("CREATE DATABASE `"+other+"`", "DROP DATABASE `"+other+"`")
		d.add("CREATE FUNCTION `" + other + "`." + fn + "() RETURNS INT RETURN 1")
		d.add("CREATE FUNCTION `"+accented+"`() RETURNS INT RETURN GET_LOCK('"+lock+"', 0)", "DROP FUNCTION `"+accented+"`")
		d.apply()
		checkDenied(t, s, s.dsn, denyCase{
			dirty:   execAll("SELECT " + fn + "()"),
			observe: myLockFree(s, lock),
			want:    "free: true",
		})
	})
}
