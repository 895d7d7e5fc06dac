package integration

import (
	"database/sql"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pooldriver/pooldriver"
)

// PL/pgSQL functions the catalog proves harmless: their bodies are read
// statement by statement, and a call of one is no session change, so the
// connection is not reset; one statement that changes the session, or a
// call of a function the catalog cannot prove, makes every call a reset,
// and the next user sees nothing of it.

// plBusiness returns the definition (what follows CREATE FUNCTION name)
// of a PL/pgSQL function of the business-logic shape: it reads an
// account's balance, decides, updates it, writes a ledger row, raises a
// notice, returns the balance; with extra run before the RETURN.
func plBusiness(accounts, ledger, extra string) string {
	return fmt.Sprintf(`(p_id int, p_amount int) RETURNS int LANGUAGE plpgsql AS $$
DECLARE
	v_balance int;
	v_note text := 'ok';
BEGIN
	SELECT balance INTO v_balance FROM %[1]s WHERE id = p_id;
	IF v_balance IS NULL THEN
		RAISE EXCEPTION 'no account %%', p_id;
	ELSIF v_balance + p_amount > 1000000 THEN
		v_note := 'capped';
		p_amount := 0;
	END IF;
	UPDATE %[1]s SET balance = balance + p_amount WHERE id = p_id RETURNING balance INTO v_balance;
	INSERT INTO %[2]s (account, amount, note) VALUES (p_id, p_amount, v_note);
	RAISE NOTICE 'balance of %% is now %%', p_id, v_balance;
	%[3]s
	RETURN v_balance;
END $$`, accounts, ledger, extra)
}

// plTables adds the tables plBusiness works on, with account 1, and
// returns their names.
func plTables(d *ddl) (accounts, ledger string) {
	accounts = d.table("pl54_accounts", "id int PRIMARY KEY, balance int NOT NULL")
	ledger = d.table("pl54_ledger", "account int, amount int, note text")
	d.add("INSERT INTO " + accounts + " VALUES (1, 0)")
	return accounts, ledger
}

// TestPLpgSQLBusinessLogicNoReset: 1,000 calls of a PL/pgSQL function of
// the business-logic shape through pooldriver at its defaults reset the
// session not once, and each did its work.
func TestPLpgSQLBusinessLogicNoReset(t *testing.T) {
	forServer(t, "postgres", func(t *testing.T, s server) {
		d := newDDL(t, s)
		accounts, ledger := plTables(d)
		fn := unique("pl54_transfer")
		d.add("CREATE FUNCTION "+fn+plBusiness(accounts, ledger, ""), "DROP FUNCTION "+fn)
		dirtyFn := unique("pl54_dirty")
		d.add("CREATE FUNCTION "+dirtyFn+plBusiness(accounts, ledger, "SET search_path = public;"), "DROP FUNCTION "+dirtyFn)
		d.apply()

		c := pooldriver.New(s.dsn)
		require.NoError(t, c.Err())
		db := sql.OpenDB(c)
		defer db.Close()
		resets := c.Stats().SessionResets
		const calls = 1000
		var balance int
		for range calls {
			require.NoError(t, db.QueryRowContext(ctx(t), "SELECT "+fn+"($1, 1)", 1).Scan(&balance))
		}
		assert.Equal(t, calls, balance, "the balance after %d calls", calls)
		var rows int
		require.NoError(t, db.QueryRowContext(ctx(t), "SELECT count(*) FROM "+ledger).Scan(&rows))
		assert.Equal(t, calls, rows, "ledger rows")
		// A call that does need a reset, last: once it is counted, any
		// reset the calls before it caused would have been too.
		_, err := db.ExecContext(ctx(t), "SELECT "+dirtyFn+"($1, 1)", 1)
		require.NoError(t, err)
		nextUser(t, db, "SELECT 'next'")
		waitFor(t, "the reset after the call that SETs", func() bool { return c.Stats().SessionResets > resets })
		// One, the SET's; at most two more over the thousand calls: a call
		// judged while the catalog is read again after DDL (other tests',
		// in this process or another) counts until the new reading
		// vouches for the function. Before PL/pgSQL bodies were read,
		// every call counted.
		got := c.Stats().SessionResets - resets
		t.Logf("%d resets over %d calls of a harmless PL/pgSQL function and one of a function that SETs", got, calls)
		assert.LessOrEqual(t, got, int64(3),
			"resets over %d calls of a harmless PL/pgSQL function and one of a function that SETs", calls)
	})
}

// TestPLpgSQLDirtyVariants: the same function with one statement added
// that changes the session where the caller's text shows nothing: SET,
// EXECUTE of a SET, a call of a function the catalog cannot prove (a
// LANGUAGE sql set_config). Every call is reset (pool of one, each next
// user sees the search_path as it was), in every mode (checkDenied: also
// beside the plain driver, and with pool_trust_functions=true, which
// vouches for the function and leaks).
func TestPLpgSQLDirtyVariants(t *testing.T) {
	forServer(t, "postgres", func(t *testing.T, s server) {
		d := newDDL(t, s)
		accounts, ledger := plTables(d)
		schema := unique("pl54_evil")
		d.add("CREATE SCHEMA "+schema, "DROP SCHEMA "+schema+" CASCADE")
		path := schema + ", public"
		landed := d.landed(schema)
		unproved := unique("pl54_setpath")
		d.add("CREATE FUNCTION "+unproved+"() RETURNS text LANGUAGE sql AS $$ SELECT set_config('search_path', '"+path+"', false) $$",
			"DROP FUNCTION "+unproved)
		variants := []struct{ name, extra string }{
			{"SET", "SET search_path = " + path + ";"},
			{"EXECUTE", "EXECUTE 'SET search_path = " + path + "';"},
			{"unproved call", "PERFORM " + unproved + "();"},
			// PL/pgSQL takes INTO and its target out of a statement wherever
			// they stand: a variable named after a word before which a
			// name's '(' opens a column list (key, index, view, ...) put
			// right before the call once hid it from the reader.
			{"call after INTO key", "DECLARE key text; BEGIN SELECT INTO key " + unproved + "(); END;"},
			{"call after DISTINCT ON", "PERFORM DISTINCT ON (1) " + unproved + "();"},
		}
		fns := make([]string, len(variants))
		for i, v := range variants {
			fns[i] = unique("pl54_variant")
			d.add("CREATE FUNCTION "+fns[i]+plBusiness(accounts, ledger, v.extra), "DROP FUNCTION "+fns[i])
		}
		d.apply()
		for i, v := range variants {
			t.Run(v.name, func(t *testing.T) {
				call := "SELECT " + fns[i] + "(1, 1)"
				t.Run("every call", func(t *testing.T) {
					c := pooldriver.New(withParams(s.dsn, "pool_max_conns=1"))
					require.NoError(t, c.Err())
					db := sql.OpenDB(c)
					defer db.Close()
					resets := c.Stats().SessionResets
					const calls = 3
					for range calls {
						_, err := db.ExecContext(ctx(t), call)
						require.NoError(t, err)
						assert.Equal(t, "public", landed(t, db), "where the next user's INSERT lands")
					}
					// At least one a call: a statement run after a function the
					// catalog cannot vouch for counts as well until the catalog
					// is read again (that function may have run DDL).
					waitFor(t, "a reset per call", func() bool { return c.Stats().SessionResets >= resets+calls })
				})
				checkDenied(t, s, s.dsn, denyCase{dirty: execAll(call), observe: landed, want: "public"})
			})
		}
	})
}
