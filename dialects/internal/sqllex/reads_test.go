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
