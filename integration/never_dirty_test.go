package integration

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/pooldriver/pooldriver"
)

// Issue 45, "never a dirty connection" (DESIGN.md, the contract, point 3):
// each test here lets a first user change the session where the text of
// its statements shows no call of the user's code (a user's function under
// a built-in's name, an operator, a cast, a trigger, a policy, a view), or
// where the reset pooldriver ran did not undo the change (the random seed,
// a dblink connection, a replication origin, the statements pooldriver
// prepared itself), then asks, as the next user of the one connection
// (pool_max_conns=1), what it sees: in every mode (dirtyModes), beside the
// plain driver (logged), and, where it applies, with pool_trust_functions.

// ddl gathers the objects a test creates: they are created together
// (apply) and dropped when the test ends, in the reverse order (a failed
// drop is an error of the test), both through a pool of pooldriver's own
// (poolExec), as a migration run through the pool would: pooldriver reads
// what runs code no call names from the server's catalog, again at once
// after DDL run through any of the process's pools, but only within
// dialects.CatalogTTL (5 s) after another client's, and these tests do not
// wait. (A dropped object the catalog still listed would only cost
// resets; a dropped dblink that it still listed would break them.)
type ddl struct {
	t      *testing.T
	s      server
	create []string
	drops  [][]string
}

func newDDL(t *testing.T, s server) *ddl { return &ddl{t: t, s: s} }

// add adds a statement to run, and those that undo it.
func (d *ddl) add(create string, drop ...string) {
	d.create = append(d.create, create)
	d.drops = append(d.drops, drop)
}

// apply runs the statements added, through one connection of a pool of
// pooldriver's own (on PostgreSQL in one round trip), and registers the
// drops, run the same way.
func (d *ddl) apply() {
	t, s := d.t, d.s
	t.Helper()
	var drops []string
	for i := len(d.drops) - 1; i >= 0; i-- {
		drops = append(drops, d.drops[i]...)
	}
	t.Cleanup(func() {
		if err := poolExec(t, s, drops...); err != nil {
			t.Errorf("cleaning up: %v", err)
		}
	})
	require.NoError(t, poolExec(t, s, d.create...))
	d.create, d.drops = nil, nil
}

// poolExec runs stmts through one connection of a pool of pooldriver's
// own on s's DSN (on PostgreSQL in one round trip, one implicit
// transaction): DDL there makes every pool of the process read the
// server's catalog again.
func poolExec(t *testing.T, s server, stmts ...string) error {
	if len(stmts) == 0 {
		return nil
	}
	db := sql.OpenDB(pooldriver.New(withParams(s.dsn, "pool_max_conns=1")))
	defer db.Close()
	if s.name == "postgres" {
		stmts = []string{strings.Join(stmts, ";\n")}
	}
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, q := range stmts {
		if _, err := db.ExecContext(c, q); err != nil {
			return fmt.Errorf("%s: %w", q, err)
		}
	}
	return nil
}

// schema adds a schema, dropped with what it holds, and returns it and the
// search_path that puts it first.
func (d *ddl) schema() (schema, path string) {
	schema = unique("pd_evil")
	d.add("CREATE SCHEMA "+schema, "DROP SCHEMA "+schema+" CASCADE")
	return schema, schema + ", public"
}

// table adds a table and returns its name.
func (d *ddl) table(prefix, columns string) string {
	name := unique(prefix)
	engine := ""
	if d.s.name == "mysql" {
		engine = " ENGINE=InnoDB"
	}
	d.add("CREATE TABLE "+name+" ("+columns+")"+engine, "DROP TABLE "+name)
	return name
}

// pathFunc adds a plpgsql function name(args) RETURNS returns that sets
// the session's search_path to path and returns ret, and returns its name.
func (d *ddl) pathFunc(path, args, returns, ret string) string {
	fn := unique("pd_hidden")
	d.add(fmt.Sprintf(`CREATE FUNCTION %s(%s) RETURNS %s LANGUAGE plpgsql AS $$
BEGIN PERFORM set_config('search_path', '%s', false); RETURN %s; END $$`, fn, args, returns, path, ret),
		"DROP FUNCTION "+fn)
	return fn
}

// loginRole adds a LOGIN role that is no superuser, and returns it and a
// DSN of the server logging in as it.
func (d *ddl) loginRole() (role, dsn string) {
	t := d.t
	t.Helper()
	role = unique("pd_app")
	d.add("CREATE ROLE "+role+" LOGIN", "DROP ROLE "+role)
	cfg, err := pgx.ParseConfig(d.s.dsn)
	require.NoError(t, err)
	dsn = strings.Replace(d.s.dsn, "://"+cfg.User+"@", "://"+role+"@", 1)
	require.NotEqual(t, d.s.dsn, dsn, "the test DSN names its user before '@'")
	return role, dsn
}

// landed adds a table to public and one of the same name to schema, and
// returns an observe that tells in which schema the next user's INSERT
// into it lands.
func (d *ddl) landed(schema string) func(t *testing.T, db *sql.DB) string {
	tbl := d.table("pd_land", "a int")
	d.add("CREATE TABLE " + schema + "." + tbl + " (a int)") // dropped with the schema
	return asks("WITH i AS (INSERT INTO " + tbl + " (a) VALUES (1) RETURNING tableoid) " +
		"SELECT n.nspname::text FROM i JOIN pg_class c ON c.oid = i.tableoid JOIN pg_namespace n ON n.oid = c.relnamespace")
}

// pgLockFree returns an observe that, once the next user of the pool has
// the connection, tells whether another connection can take the session
// advisory lock key.
func pgLockFree(s server, key int64) func(t *testing.T, db *sql.DB) string {
	return func(t *testing.T, db *sql.DB) string {
		live := nextUser(t, db, "SELECT pg_backend_pid()::text")
		c, err := s.admin(t).Conn(ctx(t))
		require.NoError(t, err)
		defer c.Close()
		free := lockFreeWithin(live, func() (bool, string) {
			var got bool
			require.NoError(t, c.QueryRowContext(ctx(t), "SELECT pg_try_advisory_lock($1)", key).Scan(&got))
			var holder sql.NullString
			if !got {
				err := c.QueryRowContext(ctx(t), "SELECT max(pid)::text FROM pg_locks WHERE locktype = 'advisory' AND granted "+
					"AND objsubid = 1 AND ((classid::bigint << 32) | objid::bigint) = $1", key).Scan(&holder)
				require.NoError(t, err)
			}
			return got, holder.String
		})
		if free {
			_, err := c.ExecContext(ctx(t), "SELECT pg_advisory_unlock($1)", key)
			require.NoError(t, err)
		}
		return fmt.Sprintf("free: %v", free)
	}
}

// myLockFree is pgLockFree for a MariaDB named lock (GET_LOCK).
func myLockFree(s server, name string) func(t *testing.T, db *sql.DB) string {
	return func(t *testing.T, db *sql.DB) string {
		live := nextUser(t, db, "SELECT CONNECTION_ID()")
		c, err := s.admin(t).Conn(ctx(t))
		require.NoError(t, err)
		defer c.Close()
		free := lockFreeWithin(live, func() (bool, string) {
			var got sql.NullInt64
			require.NoError(t, c.QueryRowContext(ctx(t), "SELECT GET_LOCK(?, 0)", name).Scan(&got))
			var holder sql.NullString
			if got.Int64 != 1 {
				require.NoError(t, c.QueryRowContext(ctx(t), "SELECT IS_USED_LOCK(?)", name).Scan(&holder))
			}
			return got.Int64 == 1, holder.String
		})
		if free {
			_, err := c.ExecContext(ctx(t), "SELECT RELEASE_LOCK(?)", name)
			require.NoError(t, err)
		}
		return fmt.Sprintf("free: %v", free)
	}
}

// lockFreeWithin reports whether a lock is free for the next user, whose
// session is live: try makes one attempt to take it, and says which
// session holds it where it cannot. Held by live, it is not free. Held by
// another, it is a session that pooldriver closed (one it could not reset:
// a wrapped connector's), which ends on the server a moment after the
// close and holds its locks until then, longer on a loaded machine: try
// is asked again, for up to 2 s.
func lockFreeWithin(live string, try func() (free bool, holder string)) bool {
	for end := time.Now().Add(2 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		free, holder := try()
		if free {
			return true
		}
		if holder == live || time.Now().After(end) {
			return false
		}
	}
}

// lockKey returns an advisory lock key no other test uses.
func lockKey() int64 { return 45_000_000 + rand.Int64N(1_000_000) }

// TestNeverDirtyPostgresBuiltinOverload (issue 45, item 1): a user's
// overload of a listed built-in, public.upper(integer), that moves the
// search_path: SELECT upper(42) names nothing but a built-in, and the next
// user's INSERT landed in the other schema. The role variant: an
// overload public.lower(integer) that switches the role.
func TestNeverDirtyPostgresBuiltinOverload(t *testing.T) {
	forServer(t, "postgres", func(t *testing.T, s server) {
		t.Run("search_path", func(t *testing.T) {
			d := newDDL(t, s)
			schema, path := d.schema()
			landed := d.landed(schema)
			d.add("DROP FUNCTION IF EXISTS public.upper(integer)") // a run that crashed may have left it
			d.add("CREATE FUNCTION public.upper(integer) RETURNS text LANGUAGE sql AS $$ SELECT set_config('search_path', '"+path+"', false) $$",
				"DROP FUNCTION public.upper(integer)")
			d.apply()
			checkDenied(t, s, s.dsn, denyCase{dirty: execAll("SELECT upper(42)"), observe: landed, want: "public"})
		})
		t.Run("role", func(t *testing.T) {
			target := pgRole(t, s)
			d := newDDL(t, s)
			app, dsn := d.loginRole()
			d.add("GRANT " + target + " TO " + app)
			d.add("DROP FUNCTION IF EXISTS public.lower(integer)")
			d.add("CREATE FUNCTION public.lower(integer) RETURNS text LANGUAGE sql AS $$ SELECT set_config('role', '"+target+"', false) $$",
				"DROP FUNCTION public.lower(integer)")
			d.apply()
			checkDenied(t, s, dsn, denyCase{dirty: execAll("SELECT lower(42)"), observe: asks("SELECT current_user::text"), want: app})
		})
	})
}

// TestNeverDirtyPostgresExtensionName (issue 45, item 2): a function named
// uuid_generate_v4 in public, without the uuid-ossp extension, that moves
// the search_path: the name is an extension's, not a built-in's.
func TestNeverDirtyPostgresExtensionName(t *testing.T) {
	forServer(t, "postgres", func(t *testing.T, s server) {
		if n := s.adminInt(t, "SELECT count(*) FROM pg_proc WHERE proname = 'uuid_generate_v4'"); n > 0 {
			t.Skip("a function uuid_generate_v4 exists in the test database (uuid-ossp installed?): the test needs the name free")
		}
		d := newDDL(t, s)
		schema, path := d.schema()
		landed := d.landed(schema)
		d.add("CREATE FUNCTION public.uuid_generate_v4() RETURNS uuid LANGUAGE plpgsql AS $$ BEGIN "+
			"PERFORM set_config('search_path', '"+path+"', false); RETURN gen_random_uuid(); END $$",
			"DROP FUNCTION public.uuid_generate_v4()")
		d.apply()
		checkDenied(t, s, s.dsn, denyCase{dirty: execAll("SELECT uuid_generate_v4()"), observe: landed, want: "public"})
	})
}

// TestNeverDirtyMariaDBBuiltinNames (issue 45, item 2): stored functions
// named regexp_like, is_uuid and any_value, MySQL built-ins on the list
// that MariaDB 10.11 does not have, in the test database: the unqualified
// name calls the user's function, which takes a named lock, or sets a user
// variable or time_zone and then fails.
func TestNeverDirtyMariaDBBuiltinNames(t *testing.T) {
	forServer(t, "mysql", func(t *testing.T, s server) {
		var zone string
		require.NoError(t, s.admin(t).QueryRowContext(ctx(t), "SELECT @@global.time_zone").Scan(&zone))
		lock := unique("pd_lock")
		variable := unique("pd_v")
		d := newDDL(t, s)
		for _, f := range []struct{ name, definition string }{
			{"regexp_like", "(s TEXT, p TEXT) RETURNS INT BEGIN DECLARE r INT; SET r = GET_LOCK('" + lock + "', 0); RETURN 1; END"},
			{"is_uuid", "(s TEXT) RETURNS INT BEGIN SET @" + variable + " = 'leaked'; SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'after a change'; RETURN 1; END"},
			{"any_value", "(v INT) RETURNS INT BEGIN SET time_zone = '+05:00'; SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'after a change'; RETURN 1; END"},
		} {
			d.add("DROP FUNCTION IF EXISTS `" + f.name + "`") // a run that crashed may have left it
			d.add("CREATE FUNCTION `"+f.name+"`"+f.definition, "DROP FUNCTION `"+f.name+"`")
		}
		d.apply()
		for _, dsn := range mariadbDSNs(s) {
			t.Run(dsn.name, func(t *testing.T) {
				t.Run("regexp_like takes a lock", func(t *testing.T) {
					checkDenied(t, s, dsn.dsn, denyCase{
						dirty:   execAll("SELECT regexp_like('a', 'a')"),
						observe: myLockFree(s, lock),
						want:    "free: true",
					})
				})
				t.Run("is_uuid sets a variable", func(t *testing.T) {
					checkDenied(t, s, dsn.dsn, denyCase{
						dirty: execAll("SELECT is_uuid('x')"),
						fails: true,
						// A failed statement that ran code counts even when trusted,
						// where the wire shows the ERR.
						reported: dsn.name == "plain wire",
						observe:  asks("SELECT coalesce(@" + variable + ", '')"),
						want:     "",
					})
				})
				t.Run("any_value sets time_zone", func(t *testing.T) {
					checkDenied(t, s, dsn.dsn, denyCase{
						dirty: execAll("SELECT any_value(1)"),
						fails: true,
						// A failed statement that ran code counts even when trusted,
						// where the wire shows the ERR.
						reported: dsn.name == "plain wire",
						observe:  asks("SELECT @@session.time_zone"),
						want:     zone,
					})
				})
			})
		}
	})
}

// Issue 45, item 3: code of the user's that runs where no call names it
// (an operator, a cast, attribute notation, a domain's CHECK, a column's
// DEFAULT, a row-level security policy, a trigger, each moving the
// search_path; a view and a materialized view whose query takes a session
// advisory lock).

// pgSearchPath returns an observe of the next user's search_path, and
// what it is in a new session.
func pgSearchPath(t *testing.T, s server) (func(t *testing.T, db *sql.DB) string, string) {
	t.Helper()
	return asks("SELECT current_setting('search_path')"), pgDefault(t, s, "search_path")
}

// TestNeverDirtyPostgresOperator (issue 45, item 3): a user's operator, whose function moves the search_path: SELECT 1 #+# 2 calls nothing by name.
func TestNeverDirtyPostgresOperator(t *testing.T) {
	forServer(t, "postgres", func(t *testing.T, s server) {
		searchPath, clean := pgSearchPath(t, s)
		d := newDDL(t, s)
		_, path := d.schema()
		fn := d.pathFunc(path, "a int, b int", "int", "a + b")
		d.add("DROP OPERATOR IF EXISTS public.#+# (int, int)") // a run that crashed may have left it
		d.add("CREATE OPERATOR public.#+# (leftarg = int, rightarg = int, function = "+fn+")", "DROP OPERATOR public.#+# (int, int)")
		d.apply()
		checkDenied(t, s, s.dsn, denyCase{dirty: execAll("SELECT 1 #+# 2"), observe: searchPath, want: clean})
	})
}

// TestNeverDirtyPostgresImpliedOperator: a user's operator that a word
// runs by its name, no symbol written: ILIKE runs ~~* resolved against
// the operands' types, here a user's for (text, int), whose function
// moves the search_path.
func TestNeverDirtyPostgresImpliedOperator(t *testing.T) {
	forServer(t, "postgres", func(t *testing.T, s server) {
		searchPath, clean := pgSearchPath(t, s)
		d := newDDL(t, s)
		_, path := d.schema()
		fn := d.pathFunc(path, "a text, b int", "bool", "true")
		d.add("DROP OPERATOR IF EXISTS public.~~* (text, int)") // a run that crashed may have left it
		d.add("CREATE OPERATOR public.~~* (leftarg = text, rightarg = int, function = "+fn+")", "DROP OPERATOR public.~~* (text, int)")
		tbl := d.table("rv54_ops", "a text")
		d.add("INSERT INTO " + tbl + " VALUES ('x')")
		d.apply()
		checkDenied(t, s, s.dsn, denyCase{dirty: execAll("SELECT a ILIKE 1 FROM " + tbl), observe: searchPath, want: clean})
	})
}

// TestNeverDirtyPostgresCast (issue 45, item 3): a user's cast, by a function that moves the search_path, used with ::.
func TestNeverDirtyPostgresCast(t *testing.T) {
	forServer(t, "postgres", func(t *testing.T, s server) {
		searchPath, clean := pgSearchPath(t, s)
		// A cast needs a type of the test's own: a composite type,
		// cast to int by a function.
		d := newDDL(t, s)
		_, path := d.schema()
		typ := unique("pd_t")
		d.add("CREATE TYPE "+typ+" AS (a int)", "DROP TYPE "+typ)
		fn := d.pathFunc(path, "v "+typ, "int", "v.a")
		d.add("CREATE CAST ("+typ+" AS int) WITH FUNCTION "+fn+"("+typ+")", "DROP CAST ("+typ+" AS int)")
		d.apply()
		checkDenied(t, s, s.dsn, denyCase{dirty: execAll("SELECT (ROW(7)::" + typ + ")::int"), observe: searchPath, want: clean})
	})
}

// TestNeverDirtyPostgresAttributeNotation (issue 45, item 3): a function called by attribute notation, SELECT x.f FROM t x: no parenthesis.
func TestNeverDirtyPostgresAttributeNotation(t *testing.T) {
	forServer(t, "postgres", func(t *testing.T, s server) {
		searchPath, clean := pgSearchPath(t, s)
		d := newDDL(t, s)
		_, path := d.schema()
		tbl := d.table("pd_attr", "a int")
		d.add("INSERT INTO " + tbl + " VALUES (1)")
		fn := d.pathFunc(path, "r "+tbl, "int", "r.a")
		d.apply()
		checkDenied(t, s, s.dsn, denyCase{dirty: execAll("SELECT x." + fn + " FROM " + tbl + " x"), observe: searchPath, want: clean})
	})
}

// TestNeverDirtyPostgresAttributeNotationDomain: attribute notation
// calls a function of one argument of a domain over a row type too:
// SELECT (c).f FROM t, where t's column c is of the domain (which has no
// check: nothing else marks it).
func TestNeverDirtyPostgresAttributeNotationDomain(t *testing.T) {
	forServer(t, "postgres", func(t *testing.T, s server) {
		searchPath, clean := pgSearchPath(t, s)
		d := newDDL(t, s)
		_, path := d.schema()
		row, dom := unique("rv54_row"), unique("rv54_dom")
		d.add("CREATE TYPE "+row+" AS (a int)", "DROP TYPE "+row)
		d.add("CREATE DOMAIN "+dom+" AS "+row, "DROP DOMAIN "+dom)
		tbl := d.table("rv54_attr", "c "+dom)
		d.add("INSERT INTO " + tbl + " VALUES (ROW(1))")
		fn := d.pathFunc(path, "r "+dom, "int", "1")
		d.apply()
		checkDenied(t, s, s.dsn, denyCase{dirty: execAll("SELECT (c)." + fn + " FROM " + tbl), observe: searchPath, want: clean})
	})
}

// TestNeverDirtyPostgresAttributeNotationDefaults: attribute notation
// calls a function whose other arguments have defaults too: SELECT x.f
// FROM t x runs f(x, 1).
func TestNeverDirtyPostgresAttributeNotationDefaults(t *testing.T) {
	forServer(t, "postgres", func(t *testing.T, s server) {
		searchPath, clean := pgSearchPath(t, s)
		d := newDDL(t, s)
		_, path := d.schema()
		tbl := d.table("rv54_attr", "a int")
		d.add("INSERT INTO " + tbl + " VALUES (1)")
		fn := d.pathFunc(path, "r "+tbl+", b int DEFAULT 1", "int", "b")
		d.apply()
		checkDenied(t, s, s.dsn, denyCase{dirty: execAll("SELECT x." + fn + " FROM " + tbl + " x"), observe: searchPath, want: clean})
	})
}

// TestNeverDirtyPostgresDomainCheck (issue 45, item 3): a domain whose CHECK calls a function that moves the search_path, checked by an INSERT into a column of the domain.
func TestNeverDirtyPostgresDomainCheck(t *testing.T) {
	forServer(t, "postgres", func(t *testing.T, s server) {
		searchPath, clean := pgSearchPath(t, s)
		d := newDDL(t, s)
		_, path := d.schema()
		fn := d.pathFunc(path, "v int", "bool", "v > 0")
		dom := unique("pd_dom")
		d.add("CREATE DOMAIN "+dom+" AS int CHECK ("+fn+"(VALUE))", "DROP DOMAIN "+dom)
		tbl := d.table("pd_domt", "a "+dom)
		d.apply()
		checkDenied(t, s, s.dsn, denyCase{dirty: execAll("INSERT INTO " + tbl + " (a) VALUES (1)"), observe: searchPath, want: clean})
	})
}

// TestNeverDirtyPostgresColumnDefault (issue 45, item 3): a column DEFAULT that calls a function that moves the search_path, run by an INSERT that leaves the column out.
func TestNeverDirtyPostgresColumnDefault(t *testing.T) {
	forServer(t, "postgres", func(t *testing.T, s server) {
		searchPath, clean := pgSearchPath(t, s)
		d := newDDL(t, s)
		_, path := d.schema()
		fn := d.pathFunc(path, "", "int", "1")
		tbl := d.table("pd_deft", "a int DEFAULT "+fn+"(), b int")
		d.apply()
		checkDenied(t, s, s.dsn, denyCase{dirty: execAll("INSERT INTO " + tbl + " (b) VALUES (1)"), observe: searchPath, want: clean})
	})
}

// TestNeverDirtyPostgresRowLevelSecurity (issue 45, item 3): a row-level security policy whose USING calls a function that moves the search_path, run by a SELECT of the table.
func TestNeverDirtyPostgresRowLevelSecurity(t *testing.T) {
	forServer(t, "postgres", func(t *testing.T, s server) {
		searchPath, clean := pgSearchPath(t, s)
		// The policy applies to a user that is neither a superuser
		// (who bypasses it, FORCE or not) nor the table's owner.
		d := newDDL(t, s)
		app, dsn := d.loginRole()
		_, path := d.schema()
		fn := d.pathFunc(path, "", "int", "1")
		tbl := d.table("pd_rls", "a int")
		d.add("INSERT INTO " + tbl + " VALUES (1)")
		d.add("ALTER TABLE " + tbl + " ENABLE ROW LEVEL SECURITY")
		d.add("CREATE POLICY pd_policy ON " + tbl + " FOR SELECT USING (" + fn + "() > 0)")
		d.add("GRANT SELECT ON " + tbl + " TO " + app)
		d.apply()
		checkDenied(t, s, dsn, denyCase{dirty: execAll("SELECT count(*) FROM " + tbl), observe: searchPath, want: clean})
	})
}

// TestNeverDirtyPostgresTrigger (issue 45, item 3): an AFTER INSERT trigger whose plpgsql function moves the search_path.
func TestNeverDirtyPostgresTrigger(t *testing.T) {
	forServer(t, "postgres", func(t *testing.T, s server) {
		searchPath, clean := pgSearchPath(t, s)
		d := newDDL(t, s)
		_, path := d.schema()
		fn := d.pathFunc(path, "", "trigger", "NULL")
		tbl := d.table("pd_trg", "a int")
		d.add("CREATE TRIGGER pd_trigger AFTER INSERT ON " + tbl + " FOR EACH ROW EXECUTE FUNCTION " + fn + "()")
		d.apply()
		checkDenied(t, s, s.dsn, denyCase{dirty: execAll("INSERT INTO " + tbl + " (a) VALUES (1)"), observe: searchPath, want: clean})
	})
}

// TestNeverDirtyPostgresViewLock (issue 45, item 3): a view whose SELECT list takes a session advisory lock: the next user, from another connection, must be able to take it.
func TestNeverDirtyPostgresViewLock(t *testing.T) {
	forServer(t, "postgres", func(t *testing.T, s server) {
		key := lockKey()
		view := unique("pd_lockview")
		d := newDDL(t, s)
		d.add(fmt.Sprintf("CREATE VIEW %s AS SELECT pg_advisory_lock(%d)::text AS l", view, key), "DROP VIEW "+view)
		d.apply()
		checkDenied(t, s, s.dsn, denyCase{dirty: execAll("SELECT l FROM " + view), observe: pgLockFree(s, key), want: "free: true"})
	})
}

// TestNeverDirtyPostgresMaterializedViewLock (issue 45, item 3): REFRESH MATERIALIZED VIEW of a materialized view whose query takes a session advisory lock.
func TestNeverDirtyPostgresMaterializedViewLock(t *testing.T) {
	forServer(t, "postgres", func(t *testing.T, s server) {
		key := lockKey()
		mv := unique("pd_lockmv")
		d := newDDL(t, s)
		// WITH NO DATA: the connection that creates it must not take
		// the lock.
		d.add(fmt.Sprintf("CREATE MATERIALIZED VIEW %s AS SELECT pg_advisory_lock(%d)::text AS l WITH NO DATA", mv, key), "DROP MATERIALIZED VIEW "+mv)
		d.apply()
		checkDenied(t, s, s.dsn, denyCase{dirty: execAll("REFRESH MATERIALIZED VIEW " + mv), observe: pgLockFree(s, key), want: "free: true"})
	})
}

// TestNeverDirtyMariaDBUnnamedCalls (issue 45, item 3): a trigger that sets
// a user variable before an INSERT that then fails on a duplicate key (an
// ERR packet carries no session tracking), and a view whose query takes a
// named lock.
func TestNeverDirtyMariaDBUnnamedCalls(t *testing.T) {
	forServer(t, "mysql", func(t *testing.T, s server) {
		variable := unique("pd_tv")
		lock := unique("pd_lock")
		view := unique("pd_lockview")
		d := newDDL(t, s)
		tbl := d.table("pd_trg", "a INT PRIMARY KEY")
		d.add("INSERT INTO " + tbl + " (a) VALUES (1)")
		d.add("CREATE TRIGGER " + unique("pd_trigger") + " BEFORE INSERT ON " + tbl + " FOR EACH ROW SET @" + variable + " = 'leaked'") // dropped with the table
		d.add("CREATE VIEW "+view+" AS SELECT GET_LOCK('"+lock+"', 0) AS l", "DROP VIEW "+view)
		d.apply()
		for _, dsn := range mariadbDSNs(s) {
			t.Run(dsn.name, func(t *testing.T) {
				t.Run("trigger, duplicate key", func(t *testing.T) {
					checkDenied(t, s, dsn.dsn, denyCase{
						dirty: execAll("INSERT INTO " + tbl + " (a) VALUES (1)"),
						fails: true,
						// A failed statement that ran code counts even when trusted,
						// where the wire shows the ERR.
						reported: dsn.name == "plain wire",
						observe:  asks("SELECT coalesce(@" + variable + ", '')"),
						want:     "",
					})
				})
				t.Run("view takes a lock", func(t *testing.T) {
					checkDenied(t, s, dsn.dsn, denyCase{
						dirty:   execAll("SELECT l FROM " + view),
						observe: myLockFree(s, lock),
						want:    "free: true",
					})
				})
			})
		}
	})
}

// TestNeverDirtyPostgresRandomSeed (issue 45, item 4): setseed(0.25) made
// the next user's random() a sequence anyone can predict. DISCARD ALL
// does not reset the seed.
func TestNeverDirtyPostgresRandomSeed(t *testing.T) {
	forServer(t, "postgres", func(t *testing.T, s server) {
		// The first values after setseed(0.25), on a session of its own.
		seeded := map[string]bool{}
		db, err := sql.Open("pgx", s.dsn)
		require.NoError(t, err)
		c, err := db.Conn(ctx(t))
		require.NoError(t, err)
		_, err = c.ExecContext(ctx(t), "SELECT setseed(0.25)")
		require.NoError(t, err)
		for range 3 {
			var v string
			require.NoError(t, c.QueryRowContext(ctx(t), "SELECT random()::text").Scan(&v))
			seeded[v] = true
		}
		require.NoError(t, c.Close())
		require.NoError(t, db.Close())
		checkDenied(t, s, s.dsn, denyCase{
			dirty: execAll("SELECT setseed(0.25)"),
			observe: func(t *testing.T, db *sql.DB) string {
				return fmt.Sprintf("random() follows setseed(0.25): %v", seeded[nextUser(t, db, "SELECT random()::text")])
			},
			want:    "random() follows setseed(0.25): false",
			builtin: true,
		})
	})
}

// TestNeverDirtyPostgresDblink (issue 45, item 4): a dblink connection
// opened by name stays open in the session: the next user saw it (and
// could run SQL through it as the first user's login).
func TestNeverDirtyPostgresDblink(t *testing.T) {
	forServer(t, "postgres", func(t *testing.T, s server) {
		// The reset closes dblink's connections where the catalog says
		// the database has dblink: the extension is created, and dropped,
		// through a pool of pooldriver's (see ddl).
		if s.adminInt(t, "SELECT count(*) FROM pg_extension WHERE extname = 'dblink'") == 0 {
			if err := poolExec(t, s, "CREATE EXTENSION IF NOT EXISTS dblink"); err != nil {
				t.Skipf("SKIPPED, NOT A PASS: the dblink extension cannot be created on this server (install postgresql-contrib): %v", err)
			}
			t.Cleanup(func() {
				if err := poolExec(t, s, "DROP EXTENSION dblink"); err != nil {
					t.Errorf("dropping extension dblink: %v", err)
				}
			})
		}
		cfg, err := pgx.ParseConfig(s.dsn)
		require.NoError(t, err)
		// The address as the server sees itself: in a container the
		// DSN's port is the host's, mapped.
		var host, port string
		require.NoError(t, s.admin(t).QueryRowContext(ctx(t),
			"SELECT coalesce(host(inet_server_addr()), '127.0.0.1'), current_setting('port')").Scan(&host, &port))
		conninfo := fmt.Sprintf("host=%s port=%s dbname=%s user=%s", host, port, cfg.Database, cfg.User)
		if cfg.Password != "" {
			conninfo += " password=" + cfg.Password
		}
		checkDenied(t, s, s.dsn, denyCase{
			dirty:     execAll("SELECT dblink_connect('pd_link', '" + strings.ReplaceAll(conninfo, "'", "''") + "')"),
			observe:   asks("SELECT coalesce(array_to_string(dblink_get_connections(), ','), '')"),
			want:      "",
			unvouched: true,
		})
	})
}

// TestNeverDirtyPostgresReplicationOrigin (issue 45, item 4): a session
// set up to replay from a replication origin stays so: the next user's
// commits were stamped with it. An origin is active in one session at a
// time, so each mode sets up an origin of its own; all are dropped when
// the test ends, once every session that had one is closed.
func TestNeverDirtyPostgresReplicationOrigin(t *testing.T) {
	forServer(t, "postgres", func(t *testing.T, s server) {
		admin := s.admin(t)
		var mu sync.Mutex
		var origins []string
		t.Cleanup(func() {
			mu.Lock()
			defer mu.Unlock()
			for _, o := range origins {
				// A closed client's server process may take a moment to
				// exit and let go of its origin.
				deadline := time.Now().Add(15 * time.Second)
				for {
					_, err := admin.ExecContext(context.Background(), "SELECT pg_replication_origin_drop($1)", o)
					if err == nil {
						break
					}
					if time.Now().After(deadline) {
						t.Errorf("dropping replication origin %s: %v", o, err)
						break
					}
					time.Sleep(50 * time.Millisecond)
				}
			}
		})
		checkDenied(t, s, s.dsn, denyCase{
			dirty: func(c context.Context, r runner) error {
				o := unique("pd_origin")
				if _, err := admin.ExecContext(c, "SELECT pg_replication_origin_create($1)", o); err != nil {
					return fmt.Errorf("creating the origin: %w", err)
				}
				mu.Lock()
				origins = append(origins, o)
				mu.Unlock()
				return execAll("SELECT pg_replication_origin_session_setup('"+o+"')")(c, r)
			},
			observe: asks("SELECT pg_replication_origin_session_is_setup()::text"),
			want:    "false",
			builtin: true,
		})
	})
}

// argQuery runs query with arg as the next user, and returns its one text
// value, or the error (which is what a next user would get).
func argQuery(db *sql.DB, c context.Context, query string, arg any) string {
	var v sql.NullString
	if err := db.QueryRowContext(c, query, arg).Scan(&v); err != nil {
		return "error: " + err.Error()
	}
	return v.String
}

// TestNeverDirtyPostgresStatementCache (issue 45, item 5): the dialect
// prepares a query with arguments once per connection, as pooldriver_<n>.
// A first user who deallocates it (DEALLOCATE ALL, DISCARD ALL), prepares
// their own statement under its name, or prepared it under another
// search_path, must not break or hijack the next user's same query.
func TestNeverDirtyPostgresStatementCache(t *testing.T) {
	forServer(t, "postgres", func(t *testing.T, s server) {
		const q = "SELECT $1::text"
		prepared := func(c context.Context, r runner) error {
			var v string
			if err := r.QueryRowContext(c, q, "first").Scan(&v); err != nil {
				return fmt.Errorf("%q: %w", q, err)
			}
			return nil
		}
		then := func(stmts ...string) func(c context.Context, r runner) error {
			return func(c context.Context, r runner) error {
				if err := prepared(c, r); err != nil {
					return err
				}
				return execAll(stmts...)(c, r)
			}
		}
		same := func(t *testing.T, db *sql.DB) string { return argQuery(db, ctx(t), q, "mine") }
		t.Run("DEALLOCATE ALL", func(t *testing.T) {
			checkDenied(t, s, s.dsn, denyCase{dirty: then("DEALLOCATE ALL"), observe: same, want: "mine", shown: true})
		})
		t.Run("DISCARD ALL", func(t *testing.T) {
			checkDenied(t, s, s.dsn, denyCase{dirty: then("DISCARD ALL"), observe: same, want: "mine", shown: true,
				noTx: "DISCARD ALL cannot run inside a transaction block"})
		})
		t.Run("hijacked name", func(t *testing.T) {
			checkDenied(t, s, s.dsn, denyCase{
				dirty: func(c context.Context, r runner) error {
					if err := prepared(c, r); err != nil {
						return err
					}
					var name string
					if err := r.QueryRowContext(c, "SELECT name FROM pg_prepared_statements WHERE NOT from_sql AND statement = '"+q+"'").Scan(&name); err != nil {
						return fmt.Errorf("the name the query was prepared under: %w", err)
					}
					// In one statement, whether or not the name is still
					// prepared there: with pool_reset_always every statement's
					// hold ends in a reset, which may have deallocated it.
					lit := "'" + strings.ReplaceAll(pgx.Identifier{name}.Sanitize(), "'", "''") + "'"
					return execAll(`DO $pd$BEGIN
	BEGIN EXECUTE 'DEALLOCATE ' || `+lit+`; EXCEPTION WHEN invalid_sql_statement_name THEN NULL; END;
	EXECUTE 'PREPARE ' || `+lit+` || '(text) AS SELECT ''hijacked:'' || $1';
END$pd$`)(c, r)
				},
				observe: same,
				want:    "mine",
				shown:   true,
			})
		})
		t.Run("search_path", func(t *testing.T) {
			// public.t and other.t, whose a has another type: a statement
			// prepared under search_path=other cannot run once the path
			// is reset (PostgreSQL plans it again, and its result type
			// changed), nor may it read other.t.
			d := newDDL(t, s)
			other, _ := d.schema()
			tbl := d.table("pd_sp", "a text")
			d.add("INSERT INTO " + tbl + " VALUES ('public')")
			d.add("CREATE TABLE " + other + "." + tbl + " (a int)") // dropped with the schema
			d.add("INSERT INTO " + other + "." + tbl + " VALUES (2)")
			d.apply()
			query := "SELECT a FROM " + tbl + " WHERE $1::int = 1"
			checkDenied(t, s, s.dsn, denyCase{
				dirty: func(c context.Context, r runner) error {
					if err := execAll("SET search_path = "+other+", public")(c, r); err != nil {
						return err
					}
					var v string
					if err := r.QueryRowContext(c, query, 1).Scan(&v); err != nil {
						return fmt.Errorf("%q: %w", query, err)
					}
					return nil
				},
				observe: func(t *testing.T, db *sql.DB) string { return argQuery(db, ctx(t), query, 1) },
				want:    "public",
				shown:   true,
			})
		})
	})
}

// TestNeverDirtyMariaDBLastInsertID (issue 45, item 6): LAST_INSERT_ID(666)
// plants the value the next LAST_INSERT_ID() returns.
func TestNeverDirtyMariaDBLastInsertID(t *testing.T) {
	forServer(t, "mysql", func(t *testing.T, s server) {
		for _, d := range mariadbDSNs(s) {
			t.Run(d.name, func(t *testing.T) {
				checkDenied(t, s, d.dsn, denyCase{
					dirty:   execAll("SELECT LAST_INSERT_ID(666)"),
					observe: asks("SELECT LAST_INSERT_ID()"),
					want:    "0",
					shown:   true,
				})
			})
		}
	})
}

// TestNeverDirtyPostgresTriggerNameSpelling: a table with a trigger that
// moves the search_path, named as the server folds it, but written
// otherwise: a non-ASCII capital (which PostgreSQL does not fold, and
// lower() over a name, of collation "C", leaves as it is), and a name
// longer than 63 bytes (which the server cuts to the table's).
func TestNeverDirtyPostgresTriggerNameSpelling(t *testing.T) {
	forServer(t, "postgres", func(t *testing.T, s server) {
		searchPath, clean := pgSearchPath(t, s)
		d := newDDL(t, s)
		_, path := d.schema()
		fn := d.pathFunc(path, "", "trigger", "NULL")
		capital := unique("rv54_trg") + "_TÄB"
		long := unique("rv54_trg")
		long += strings.Repeat("x", 63-len(long))
		for _, tbl := range []string{capital, long} {
			d.add("CREATE TABLE "+tbl+" (a int)", "DROP TABLE "+tbl)
			d.add("CREATE TRIGGER rv54_trigger AFTER INSERT ON " + tbl + " FOR EACH ROW EXECUTE FUNCTION " + fn + "()")
		}
		d.apply()
		for name, written := range map[string]string{"capital": capital, "long": long + "_cut_off_by_the_server"} {
			t.Run(name, func(t *testing.T) {
				checkDenied(t, s, s.dsn, denyCase{dirty: execAll("INSERT INTO " + written + " (a) VALUES (1)"), observe: searchPath, want: clean})
			})
		}
	})
}

// TestNeverDirtyPostgresCallAfterParen: a call of a function that moves
// the search_path right after a ')' that closes no alias: DISTINCT ON
// (…), and the parenthesized statement of a WITH list.
func TestNeverDirtyPostgresCallAfterParen(t *testing.T) {
	forServer(t, "postgres", func(t *testing.T, s server) {
		searchPath, clean := pgSearchPath(t, s)
		d := newDDL(t, s)
		_, path := d.schema()
		fn := d.pathFunc(path, "a int", "int", "a")
		d.apply()
		for name, stmt := range map[string]string{
			"DISTINCT ON": "SELECT DISTINCT ON (1) " + fn + "(1)",
			"WITH (…)":    "WITH x AS (SELECT 1 AS a) (SELECT a FROM x) ORDER BY " + fn + "(1)",
		} {
			t.Run(name, func(t *testing.T) {
				checkDenied(t, s, s.dsn, denyCase{dirty: execAll(stmt), observe: searchPath, want: clean})
			})
		}
	})
}
