package sqllex

import (
	"slices"
	"strings"
	"testing"
)

const (
	K = CallsKnown
	U = CallsUnknown
	T = CallsText
)

// callCases feeds the call rule tests and the fuzz corpus: what CallsOf
// answers for Postgres, MySQL and Any.
var callCases = []struct {
	query         string
	pg, my, anyDB Calls
}{
	// What ORMs send (GORM, sqlx, bun, ent), and hand-written plain SQL.
	{"SELECT a, b FROM t WHERE id = $1", K, K, K},
	{"SELECT * FROM t WHERE id = ?", K, K, K},
	{`INSERT INTO "t" ("a","b") VALUES ($1,$2) RETURNING "id"`, K, K, K},
	{`SELECT count(*) FROM "t" WHERE "t"."deleted_at" IS NULL`, K, K, K},
	{"SELECT * FROM t WHERE id IN (?,?)", K, K, K},
	{"CREATE TABLE t (id bigserial, name varchar(64), n numeric(10,2))", K, K, K},
	{`CREATE TABLE "users" ("id" bigserial,"created_at" timestamptz,"name" text,"email" varchar(191) NOT NULL,PRIMARY KEY ("id"))`, K, K, K},
	{`CREATE INDEX IF NOT EXISTS "idx_users_deleted_at" ON "users" ("deleted_at")`, K, K, K},
	{`CREATE UNIQUE INDEX CONCURRENTLY i ON ONLY t USING btree (lower(email))`, K, K, K},
	{"CREATE TABLE `users` (`id` bigint unsigned AUTO_INCREMENT,`name` varchar(191),`created_at` datetime(3) NULL,PRIMARY KEY (`id`),INDEX `idx_users_deleted_at` (`deleted_at`))", U, K, U},
	{"CREATE TABLE t (id INT(11) NOT NULL, kind ENUM('a','b'), flags SET('x','y'), price DECIMAL(10,2), KEY k (kind), UNIQUE KEY uk (price), CONSTRAINT fk FOREIGN KEY (id) REFERENCES o(id))", U, K, U},
	{`UPDATE "users" SET "name"=$1,"updated_at"=$2 WHERE "users"."deleted_at" IS NULL AND "id" = $3`, K, K, K},
	{`DELETE FROM "users" AS "u" WHERE ("u"."id" = 1)`, K, K, K},
	{`INSERT INTO "users" AS "u" ("id", "name") VALUES (DEFAULT, 'x') RETURNING "u"."id"`, K, K, K},
	{`SELECT "u"."id", "u"."name" FROM "users" AS "u" WHERE ("u"."id" = 1) LIMIT 1`, K, K, K},
	{`INSERT INTO "t" ("a") VALUES ($1) ON CONFLICT ("a") DO UPDATE SET "b"="excluded"."b"`, K, K, K},
	{"INSERT INTO t (a, b) VALUES (?, ?) ON DUPLICATE KEY UPDATE b = VALUES(b)", K, K, K},
	{"INSERT t (a) VALUE (1)", U, K, U},
	{"INSERT IGNORE t(a) VALUES (1)", U, K, U},
	{"REPLACE INTO t (a) VALUES (1)", K, K, K},
	{"SELECT COUNT(*) FROM (SELECT DISTINCT id FROM t) AS t1", K, K, K},
	{"SELECT count(*) FROM information_schema.tables WHERE table_schema = CURRENT_SCHEMA() AND table_name = $1", K, U, K},
	{"SELECT CURRENT_DATABASE()", K, U, K},
	{"SELECT DATABASE(), VERSION()", U, K, K},
	{"SELECT a FROM t LEFT JOIN (SELECT b FROM u) x ON x.b = t.a", K, K, K},
	{"SELECT * FROM t WHERE (a, b) = ($1, $2) AND c = ANY($3) AND NOT EXISTS (SELECT 1 FROM u)", K, K, K},
	{"SELECT x::numeric(10,2), CAST(y AS varchar(5)), z::pg_catalog.bpchar(3) FROM t", K, K, K},
	{"SELECT CAST(a AS DECIMAL(10,2)), CONVERT(b, CHAR(10)) FROM t", U, K, K},
	{"SELECT rank() OVER (PARTITION BY a ORDER BY b), count(*) FILTER (WHERE c) FROM t", K, K, K},
	{"SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY x) FROM t", K, U, K},
	{"WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n+1 FROM c WHERE n < 5), d (m) AS (SELECT 2) SELECT * FROM c, d", K, K, K},
	{"SELECT * FROM generate_series(1, 3) AS g(n), unnest($1::int[]) u (x)", K, U, K},
	{"SELECT jsonb_set(data, '{a}', to_jsonb($1)) FROM t", K, U, K},
	{"SELECT JSON_EXTRACT(doc, '$.a'), IFNULL(a, 0), IF(b, 1, 2), DATE_FORMAT(NOW(), '%Y') FROM t", U, K, K},
	{"SELECT nextval('s'), currval('s'), lastval(), setval('s', 1)", K, U, K},
	{"SELECT LAST_INSERT_ID()", U, K, K},
	{"SELECT set_config('app.user', $1, true)", K, U, K},
	{"SELECT pg_catalog.lower('A'), \"lower\"('B')", K, U, U},
	{"SELECT extract(epoch FROM now()), substring(a FROM 1 FOR 2), trim(BOTH ' ' FROM b), position('a' IN c) FROM t", K, K, K},
	{"SELECT a FROM t WHERE x LIKE ('%' || $1) AND y IS NOT NULL", K, K, K},
	{"EXPLAIN (ANALYZE, FORMAT JSON) SELECT 1", K, K, K},
	{"COPY t (a, b) FROM STDIN WITH (FORMAT csv)", K, K, K},
	{"CREATE OR REPLACE FUNCTION f(a int) RETURNS TABLE (b int) LANGUAGE sql AS $$ SELECT become('x') $$", K, U, U},
	{"DROP FUNCTION IF EXISTS f(int)", K, K, K},
	{"CREATE TABLE t (a int, PRIMARY KEY (a)) PARTITION BY RANGE (a)", K, K, K},
	{"CREATE TABLE t (c character varying(20), b bit varying(8), d timestamp(3) with time zone)", K, K, K},
	{"ALTER TABLE t ADD CONSTRAINT fk FOREIGN KEY (a) REFERENCES u (id) ON DELETE CASCADE", K, K, K},
	{"GRANT SELECT (a, b) ON t TO r", K, K, K},
	{"SELECT 'f(x)', $$g(y)$$ FROM t -- h(z)", K, U, U},
	{"SELECT a FROM t TABLESAMPLE SYSTEM (10)", K, K, K},
	{"SELECT * FROM t WHERE MATCH (a) AGAINST ('x')", U, K, U},
	{"SELECT COUNT (*) FROM t", K, U, U}, // MySQL: with a space, a stored function may answer

	// Calls of the user's functions and procedures.
	{"SELECT f()", U, U, U},
	{"SELECT public.f(1)", U, U, U},
	{`SELECT "f"()`, U, U, U}, // MySQL: a call under ANSI_QUOTES, no valid text otherwise
	{"SELECT `f`()", K, U, U},
	{"SELECT \"Lower\"('x')", U, U, U},
	{"SELECT public.lower('x')", U, U, U},
	{"SELECT * FROM t WHERE f(x)", U, U, U},
	{"SELECT my_func()", U, U, U},
	{"SELECT become_admin()", U, U, U},
	{"CALL p()", U, U, U},
	{"call p", U, U, U},
	{"SELECT lower(f(x)) FROM t", U, U, U},
	{"INSERT INTO t (a) VALUES (f(1))", U, U, U},
	{"INSERT INTO t (a) SELECT g(b) FROM u", U, U, U},
	{"UPDATE t SET a = f(a)", U, U, U},
	{"DELETE FROM t WHERE id = f()", U, U, U},
	{"SELECT a FROM t ORDER BY f(a)", U, U, U},
	{"SELECT * FROM f(1) AS x", U, U, U},
	{"SELECT * FROM t JOIN u ON f(t.a, u.b)", U, U, U},
	{"SELECT 1; SELECT f()", U, U, U},
	{"WITH x AS (SELECT f()) SELECT * FROM x", U, U, U},
	{"SELECT sleep(1), pg_sleep(1)", U, U, K},
	{"SELECT like(a), is(1, 1)", U, U, U},
	{"SELECT a FROM t WHERE like(a)", U, K, U},
	{"CREATE TABLE t2 AS SELECT * FROM a JOIN b ON f(a.x)", U, U, U},
	{"CREATE INDEX ON t (f(a))", U, U, U},
	{"ALTER TABLE t ALTER COLUMN a TYPE int USING f(a)", U, U, U},
	{"SELECT range(1)", U, K, U},
	{"SELECT a FROM t ORDER BY range(a)", U, K, U},
	{"DO f()", U, U, U},
	{"SELECT U&\"\\0066\"()", U, T, T}, // MySQL: a backslash in "…" is in doubt (ANSI_QUOTES)

	// SQL the server runs from a string, and pg_settings.
	{"UPDATE pg_settings SET setting = 'x' WHERE name = 'search_path'", T, K, T},
	{"update pg_catalog.\"pg_settings\" set setting = 'x' where name = 'role'", T, K, T},
	{"WITH s AS (UPDATE pg_settings SET setting = 'x' WHERE name = 'role' RETURNING 1) SELECT 1", T, K, T},
	{"SELECT name, setting FROM pg_settings", K, K, K},
	{"SELECT query_to_xml('select set_config(''role'', ''x'', false)', true, true, '')", T, U, T},
	{"SELECT * FROM dblink('db', 'select 1') AS t(a int)", T, U, T},
	{"SELECT dblink_exec('SET ROLE x')", T, U, T},
	{"SELECT * FROM crosstab('select 1')", T, U, T},
	{"EXECUTE IMMEDIATE 'SET @a=1'", T, T, T},
	{"EXECUTE s(1)", T, T, T},
	{"EXEC sp_who", T, T, T},
	{"SELECT 'unterminated(", T, T, T}, // and without '(' the session rules count it,
	{"UPDATE U&\"pg\\005fsettings\" SET setting = 'x'", T, K, T},
}

func TestCallsOf(t *testing.T) {
	for _, c := range callCases {
		for _, f := range []struct {
			f    Flavor
			want Calls
		}{{Postgres, c.pg}, {MySQL, c.my}, {Any, c.anyDB}} {
			if got := CallsOf(c.query, f.f); got != f.want {
				t.Errorf("CallsOf(%q, %d) = %d, want %d", c.query, f.f, got, f.want)
			}
		}
	}
}

// TestFactsChanges: a call of an unknown function counts unless trusted;
// SQL run from a string and the session rules count either way.
func TestFactsChanges(t *testing.T) {
	for _, c := range []struct {
		query              string
		untrusted, trusted bool
	}{
		{"SELECT a FROM t WHERE id = $1", false, false},
		{"SELECT f()", true, false},
		{"CALL p()", true, false},
		{"SELECT query_to_xml('select 1', true, true, '')", true, true},
		{"UPDATE pg_settings SET setting = 'x' WHERE name = 'search_path'", true, true},
		{"SET search_path = x", true, true},
		{"SELECT set_config('role', 'x', false)", true, true},
		{"SELECT set_config('app.x', 'y', true)", false, false},
	} {
		f := Of(c.query, Postgres)
		if got := f.Changes(false); got != c.untrusted {
			t.Errorf("Of(%q).Changes(false) = %v", c.query, got)
		}
		if got := f.Changes(true); got != c.trusted {
			t.Errorf("Of(%q).Changes(true) = %v", c.query, got)
		}
	}
}

// TestCallsQuickScan: a text the quick scan passes over is one the rules
// find no call in.
func TestCallsQuickScan(t *testing.T) {
	for _, c := range callCases {
		checkCallsQuickScan(t, c.query)
	}
}

func checkCallsQuickScan(t *testing.T, q string) {
	t.Helper()
	for _, f := range []Flavor{Postgres, MySQL, Any} {
		if mayCall(q, f) {
			continue
		}
		var c Calls
		if f&Postgres != 0 {
			c = callsTwice(q, false, f)
		}
		if f&MySQL != 0 {
			c = max(c, callsTwice(q, true, f))
		}
		if c != CallsKnown && !cannotLex(q, f) {
			t.Fatalf("CallsOf(%q, %d): the quick scan missed %d", q, f, c)
		}
	}
}

func FuzzCallsOf(f *testing.F) {
	for _, c := range callCases {
		f.Add(c.query)
	}
	for _, c := range sessionCases {
		f.Add(c.query)
	}
	f.Fuzz(func(t *testing.T, q string) {
		checkCallsQuickScan(t, q)
	})
}

func BenchmarkCallsOf(b *testing.B) {
	for _, q := range append(benchQueries, struct{ name, query string }{"orm_insert", `INSERT INTO "t" ("a","b") VALUES ($1,$2) RETURNING "id"`}) {
		b.Run(q.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				sinkCalls = CallsOf(q.query, Postgres)
			}
		})
	}
}

var sinkCalls Calls

// TestUnknownCalls: the names of the calls CallsOf cannot vouch for, as a
// catalog would look them up, and where a call names no function.
func TestUnknownCalls(t *testing.T) {
	for q, want := range map[string][]string{
		"SELECT app_f(1)":                       {"app_f"},
		"SELECT app.App_F(1), lower('x')":       {"app_f"},
		`SELECT "MyFunc"()`:                     {"MyFunc"}, // as quoted
		"SELECT rvÄ(), \"rvÄ\"()":               {"rvÄ"},    // PostgreSQL folds ASCII only
		"SELECT f(1), g(2), f(3); SELECT h()":   {"f", "g", "h"},
		"SELECT lower('x'), count(*) FROM t":    nil,
		"INSERT INTO t (a, b) VALUES (f(1), 2)": {"f"},
		// A ')' before a name and '(' is no alias's column list after
		// DISTINCT ON (…) or a WITH list's parenthesized statement.
		"SELECT DISTINCT ON (1) f(1)":                                    {"f"},
		"SELECT DISTINCT ON (a, (b)) g(a) FROM t":                        {"g"},
		"SELECT DISTINCT ON (a) a, b FROM t AS x (a, b)":                 nil,
		"WITH x AS (SELECT 1 AS a) (SELECT a FROM x) ORDER BY f(1)":      {"f"},
		"WITH x AS (SELECT 1) (SELECT 1) LIMIT f(1)":                     {"f"},
		"WITH x (a) AS (SELECT 1), y AS MATERIALIZED (SELECT 2) TABLE x": nil,
	} {
		got, ok := UnknownCalls(q)
		if !ok || !slices.Equal(got, want) {
			t.Errorf("UnknownCalls(%q) = %q, %v; want %q", q, got, ok, want)
		}
	}
	for _, q := range []string{"CALL p()", "SELECT query_to_xml('SELECT 1', true, true, '')", "SELECT f('a\\')"} {
		if got, ok := UnknownCalls(q); ok {
			t.Errorf("UnknownCalls(%q) = %q, true; want not ok", q, got)
		}
	}
}

// TestUnknownCallsMySQL: MySQL's function names are case-insensitive,
// quoted or not, and a database-qualified call is looked up by its last
// part.
func TestUnknownCallsMySQL(t *testing.T) {
	for q, want := range map[string][]string{
		"SELECT app_f(1)":                    {"app_f"},
		"SELECT test.App_F(1), `APP_F`(2)":   {"app_f"},
		"SELECT `test`.`My``F`()":            {"my`f"},
		"SELECT `a````b`()":                  {"a``b"}, // two quotes, each doubled
		"SELECT lower('x'), count(*) FROM t": nil,
	} {
		got, ok := UnknownCallsOf(q, MySQL)
		if !ok || !slices.Equal(got, want) {
			t.Errorf("UnknownCallsOf(%q, MySQL) = %q, %v; want %q", q, got, ok, want)
		}
	}
	if got, ok := UnknownCallsOf("CALL p()", MySQL); ok {
		t.Errorf("UnknownCallsOf(CALL p(), MySQL) = %q, true; want not ok", got)
	}
}

// TestHarmlessReturn: a stored function's body leaves the session alone
// only where it is one RETURN of an expression the rules read so.
func TestHarmlessReturn(t *testing.T) {
	s := &Shadows{Names: map[string]struct{}{"audited": {}, "other_f": {}}}
	for body, want := range map[string]bool{
		"RETURN 1":                     true,
		"  return x * 2 + LENGTH(y)\n": true,
		"RETURN(SELECT COUNT(*) FROM t WHERE a = x)": true,
		"RETURN CONCAT('a', ';', 'SET @x = 1')":      true,
		"RETURN (SELECT a FROM audited)":             false,
		"RETURN other_f(1)":                          false,
		"RETURN GET_LOCK('l', 0)":                    false,
		"RETURN LAST_INSERT_ID(5)":                   false,
		"RETURN (@v := 1)":                           false,
		"RETURN @@session.sql_mode":                  true,
		"BEGIN RETURN 1; END":                        false,
		"RETURNS 1":                                  false,
		"RETURN":                                     false,
		"":                                           false,
	} {
		if got := HarmlessReturn(body, s); got != want {
			t.Errorf("HarmlessReturn(%q) = %v, want %v", body, got, want)
		}
	}
	if HarmlessReturn("RETURN 1", nil) {
		t.Error("HarmlessReturn with no catalog reading: true")
	}
}

// TestHarmlessBody: a LANGUAGE sql function's body leaves the session
// alone only where the rules read it so, calling nothing but listed
// built-ins and naming nothing the catalog marks; Vouched needs every
// name called proven so.
func TestHarmlessBody(t *testing.T) {
	s := &Shadows{Names: map[string]struct{}{"audited": {}}}
	for body, want := range map[string]bool{
		"SELECT 1":                                true,
		"SELECT lower($1) || 'x'":                 true,
		"SELECT a FROM plain WHERE b = $1":        true,
		"INSERT INTO plain VALUES ($1); SELECT 1": true,
		"":   false, // BEGIN ATOMIC: stored parsed
		"  ": false,
		"SELECT set_config('search_path', 'x', false)":                          false,
		"SET search_path = x":                                                   false,
		"SELECT pg_advisory_lock(1)":                                            false,
		"SELECT other_user_function()":                                          false,
		"SELECT query_to_xml('SET role x', true, true, '')":                     false,
		"INSERT INTO audited VALUES (1)":                                        false,
		"CREATE TEMP TABLE x (a int)":                                           false,
		"CREATE OR REPLACE FUNCTION g() RETURNS int LANGUAGE sql AS 'SELECT 1'": false, // DDL: the catalog would not know
	} {
		if got := HarmlessBody(body, s); got != want {
			t.Errorf("HarmlessBody(%q) = %v, want %v", body, got, want)
		}
	}
	if HarmlessBody("SELECT 1", nil) {
		t.Error("HarmlessBody with no catalog reading")
	}
	s.Harmless = map[string]struct{}{"f": {}, "g": {}}
	for names, want := range map[string]bool{"f": true, "f,g": true, "f,h": false, "": false} {
		var ns []string
		if names != "" {
			ns = strings.Split(names, ",")
		}
		if got := s.Vouched(ns); got != want {
			t.Errorf("Vouched(%q) = %v, want %v", ns, got, want)
		}
	}
	var none *Shadows
	if none.Vouched([]string{"f"}) {
		t.Error("a nil Shadows vouched")
	}
}
