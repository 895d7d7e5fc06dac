package sqllex

import (
	"slices"
	"strings"
	"testing"
)

// TestRefsOf: the words, operator runs, casts and DDL a text names, as
// the server would read them: comments and strings name nothing, a quoted
// name is a word, white space ends an operator.
func TestRefsOf(t *testing.T) {
	for _, tc := range []struct {
		q          string
		f          Flavor
		words, ops []string
		casts, ddl bool
	}{
		{q: "SELECT id FROM T WHERE id = $1", f: Postgres, words: []string{"1", "from", "id", "select", "t", "where"}, ops: []string{"="}},
		{q: "SELECT 1 #+# 2 -- x ## y", f: Postgres, words: []string{"1", "2", "select"}, ops: []string{"#+#"}},
		{q: "SELECT a =-1, b < > c", f: Postgres, words: []string{"1", "a", "b", "c", "select"}, ops: []string{"<", "=-", ">"}},
		{q: `SELECT "Upper"('x'), 'y #+#'::text`, f: Postgres, words: []string{"select", "text", "upper"}, casts: true},
		{q: "select cast(1 as dom)", f: Postgres, words: []string{"1", "as", "cast", "dom", "select"}, casts: true},
		{q: "SELECT 1; CREATE FUNCTION f() RETURNS int", f: Postgres, words: []string{"1", "create", "f", "function", "int", "returns", "select"}, ddl: true},
		{q: "select `regexp_like`(a, 'b')", f: MySQL, words: []string{"a", "regexp_like", "select"}},
		{q: "SELECT 'a\\'; DROP x' FROM t", f: Postgres, words: []string{"drop", "from", "select", "t"}, ddl: true},
	} {
		r := RefsOf(tc.q, tc.f)
		if r.AfterDDL {
			t.Errorf("RefsOf(%q): a statement after DDL", tc.q)
		}
		if !slices.Equal(r.Words, tc.words) || !slices.Equal(r.Ops, tc.ops) || r.Casts != tc.casts || r.DDL != tc.ddl {
			t.Errorf("RefsOf(%q) = %+v, want words %q ops %q casts %v ddl %v", tc.q, *r, tc.words, tc.ops, tc.casts, tc.ddl)
		}
	}
}

// TestRefsAfterDDL: a statement that follows a DDL statement in the same
// text runs with what the DDL changed.
func TestRefsAfterDDL(t *testing.T) {
	for q, want := range map[string]bool{
		"CREATE TABLE t (a int)":                                                        false,
		"CREATE TABLE t (a int);  ":                                                     false,
		"CREATE TABLE t (a int); INSERT INTO t VALUES (1)":                              true,
		"SELECT 1; CREATE TABLE t (a int)":                                              false,
		"CREATE FUNCTION f() RETURNS int LANGUAGE plpgsql AS $$ BEGIN RETURN 1; END $$": false,
		"CREATE OR REPLACE FUNCTION g() RETURNS int AS 'SELECT 1'; SELECT g()":          true,
	} {
		if got := RefsOf(q, Postgres).AfterDDL; got != want {
			t.Errorf("RefsOf(%q).AfterDDL = %v, want %v", q, got, want)
		}
	}
}

// TestMeets: a text meets what the catalog shadows when it names it; with
// nothing read yet, every text that names anything does.
func TestMeets(t *testing.T) {
	// The catalog's names are lower() over the server's, which lowers
	// ASCII letters only, and at most 63 bytes long.
	long := "t" + strings.Repeat("x", 62)
	s := &Shadows{Names: map[string]struct{}{"upper": {}, "audited": {}, "tÄb": {}, "ünö": {}, long: {}, long[:60] + "é": {}}, Ops: []string{"#+#"}}
	for _, tc := range []struct {
		q    string
		want bool
	}{
		{"SELECT upper(42)", true},
		{"SELECT lower('x')", false},
		{"INSERT INTO Audited (a) VALUES (1)", true},
		{"SELECT 1 #+# 2", true},
		{"SELECT 1 #+#- 2", true},
		{"SELECT 1 # 2", false},
		{"SELECT 1::text", false},
		{"INSERT INTO TÄB (a) VALUES (1)", true},
		{`INSERT INTO "tÄb" (a) VALUES (1)`, true},
		{`INSERT INTO "ünö" (a) VALUES (1)`, true},
		{"INSERT INTO tÄbs (a) VALUES (1)", false},
		{"INSERT INTO " + long + "_cut_by_the_server (a) VALUES (1)", true},
		{`INSERT INTO "` + long[:60] + `éé" (a) VALUES (1)`, true},
		{"INSERT INTO " + long[:62] + " (a) VALUES (1)", false},
	} {
		if got := RefsOf(tc.q, Postgres).Meets(s); got != tc.want {
			t.Errorf("%q meets %v, want %v", tc.q, got, tc.want)
		}
	}
	if !RefsOf("SELECT 1::text", Postgres).Meets(&Shadows{Casts: true}) || RefsOf("SELECT 1", Postgres).Meets(&Shadows{Casts: true}) {
		t.Error("a user's cast: a text that casts meets it, one that does not, not")
	}
	if !RefsOf("SELECT 1", Postgres).Meets(&Shadows{All: true}) {
		t.Error("an implicit user cast: every text meets it")
	}
	if !RefsOf("SELECT a FROM t", Postgres).Meets(nil) || RefsOf("", Postgres).Meets(nil) {
		t.Error("nothing read: every text that names anything meets it")
	}
}

// TestMeetsNothingRead: with nothing read, a text meets what may name a
// user's object, run a user's operator or be a user's cast; keywords
// that no object can be named unquoted, the first word of a statement
// and numbers name nothing. A keyword that is not reserved may name a
// table or a function (key, value, name, left), and so may any word
// after a '.' (s.select() calls a function of that name).
func TestMeetsNothingRead(t *testing.T) {
	for _, tc := range []struct {
		q    string
		f    Flavor
		want bool
	}{
		{"SELECT 1", Postgres, false},
		{"select 1.5e3, 1_000, true, false, null", Postgres, false},
		{"SELECT $1", Postgres, false},
		{"SELECT 'a b c' AS x", Postgres, true}, // x: an alias, but a word
		{"BEGIN", Postgres, false},
		{"COMMIT; ROLLBACK; START TRANSACTION", Postgres, true}, // transaction: not reserved
		{"SELECT CURRENT_DATE, CURRENT_USER, LOCALTIMESTAMP", Postgres, false},
		{"SELECT 1 WHERE true AND NOT false", Postgres, false},
		{"SELECT 1 + 1", Postgres, true},                     // a user's + for (int, int)
		{"SELECT 1::int", Postgres, true},                    // a user's cast
		{"SELECT CASE WHEN true THEN 1 END", Postgres, true}, // CASE runs =
		{"SELECT key FROM value", Postgres, true},
		{"SELECT left('ab', 1)", Postgres, true},
		{"SELECT s.select(1)", Postgres, true},
		{`SELECT "select"()`, Postgres, true},
		{"SELECT name", Postgres, true},
		{"SELECT now()", Postgres, true},
		{"SELECT 1; SELECT system_user", Postgres, true}, // a name before 16
		{"SELECT 1", MySQL, true},                        // MySQL's keywords are kept
		{"1", MySQL, false},
		{"1e5", MySQL, true}, // a name may start with a digit there
	} {
		r := RefsOf(tc.q, tc.f)
		if got := r.Meets(nil); got != tc.want {
			t.Errorf("%q (%v) meets with nothing read: %v, want %v (%+v)", tc.q, tc.f, got, tc.want, *r)
		}
	}
}

// TestMeetsImpliedOps: a word that runs an operator by its name (IN runs
// =, BETWEEN >= and <=, LIKE ~~, ...) meets a user's operator of that
// name, as != meets <>, the name the server gives it.
func TestMeetsImpliedOps(t *testing.T) {
	for _, tc := range []struct {
		q, op string
		want  bool
	}{
		{"SELECT a IN (1, 2) FROM t", "=", true},
		{"SELECT a NOT IN (SELECT b FROM u) FROM t", "<>", true},
		{"SELECT a LIKE 1 FROM t", "~~", true},
		{"SELECT a NOT ILIKE 1 FROM t", "!~~*", true},
		{"SELECT a SIMILAR TO 'x' FROM t", "~", true},
		{"SELECT a BETWEEN 1 AND 2 FROM t", ">=", true},
		{"SELECT a NOT BETWEEN 1 AND 2 FROM t", "<", true},
		{"SELECT a IS DISTINCT FROM 1 FROM t", "=", true},
		{"SELECT nullif(a, 1) FROM t", "=", true},
		{"SELECT CASE a WHEN 1 THEN 2 END FROM t", "=", true},
		{"SELECT 1 FROM t JOIN u USING (a)", "=", true},
		{"SELECT 1 FROM t NATURAL JOIN u", "=", true},
		{"SELECT a != 1 FROM t", "<>", true},
		{"SELECT a FROM t WHERE a > 1", "=", false},
		{"SELECT 'in like between' FROM t", "=", false},
	} {
		if got := RefsOf(tc.q, Postgres).Meets(&Shadows{Ops: []string{tc.op}}); got != tc.want {
			t.Errorf("%q meets a user's %s: %v, want %v", tc.q, tc.op, got, tc.want)
		}
	}
}

// TestRefsMakes: DDL that may make or change what runs code, or rename
// what a reading names, against DDL that only removes or labels, and a
// plain CREATE TABLE, which runs only the code its text names.
func TestRefsMakes(t *testing.T) {
	for q, want := range map[string]bool{
		"CREATE TABLE t (id int PRIMARY KEY, v text NOT NULL DEFAULT 'x')":          false,
		"create unlogged table t (a int)":                                           false,
		"CREATE TABLE IF NOT EXISTS t (a int REFERENCES u)":                         false,
		"DROP TABLE t; DROP FUNCTION f(int) CASCADE":                                false,
		"COMMENT ON TABLE t IS 'x'; GRANT SELECT ON t TO r; REVOKE ALL ON t FROM r": false,
		"SELECT 1":                    false,
		"CREATE TEMP TABLE t (a int)": true,
		"CREATE TABLE t (a int) PARTITION BY RANGE (a text_pattern_ops)":                   true,
		"CREATE TABLE t PARTITION OF p FOR VALUES IN (1)":                                  true,
		"CREATE TABLE t (a int, EXCLUDE USING gist (a my_ops WITH &&))":                    true,
		"CREATE TABLE t (a int) USING my_am":                                               true,
		"CREATE VIEW v AS SELECT 1":                                                        true,
		"CREATE INDEX i ON t (a my_ops)":                                                   true,
		"ALTER TABLE t RENAME TO u":                                                        true,
		"CREATE TABLE t (a int); CREATE TRIGGER g BEFORE INSERT ON t EXECUTE FUNCTION f()": true,
		"CREATE FUNCTION f() RETURNS int AS 'SELECT 1'":                                    true,
		"SECURITY LABEL ON TABLE t IS 'x'":                                                 true,
	} {
		if got := RefsOf(q, Postgres).Makes; got != want {
			t.Errorf("RefsOf(%q).Makes = %v, want %v", q, got, want)
		}
	}
}
