package sqllex

import (
	"fmt"
	"reflect"
	"testing"
)

// TestOfIsTheLexersAnswer: Of answers what ChangesSession, OnlySettings,
// CallsOf, TxEffectOf, RefsOf, UnknownCallsOf and PathUseOf do, for a text met for the first
// time and again, in every flavor, and a text that took another's slot
// does not get its facts.
func TestOfIsTheLexersAnswer(t *testing.T) {
	texts := []string{
		"SELECT 1", "BEGIN", "COMMIT", "SET search_path = x", "SET @a = 1",
		"SELECT set_config('a.b', 'c', false)", "START TRANSACTION", "CALL p()",
		"select 1 -- BEGIN", "/*! SET x=1 */ SELECT 1", "CREATE TEMP TABLE t (a int)",
	}
	for i := range 2 * memoSlots { // more texts than slots: some collide
		texts = append(texts, fmt.Sprintf("SELECT %d", i), fmt.Sprintf("SET x = %d", i))
	}
	for _, f := range []Flavor{Postgres, MySQL, Any} {
		for round := range 2 {
			for _, q := range texts {
				want := Facts{ChangesSession: ChangesSession(q, f), Calls: CallsOf(q, f), Tx: TxEffectOf(q, f), Refs: RefsOf(q, f)}
				if want.Calls == CallsUnknown && f != Any {
					want.Unknown, _ = UnknownCallsOf(q, f)
				}
				want.OnlySettings = !want.ChangesSession
				if f == Postgres {
					want.Path = PathUseOf(q)
					want.OnlySettings = want.OnlySettings || OnlySettings(q)
				}
				if got := Of(q, f); !reflect.DeepEqual(got, want) {
					t.Fatalf("flavor %d, round %d: Of(%q) = %+v, want %+v", f, round, q, got, want)
				}
			}
		}
	}
}

// TestOfKeepsFlavorsApart: a text whose facts differ by flavor is answered
// for each flavor by its own rules, whichever was asked first.
func TestOfKeepsFlavorsApart(t *testing.T) {
	q := "SELECT GET_LOCK('x', 1)" // a MySQL session lock; nothing to PostgreSQL
	if !Of(q, MySQL).ChangesSession || Of(q, Postgres).ChangesSession {
		t.Fatalf("Of(%q): MySQL %+v, Postgres %+v", q, Of(q, MySQL), Of(q, Postgres))
	}
}

// TestOfLongText: a text past maxMemoText is still answered (not kept).
func TestOfLongText(t *testing.T) {
	q := "SET x = '" + string(make([]byte, maxMemoText)) + "'"
	if !Of(q, Postgres).ChangesSession {
		t.Fatal("a long SET was not seen")
	}
}

func BenchmarkOf(b *testing.B) {
	q := "SELECT id, name, email FROM users WHERE id = $1 AND deleted_at IS NULL"
	b.ReportAllocs()
	for b.Loop() {
		_ = Of(q, Postgres)
	}
}
