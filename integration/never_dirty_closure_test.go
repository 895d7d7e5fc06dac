package integration

import (
	"fmt"
	"strings"
	"testing"
)

// The user's code a statement reaches through what the server records it
// depends on (pg_depend), not through a name its text shows: each test
// here makes a function that moves the search_path, reaches it through a
// kind of object the catalog reading once did not walk to, and asks, as
// the next user of the one connection, in every mode, what search_path it
// sees (checkDenied).

// TestNeverDirtyPostgresPartitionKey: a partition key expression calls the
// function on every row an INSERT routes; no superuser is needed.
func TestNeverDirtyPostgresPartitionKey(t *testing.T) {
	forServer(t, "postgres", func(t *testing.T, s server) {
		searchPath, clean := pgSearchPath(t, s)
		d := newDDL(t, s)
		_, path := d.schema()
		fn := unique("pd_hidden")
		d.add(fmt.Sprintf(`CREATE FUNCTION %s(v int) RETURNS int IMMUTABLE LANGUAGE plpgsql AS $$
BEGIN PERFORM set_config('search_path', '%s', false); RETURN v; END $$`, fn, path), "DROP FUNCTION "+fn)
		tbl := unique("pd_part")
		d.add("CREATE TABLE "+tbl+" (a int) PARTITION BY RANGE ("+fn+"(a))", "DROP TABLE "+tbl)
		d.add("CREATE TABLE " + tbl + "_all PARTITION OF " + tbl + " FOR VALUES FROM (MINVALUE) TO (MAXVALUE)")
		d.apply()
		checkDenied(t, s, s.dsn, denyCase{dirty: execAll("INSERT INTO " + tbl + " (a) VALUES (1)"), observe: searchPath, want: clean})
	})
}

// TestNeverDirtyPostgresDomainReached: a domain whose CHECK calls the
// function, reached by a cast the statement does not show: inside a view,
// a column default, a table CHECK, a row-level security policy, a
// LANGUAGE sql function's body, and COPY of a query of the view.
func TestNeverDirtyPostgresDomainReached(t *testing.T) {
	forServer(t, "postgres", func(t *testing.T, s server) {
		searchPath, clean := pgSearchPath(t, s)
		d := newDDL(t, s)
		app, appDSN := d.loginRole()
		_, path := d.schema()
		fn := d.pathFunc(path, "v int", "bool", "v > 0")
		dom := unique("pd_rdom")
		d.add("CREATE DOMAIN "+dom+" AS int CHECK ("+fn+"(VALUE))", "DROP DOMAIN "+dom)
		view := unique("pd_rview")
		d.add("CREATE VIEW "+view+" AS SELECT (1::"+dom+")::int AS a", "DROP VIEW "+view)
		def := d.table("pd_rdef", "a int DEFAULT 1::"+dom+", b int")
		check := d.table("pd_rchk", "a int CHECK (a::"+dom+" > 0)")
		pol := d.table("pd_rpol", "a int")
		d.add("INSERT INTO " + pol + " VALUES (1)")
		d.add("ALTER TABLE " + pol + " ENABLE ROW LEVEL SECURITY")
		d.add("CREATE POLICY pd_policy ON " + pol + " FOR SELECT USING (a::" + dom + " > 0)")
		d.add("GRANT SELECT ON " + pol + " TO " + app)
		body := unique("pd_rsql")
		d.add("CREATE FUNCTION "+body+"() RETURNS int LANGUAGE sql AS $$ SELECT 1::"+dom+"::int $$", "DROP FUNCTION "+body)
		d.apply()
		for _, c := range []struct{ name, dsn, query string }{
			{"view", s.dsn, "SELECT a FROM " + view},
			{"column default", s.dsn, "INSERT INTO " + def + " (b) VALUES (1)"},
			{"table check", s.dsn, "INSERT INTO " + check + " (a) VALUES (1)"},
			{"policy", appDSN, "SELECT count(*) FROM " + pol},
			{"sql body", s.dsn, "SELECT " + body + "()"},
			{"copy of the view", s.dsn, "COPY (SELECT a FROM " + view + ") TO STDOUT"},
		} {
			t.Run(c.name, func(t *testing.T) {
				checkDenied(t, s, c.dsn, denyCase{dirty: execAll(c.query), observe: searchPath, want: clean})
			})
		}
	})
}

// TestNeverDirtyPostgresEnumToJSON: to_json of a user's enum, inside a
// view, calls the user's cast of the enum to json; the statement names
// the view only, and the view's column is text.
func TestNeverDirtyPostgresEnumToJSON(t *testing.T) {
	forServer(t, "postgres", func(t *testing.T, s server) {
		searchPath, clean := pgSearchPath(t, s)
		d := newDDL(t, s)
		_, path := d.schema()
		enum := unique("pd_enum")
		d.add("CREATE TYPE "+enum+" AS ENUM ('a', 'b')", "DROP TYPE "+enum)
		fn := d.pathFunc(path, "v "+enum, "json", "'1'::json")
		d.add("CREATE CAST ("+enum+" AS json) WITH FUNCTION "+fn+"("+enum+")", "DROP CAST ("+enum+" AS json)")
		view := unique("pd_enumv")
		d.add("CREATE VIEW "+view+" AS SELECT to_json('a'::"+enum+")::text AS j", "DROP VIEW "+view)
		d.apply()
		checkDenied(t, s, s.dsn, denyCase{dirty: execAll("SELECT j FROM " + view), observe: searchPath, want: clean})
	})
}

// TestNeverDirtyMariaDBClosureKinds: on MariaDB the user's code a
// statement reaches without naming it is a view's body or a table's
// trigger, which the catalog reading reads (dialects/mysql, shadowsSQL);
// a stored function cannot stand in a generated column, a CHECK
// constraint or a column DEFAULT, where PostgreSQL's closure must follow
// it. The server is asked: a version that accepts one fails here, naming
// the kind the reading must then walk to.
func TestNeverDirtyMariaDBClosureKinds(t *testing.T) {
	forServer(t, "mysql", func(t *testing.T, s server) {
		fn := unique("pd_kind_fn")
		s.adminExec(t, "CREATE FUNCTION "+fn+"(x INT) RETURNS INT DETERMINISTIC RETURN x + 1")
		t.Cleanup(func() { s.adminExec(t, "DROP FUNCTION "+fn) })
		for kind, column := range map[string]string{
			"generated column": "b INT AS (" + fn + "(a))",
			"CHECK constraint": "b INT CHECK (" + fn + "(b) > 0)",
			"column DEFAULT":   "b INT DEFAULT (" + fn + "(1))",
		} {
			tbl := unique("pd_kind")
			_, err := s.admin(t).ExecContext(ctx(t), "CREATE TABLE "+tbl+" (a INT, "+column+")")
			switch {
			case err == nil:
				s.adminExec(t, "DROP TABLE "+tbl)
				t.Errorf("the server runs a stored function in a %s: the catalog reading must follow it there", kind)
			case !strings.Contains(err.Error(), fn):
				t.Errorf("a %s: %v, want the server's refusal of %s", kind, err, fn)
			}
		}
	})
}
