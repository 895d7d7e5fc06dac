package mysql

import (
	"slices"
	"testing"

	"github.com/pooldriver/pooldriver/dialects"
	"github.com/pooldriver/pooldriver/dialects/internal/sqllex"
)

// TestBuildShadows: stored functions and tables with triggers count by
// name; a view counts when its definition changes the session, calls
// what no list vouches for, cannot be read, or names what counts,
// through any chain of views; the others do not.
func TestBuildShadows(t *testing.T) {
	v := buildShadows([]catalogRow{
		{kind: "f", name: "REGEXP_LIKE"},
		{kind: "t", name: "Audited"},
		{kind: "v", name: "plain", def: "select `t`.`a` AS `a` from `test`.`t`"},
		{kind: "v", name: "locks", def: "select get_lock('x',0) AS `l`"},
		{kind: "v", name: "calls", def: "select `test`.`my_func`(1) AS `f`"},
		{kind: "v", name: "shadowed", def: "select regexp_like('a','a') AS `r`"},
		{kind: "v", name: "hidden", def: ""},
		{kind: "v", name: "over_audited", def: "select `a` from `test`.`audited`"},
		// over_over before over_locks: the fixed point, not the order.
		{kind: "v", name: "over_over", def: "select * from `test`.`over_locks`"},
		{kind: "v", name: "over_locks", def: "select * from `test`.`locks`"},
		{kind: "v", name: "over_plain", def: "select * from `test`.`plain`"},
		{kind: "b", name: "Other"},
	})
	var got []string
	for n := range v.s.Names {
		got = append(got, n)
	}
	slices.Sort(got)
	want := []string{"audited", "calls", "hidden", "locks", "over_audited", "over_locks", "over_over", "regexp_like", "shadowed"}
	if !slices.Equal(got, want) {
		t.Errorf("Names = %v, want %v", got, want)
	}
	if _, ok := v.blind["other"]; !ok || len(v.blind) != 1 {
		t.Errorf("blind = %v, want [other]", v.blind)
	}
}

// TestHarmlessFunctions: a name all of whose stored functions have a
// body that reads as harmless (one RETURN, or a BEGIN … END block, read
// statement by statement, calling only functions proved harmless in
// turn) is vouched for, and no longer counts; a body the user may not
// read, one that changes the session, calls itself or a built-in that is
// no known one, or names a table with a trigger, and a name that another
// database's function of the same name makes harmful, still count. A
// table with a trigger of the same name still counts.
func TestHarmlessFunctions(t *testing.T) {
	v := buildShadows([]catalogRow{
		{kind: "f", name: "one", def: "RETURN 1", hasDef: true},
		{kind: "f", name: "Plus", def: "return x + 1", hasDef: true},
		{kind: "f", name: "paren", def: "RETURN(SELECT COUNT(*) FROM `test`.`t`)", hasDef: true},
		{kind: "f", name: "block", def: "BEGIN RETURN 1; END", hasDef: true},
		{kind: "f", name: "unread", hasDef: false},
		{kind: "f", name: "locker", def: "RETURN GET_LOCK('x', 0)", hasDef: true},
		{kind: "f", name: "setter", def: "RETURN (@v := 1)", hasDef: true},
		{kind: "f", name: "chain", def: "RETURN one()", hasDef: true},
		{kind: "f", name: "self", def: "RETURN self()", hasDef: true},
		{kind: "f", name: "reads_audited", def: "RETURN (SELECT a FROM audited)", hasDef: true},
		{kind: "f", name: "returned", def: "RETURNED", hasDef: true},
		{kind: "f", name: "twice", def: "RETURN 1", hasDef: true},
		{kind: "f", name: "twice", def: "RETURN RELEASE_ALL_LOCKS()", hasDef: true},
		{kind: "f", name: "audited", def: "RETURN 1", hasDef: true},
		{kind: "t", name: "audited"},
		{kind: "f", name: "via_package", def: "BEGIN RETURN pkg.one(); END", hasDef: true},
		{kind: "k", name: "pkg"},
	})
	var harmless []string
	for n := range v.s.Harmless {
		harmless = append(harmless, n)
	}
	slices.Sort(harmless)
	if want := []string{"audited", "block", "chain", "one", "paren", "plus"}; !slices.Equal(harmless, want) {
		t.Errorf("Harmless = %v, want %v", harmless, want)
	}
	for _, n := range []string{"one", "plus", "paren", "block", "chain"} {
		if _, ok := v.s.Names[n]; ok {
			t.Errorf("%s, harmless, still counts", n)
		}
	}
	for _, n := range []string{"unread", "locker", "setter", "self", "reads_audited", "returned", "twice", "audited", "via_package", "pkg"} {
		if _, ok := v.s.Names[n]; !ok {
			t.Errorf("%s no longer counts", n)
		}
	}
	c := &conn{db: "test", cat: fixedCatalog(v)}
	for _, tc := range []struct {
		query   string
		changes bool
	}{
		{"SELECT one()", false},
		{"SELECT ONE(), `Plus`(2)", false},
		{"SELECT test.one()", false},
		{"SELECT one(), locker()", true},
		{"SELECT block(), chain()", false},
		{"SELECT self()", true},
		{"SELECT twice()", true},
		{"SELECT audited()", true}, // the table's name counts
		{"SELECT one(), GET_LOCK('y', 0)", true},
	} {
		if got := c.ChangesSession(tc.query); got != tc.changes {
			t.Errorf("ChangesSession(%q) = %v, want %v", tc.query, got, tc.changes)
		}
	}
}

// TestHarmlessAccentedNames: the server finds a routine by its name in
// utf8mb3_general_ci, where fk() calls a function named fķ (accents and
// some letters fold, one character for one), though Go's case folding
// keeps the names apart: a name is harmless only where every routine whose
// name may equal it so, in any database, is.
func TestHarmlessAccentedNames(t *testing.T) {
	v := buildShadows([]catalogRow{
		{kind: "f", schema: "db1", name: "fk", def: "RETURN 1", hasDef: true},
		{kind: "f", schema: "db2", name: "f\u0137", def: "RETURN GET_LOCK('x', 0)", hasDef: true},
		{kind: "f", schema: "db1", name: "g\u00e9", def: "RETURN 1", hasDef: true},
		{kind: "f", schema: "db2", name: "ge", def: "RETURN GET_LOCK('x', 0)", hasDef: true},
		{kind: "f", schema: "db1", name: "h\u00e9", def: "RETURN 1", hasDef: true},
		{kind: "f", schema: "db1", name: "hxy", def: "RETURN GET_LOCK('x', 0)", hasDef: true},
		{kind: "f", schema: "db1", name: "regexp_l\u00edke", def: "RETURN GET_LOCK('x', 0)", hasDef: true},
		{kind: "f", schema: "db1", name: "outer_f", def: "RETURN regexp_like('a', 'b')", hasDef: true},
		{kind: "p", schema: "db1", name: "pk", def: "SELECT 1", hasDef: true},
		{kind: "p", schema: "db2", name: "p\u0137", def: "SET @v = 1", hasDef: true},
	})
	c := &conn{db: "db2", cat: fixedCatalog(v)}
	for q, want := range map[string]bool{
		"SELECT fk()":      true,
		"SELECT F\u0137()": true,
		"SELECT g\u00e9()": true,
		"SELECT ge()":      true,
		"SELECT h\u00e9()": false, // hxy is longer: no name of that kind
		"CALL pk()":        true,
		// No built-in of MariaDB's, listed: the stored function runs.
		"SELECT regexp_like('a', 'b')": true,
		"SELECT outer_f()":             true,
	} {
		if got := c.ChangesSession(q); got != want {
			t.Errorf("ChangesSession(%q) = %v, want %v", q, got, want)
		}
	}
}

// TestLexWithShadows: a text counts when it names what the catalog
// says runs code, unless the user trusts their functions; a write counts
// where the user may not see the triggers; before any reading, every
// text that names anything counts. The remembered answer follows the
// reading.
func TestLexWithShadows(t *testing.T) {
	v := buildShadows([]catalogRow{
		{kind: "f", name: "regexp_like"},
		{kind: "t", name: "audited"},
		{kind: "v", name: "locks", def: "select get_lock('x',0) AS `l`"},
		{kind: "b", name: "blinddb"},
	})
	c := &conn{db: "test"}
	c.cat = fixedCatalog(v)
	for _, tc := range []struct {
		query            string
		untrusted, trust bool
	}{
		{"SELECT 1", false, false},
		{"SELECT regexp_like('a', 'a')", true, false},
		{"SELECT REGEXP_LIKE(a, 'x') FROM t", true, false},
		{"SELECT regexp_replace('a', 'a', 'b')", false, false},
		{"INSERT INTO audited (a) VALUES (1)", true, false},
		{"INSERT INTO `Audited` (a) VALUES (1)", true, false},
		{"INSERT INTO plain (a) VALUES (1)", false, false},
		{"SELECT * FROM locks", true, false},
		{"SELECT * FROM plain", false, false},
		{"SELECT * FROM blinddb.t", false, false},
		{"INSERT INTO blinddb.t VALUES (1)", true, false},
		{"CREATE TABLE t2 (a int)", false, false},
	} {
		for _, trust := range []bool{false, true} {
			c.TrustFunctions(trust)
			want := tc.untrusted
			if trust {
				want = tc.trust
			}
			if got := c.ChangesSession(tc.query); got != want {
				t.Errorf("trust %v: ChangesSession(%q) = %v, want %v", trust, tc.query, got, want)
			}
			if got := c.read(tc.query, c.snapshot()); got.untrusted() != tc.untrusted {
				t.Errorf("trust %v: %q untrusted = %v, want %v", trust, tc.query, got.untrusted(), tc.untrusted)
			}
		}
	}
	c.TrustFunctions(false)

	// The current database blind: every write counts, no read does.
	b := &conn{db: "blinddb", cat: fixedCatalog(v)}
	if !b.ChangesSession("UPDATE t SET a = 1") || b.ChangesSession("SELECT a FROM t") {
		t.Error("in a blind database: a write must count, a read must not")
	}

	// The same text, judged again when the reading changes.
	c.cat = fixedCatalog(noShadows())
	if c.ChangesSession("SELECT a FROM t") {
		t.Fatal("a plain SELECT counts")
	}
	c.cat = fixedCatalog(buildShadows([]catalogRow{{kind: "t", name: "t"}}))
	if !c.ChangesSession("SELECT a FROM t") {
		t.Error("the remembered answer outlived the reading")
	}

	// No reading: anything that names anything counts.
	n := &conn{}
	if !n.ChangesSession("SELECT 1") || !n.ChangesSession("COMMIT") {
		t.Error("without a reading of the catalog, a statement reads as harmless")
	}
	// A reading the server refused (shadows{}): the same.
	n.cat = fixedCatalog(shadows{})
	if !n.ChangesSession("SELECT 1") {
		t.Error("with a refused reading, a statement reads as harmless")
	}
}

// TestWrites: the statements that may write a table, and fire a trigger.
func TestWrites(t *testing.T) {
	for q, want := range map[string]bool{
		"SELECT 1":                           false,
		"(SELECT 1) UNION (SELECT 2)":        false,
		"SHOW TABLES":                        false,
		"EXPLAIN UPDATE t SET a = 1":         false,
		"INSERT INTO t VALUES (1)":           true,
		"replace into t values (1)":          true,
		"UPDATE t SET a = 1":                 true,
		"DELETE FROM t":                      true,
		"LOAD DATA INFILE 'x' INTO TABLE t":  true,
		"WITH c AS (SELECT 1) DELETE FROM t": true,
		"ANALYZE UPDATE t SET a = 1":         true,
		"SELECT 1; DELETE FROM t":            true,
		"CALL p()":                           true,
		"`weird`":                            true,
	} {
		if got := writes(q); got != want {
			t.Errorf("writes(%q) = %v, want %v", q, got, want)
		}
	}
}

// TestWritesBlindWithoutRefs: a text the lexer gave no names for counts
// where any database is blind.
func TestWritesBlindWithoutRefs(t *testing.T) {
	v := shadows{s: &sqllex.Shadows{}, blind: map[string]struct{}{"x": {}}}
	if !v.writesBlind("test", nil) {
		t.Error("no refs: must count")
	}
	if (&shadows{s: &sqllex.Shadows{}}).writesBlind("test", nil) {
		t.Error("nothing blind: must not count")
	}
}

// TestCatalogKey: per server and account; none without an address.
func TestCatalogKey(t *testing.T) {
	if catalogKey("tcp", "", "u") != "" {
		t.Error("a key without an address")
	}
	if catalogKey("tcp", "db:3306", "a") == catalogKey("tcp", "db:3306", "b") {
		t.Error("two accounts share a key")
	}
}

// TestProvedCall: one CALL of a procedure the catalog proves harmless,
// through the routines it calls, is no session change; a procedure that
// changes the session, calls one that does or calls itself, a user
// variable among the arguments (an OUT parameter assigns it), an argument
// that calls what is not proved, and two statements still count.
func TestProvedCall(t *testing.T) {
	v := buildShadows([]catalogRow{
		{kind: "p", schema: "test", name: "good_p", def: "BEGIN DECLARE n INT; SELECT COUNT(*) INTO n FROM t WHERE a = x; INSERT INTO t (a) VALUES (n); CALL inner_p(); END", hasDef: true},
		{kind: "a", schema: "test", name: "good_p", def: "x", mode: "PROCEDURE"},
		{kind: "p", schema: "test", name: "inner_p", def: "UPDATE t SET a = a + 1", hasDef: true},
		{kind: "p", schema: "test", name: "setter_p", def: "BEGIN SET @v = 1; END", hasDef: true},
		{kind: "p", schema: "test", name: "outer_p", def: "BEGIN CALL setter_p(); END", hasDef: true},
		{kind: "p", schema: "test", name: "loop_p", def: "BEGIN CALL loop_p(); END", hasDef: true},
		{kind: "p", schema: "test", name: "param_p", def: "SET x = 1", hasDef: true},
		{kind: "f", schema: "test", name: "good_f", def: "RETURN 1", hasDef: true},
		{kind: "f", schema: "test", name: "bad_f", def: "RETURN GET_LOCK('x', 0)", hasDef: true},
		// Databases whose names differ in case only are two databases
		// (lower_case_table_names=0): one's parameters are not the
		// other's, whose SET time_zone sets the session's.
		{kind: "p", schema: "App", name: "zone_p", def: "SET time_zone = '+01:00'", hasDef: true},
		{kind: "a", schema: "App", name: "zone_p", def: "time_zone", mode: "PROCEDURE"},
		{kind: "p", schema: "app", name: "zone_p", def: "SET time_zone = '+01:00'", hasDef: true},
		{kind: "p", schema: "App", name: "Arg_p", def: "SET x = 1", hasDef: true},
		{kind: "a", schema: "App", name: "Arg_p", def: "x", mode: "PROCEDURE"},
		// A '.' in a name: `a.b`.c is not a.`b.c`.
		{kind: "p", schema: "a.b", name: "c", def: "SET time_zone = '+01:00'", hasDef: true},
		{kind: "a", schema: "a.b", name: "c", def: "time_zone", mode: "PROCEDURE"},
		{kind: "p", schema: "a", name: "b.c", def: "SET time_zone = '+01:00'", hasDef: true},
	})
	c := &conn{db: "test", cat: fixedCatalog(v)}
	for q, want := range map[string]bool{
		"CALL good_p(1)":                 false,
		"call `GOOD_P`(good_f())":        false,
		"CALL inner_p":                   false,
		"CALL setter_p()":                true,
		"CALL outer_p()":                 true,
		"CALL loop_p()":                  true,
		"CALL param_p()":                 true, // x is no parameter the catalog listed: a system variable
		"CALL good_p(@v)":                true,
		"CALL good_p(bad_f())":           true,
		"CALL good_p(1); CALL good_p(2)": true,
		"CALL good_p('a\\b')":            true,
		"CALL unknown_p()":               true,
		"CALL zone_p('x')":               true,
		"CALL arg_p(1)":                  false,
		"CALL a.`b.c`()":                 true,
	} {
		if got := c.ChangesSession(q); got != want {
			t.Errorf("ChangesSession(%q) = %v, want %v", q, got, want)
		}
	}
}

// TestCatalogWatch: the pool waits on the catalog of a connection that
// may read it again (a key, autocommit on or not yet known as the session
// starts), and on no catalog otherwise: an untyped nil, never a nil *Catalog, whose
// DueSignal would panic.
func TestCatalogWatch(t *testing.T) {
	cat := fixedCatalog(noShadows())
	for _, tc := range []struct {
		name string
		c    *conn
		want dialects.CatalogDue
	}{
		{"autocommit on", &conn{cat: cat, baseAuto: 1}, cat},
		{"no key", &conn{baseAuto: 1}, nil},
		{"autocommit off", &conn{cat: cat, baseAuto: 0}, nil},
		{"autocommit not learnt yet (wrapped)", &conn{cat: cat, baseAuto: -1}, cat},
	} {
		if got := tc.c.CatalogWatch(); got != tc.want {
			t.Errorf("%s: CatalogWatch() = %#v, want %#v", tc.name, got, tc.want)
		}
	}
}
