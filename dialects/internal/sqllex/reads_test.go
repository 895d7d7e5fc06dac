package sqllex

import "testing"

// TestReadsOnly: one SELECT that writes and locks nothing by its words
// and calls only built-ins that write nothing reads only; anything else,
// or anything unsure, does not.
func TestReadsOnly(t *testing.T) {
	for q, want := range map[string]bool{
		"SELECT 1":                       true,
		"select v from kv where id = $1": true,
		"  (SELECT a FROM t) UNION (SELECT b FROM u)":    true,
		"SELECT * FROM t;":                               true,
		"WITH c AS (SELECT 1) SELECT * FROM c":           true,
		"VALUES (1), (2)":                                true,
		"TABLE t":                                        true,
		"SELECT lower(name), count(*) FROM t GROUP BY 1": true,
		"SELECT 'update; insert' AS \"delete\"":          true,
		"SELECT now(), pg_is_in_recovery()":              true,
		"SELECT E'it\\'s' FROM t":                        true,

		"":                                  false,
		"INSERT INTO t VALUES (1)":          false,
		"UPDATE t SET a = 1":                false,
		"SELECT * INTO t2 FROM t":           false,
		"SELECT * FROM t FOR UPDATE":        false,
		"SELECT * FROM t FOR NO KEY UPDATE": false,
		"SELECT * FROM t FOR SHARE":         false,
		"SELECT * FROM t FOR KEY SHARE":     false,
		"WITH d AS (DELETE FROM t RETURNING *) SELECT * FROM d": false,
		"SELECT 1; DELETE FROM t":                               false,
		"SELECT 1; SELECT 2":                                    false,
		"SELECT nextval('s')":                                   false,
		"SELECT pg_catalog.nextval('s')":                        false,
		"SELECT setval('s', 1)":                                 false,
		"SELECT pg_advisory_lock(1)":                            false,
		"SELECT pg_try_advisory_xact_lock(1)":                   false,
		"SELECT pg_notify('c', 'x')":                            false,
		"SELECT txid_current()":                                 false,
		"SELECT set_config('a.b', 'c', false)":                  false,
		"SELECT lo_create(0)":                                   false,
		"SELECT my_function(1)":                                 false,
		"SELECT app.f(1)":                                       false,
		"SELECT query_to_xml('delete from t', true, true, '')":  false,
		"SET x = 1":                     false,
		"SHOW search_path":              false,
		"EXPLAIN ANALYZE DELETE FROM t": false,
		"SELECT 'unterminated":          false,
	} {
		if got := ReadsOnly(q); got != want {
			t.Errorf("%q: %v, want %v", q, got, want)
		}
	}
}

// TestReadsVouched: a SELECT whose only doubt is its calls of functions
// not on the list reads only where the catalog proves every one a read
// and the text names nothing the catalog says runs unseen code; its
// words must still be ReadsOnly's.
// TestReadsOnStandby: a standby's read by the catalog's reading: the
// words of a read, user functions proven reads, nothing that runs code
// unseen, no relation a standby answers differently; nothing without a
// reading.
func TestReadsOnStandby(t *testing.T) {
	s := &Shadows{
		Names:    map[string]struct{}{"audited": {}},
		Harmless: map[string]struct{}{"f": {}, "g": {}, "h": {}},
		Reads:    map[string]struct{}{"f": {}, "g": {}, "Mixed": {}, `a""b`: {}},
		Standby:  map[string]struct{}{"unlogged_t": {}, "s_id_seq": {}, "claims": {}},
	}
	for q, want := range map[string]bool{
		"SELECT f(1)":                                  true,
		"SELECT F(1), s.g($1) FROM t":                  true,
		`SELECT "Mixed"()`:                             true,
		"SELECT f(1) FROM audited":                     false, // a table whose use runs code
		"SELECT h()":                                   false, // harmless, not a read
		"SELECT f(1), h()":                             false,
		"SELECT mixed()":                               false, // folded: not the quoted name
		`SELECT "a""b"()`:                              false, // the function a"b, not a""b
		"SELECT nope()":                                false,
		"SELECT f(1) FOR UPDATE":                       false,
		"SELECT f(nextval('s'))":                       false,
		"SELECT f(1) INTO t2":                          false,
		"INSERT INTO t VALUES (f(1))":                  false,
		"SELECT f(1); SELECT 1":                        false,
		"SELECT 1":                                     true, // built-ins only
		"SELECT a FROM t WHERE id = $1":                true,
		"SELECT * FROM unlogged_t":                     false, // a standby refuses it
		"SELECT last_value FROM public.s_id_seq":       false, // a standby's differs
		`SELECT * FROM "claims"`:                       false, // a view reaching a volatile function
		"SELECT f(1) FROM t JOIN Unlogged_T u ON true": false,
		"SELECT pg_try_advisory_lock(1)":               false,
		"WITH c AS (SELECT g(2)) SELECT * FROM c":      true,
	} {
		if got := ReadsOnStandby(q, s); got != want {
			t.Errorf("ReadsOnStandby(%q) = %v, want %v", q, got, want)
		}
	}
	if ReadsOnStandby("SELECT 1", nil) || ReadsOnStandby("SELECT f(1)", &Shadows{Harmless: s.Harmless}) {
		t.Error("no reading, or one that proves no read: nothing vouched")
	}
	if ReadsOnStandby("SELECT f(1)", &Shadows{Reads: s.Reads, All: true}) {
		t.Error("an implicit cast that runs user code: nothing vouched")
	}
}

// TestNamesWriter: a body naming a built-in that writes or answers for
// the session, as a word or a quoted name, in any case.
func TestNamesWriter(t *testing.T) {
	for body, want := range map[string]bool{
		"SELECT $1 + 1":                             false,
		"SELECT pg_is_in_recovery()":                false,
		"SELECT 'nextval(1)'":                       false,
		"SELECT nextval('s')":                       true,
		"SELECT pg_catalog.CurrVal('s')":            true,
		`SELECT "setval"('s', 1)`:                   true,
		"BEGIN PERFORM pg_advisory_lock(1); END":    true,
		"BEGIN RETURN pg_try_advisory_lock(1); END": true,
		"SELECT set_config('a.b', 'c', false)":      true,
		"SELECT lo_import('/x')":                    true,
		"SELECT lastval()":                          true,
	} {
		if got := NamesWriter(body); got != want {
			t.Errorf("NamesWriter(%q) = %v, want %v", body, got, want)
		}
	}
}
