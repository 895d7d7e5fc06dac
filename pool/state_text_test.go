package pool

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestStateText: a State marshals to its word, as String says it, and
// back; a word or a number that is no state is an error naming it.
func TestStateText(t *testing.T) {
	for _, s := range []State{Active, Inactive, Recovering, Limited} {
		b, err := json.Marshal(struct{ BreakerState State }{s})
		if err != nil {
			t.Fatal(err)
		}
		if want := `{"BreakerState":"` + s.String() + `"}`; string(b) != want {
			t.Errorf("%v: %s, want %s", s, b, want)
		}
		var back struct{ BreakerState State }
		if err := json.Unmarshal(b, &back); err != nil || back.BreakerState != s {
			t.Errorf("%s: read back %v, %v", b, back.BreakerState, err)
		}
	}
	var s State
	if err := s.UnmarshalText([]byte("ajar")); err == nil || !strings.Contains(err.Error(), `"ajar"`) {
		t.Errorf("ajar: %v, want an error naming it", err)
	}
	if _, err := State(9).MarshalText(); err == nil || !strings.Contains(err.Error(), "State(9)") {
		t.Errorf("State(9): %v, want an error naming it", err)
	}
}
