package sqllex

import "testing"

// The statement path: pooldriver asks ChangesSession after every statement
// on a clean session, and the generic dialect asks TxEffectOf as well.

var benchQueries = []struct{ name, query string }{
	{"select", "SELECT a FROM t WHERE id = $1"},
	{"insert", "INSERT INTO users (name, email, created_at) VALUES ($1, $2, now())"},
	{"select_mysql", "SELECT id, name, email FROM users WHERE id = ? AND deleted_at IS NULL"},
	{"update", "UPDATE t SET a = $1 WHERE id = $2"},
	{"set", "SET search_path = app"},
	{"set_config_local", "SELECT set_config('app.user_id', $1, true)"},
}

var sinkBool bool

func BenchmarkChangesSession(b *testing.B) {
	for _, q := range benchQueries {
		for _, f := range []struct {
			name string
			f    Flavor
		}{{"pg", Postgres}, {"mysql", MySQL}, {"any", Any}} {
			b.Run(q.name+"/"+f.name, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					sinkBool = ChangesSession(q.query, f.f)
				}
			})
		}
	}
}

var sinkEffect TxEffect

func BenchmarkTxEffectOf(b *testing.B) {
	for _, q := range append(benchQueries, struct{ name, query string }{"begin", "BEGIN"}) {
		b.Run(q.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				sinkEffect = TxEffectOf(q.query, Any)
			}
		})
	}
}
