package integration

import (
	"database/sql"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pooldriver/pooldriver"
)

// A MariaDB stored routine runs in the sql_mode it was created with, and
// its body may be a block of statements: pooldriver reads it so, from the
// catalog, and proves it harmless (no reset after a call of it) or not
// (the connection is reset before its next user). Each test creates its
// objects under names prefixed my54_ and drops them after.

// createInMode runs creates on one connection of a pool of pooldriver's
// own, after SET sql_mode = mode (the session's mode is the one a routine
// keeps), and drops what drops name when the test ends. The DDL makes
// every pool of the process read the catalog again; the connection is
// reset after, its sql_mode with it.
func createInMode(t *testing.T, s server, mode string, creates, drops []string) {
	t.Helper()
	t.Cleanup(func() {
		if err := poolExec(t, s, drops...); err != nil {
			t.Errorf("cleaning up: %v", err)
		}
	})
	db := sql.OpenDB(pooldriver.New(withParams(s.dsn, "pool_max_conns=1")))
	defer db.Close()
	c, err := db.Conn(ctx(t))
	require.NoError(t, err)
	defer c.Close()
	_, err = c.ExecContext(ctx(t), "SET sql_mode = '"+mode+"'")
	require.NoError(t, err)
	for _, q := range creates {
		_, err := c.ExecContext(ctx(t), q)
		require.NoError(t, err, q)
	}
}

// TestNeverDirtyMariaDBRoutineSQLMode: stored functions created under
// ANSI_QUOTES, where "get_lock"(…) calls GET_LOCK and "my54_inner"() the
// stored function of that name, which takes a named lock: read in the
// default mode, "…" is a string, the body read as harmless, and the next
// user of the one connection found the lock held.
func TestNeverDirtyMariaDBRoutineSQLMode(t *testing.T) {
	forServer(t, "mysql", func(t *testing.T, s server) {
		lock := unique("my54_lock")
		inner := unique("my54_inner")
		direct := unique("my54_ansi_lock")
		viaInner := unique("my54_ansi_call")
		createInMode(t, s, "STRICT_TRANS_TABLES",
			[]string{"CREATE FUNCTION " + inner + "() RETURNS INT BEGIN DECLARE r INT; SET r = GET_LOCK('" + lock + "', 0); RETURN r; END"},
			[]string{"DROP FUNCTION " + inner})
		createInMode(t, s, "ANSI_QUOTES",
			[]string{
				"CREATE FUNCTION " + direct + `() RETURNS INT RETURN "get_lock"('` + lock + `', 0)`,
				"CREATE FUNCTION " + viaInner + `() RETURNS INT RETURN "` + inner + `"()`,
			},
			[]string{"DROP FUNCTION " + direct, "DROP FUNCTION " + viaInner})
		for name, fn := range map[string]string{`"get_lock"()`: direct, `"stored function"()`: viaInner} {
			t.Run(name, func(t *testing.T) {
				checkDenied(t, s, s.dsn, denyCase{
					dirty:   execAll("SELECT " + fn + "()"),
					observe: myLockFree(s, lock),
					want:    "free: true",
				})
			})
		}
	})
}

// businessFunction is the body of a stored function of the usual shape:
// locals, a branch, a read into a local, a write of two tables, a result;
// extra goes in before the RETURN.
func businessFunction(name, orders, customers, extra string) string {
	return fmt.Sprintf(`CREATE FUNCTION %s(cust INT, qty INT) RETURNS DECIMAL(10,2) MODIFIES SQL DATA
BEGIN
  DECLARE total DECIMAL(10,2) DEFAULT 0;
  DECLARE n INT;
  IF qty <= 0 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'bad quantity';
  ELSEIF qty > 100 THEN
    SET total = qty * 0.9;
  ELSE
    SET total = qty;
  END IF;
  SELECT COUNT(*) INTO n FROM %s WHERE customer = cust;
  INSERT INTO %s (customer, amount) VALUES (cust, total);
  UPDATE %s SET last_total = total WHERE id = cust;
  %s
  RETURN total + n;
END`, name, orders, orders, customers, extra)
}

// callsAtDefaults opens a pool of pooldriver's at the defaults on s, closed
// when the test ends, and returns it and a func that runs query n times,
// the i-th with 1+i%150 for its argument.
func callsAtDefaults(t *testing.T, s server) (*pooldriver.Connector, func(query string, n int)) {
	connector := pooldriver.New(s.dsn)
	require.NoError(t, connector.Err())
	db := sql.OpenDB(connector)
	t.Cleanup(func() { _ = db.Close() })
	return connector, func(query string, n int) {
		t.Helper()
		for i := range n {
			_, err := db.ExecContext(ctx(t), query, 1+i%150)
			require.NoError(t, err, query)
		}
	}
}

// TestMariaDBBusinessFunctionNoReset: a stored function with locals, IF,
// SELECT … INTO a local, INSERT, UPDATE and RETURN, called 1,000 times
// through pooldriver at the defaults, costs no reset; the same function
// with one SET @v, one SET SESSION, or one call of a function the catalog
// cannot prove harmless added costs a reset after every call, and its next
// user finds the session clean.
func TestMariaDBBusinessFunctionNoReset(t *testing.T) {
	forServer(t, "mysql", func(t *testing.T, s server) {
		var zone string
		require.NoError(t, s.admin(t).QueryRowContext(ctx(t), "SELECT @@global.time_zone").Scan(&zone))
		lock := unique("my54_lock")
		variable := unique("my54_v")
		d := newDDL(t, s)
		orders := d.table("my54_orders", "id INT AUTO_INCREMENT PRIMARY KEY, customer INT, amount DECIMAL(10,2)")
		customers := d.table("my54_customers", "id INT PRIMARY KEY, last_total DECIMAL(10,2)")
		d.add("INSERT INTO " + customers + " VALUES (7, 0)")
		locker := unique("my54_locker")
		d.add("CREATE FUNCTION "+locker+"() RETURNS INT BEGIN DECLARE r INT; SELECT GET_LOCK('"+lock+"', 0) INTO r; RETURN r; END",
			"DROP FUNCTION "+locker)
		fns := map[string]string{}
		for variant, extra := range map[string]string{
			"harmless":         "",
			"SET @v":           "SET @" + variable + " = qty;",
			"SET SESSION":      "SET SESSION time_zone = '+05:00';",
			"unproved routine": "SET n = n + " + locker + "();",
		} {
			fns[variant] = unique("my54_order")
			d.add(businessFunction(fns[variant], orders, customers, extra), "DROP FUNCTION "+fns[variant])
		}
		d.apply()

		connector, run := callsAtDefaults(t, s)
		call := func(fn string, n int) { run("SELECT "+fn+"(7, ?)", n) }
		call(fns["harmless"], 10) // the catalog read, the connections made
		before := connector.Stats().SessionResets
		const calls = 1000
		call(fns["harmless"], calls)
		assert.Equal(t, int64(0), connector.Stats().SessionResets-before, "resets over %d calls of a function the catalog proves harmless", calls)

		for _, c := range []struct {
			variant, observe, want string
			reported               bool // by MariaDB's session tracker: seen with pool_trust_functions too
		}{
			{"SET @v", "SELECT coalesce(@" + variable + ", '')", "", true},
			{"SET SESSION", "SELECT @@session.time_zone", zone, true},
			{"unproved routine", "", "free: true", false},
		} {
			t.Run(c.variant, func(t *testing.T) {
				const n = 20
				before := connector.Stats().SessionResets
				call(fns[c.variant], n)
				waitFor(t, fmt.Sprintf("a reset after each of %d calls", n), func() bool {
					return connector.Stats().SessionResets-before >= n
				})
				observe := asks(c.observe)
				if c.observe == "" {
					observe = myLockFree(s, lock)
				}
				checkDenied(t, s, s.dsn, denyCase{
					dirty:    execAll("SELECT " + fns[c.variant] + "(7, 3)"),
					observe:  observe,
					want:     c.want,
					reported: c.reported,
				})
			})
		}
	})
}

// TestNeverDirtyMariaDBAnsiQuotesSession: a session whose DSN turns
// ANSI_QUOTES on calls GET_LOCK as "get_lock"(…) and a stored function as
// "my54_…"(): read as strings, neither counted, and the next user of the
// one connection found the lock held.
func TestNeverDirtyMariaDBAnsiQuotesSession(t *testing.T) {
	forServer(t, "mysql", func(t *testing.T, s server) {
		lock := unique("my54_lock")
		inner := unique("my54_inner")
		d := newDDL(t, s)
		d.add("CREATE FUNCTION "+inner+"() RETURNS INT BEGIN DECLARE r INT; SET r = GET_LOCK('"+lock+"', 0); RETURN r; END",
			"DROP FUNCTION "+inner)
		d.apply()
		dsn := withParams(s.dsn, "sql_mode=%27ANSI_QUOTES%27")
		t.Run(`"get_lock"()`, func(t *testing.T) {
			checkDenied(t, s, dsn, denyCase{
				dirty:   execAll(`SELECT "get_lock"('` + lock + `', 0)`),
				observe: myLockFree(s, lock),
				want:    "free: true",
				shown:   true,
			})
		})
		t.Run(`"stored function"()`, func(t *testing.T) {
			checkDenied(t, s, dsn, denyCase{
				dirty:   execAll(`SELECT "` + inner + `"()`),
				observe: myLockFree(s, lock),
				want:    "free: true",
			})
		})
	})
}

// TestMariaDBProcedureNoReset: CALL of a procedure with locals, IF,
// SELECT … INTO, INSERT and UPDATE, 200 times through pooldriver at the
// defaults, costs no reset; the same procedure with a SET @v added costs a
// reset after every call, and its next user finds no variable.
func TestMariaDBProcedureNoReset(t *testing.T) {
	forServer(t, "mysql", func(t *testing.T, s server) {
		variable := unique("my54_v")
		d := newDDL(t, s)
		orders := d.table("my54_orders", "id INT AUTO_INCREMENT PRIMARY KEY, customer INT, amount DECIMAL(10,2)")
		procs := map[string]string{"harmless": unique("my54_proc"), "SET @v": unique("my54_proc")}
		for variant, extra := range map[string]string{"harmless": "", "SET @v": "SET @" + variable + " = qty;"} {
			d.add(fmt.Sprintf(`CREATE PROCEDURE %s(cust INT, qty INT)
BEGIN
  DECLARE n INT;
  IF qty > 100 THEN SET qty = 100; END IF;
  SELECT COUNT(*) INTO n FROM %s WHERE customer = cust;
  INSERT INTO %s (customer, amount) VALUES (cust, qty + n);
  UPDATE %s SET amount = amount WHERE id = LAST_INSERT_ID();
  %s
END`, procs[variant], orders, orders, orders, extra), "DROP PROCEDURE "+procs[variant])
		}
		d.apply()

		connector, run := callsAtDefaults(t, s)
		call := func(proc string, n int) { run("CALL "+proc+"(7, ?)", n) }
		call(procs["harmless"], 10)
		before := connector.Stats().SessionResets
		const calls = 200
		call(procs["harmless"], calls)
		assert.Equal(t, int64(0), connector.Stats().SessionResets-before, "resets over %d calls of a procedure the catalog proves harmless", calls)

		before = connector.Stats().SessionResets
		const n = 20
		call(procs["SET @v"], n)
		waitFor(t, fmt.Sprintf("a reset after each of %d calls", n), func() bool {
			return connector.Stats().SessionResets-before >= n
		})
		checkDenied(t, s, s.dsn, denyCase{
			dirty:    execAll("CALL " + procs["SET @v"] + "(7, 3)"),
			observe:  asks("SELECT coalesce(@" + variable + ", '')"),
			want:     "",
			reported: true,
		})
	})
}
