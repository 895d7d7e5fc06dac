package postgres

import (
	"maps"
	"slices"
	"testing"

	"github.com/pooldriver/pooldriver/dialects/internal/sqllex"
)

// TestProvedFunctions: a name is proved where its bodies read as harmless
// and every name they call is proved, by chains of at most maxCallDepth
// calls; a cycle, a name without a body and an unreadable body are not.
func TestProvedFunctions(t *testing.T) {
	ok := func(calls ...string) *fnBodies { return &fnBodies{ok: true, calls: calls} }
	bodies := map[string]*fnBodies{
		"leaf":    ok(),
		"caller":  ok("leaf"),
		"both":    ok("leaf", "caller"),
		"bad":     {ok: false},
		"to_bad":  ok("leaf", "bad"),
		"to_none": ok("no_such_body"),
		"self":    ok("self"),
		"ping":    ok("pong"),
		"pong":    ok("ping"),
		"to_ping": ok("ping"),
	}
	// A chain: c0 calls c1 ... c9 calls leaf; c_i is proved while its
	// chain is at most maxCallDepth calls long.
	for i := range 10 {
		next := "leaf"
		if i < 9 {
			next = "c" + string(rune('0'+i+1))
		}
		bodies["c"+string(rune('0'+i))] = ok(next)
	}
	got := slices.Sorted(maps.Keys(provedFunctions(bodies)))
	want := []string{"both", "c2", "c3", "c4", "c5", "c6", "c7", "c8", "c9", "caller", "leaf"}
	if !slices.Equal(got, want) {
		t.Errorf("proved %q, want %q", got, want)
	}
}

// TestFunctionProofsReads: of the names proved harmless, a read is one
// whose every function (any schema, any overload) is STABLE or
// IMMUTABLE, names no built-in that writes or answers for the session,
// and calls only reads; a row that leaves off the volatility proves none.
func TestFunctionProofsReads(t *testing.T) {
	row := func(name, body, plpgsql, vol string) [][]byte {
		return [][]byte{[]byte(name), []byte(body), []byte(plpgsql), []byte(vol)}
	}
	rows := [][][]byte{
		row("stable_sql", "SELECT $1 + 1", "f", "s"),
		row("immutable_sql", "SELECT $1 * 2", "f", "i"),
		row("volatile_sql", "SELECT $1 + 1", "f", "v"),
		row("stable_nextval", "BEGIN RETURN nextval('s'); END", "t", "s"),
		row("stable_lock", "BEGIN PERFORM pg_advisory_lock(1); RETURN 1; END", "t", "s"),
		row("stable_config", "BEGIN RETURN set_config('a.b', 'c', false); END", "t", "s"),
		row("stable_currval", "SELECT currval('s')", "f", "s"),
		row("mixed", "SELECT 1", "f", "s"),
		row("mixed", "SELECT 2", "f", "v"),
		row("stable_caller", "BEGIN RETURN stable_sql(1) + immutable_sql(2); END", "t", "s"),
		row("calls_volatile", "SELECT volatile_sql(1)", "f", "s"),
		row("calls_mixed", "SELECT mixed()", "f", "s"),
		row("stable_pl", "DECLARE v int; BEGIN SELECT 1 INTO v; RETURN v; END", "t", "s"),
		{[]byte("no_volatility"), []byte("SELECT 1"), []byte("f")},
		{[]byte("no_body"), nil, []byte("f"), []byte("s")},
	}
	s := &sqllex.Shadows{Names: map[string]struct{}{}}
	harmless, reads, _ := functionProofs(rows, s)
	got := slices.Sorted(maps.Keys(reads))
	want := []string{"immutable_sql", "stable_caller", "stable_pl", "stable_sql"}
	if !slices.Equal(got, want) {
		t.Errorf("reads %q, want %q", got, want)
	}
	for n := range reads {
		if _, ok := harmless[n]; !ok {
			t.Errorf("%s: a read not proved harmless", n)
		}
	}
	for _, n := range []string{"volatile_sql", "mixed", "calls_volatile", "no_volatility"} {
		if _, ok := harmless[n]; !ok {
			t.Errorf("%s: harmless, whatever its volatility", n)
		}
	}
	if h := harmlessFunctions(rows, s); !maps.Equal(h, harmless) {
		t.Errorf("harmlessFunctions = %v, want functionProofs' %v", h, harmless)
	}
}

// TestFunctionProofsSettings: a name proved to change nothing but
// settings is one whose every function is harmless, or LANGUAGE sql
// that sets settings (SET, RESET, set_config) and nothing else, calling
// only names proved so in turn. PL/pgSQL that sets one, a session lock,
// LISTEN, a temporary table, a set_config within another's arguments,
// SET search_path to pg_temp, a body not read and a call of a name not
// proved are not.
func TestFunctionProofsSettings(t *testing.T) {
	row := func(name, body, plpgsql string) [][]byte {
		return [][]byte{[]byte(name), []byte(body), []byte(plpgsql), []byte("v")}
	}
	rows := [][][]byte{
		row("harmless", "SELECT $1 + 1", "f"),
		row("sets", "SELECT set_config('work_mem', $1, false)", "f"),
		row("set_stmt", "SET work_mem = '8MB'; SELECT 1", "f"),
		row("resets", "RESET ALL", "f"),
		row("role", "SELECT set_config('role', $1, false)", "f"),
		row("calls_sets", "SELECT sets('8MB'), harmless(1)", "f"),
		row("harmless_pl", "BEGIN RETURN 1; END", "t"),
		row("calls_pl", "SELECT harmless_pl()", "f"),
		row("pl_sets", "BEGIN PERFORM set_config('a.b', 'c', false); RETURN 1; END", "t"),
		row("calls_pl_sets", "SELECT pl_sets()", "f"),
		row("locks", "SELECT set_config('a.b', 'c', false), pg_advisory_lock(1)", "f"),
		row("listens", "SET a.b = 1; LISTEN c", "f"),
		row("temp", "CREATE TEMP TABLE t (a int)", "f"),
		row("nested", "SELECT set_config(set_config('a.b', 'c', false), 'd', false)", "f"),
		row("temp_path", "SET search_path = pg_temp", "f"),
		row("to_unknown", "SELECT sets('1'), unknown_fn()", "f"),
		row("mixed", "SELECT set_config('a.b', 'c', false)", "f"),
		row("mixed", "SELECT pg_advisory_lock(1)", "f"),
		{[]byte("no_body"), nil, []byte("f"), []byte("v")},
	}
	s := &sqllex.Shadows{Names: map[string]struct{}{}}
	harmless, _, settings := functionProofs(rows, s)
	got := slices.Sorted(maps.Keys(settings))
	want := []string{"calls_pl", "calls_sets", "harmless", "harmless_pl", "resets", "role", "set_stmt", "sets"}
	if !slices.Equal(got, want) {
		t.Errorf("settings %q, want %q", got, want)
	}
	for n := range harmless {
		if _, ok := settings[n]; !ok {
			t.Errorf("%s: harmless but not proved to change nothing but settings", n)
		}
	}
}

// TestStaticFunctions: a body that may set a setting but runs nothing
// that may change the catalog or the prepared statements is static; DDL,
// EXECUTE, DO, PREPARE, DEALLOCATE, DISCARD, SQL from a string, a table
// whose use runs a user's code (a trigger's), a body not read, an unknown
// call, or a call of a name not static in turn is not.
func TestStaticFunctions(t *testing.T) {
	row := func(name, body string) [][]byte {
		return [][]byte{[]byte(name), []byte(body), []byte("t"), []byte("v")}
	}
	rows := [][][]byte{
		row("sets", "BEGIN PERFORM set_config('search_path', 'x', false); RETURN 1; END"),
		row("plain_sql", "SELECT $1 + 1"),
		row("calls_sets", "BEGIN RETURN sets(); END"),
		row("creates", "BEGIN CREATE TABLE t (a int); RETURN 1; END"),
		row("executes", "BEGIN EXECUTE 'SELECT 1'; RETURN 1; END"),
		row("does", "BEGIN DO $x$ BEGIN END $x$; RETURN 1; END"),
		row("from_string", "SELECT query_to_xml('create table z ()', true, true, '')"),
		row("calls_creates", "SELECT creates()"),
		row("calls_unknown", "SELECT dblink_exec('x', 'drop table t')"),
		row("mixed", "SELECT 1"),
		row("mixed", "BEGIN DROP TABLE t; END"),
		row("deallocates", "DEALLOCATE ALL; SELECT set_config('work_mem', '8MB', false)"),
		row("discards", "BEGIN DISCARD PLANS; RETURN 1; END"),
		row("prepares", "PREPARE p AS SELECT 1; SELECT 1"),
		row("audits", "INSERT INTO audited VALUES (1); SELECT set_config('work_mem', '8MB', false)"),
		{[]byte("no_body"), nil, []byte("f"), []byte("s")},
	}
	s := &sqllex.Shadows{Names: map[string]struct{}{"audited": {}}} // a table with a trigger
	got := slices.Sorted(maps.Keys(staticFunctions(rows, s)))
	want := []string{"calls_sets", "plain_sql", "sets"}
	if !slices.Equal(got, want) {
		t.Errorf("static %q, want %q", got, want)
	}
}
