package pooldriver_test

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestStatsJSONBreakerState: Stats marshalled to JSON (an admin endpoint,
// a structured log) tells the breaker's state in its word, not a number.
func TestStatsJSONBreakerState(t *testing.T) {
	srv := newServer(t)
	_, c := newDB(t, srv, "")
	b, err := json.Marshal(c.Stats())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"BreakerState":"closed"`) {
		t.Errorf("%s: no \"BreakerState\":\"closed\"", b)
	}
}
