package postgres

import (
	"maps"
	"slices"
	"testing"
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
