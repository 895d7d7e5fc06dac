package sqllex

import (
	"reflect"
	"testing"
)

// TestVerdictEveryInput holds Verdict, over every combination of its
// inputs, to the reasons a statement counts as changing the session, each
// written on its own: one holds exactly where Verdict says true.
func TestVerdictEveryInput(t *testing.T) {
	reasons := []struct {
		name string
		is   func(s SessionFacts) bool
	}{
		{"the text changes it", func(s SessionFacts) bool { return s.Text }},
		{"no reading after its catalog change", func(s SessionFacts) bool { return s.Unread }},
		{"an unvouched call, untrusted", func(s SessionFacts) bool { return !s.Trust && s.Calls && !s.Vouched }},
		{"names what runs code, untrusted", func(s SessionFacts) bool { return !s.Trust && s.Runs }},
		{"a later reading: unvouched call, untrusted", func(s SessionFacts) bool { return !s.Trust && s.Later && s.Calls && !s.LaterVouched }},
		{"a later reading: names what runs code, untrusted", func(s SessionFacts) bool { return !s.Trust && s.Later && s.LaterRuns }},
		{"the server reported a change", func(s SessionFacts) bool { return s.Reported }},
		{"a parameter differs, no transaction", func(s SessionFacts) bool { return s.Params && !s.TxOpen }},
		{"failed where it may run code", func(s SessionFacts) bool { return s.Failed && s.MayRunCode }},
		{"failed with an unvouched call", func(s SessionFacts) bool { return s.Failed && s.Calls && !s.Vouched }},
		{"failed naming what runs code", func(s SessionFacts) bool { return s.Failed && s.Runs }},
	}
	n := reflect.TypeFor[SessionFacts]().NumField()
	for bits := range 1 << n {
		var s SessionFacts
		v := reflect.ValueOf(&s).Elem()
		for i := range n {
			v.Field(i).SetBool(bits&(1<<i) != 0)
		}
		want := false
		for _, r := range reasons {
			want = want || r.is(s)
		}
		if got := Verdict(s); got != want {
			t.Fatalf("Verdict(%+v) = %v, want %v", s, got, want)
		}
	}
}

// TestVerdictCases: the statements the dialects meet, by name.
func TestVerdictCases(t *testing.T) {
	for _, tc := range []struct {
		name string
		s    SessionFacts
		want bool
	}{
		{"SELECT 1", SessionFacts{}, false},
		{"SET", SessionFacts{Text: true, Trust: true}, true},
		{"a user's function", SessionFacts{Calls: true}, true},
		{"a user's function, trusted", SessionFacts{Calls: true, Trust: true}, false},
		{"a function the catalog proves harmless", SessionFacts{Calls: true, Vouched: true}, false},
		{"a function the catalog proved harmless, replaced since", SessionFacts{Calls: true, Vouched: true, Later: true}, true},
		{"a table with a trigger", SessionFacts{Runs: true}, true},
		{"a table with a trigger, trusted", SessionFacts{Runs: true, Trust: true}, false},
		{"a trusted function that failed", SessionFacts{Calls: true, Trust: true, Failed: true}, true},
		{"a failed read of built-ins", SessionFacts{Failed: true}, false},
		{"a failed write", SessionFacts{Failed: true, MayRunCode: true, Trust: true}, true},
		{"the server's state-changed flag", SessionFacts{Reported: true}, true},
		{"a parameter changed in a transaction", SessionFacts{Params: true, TxOpen: true}, false},
		{"a parameter changed, transaction ended", SessionFacts{Params: true}, true},
		{"DDL, no reading after it", SessionFacts{Unread: true, Trust: true}, true},
	} {
		if got := Verdict(tc.s); got != tc.want {
			t.Errorf("%s: Verdict(%+v) = %v, want %v", tc.name, tc.s, got, tc.want)
		}
	}
}

// TestSessionFacts: what the lexer's facts say, with and without a
// catalog's reading.
func TestSessionFacts(t *testing.T) {
	for _, tc := range []struct {
		query            string
		untrusted, trust bool
	}{
		{"SELECT 1", false, false},
		{"SET search_path = x", true, true},
		{"SELECT app.login(42)", true, false},
		{"SELECT query_to_xml('SET x = 1', true, true, '')", true, true},
	} {
		f := Of(tc.query, Postgres)
		if got := Verdict(f.Session(false)); got != tc.untrusted {
			t.Errorf("%q untrusted: %v, want %v", tc.query, got, tc.untrusted)
		}
		if got := Verdict(f.Session(true)); got != tc.trust {
			t.Errorf("%q trusted: %v, want %v", tc.query, got, tc.trust)
		}
	}
	// No reading: anything the text names counts; a reading that shadows
	// nothing vouches for a harmless name and passes the rest.
	f := Of("SELECT * FROM t", Postgres)
	if !Verdict(f.SessionWith(false, nil)) {
		t.Error("a name with no reading: no change")
	}
	if Verdict(f.SessionWith(false, &Shadows{})) {
		t.Error("a name a reading does not shadow: a change")
	}
	if Verdict(f.SessionWith(true, nil)) {
		t.Error("a name with no reading, trusted: a change")
	}
	g := Of("SELECT app.f()", Postgres)
	if Verdict(g.SessionWith(false, &Shadows{Harmless: map[string]struct{}{"f": {}}})) {
		t.Error("a call the reading vouches for: a change")
	}
}
