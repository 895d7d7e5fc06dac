package integration

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pooldriver/pooldriver"
	"github.com/pooldriver/pooldriver/dialects"
)

// The catalog proof against a hostile tenant (docs/design.md, "The
// catalog proof"): each test here lets a first user of the one connection
// (pool_max_conns=1) bend or outrun what pooldriver reads from the
// server's catalog, then asks, as the next users, what the session looks
// like: in every mode, beside the plain driver (logged), and with
// pool_trust_functions (where the user vouches for their code, the leak
// is theirs). Every object is named cat54_… or lives in a schema of the
// test's own, and is dropped after.

// rowOverload adds a table of the test's own and public.lower(that
// table's row type), a LANGUAGE sql overload of a listed built-in that
// sets the search_path to path, and returns the table and the statement
// that calls the overload where its text names only the built-in's name.
func (d *ddl) rowOverload(path string) (table, call string) {
	table = d.table("cat54_rows", "a int")
	d.add("INSERT INTO " + table + " VALUES (1)")
	d.add("CREATE FUNCTION public.lower("+table+") RETURNS text LANGUAGE sql AS $$ SELECT set_config('search_path', '"+path+"', false) $$",
		"DROP FUNCTION public.lower("+table+")")
	return table, "SELECT lower(x) FROM " + table + " x"
}

// thenAsks returns an observe that runs first as the next user, then
// observe as the one after.
func thenAsks(first string, observe func(t *testing.T, db *sql.DB) string) func(t *testing.T, db *sql.DB) string {
	return func(t *testing.T, db *sql.DB) string {
		nextUser(t, db, first)
		return observe(t, db)
	}
}

// TestCatalogProofBentReading: the first user bends what the catalog
// reading sees in its own session, by a temporary view named pg_proc
// (the temporary schema comes before pg_catalog for relations) or a
// search_path that puts a schema with a view pg_proc first, and runs DDL
// in the same text, after which pooldriver reads the catalog again. A
// reading taken in that session would hide every user function
// (oid >= 16384): the next user's call of the overload public.lower(row)
// would count as the built-in's, and the user after would get its
// search_path.
func TestCatalogProofBentReading(t *testing.T) {
	forServer(t, "postgres", func(t *testing.T, s server) {
		searchPath, clean := pgSearchPath(t, s)
		d := newDDL(t, s)
		schema, path := d.schema()
		d.add("CREATE VIEW " + schema + ".pg_proc AS SELECT * FROM pg_catalog.pg_proc WHERE oid < 16384")
		_, call := d.rowOverload(path)
		marker := unique("cat54_marker")
		d.add("SELECT 1", "DROP TABLE IF EXISTS "+marker)
		d.apply()
		for _, bend := range []struct{ name, sql string }{
			{"temporary view", "CREATE TEMP VIEW pg_proc AS SELECT * FROM pg_catalog.pg_proc WHERE oid < 16384"},
			{"search_path", "SET search_path = " + schema + ", pg_catalog, public"},
		} {
			t.Run(bend.name, func(t *testing.T) {
				checkDenied(t, s, s.dsn, denyCase{
					dirty:   execAll(bend.sql + "; CREATE TABLE IF NOT EXISTS " + marker + " (a int)"),
					observe: thenAsks(call, searchPath),
					want:    clean,
				})
			})
		}
	})
}

// TestCatalogProofJSONCast: to_json and the rest of the JSON family call
// a cast to json of a user's type where one exists, with no :: in the
// text; so does a LANGUAGE sql function whose body aggregates the type
// with json_agg.
func TestCatalogProofJSONCast(t *testing.T) {
	forServer(t, "postgres", func(t *testing.T, s server) {
		searchPath, clean := pgSearchPath(t, s)
		d := newDDL(t, s)
		_, path := d.schema()
		typ := unique("cat54_mood")
		d.add("CREATE TYPE "+typ+" AS ENUM ('happy')", "DROP TYPE "+typ)
		fn := d.pathFunc(path, "m "+typ, "json", "to_json(m::text)")
		d.add("CREATE CAST ("+typ+" AS json) WITH FUNCTION "+fn+"("+typ+")", "DROP CAST ("+typ+" AS json)")
		tbl := d.table("cat54_moods", "m "+typ)
		d.add("INSERT INTO " + tbl + " VALUES ('happy')")
		agg := unique("cat54_agg")
		d.add("CREATE FUNCTION "+agg+"() RETURNS json LANGUAGE sql AS $$ SELECT json_agg(m) FROM "+tbl+" $$", "DROP FUNCTION "+agg+"()")
		d.apply()
		for _, q := range []string{
			"SELECT to_json(m) FROM " + tbl,
			"SELECT jsonb_agg(m) FROM " + tbl,
			"SELECT json_build_object('m', m) FROM " + tbl,
			"SELECT row_to_json(x) FROM " + tbl + " x",
			"SELECT " + agg + "()",
		} {
			t.Run(q, func(t *testing.T) {
				checkDenied(t, s, s.dsn, denyCase{dirty: execAll(q), observe: searchPath, want: clean})
			})
		}
	})
}

// skipUnlessSuperuser skips t where the test's role on s is no superuser.
func skipUnlessSuperuser(t *testing.T, s server, why string) {
	t.Helper()
	if s.adminInt(t, "SELECT count(*) FROM pg_roles WHERE rolname = current_user AND rolsuper") == 0 {
		t.Skip(why)
	}
}

// TestCatalogProofOperatorClass: an index whose operator class's support
// function is a user's PL/pgSQL (creating an operator class needs a
// superuser) runs it on an INSERT into the table, with no operator or
// call in the text.
func TestCatalogProofOperatorClass(t *testing.T) {
	forServer(t, "postgres", func(t *testing.T, s server) {
		skipUnlessSuperuser(t, s, "an operator class needs a superuser")
		searchPath, clean := pgSearchPath(t, s)
		d := newDDL(t, s)
		_, path := d.schema()
		cmp := d.pathFunc(path, "a int, b int", "int", "btint4cmp(a, b)")
		opc := unique("cat54_ops")
		d.add("CREATE OPERATOR CLASS "+opc+" FOR TYPE int4 USING btree AS "+
			"OPERATOR 1 <, OPERATOR 2 <=, OPERATOR 3 =, OPERATOR 4 >=, OPERATOR 5 >, FUNCTION 1 "+cmp+"(int, int)",
			"DROP OPERATOR FAMILY "+opc+" USING btree")
		tbl := d.table("cat54_sorted", "a int")
		d.add("INSERT INTO " + tbl + " SELECT g FROM generate_series(1, 10) g")
		d.add("CREATE INDEX ON " + tbl + " (a " + opc + ")") // dropped with the table
		d.apply()
		checkDenied(t, s, s.dsn, denyCase{dirty: execAll("INSERT INTO " + tbl + " (a) VALUES (5)"), observe: searchPath, want: clean})
	})
}

// TestCatalogProofDefaultOperatorClass: a user's enum type with a default
// btree operator class whose comparison function is a user's PL/pgSQL
// that moves the search_path. ORDER BY, GROUP BY and count(DISTINCT) of a
// column of that type run it with no operator or call in the text. The
// operators are LANGUAGE sql over built-ins (harmless by themselves): only
// the support function makes the type count; they are named like no
// built-in, as only strategy numbers tie them to ORDER BY.
func TestCatalogProofDefaultOperatorClass(t *testing.T) {
	forServer(t, "postgres", func(t *testing.T, s server) {
		skipUnlessSuperuser(t, s, "an operator class needs a superuser")
		searchPath, clean := pgSearchPath(t, s)
		d := newDDL(t, s)
		_, path := d.schema()
		typ := unique("cat54_mood")
		// The operators and their functions go with the type.
		d.add("CREATE TYPE "+typ+" AS ENUM ('a', 'b', 'c')", "DROP TYPE "+typ+" CASCADE")
		cmp := d.pathFunc(path, "x "+typ+", y "+typ, "int", "enum_cmp(x, y)")
		// Operators of names no other test writes: a user's operator
		// named = or < would count wherever = or < stands, in every
		// statement of the tests that run beside this one.
		var ops []string
		for i, cmpOp := range []string{"<", "<=", "=", ">=", ">"} {
			fn, op := fmt.Sprintf("%s_op%d", typ, i+1), "#"+cmpOp+"#"
			d.add(fmt.Sprintf("CREATE FUNCTION %s(x %s, y %s) RETURNS bool LANGUAGE sql AS 'SELECT enum_cmp(x, y) %s 0'", fn, typ, typ, cmpOp))
			d.add(fmt.Sprintf("CREATE OPERATOR public.%s (leftarg = %s, rightarg = %s, function = %s)", op, typ, typ, fn))
			ops = append(ops, fmt.Sprintf("OPERATOR %d public.%s", i+1, op))
		}
		d.add("CREATE OPERATOR CLASS "+typ+"_ops DEFAULT FOR TYPE "+typ+" USING btree AS "+
			strings.Join(ops, ", ")+", FUNCTION 1 "+cmp+"("+typ+", "+typ+")",
			"DROP OPERATOR FAMILY "+typ+"_ops USING btree") // before cmp's own drop
		tbl := d.table("cat54_moods", "m "+typ)
		d.add("INSERT INTO " + tbl + " VALUES ('c'), ('a'), ('b'), ('a')")
		d.apply()
		for _, q := range []struct{ name, sql string }{
			{"order_by", "SELECT m FROM " + tbl + " ORDER BY m"},
			{"group_by", "SELECT m, count(*) FROM " + tbl + " GROUP BY m"},
			{"count_distinct", "SELECT count(DISTINCT m) FROM " + tbl},
		} {
			t.Run(q.name, func(t *testing.T) {
				checkDenied(t, s, s.dsn, denyCase{dirty: execAll(q.sql), observe: searchPath, want: clean})
			})
		}
	})
}

// TestCatalogProofHiddenDDL: a user's PL/pgSQL function, or a DO block,
// that replaces a LANGUAGE sql function the catalog proved harmless with
// one that sets the search_path, by EXECUTE: no text shows DDL, and a
// reading from before would vouch for the next user's call of the
// replaced function.
func TestCatalogProofHiddenDDL(t *testing.T) {
	forServer(t, "postgres", func(t *testing.T, s server) {
		searchPath, clean := pgSearchPath(t, s)
		d := newDDL(t, s)
		_, path := d.schema()
		g := unique("cat54_g")
		harmless := "CREATE OR REPLACE FUNCTION public." + g + "() RETURNS int LANGUAGE sql AS $$ SELECT 1 $$"
		d.add(harmless, "DROP FUNCTION public."+g+"()")
		replace := "EXECUTE 'CREATE OR REPLACE FUNCTION public." + g + "() RETURNS int LANGUAGE sql AS $b$ " +
			"SELECT length(set_config(''search_path'', ''" + path + "'', false)) $b$'"
		redefine := unique("cat54_redefine")
		d.add("CREATE FUNCTION "+redefine+"() RETURNS void LANGUAGE plpgsql AS $$ BEGIN "+replace+"; END $$",
			"DROP FUNCTION "+redefine+"()")
		d.apply()
		for _, hidden := range []struct{ name, sql string }{
			{"function", "SELECT " + redefine + "()"},
			{"DO", "DO $$ BEGIN " + replace + "; END $$"},
		} {
			t.Run(hidden.name, func(t *testing.T) {
				checkDenied(t, s, s.dsn, denyCase{
					dirty: func(c context.Context, r runner) error {
						// The function harmless again, through a pool
						// of pooldriver's: every pool reads it so.
						if err := poolExec(t, s, harmless); err != nil {
							return fmt.Errorf("making %s harmless again: %w", g, err)
						}
						return execAll(hidden.sql)(c, r)
					},
					observe: thenAsks("SELECT "+g+"()", searchPath),
					want:    clean,
				})
			})
		}
	})
}

// TestCatalogProofWindow: at the defaults (a health check every 30 s), an
// overload of a listed built-in that another client made is seen within
// dialects.CatalogTTL of the last reading and the moment it takes to find
// the connection idle, not at the next health check: a due reading is
// read again at once, off the callers' paths.
func TestCatalogProofWindow(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for the catalog's reading to be due (5 s)")
	}
	forServer(t, "postgres", func(t *testing.T, s server) {
		searchPath, clean := pgSearchPath(t, s)
		d := newDDL(t, s)
		_, path := d.schema()
		tbl := d.table("cat54_window", "a int")
		d.add("INSERT INTO " + tbl + " VALUES (1)")
		d.apply()
		db := sql.OpenDB(pooldriver.New(withParams(s.dsn, "pool_max_conns=1")))
		defer db.Close()
		require.Equal(t, clean, searchPath(t, db)) // and the catalog read

		// Made by another client, not through a pool of pooldriver's.
		made := time.Now()
		s.adminExec(t, "CREATE FUNCTION public.lower("+tbl+") RETURNS text LANGUAGE sql AS "+
			"$$ SELECT set_config('search_path', '"+path+"', false) $$")
		t.Cleanup(func() {
			if _, err := s.admin(t).ExecContext(context.Background(), "DROP FUNCTION public.lower("+tbl+")"); err != nil {
				t.Errorf("dropping public.lower(%s): %v", tbl, err)
			}
		})
		bound := dialects.CatalogTTL + 3*time.Second
		leaked := 0
		for {
			_, err := db.ExecContext(ctx(t), "SELECT lower(x) FROM "+tbl+" x")
			require.NoError(t, err)
			if got := searchPath(t, db); got == clean {
				break
			}
			leaked++
			require.Less(t, time.Since(made), bound, "the overload is still unseen: the next user got its search_path")
			time.Sleep(50 * time.Millisecond) // a statement now and then, as a service would send
		}
		t.Logf("seen %v after it was made (CatalogTTL %v); %d statements leaked meanwhile", time.Since(made).Round(10*time.Millisecond), dialects.CatalogTTL, leaked)
	})
}

// TestCatalogProofWindowMariaDB is TestCatalogProofWindow on MariaDB, for
// a pool of the DSN's and one of a wrapped go-sql-driver connector: a
// stored function the catalog proved harmless, which another client
// replaces with one that takes a named lock (GET_LOCK: no session change
// that MariaDB's session tracker reports), is judged by its new body
// within dialects.CatalogTTL of the last reading and the moment it takes
// to find the connection idle, not at the next health check.
func TestCatalogProofWindowMariaDB(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for the catalog's reading to be due (5 s)")
	}
	forServer(t, "mysql", func(t *testing.T, s server) {
		for _, pool := range []struct {
			name string
			open func() *pooldriver.Connector
		}{
			{"dsn", func() *pooldriver.Connector { return pooldriver.New(withParams(s.dsn, "pool_max_conns=1")) }},
			{"wrapped", func() *pooldriver.Connector {
				return pooldriver.Wrap(plainConnector(t, s, s.dsn), pooldriver.WithMaxConns(1))
			}},
		} {
			t.Run(pool.name, func(t *testing.T) {
				fn := unique("mw54_f")
				lock := unique("mw54_lock")
				d := newDDL(t, s)
				d.add("CREATE FUNCTION "+fn+"() RETURNS INT DETERMINISTIC RETURN 1", "DROP FUNCTION "+fn)
				d.apply()
				connector := pool.open()
				require.NoError(t, connector.Err())
				db := sql.OpenDB(connector)
				defer db.Close()
				call := "SELECT " + fn + "()"
				nextUser(t, db, call) // the connection made, the catalog read
				before := connector.Stats()
				nextUser(t, db, call)
				after := connector.Stats()
				require.Equal(t, before.SessionResets+before.Destroyed, after.SessionResets+after.Destroyed,
					"a call of %s, which the catalog proves harmless, was reset", fn)
				held := "SELECT IS_USED_LOCK('" + lock + "') <=> CONNECTION_ID()"

				// Replaced by another client, not through a pool of pooldriver's.
				made := time.Now()
				s.adminExec(t, "CREATE OR REPLACE FUNCTION "+fn+"() RETURNS INT BEGIN DECLARE r INT; SET r = GET_LOCK('"+lock+"', 0); RETURN r; END")
				bound := dialects.CatalogTTL + 3*time.Second
				leaked := 0
				for {
					require.Equal(t, "1", nextUser(t, db, call))
					if nextUser(t, db, held) != "1" {
						break
					}
					leaked++
					require.Less(t, time.Since(made), bound, "the new body is still unseen: the next user held the lock")
					time.Sleep(50 * time.Millisecond) // a statement now and then, as a service would send
				}
				t.Logf("seen %v after it was made (CatalogTTL %v); %d calls leaked meanwhile", time.Since(made).Round(10*time.Millisecond), dialects.CatalogTTL, leaked)
			})
		}
	})
}
