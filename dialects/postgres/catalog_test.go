package postgres

import (
	"context"
	"database/sql/driver"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pooldriver/pooldriver/dialects"
)

// TestCatalogShadows (issue 45): what the catalog says runs user code
// where a statement's text names no call, read from the server: a user's
// overload of a listed name, a user's operator, a table with a trigger, a
// partition's trigger through its parent, a view over such a table, a
// table that references it (a cascade), a domain whose check calls user
// code and the tables that use it, a function t.f can call, a user's cast,
// the tables with a column of a type whose use runs a user's function (a
// range's subtype_diff, a default hash operator class, a cast to json, a
// composite over such a type), a function named as a word the call rules
// read as syntax before '(' (conflict, like, by), a partition key's
// function, a domain cast to inside a view; and what names none of it
// stays harmless (a table whose foreign key references a table with a
// trigger too). A DDL statement on the
// connection reads the catalog again at once.
func TestCatalogShadows(t *testing.T) {
	c := wrapped(t)
	admin := wrapped(t)
	s := fmt.Sprintf("pd_cat_%d", time.Now().UnixNano())
	exec(t, admin, "CREATE SCHEMA "+s)
	t.Cleanup(func() {
		// t.Context is done by now.
		if _, err := admin.Driver().(driver.ExecerContext).ExecContext(context.Background(), "DROP SCHEMA "+s+" CASCADE", nil); err != nil {
			t.Error(err)
		}
	})
	fn := `RETURNS int LANGUAGE sql AS $$ SELECT length(set_config('search_path', 'x', false)) $$`
	for _, q := range []string{
		"CREATE FUNCTION " + s + ".initcap(integer) RETURNS text LANGUAGE sql AS $$ SELECT set_config('search_path', 'x', false) $$",
		"CREATE FUNCTION " + s + ".evil(int, int) " + fn,
		"CREATE FUNCTION " + s + ".evil1(int) " + fn,
		"CREATE OPERATOR " + s + ".#+# (leftarg = int, rightarg = int, function = " + s + ".evil)",
		"CREATE FUNCTION " + s + ".trig() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN PERFORM set_config('search_path', 'x', false); RETURN NEW; END $$",
		"CREATE TABLE " + s + ".pd_audited (a int PRIMARY KEY)",
		"CREATE TRIGGER t AFTER INSERT ON " + s + ".pd_audited FOR EACH ROW EXECUTE FUNCTION " + s + ".trig()",
		"CREATE VIEW " + s + ".pd_audited_v AS SELECT a FROM " + s + ".pd_audited",
		"CREATE TABLE " + s + ".pd_referrer (a int REFERENCES " + s + ".pd_audited ON DELETE CASCADE)",
		"CREATE TRIGGER t AFTER DELETE ON " + s + ".pd_referrer FOR EACH ROW EXECUTE FUNCTION " + s + ".trig()",
		"CREATE TABLE " + s + ".pd_referenced (a int PRIMARY KEY)",
		"ALTER TABLE " + s + ".pd_referrer ADD COLUMN b int REFERENCES " + s + ".pd_referenced ON DELETE SET NULL",
		"CREATE TABLE " + s + ".pd_parent (a int) PARTITION BY RANGE (a)",
		"CREATE TABLE " + s + ".pd_part PARTITION OF " + s + ".pd_parent FOR VALUES FROM (0) TO (10)",
		"CREATE TRIGGER t BEFORE INSERT ON " + s + ".pd_part FOR EACH ROW EXECUTE FUNCTION " + s + ".trig()",
		"CREATE DOMAIN " + s + ".pd_dom AS int CHECK (" + s + ".evil1(VALUE) > 0)",
		"CREATE TABLE " + s + ".pd_uses_dom (a " + s + ".pd_dom)",
		"CREATE TABLE " + s + ".pd_row (a int)",
		"CREATE FUNCTION " + s + ".pd_attr(" + s + ".pd_row) " + fn,
		"CREATE TABLE " + s + ".pd_plain (a int DEFAULT nextval('" + s + ".pd_seq'), b timestamptz DEFAULT now())",
		"CREATE VIEW " + s + ".pd_locks AS SELECT pg_advisory_lock(1) IS NULL AS l",
		"CREATE VIEW " + s + ".pd_casts AS SELECT count(*)::int AS n, now()::date AS d, upper(a::text) AS u, row_number() OVER () AS r FROM " + s + ".pd_plain GROUP BY a",
		// Types whose use runs a user's function: a range's subtype_diff,
		// a default hash operator class's support function, a cast to
		// json (the JSON built-ins call it); the tables that use them.
		"CREATE FUNCTION " + s + ".diff(a float8, b float8) RETURNS float8 LANGUAGE plpgsql IMMUTABLE AS $$ BEGIN PERFORM set_config('search_path', 'x', false); RETURN a - b; END $$",
		"CREATE TYPE " + s + ".pd_rng AS RANGE (subtype = float8, subtype_diff = " + s + ".diff)",
		"CREATE TABLE " + s + ".pd_uses_rng (r " + s + ".pd_rng)",
		"CREATE TYPE " + s + ".pd_ord AS (a int)",
		"CREATE FUNCTION " + s + ".ord_eq(x " + s + ".pd_ord, y " + s + ".pd_ord) RETURNS bool LANGUAGE sql AS 'SELECT x.a = y.a'",
		"CREATE OPERATOR " + s + ".#=# (leftarg = " + s + ".pd_ord, rightarg = " + s + ".pd_ord, function = " + s + ".ord_eq)",
		"CREATE FUNCTION " + s + ".ord_hash(x " + s + ".pd_ord) RETURNS int LANGUAGE plpgsql AS $$ BEGIN PERFORM set_config('search_path', 'x', false); RETURN x.a; END $$",
		"CREATE OPERATOR CLASS " + s + ".pd_ord_ops DEFAULT FOR TYPE " + s + ".pd_ord USING hash AS OPERATOR 1 " + s + ".#=#, FUNCTION 1 " + s + ".ord_hash(" + s + ".pd_ord)",
		"CREATE TABLE " + s + ".pd_uses_ord (o " + s + ".pd_ord)",
		"CREATE TYPE " + s + ".pd_mood AS ENUM ('happy')",
		"CREATE FUNCTION " + s + ".mood_json(m " + s + ".pd_mood) RETURNS json LANGUAGE plpgsql AS $$ BEGIN PERFORM set_config('search_path', 'x', false); RETURN to_json(m::text); END $$",
		"CREATE CAST (" + s + ".pd_mood AS json) WITH FUNCTION " + s + ".mood_json(" + s + ".pd_mood)",
		"CREATE TABLE " + s + ".pd_moods (m " + s + ".pd_mood, n int)",
		"CREATE TABLE " + s + ".pd_mood_rows (r " + s + ".pd_moods)",
		// Functions named as words the call rules read as syntax before
		// '(' (ORDER BY (a)), after an ON or an operand (ON CONFLICT (a),
		// a LIKE (b)).
		"CREATE FUNCTION " + s + ".conflict(int) RETURNS bool LANGUAGE sql AS $$ SELECT length(set_config('search_path', 'x', false)) > 0 $$",
		"CREATE FUNCTION " + s + ".like(int) " + fn,
		"CREATE FUNCTION " + s + ".by(int) " + fn,
		// Reached only through what the server records: a partition
		// key's function, a domain cast to inside a view whose column is
		// not of it, a table whose foreign key references a table with a
		// trigger (the check runs none of it).
		"CREATE FUNCTION " + s + ".evil_imm(v int) RETURNS int IMMUTABLE LANGUAGE plpgsql AS $$ BEGIN PERFORM set_config('search_path', 'x', false); RETURN v; END $$",
		"CREATE TABLE " + s + ".pd_keyed (a int) PARTITION BY RANGE (" + s + ".evil_imm(a))",
		"CREATE VIEW " + s + ".pd_dom_v AS SELECT (1::" + s + ".pd_dom)::int AS a",
		"CREATE TABLE " + s + ".pd_refs_audited (a int REFERENCES " + s + ".pd_audited)",
	} {
		if strings.Contains(q, "pd_plain (") {
			exec(t, admin, "CREATE SEQUENCE "+s+".pd_seq")
		}
		exec(t, admin, q)
	}
	// DDL on c, observed as pooldriver observes every statement: the
	// catalog is read again now (whatever an earlier test read).
	ddl := "CREATE TABLE " + s + ".pd_ddl_here (a int)"
	exec(t, c, ddl)
	c.ChangesSession(ddl)
	for _, tc := range []struct {
		query string
		want  bool
	}{
		{"SELECT initcap(42)", true},
		{"SELECT coalesce(current_setting('x', true), ''), current_date, trim(' a '), nullif(1, 2)", false},
		{"SELECT lower('x'), count(*) FROM pd_plain", false},
		{"SELECT 1 #+# 2", true},
		{"SELECT 1 + 2", false},
		{"INSERT INTO pd_audited (a) VALUES (1)", true},
		{"SELECT a FROM pd_audited_v", true},
		{"DELETE FROM pd_referenced", true},
		{"INSERT INTO pd_parent (a) VALUES (1)", true},
		{"INSERT INTO pd_uses_dom (a) VALUES (1)", true},
		{"SELECT 1::pd_dom", true},
		{"SELECT r.pd_attr FROM pd_row r", true},
		{"INSERT INTO pd_plain (a) VALUES (1)", false},
		{"SELECT a FROM pd_row", false},
		{"SELECT l FROM pd_locks", true},
		{"SELECT n FROM pd_casts", false},
		{"SELECT upper(r) FROM pd_uses_rng", true},
		{"SELECT count(DISTINCT o) FROM pd_uses_ord", true},
		{"SELECT to_json(m) FROM pd_moods", true},
		{"SELECT json_agg(r) FROM pd_mood_rows", true},
		{"SELECT json_agg(a) FROM pd_plain", false},
		{"SELECT 1 FROM pd_plain a JOIN pd_plain b ON conflict(a.a)", true},
		{"SELECT 1 BETWEEN SYMMETRIC like(1) AND 2", true},
		{"SELECT 'a' LIKE 'b' ESCAPE like(1)::text", true},
		{"SELECT by(1)", true},
		{"SELECT 1 FROM pd_plain a JOIN pd_plain b ON a.a = b.a", false},
		{"INSERT INTO pd_keyed (a) VALUES (1)", true},
		{"SELECT a FROM pd_dom_v", true},
		{"INSERT INTO pd_refs_audited (a) VALUES (1)", false},
	} {
		nextUser(t, c)
		if got := c.ChangesSession(tc.query); got != tc.want {
			t.Errorf("ChangesSession(%q) = %v, want %v", tc.query, got, tc.want)
		}
	}
	c.TrustFunctions(true)
	if c.ChangesSession("SELECT initcap(42)") {
		t.Error("trusted: a user's overload counts only for what the text shows")
	}
}

// nextUser readies c as a next user finds it: reset, and the catalog read
// again where the last user's code may have changed it (what the pool's
// loop over a due catalog does, off the callers' paths).
func nextUser(t *testing.T, c *conn) {
	t.Helper()
	if err := c.ResetSession(t.Context()); err != nil {
		t.Fatal(err)
	}
	c.shadows(c.pgx().PgConn(), true)
}

// TestCatalogHarmlessFunctions: a call of a user's LANGUAGE sql or
// PL/pgSQL function whose body the rules read as leaving the session
// alone, calling only functions proved so in turn, is no session change,
// decided by what the catalog says the server will run: every function of
// that name, in any schema, must be such a function. A body that changes
// the session, calls a user function that does, or names a table with a
// trigger, a PL/pgSQL body with EXECUTE, a cursor or a SET clause, a cycle
// of calls, an overload the reader refuses, a BEGIN ATOMIC body (stored
// parsed), a procedure: all count.
func TestCatalogHarmlessFunctions(t *testing.T) {
	c := wrapped(t)
	admin := wrapped(t)
	s := fmt.Sprintf("pd_fn_%d", time.Now().UnixNano())
	exec(t, admin, "CREATE SCHEMA "+s)
	t.Cleanup(func() {
		if _, err := admin.Driver().(driver.ExecerContext).ExecContext(context.Background(), "DROP SCHEMA "+s+" CASCADE", nil); err != nil {
			t.Error(err)
		}
	})
	u := s + "_" // names unique to this run, called unqualified
	for _, q := range []string{
		"CREATE TABLE " + s + ".audited (a int)",
		"CREATE FUNCTION " + s + ".trig() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN PERFORM set_config('search_path', 'x', false); RETURN NEW; END $$",
		"CREATE TRIGGER t AFTER INSERT ON " + s + ".audited FOR EACH ROW EXECUTE FUNCTION " + s + ".trig()",
		"CREATE FUNCTION " + s + "." + u + "ok(int) RETURNS int LANGUAGE sql AS 'SELECT $1 + 1'",
		"CREATE FUNCTION " + s + "." + u + "rows() RETURNS SETOF int LANGUAGE sql AS 'SELECT generate_series(1, 3)'",
		"CREATE FUNCTION " + s + "." + u + "sets() RETURNS text LANGUAGE sql AS $$ SELECT set_config('search_path', 'x', false) $$",
		"CREATE FUNCTION " + s + "." + u + "plpgsql() RETURNS int LANGUAGE plpgsql AS $$ BEGIN RETURN 1; END $$",
		"CREATE FUNCTION " + s + "." + u + "over(int) RETURNS int LANGUAGE sql AS 'SELECT 1'",
		"CREATE FUNCTION " + s + "." + u + "over(text) RETURNS int LANGUAGE plpgsql AS $$ BEGIN EXECUTE 'SELECT 1'; RETURN 1; END $$",
		"CREATE FUNCTION " + s + "." + u + "atomic() RETURNS int LANGUAGE sql BEGIN ATOMIC SELECT 1; END",
		"CREATE FUNCTION " + s + "." + u + "chain() RETURNS int LANGUAGE sql AS 'SELECT " + s + "." + u + "ok(1)'",
		"CREATE FUNCTION " + s + "." + u + "chain_sets() RETURNS text LANGUAGE sql AS 'SELECT " + s + "." + u + "sets()'",
		// PL/pgSQL: read statement by statement, calls followed.
		"CREATE FUNCTION " + s + "." + u + "pl_logic(p int) RETURNS int LANGUAGE plpgsql AS $$ DECLARE v int := " + u + "ok(p); " +
			"BEGIN IF v > 1 THEN v := v + " + u + "chain(); ELSE RAISE NOTICE 'small %', v; END IF; PERFORM " + u + "plpgsql(); RETURN v; END $$",
		"CREATE FUNCTION " + s + "." + u + "pl_set() RETURNS int LANGUAGE plpgsql AS $$ BEGIN SET search_path = public; RETURN 1; END $$",
		"CREATE FUNCTION " + s + "." + u + "pl_calls_sets() RETURNS int LANGUAGE plpgsql AS $$ BEGIN PERFORM " + u + "sets(); RETURN 1; END $$",
		"CREATE FUNCTION " + s + "." + u + "pl_audit() RETURNS int LANGUAGE plpgsql AS $$ BEGIN INSERT INTO " + s + ".audited VALUES (1); RETURN 1; END $$",
		"CREATE FUNCTION " + s + "." + u + "pl_cursor() RETURNS int LANGUAGE plpgsql AS $$ DECLARE c refcursor; BEGIN OPEN c FOR SELECT 1; RETURN 1; END $$",
		"CREATE FUNCTION " + s + "." + u + "pl_config() RETURNS int LANGUAGE plpgsql SET search_path = public AS $$ BEGIN RETURN 1; END $$",
		"CREATE FUNCTION " + s + "." + u + "pl_ping(n int) RETURNS int LANGUAGE plpgsql AS $$ BEGIN RETURN " + u + "pl_pong(n); END $$",
		"CREATE FUNCTION " + s + "." + u + "pl_pong(n int) RETURNS int LANGUAGE plpgsql AS $$ BEGIN IF n > 0 THEN RETURN " + u + "pl_ping(n - 1); END IF; RETURN 0; END $$",
		"CREATE FUNCTION " + s + "." + u + "audit() RETURNS int LANGUAGE sql AS 'INSERT INTO " + s + ".audited VALUES (1) RETURNING a'",
		"CREATE FUNCTION " + s + "." + u + "lock() RETURNS void LANGUAGE sql AS 'SELECT pg_advisory_lock(4646)'",
		"CREATE PROCEDURE " + s + "." + u + "proc() LANGUAGE sql AS 'SELECT 1'",
		// Code the body does not hold: a default, a domain's check.
		"CREATE FUNCTION " + s + "." + u + "dflt(x text DEFAULT set_config('search_path', 'x', false)) RETURNS text LANGUAGE sql AS 'SELECT $1'",
		"CREATE FUNCTION " + s + ".evil(int) RETURNS bool LANGUAGE plpgsql AS $$ BEGIN PERFORM set_config('search_path', 'x', false); RETURN true; END $$",
		"CREATE DOMAIN " + s + ".dom AS int CHECK (" + s + ".evil(VALUE))",
		"CREATE FUNCTION " + s + "." + u + "dom_in(x " + s + ".dom) RETURNS int LANGUAGE sql AS 'SELECT $1'",
		"CREATE FUNCTION " + s + "." + u + "dom_out() RETURNS " + s + ".dom LANGUAGE sql AS 'SELECT 1'",
		// DDL: it could make another function harmful unseen.
		"CREATE FUNCTION " + s + "." + u + "mutator() RETURNS void LANGUAGE sql AS $m$CREATE OR REPLACE FUNCTION " + s + "." + u + "ok(int) RETURNS int LANGUAGE sql AS $b$SELECT 1$b$$m$",
		// Names compared as the server folds them: ASCII only.
		`CREATE FUNCTION ` + s + `."` + u + `rvä"() RETURNS int LANGUAGE sql AS 'SELECT 1'`,
		`CREATE FUNCTION ` + s + `."` + u + `rvÄ"() RETURNS int LANGUAGE plpgsql AS $$ BEGIN EXECUTE 'SELECT 1'; RETURN 1; END $$`,
	} {
		exec(t, admin, q)
	}
	ddl := "CREATE TABLE " + s + ".pd_ddl_here (a int)"
	exec(t, c, ddl)
	c.ChangesSession(ddl) // observed as pooldriver observes it: the catalog is read again now
	for q, want := range map[string]bool{
		"SELECT " + u + "ok(41)":                 false,
		"SELECT " + s + "." + u + "ok($1)":       false,
		"SELECT * FROM " + u + "rows()":          false,
		"SELECT " + u + "ok(1), lower('x')":      false,
		"SELECT " + u + "sets()":                 true,
		"SELECT " + u + "plpgsql()":              false,
		"SELECT " + u + "over(1)":                true,
		"SELECT " + u + "atomic()":               true,
		"SELECT " + u + "chain()":                false,
		"SELECT " + u + "chain_sets()":           true,
		"SELECT " + u + "pl_logic(1)":            false,
		"SELECT " + u + "pl_set()":               true,
		"SELECT " + u + "pl_calls_sets()":        true,
		"SELECT " + u + "pl_audit()":             true,
		"SELECT " + u + "pl_cursor()":            true,
		"SELECT " + u + "pl_config()":            true,
		"SELECT " + u + "pl_ping(1)":             true,
		"SELECT " + u + "audit()":                true,
		"SELECT " + u + "lock()":                 true,
		"CALL " + u + "proc()":                   true,
		"SELECT " + u + "ok(1), " + u + "sets()": true,
		"SELECT " + u + "no_such_function()":     true,
		"SELECT " + u + "dflt()":                 true,
		"SELECT " + u + "dom_in(1)":              true,
		"SELECT " + u + "dom_out()":              true,
		"SELECT " + u + "mutator()":              true,
		"SELECT " + u + "rvä()":                  false,
		"SELECT " + u + "rvÄ()":                  true,
		`SELECT "` + u + `rvÄ"()`:                true,
	} {
		nextUser(t, c)
		if got := c.ChangesSession(q); got != want {
			t.Errorf("ChangesSession(%q) = %v, want %v", q, got, want)
		}
	}
	c.TrustFunctions(true)
	if c.ChangesSession("SELECT " + u + "sets()") {
		t.Error("trusted: a call counts only for what its text shows")
	}
}

// TestCatalogServerID: a reading carries its server's system identifier,
// the one serverID reads on any connection to that server, so that a
// sibling's reading is borrowed only from a physical copy.
func TestCatalogServerID(t *testing.T) {
	c := wrapped(t)
	pg := c.pgx().PgConn()
	id := serverID(t.Context(), pg)
	if id == "" {
		t.Fatal("serverID: empty on a server whose role may read it")
	}
	snap := c.shadows(pg, true)
	if snap == nil || snap.Value.sysid != id {
		t.Fatalf("the catalog reading's system identifier: %v, want %q", snap, id)
	}
}

// TestCatalogExtensionFunctionInTree: a view (or default, check, policy)
// that calls an extension's function by name runs code the list does not
// vouch for: pg_trgm's set_limit sets pg_trgm.similarity_threshold for
// the session. The view counts; one over a listed built-in does not.
func TestCatalogExtensionFunctionInTree(t *testing.T) {
	c := wrapped(t)
	admin := wrapped(t)
	s := fmt.Sprintf("rv54_ext_%d", time.Now().UnixNano())
	exec(t, admin, "CREATE SCHEMA "+s)
	t.Cleanup(func() {
		if _, err := admin.Driver().(driver.ExecerContext).ExecContext(context.Background(), "DROP SCHEMA "+s+" CASCADE", nil); err != nil {
			t.Error(err)
		}
	})
	if _, err := admin.Driver().(driver.ExecerContext).ExecContext(t.Context(), "CREATE EXTENSION pg_trgm SCHEMA "+s, nil); err != nil {
		t.Skipf("SKIPPED, NOT A PASS: the pg_trgm extension cannot be created on this server (install postgresql-contrib): %v", err)
	}
	exec(t, admin, "CREATE VIEW "+s+".rv54_limit AS SELECT "+s+".set_limit(0.9) AS l")
	exec(t, admin, "CREATE VIEW "+s+".rv54_plain AS SELECT upper('x') AS u")
	ddl := "CREATE TABLE " + s + ".rv54_ddl_here (a int)"
	exec(t, c, ddl)
	c.ChangesSession(ddl)
	nextUser(t, c)
	if !c.ChangesSession("SELECT l FROM rv54_limit") {
		t.Error("a view that calls pg_trgm's set_limit: no change")
	}
	nextUser(t, c)
	if c.ChangesSession("SELECT u FROM rv54_plain") {
		t.Error("a view over a listed built-in: a change")
	}
}

// TestCatalogOtherConnectionsDDL: DDL that another connection of the
// process ran leaves every connection's reading older than it, vouching
// for nothing until a reading taken since is stored. No statement reads
// it on its path, neither the DDL's nor the next one's: the catalog's
// watcher and the session reset do, off the callers' paths (shadows
// here). Meanwhile SELECT 1, which names nothing, is no change, and the
// call of a harmless function is one.
func TestCatalogOtherConnectionsDDL(t *testing.T) {
	c := wrapped(t)
	admin := wrapped(t)
	s := fmt.Sprintf("pd_catddl_%d", time.Now().UnixNano())
	t.Cleanup(func() {
		// t.Context is done by now.
		if _, err := admin.Driver().(driver.ExecerContext).ExecContext(context.Background(), "DROP SCHEMA IF EXISTS "+s+" CASCADE", nil); err != nil {
			t.Error(err)
		}
	})
	for _, ddl := range []string{
		"CREATE SCHEMA " + s,
		"CREATE FUNCTION " + s + ".pd_ok(int) RETURNS int LANGUAGE sql AS 'SELECT $1 + 1'",
	} {
		exec(t, admin, ddl)
		admin.ChangesSession(ddl)
	}
	nextUser(t, admin) // a DDL statement after DDL counts: the reset, then a reading as the catalog's watcher takes it
	call := "SELECT " + s + ".pd_ok(1)"
	for _, q := range []string{"SELECT 1", call} {
		t.Run(q, func(t *testing.T) {
			if _, err := c.ExecContext(t.Context(), q, nil); err != nil {
				t.Fatal(err)
			}
			if c.ChangesSession(q) {
				t.Fatal("counted with the catalog as it is")
			}
			ddl := "CREATE VIEW " + s + ".pd_v" + strconv.Itoa(len(q)) + " AS SELECT 1 AS a"
			exec(t, admin, ddl)
			admin.ChangesSession(ddl) // no reading on its path
			if snap := c.catalog.Current(); snap.Sees(c.catalog.Changed()) {
				t.Fatal("the reading sees DDL read by no connection")
			}
			if _, err := c.ExecContext(t.Context(), q, nil); err != nil {
				t.Fatal(err)
			}
			if got, want := c.ChangesSession(q), q != "SELECT 1"; got != want {
				t.Errorf("after another connection's DDL, before a reading that sees it: counted %v, want %v", got, want)
			}
			if snap := c.catalog.Current(); snap.Sees(c.catalog.Changed()) {
				t.Error("a reading taken on the statement's path")
			}
			nextUser(t, c) // the reset, and a reading as the catalog's watcher takes it
			if snap := c.catalog.Current(); !snap.Sees(c.catalog.Changed()) {
				t.Fatal("no reading that sees the DDL")
			}
			if _, err := c.ExecContext(t.Context(), q, nil); err != nil {
				t.Fatal(err)
			}
			if c.ChangesSession(q) {
				t.Error("counted as a change by a reading that sees the DDL")
			}
		})
	}
}

// TestCatalogDDLInTransaction: DDL run in a transaction expires the
// readings, and another connection reads the catalog again before the
// COMMIT: that reading, which cannot see the uncommitted change, must not
// vouch for statements once it is committed. Here the change makes a
// harmless function take an advisory lock (a session change): judged by
// the reading from before the COMMIT, its call would count as harmless.
func TestCatalogDDLInTransaction(t *testing.T) {
	c := wrapped(t)
	admin := wrapped(t)
	s := fmt.Sprintf("pd_catddltx_%d", time.Now().UnixNano())
	t.Cleanup(func() {
		if _, err := admin.Driver().(driver.ExecerContext).ExecContext(context.Background(), "DROP SCHEMA IF EXISTS "+s+" CASCADE", nil); err != nil {
			t.Error(err)
		}
	})
	for _, ddl := range []string{
		"CREATE SCHEMA " + s,
		"CREATE FUNCTION " + s + ".pd_f() RETURNS int LANGUAGE sql AS 'SELECT 1'",
	} {
		exec(t, admin, ddl)
		admin.ChangesSession(ddl)
	}
	nextUser(t, admin) // a DDL statement after DDL counts: the reset, then a reading as the catalog's watcher takes it
	call := "SELECT " + s + ".pd_f()"
	exec(t, c, call)
	if c.ChangesSession(call) {
		t.Fatal("a harmless function's call counted as a change")
	}
	exec(t, admin, "BEGIN")
	ddl := "CREATE OR REPLACE FUNCTION " + s + ".pd_f() RETURNS int LANGUAGE sql AS 'SELECT pg_try_advisory_lock(4648)::int'"
	exec(t, admin, ddl)
	admin.ChangesSession(ddl) // in a transaction: expires the readings
	// Another connection reads again while the change is not committed.
	c.shadows(c.pgx().PgConn(), true)
	if snap := c.catalog.Current(); !snap.Sees(c.catalog.Changed()) {
		t.Fatal("no reading taken while the transaction was open: the case is not set up")
	}
	exec(t, admin, "COMMIT")
	admin.ChangesSession("COMMIT")
	if snap := c.catalog.Current(); snap.Sees(c.catalog.Changed()) {
		t.Error("the reading from before the COMMIT counts as seeing the committed change")
	}
	exec(t, c, call)
	if !c.ChangesSession(call) {
		t.Error("the call of a function that now takes an advisory lock counted as harmless")
	}
	exec(t, c, "SELECT pg_advisory_unlock_all()")
}

// TestCatalogReads: what the catalog proves a read (sqllex.Shadows.Reads),
// read from the server: a harmless STABLE or IMMUTABLE function, and one
// that calls only such; not a VOLATILE one, one that calls nextval,
// pg_advisory_lock or set_config, or a name with a VOLATILE overload.
// The template proves by it a SELECT that calls them, with the reading
// its connections last used, and by no reading that is due.
func TestCatalogReads(t *testing.T) {
	c := wrapped(t)
	admin := wrapped(t)
	s := fmt.Sprintf("pd_rd_%d", time.Now().UnixNano())
	exec(t, admin, "CREATE SCHEMA "+s)
	t.Cleanup(func() {
		if _, err := admin.Driver().(driver.ExecerContext).ExecContext(context.Background(), "DROP SCHEMA "+s+" CASCADE", nil); err != nil {
			t.Error(err)
		}
	})
	u := s + "_"
	for _, q := range []string{
		"CREATE SEQUENCE " + s + ".seq",
		"CREATE FUNCTION " + s + "." + u + "stable(int) RETURNS int STABLE LANGUAGE sql AS 'SELECT $1 + 1'",
		"CREATE FUNCTION " + s + "." + u + "immutable(int) RETURNS int IMMUTABLE LANGUAGE sql AS 'SELECT $1 * 2'",
		"CREATE FUNCTION " + s + "." + u + "volatile(int) RETURNS int VOLATILE LANGUAGE sql AS 'SELECT $1 + 1'",
		"CREATE FUNCTION " + s + "." + u + "nextval() RETURNS bigint STABLE LANGUAGE plpgsql AS $$ BEGIN RETURN nextval('" + s + ".seq'); END $$",
		"CREATE FUNCTION " + s + "." + u + "lock() RETURNS int STABLE LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_advisory_lock(4647); RETURN 1; END $$",
		"CREATE FUNCTION " + s + "." + u + "config() RETURNS text STABLE LANGUAGE plpgsql AS $$ BEGIN RETURN set_config('pd.x', 'y', false); END $$",
		"CREATE FUNCTION " + s + "." + u + "mixed(int) RETURNS int STABLE LANGUAGE sql AS 'SELECT 1'",
		"CREATE FUNCTION " + s + "." + u + "mixed(text) RETURNS int VOLATILE LANGUAGE sql AS 'SELECT 2'",
		"CREATE FUNCTION " + s + "." + u + "caller() RETURNS int STABLE LANGUAGE plpgsql AS $$ BEGIN RETURN " + u + "stable(1) + " + u + "immutable(2); END $$",
		"CREATE FUNCTION " + s + "." + u + "calls_volatile() RETURNS int STABLE LANGUAGE sql AS 'SELECT " + s + "." + u + "volatile(1)'",
	} {
		exec(t, admin, q)
	}
	pg := c.pgx().PgConn()
	cat, err := readCatalog(t.Context(), pg)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]bool{
		"stable": true, "immutable": true, "caller": true,
		"volatile": false, "nextval": false, "lock": false, "config": false, "mixed": false, "calls_volatile": false,
	} {
		if _, got := cat.shadows.Reads[u+name]; got != want {
			t.Errorf("Reads[%s%s] = %v, want %v", u, name, got, want)
		}
		if _, harmless := cat.shadows.Harmless[u+name]; want && !harmless {
			t.Errorf("%s%s: a read not proved harmless", u, name)
		}
	}

	// The template, by its connections' reading: a fresh one proves, a
	// due one does not.
	tm := &template{reached: new(atomic.Pointer[dialects.Catalog[*pgCatalog]])}
	if tm.ReadsOnly("SELECT " + u + "stable(1)") {
		t.Error("no reading: a user's function proved a read")
	}
	c.catalogOf(pg)
	tm.reached.Store(c.catalog)
	c.catalog.Expire()
	c.shadows(pg, true)
	for q, want := range map[string]bool{
		"SELECT 1":                               true,
		"SELECT " + u + "stable(1)":              true,
		"SELECT " + s + "." + u + "caller()":     true,
		"SELECT " + u + "volatile(1)":            false,
		"SELECT " + u + "nextval()":              false,
		"SELECT " + u + "mixed(1)":               false,
		"SELECT " + u + "stable(1) FOR UPDATE":   false,
		"SELECT " + u + "stable(nextval('seq'))": false,
	} {
		if got := tm.ReadsOnly(q); got != want {
			t.Errorf("ReadsOnly(%q) = %v, want %v (snapshot due: %v)", q, got, want, c.catalog.Current().Due())
		}
	}
	c.catalog.Expire()
	if tm.ReadsOnly("SELECT " + u + "stable(1)") {
		t.Error("a due reading proved a read")
	}
}

// TestCatalogFreshAtConnect: connections opened where the catalog's latest
// reading is no longer Fresh (a process that opens a pool again after a
// pause longer than dialects.CatalogMaxAge) read it again at connect, one
// of them, which the others opened with it wait for (freshWait at most):
// their first statements are judged by a reading that vouches, not by
// one that vouches for nothing.
func TestCatalogFreshAtConnect(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for the catalog's reading to be older than dialects.CatalogMaxAge")
	}
	first := opened(t)
	first.catalogOf(first.pgx().PgConn()) // set where a reading existed before it
	old := first.catalog.Current()
	if old == nil {
		t.Fatal("no reading after a connection opened")
	}
	time.Sleep(dialects.CatalogMaxAge + 100*time.Millisecond)
	if first.catalog.Current() != old || old.Fresh() {
		t.Fatal("the reading changed, or is still Fresh, with no connection to read it")
	}
	tmpl, _, err := Dialect.Parse(serverDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			dc, err := tmpl.Open(t.Context(), tmpl.Credentials())
			if err != nil {
				t.Error(err)
				return
			}
			_ = dc.Close()
		})
	}
	wg.Wait()
	now := first.catalog.Current()
	if now == old || !now.Fresh() {
		t.Fatal("connections opened after the reading aged left it as it was: it vouches for nothing")
	}
}
