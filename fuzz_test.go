package pooldriver_test

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/pooldriver/pooldriver"
	"github.com/pooldriver/pooldriver/dialects"
	_ "github.com/pooldriver/pooldriver/internal/fakedb" // the fake:// dialect
)

// secret is the password the DSN cases carry; nothing may ever show it.
const secret = "SECRETxyz"

// dsnCase is one DSN: valid (errHas nil) or not (errHas lists what the
// error must contain: the parameter and the value at fault). One table
// feeds TestDSNTable, the round trip through String, and FuzzParseDSN's
// corpus.
type dsnCase struct {
	name     string
	dsn      string
	errHas   []string
	maxConns int    // valid: the resulting Stats().MaxConns
	str      string // valid: the resulting String()
	needs    string // a scheme that must not be registered in this binary
}

var dsnCases = []dsnCase{
	// Valid.
	{name: "defaults", dsn: "fake://srv", maxConns: 10, str: "fake://srv"},
	{name: "scheme case", dsn: "FAKE://srv?pool_max_conns=3", maxConns: 3, str: "fake://srv"},
	{
		name: "every parameter",
		dsn: "fake://u:" + secret + "@srv?pool_max_conns=7&pool_min_conns=0&pool_acquire_timeout=1500ms" +
			"&pool_health_check_period=0&pool_max_conn_lifetime=1h&pool_max_conn_idle_time=30m&pool_mode=session",
		maxConns: 7, str: "fake://u:xxxxx@srv",
	},
	{name: "transaction mode, app kept", dsn: "fake://u@srv?app=web&pool_mode=transaction&pool_max_conns=1", maxConns: 1, str: "fake://u@srv?app=web"},
	{name: "no server pooling", dsn: "fake://srv?pool_server_pooling=none", maxConns: 10, str: "fake://srv"},
	{name: "min equals max", dsn: "fake://srv?pool_max_conns=2&pool_min_conns=2", maxConns: 2, str: "fake://srv"},
	{
		name: "pgxpool names",
		dsn: "fake://srv?pool_max_conns=4&pool_min_idle_conns=2&pool_max_conn_lifetime_jitter=5m" +
			"&pool_leak_detection_threshold=30s&pool_name=orders",
		maxConns: 4, str: "fake://srv",
	},
	{name: "reset always", dsn: "fake://srv?pool_reset_always=true", maxConns: 10, str: "fake://srv"},
	{name: "reset always off", dsn: "fake://srv?pool_reset_always=0", maxConns: 10, str: "fake://srv"},
	{name: "zero durations", dsn: "fake://srv?pool_acquire_timeout=0s&pool_max_conn_lifetime=0&pool_max_conn_idle_time=0", maxConns: 10, str: "fake://srv"},

	// Bad pool parameters.
	{name: "max zero", dsn: "fake://srv?pool_max_conns=0", errHas: []string{"pool_max_conns", `"0"`}},
	{name: "max negative", dsn: "fake://srv?pool_max_conns=-3", errHas: []string{"pool_max_conns", `"-3"`}},
	{name: "max not a number", dsn: "fake://srv?pool_max_conns=ten", errHas: []string{"pool_max_conns", `"ten"`}},
	{name: "min negative", dsn: "fake://srv?pool_min_conns=-1", errHas: []string{"pool_min_conns", `"-1"`}},
	{name: "min greater than max", dsn: "fake://srv?pool_max_conns=2&pool_min_conns=5", errHas: []string{"pool_min_conns", "5", "pool_max_conns", "2"}},
	{name: "negative acquire timeout", dsn: "fake://srv?pool_acquire_timeout=-1s", errHas: []string{"pool_acquire_timeout", `"-1s"`}},
	{name: "negative health check period", dsn: "fake://srv?pool_health_check_period=-5m", errHas: []string{"pool_health_check_period", `"-5m"`}},
	{name: "negative lifetime", dsn: "fake://srv?pool_max_conn_lifetime=-1h", errHas: []string{"pool_max_conn_lifetime", `"-1h"`}},
	{name: "negative idle time", dsn: "fake://srv?pool_max_conn_idle_time=-2s", errHas: []string{"pool_max_conn_idle_time", `"-2s"`}},
	{name: "duration without unit", dsn: "fake://srv?pool_acquire_timeout=30", errHas: []string{"pool_acquire_timeout", `"30"`}},
	{name: "unparsable duration", dsn: "fake://srv?pool_max_conn_idle_time=soon", errHas: []string{"pool_max_conn_idle_time", `"soon"`}},
	{name: "unknown mode", dsn: "fake://srv?pool_mode=statement", errHas: []string{"pool_mode", `"statement"`}},
	{name: "unknown pool parameter", dsn: "fake://srv?pool_size=3", errHas: []string{"pool_size"}},
	{name: "pgxpool's ping timeout", dsn: "fake://srv?pool_ping_timeout=1s", errHas: []string{"unknown parameter pool_ping_timeout"}},
	{name: "min idle greater than max", dsn: "fake://srv?pool_max_conns=2&pool_min_idle_conns=3", errHas: []string{"pool_min_idle_conns", "3", "pool_max_conns", "2"}},
	{name: "negative jitter", dsn: "fake://srv?pool_max_conn_lifetime_jitter=-1s", errHas: []string{"pool_max_conn_lifetime_jitter", `"-1s"`}},
	{name: "negative leak threshold", dsn: "fake://srv?pool_leak_detection_threshold=-1s", errHas: []string{"pool_leak_detection_threshold", `"-1s"`}},
	{name: "empty pool name", dsn: "fake://srv?pool_name=", errHas: []string{"pool_name"}},
	{name: "unknown server pooling", dsn: "fake://srv?pool_server_pooling=statement", errHas: []string{"pool_server_pooling", `"statement"`}},
	{name: "server pooling the dialect cannot do", dsn: "fake://srv?pool_server_pooling=transaction", errHas: []string{"pool_server_pooling=transaction", "dialect"}},
	{name: "session tasks behind transaction pooling", dsn: "fake://srv?pool_server_pooling=transaction&pool_mode=session", errHas: []string{"pool_mode=session", "pool_server_pooling=transaction"}},
	{name: "trust functions", dsn: "fake://srv?pool_trust_functions=true", maxConns: 10, str: "fake://srv"},
	{name: "trust functions not a boolean", dsn: "fake://srv?pool_trust_functions=sure", errHas: []string{"pool_trust_functions", `"sure"`}},
	{name: "reset always not a boolean", dsn: "fake://srv?pool_reset_always=always", errHas: []string{"pool_reset_always", `"always"`}},
	{name: "reset always behind transaction pooling", dsn: "fake://srv?pool_server_pooling=transaction&pool_reset_always=true", errHas: []string{"pool_reset_always", "pool_server_pooling=transaction", "server_reset_query_always"}},
	{name: "bad value with a password", dsn: "fake://u:" + secret + "@srv?pool_max_conns=0", errHas: []string{"pool_max_conns", `"0"`}},

	// Bad DSNs.
	{name: "empty", dsn: "", errHas: []string{"empty DSN"}},
	{name: "no scheme", dsn: "just-a-name", errHas: []string{"scheme"}},
	{name: "unknown scheme", dsn: "foo://u:" + secret + "@host/db", errHas: []string{`"foo"`}},
	{
		name: "mysql not imported", dsn: "mysql://u:" + secret + "@tcp(db:3306)/shop?pool_max_conns=3",
		errHas: []string{"mysql", `"github.com/pooldriver/pooldriver/dialects/mysql"`}, needs: "mysql",
	},
	{
		name: "postgres not imported", dsn: "postgres://u:" + secret + "@db/shop",
		errHas: []string{"postgres", `"github.com/pooldriver/pooldriver/dialects/postgres"`}, needs: "postgres",
	},
	{
		name: "postgres keywords not imported", dsn: "host=db user=u password=" + secret,
		errHas: []string{`"github.com/pooldriver/pooldriver/dialects/postgres"`}, needs: "postgres",
	},
	{name: "fake without server", dsn: "fake://u:" + secret + "@?pool_max_conns=2", errHas: []string{"no server"}},
	{name: "fake unknown parameter", dsn: "fake://srv?color=blue", errHas: []string{"color"}},
	{name: "fake parameter twice", dsn: "fake://srv?pool_max_conns=1&pool_max_conns=2", errHas: []string{"pool_max_conns"}},
	{name: "fake malformed escape", dsn: "fake://u:" + secret + "@srv%zz", errHas: []string{"invalid DSN"}},
}

// TestDSNTable checks every case of dsnCases: a valid DSN gives a Connector
// with the expected settings and a redacted String that parses back to the
// same; a bad one makes New's Connector report, from Err, an error naming
// the parameter and value, and the same error from Connect. No message
// ever shows the password.
func TestDSNTable(t *testing.T) {
	for _, tc := range dsnCases {
		t.Run(tc.name, func(t *testing.T) { checkDSNCase(t, tc) })
	}
}

func checkDSNCase(t *testing.T, tc dsnCase) {
	if tc.needs != "" {
		if _, err := dialects.Lookup(tc.needs); err == nil {
			t.Skipf("the %s dialect is imported in this test binary", tc.needs)
		}
	}
	c := pooldriver.New(tc.dsn)
	err := c.Err()
	if tc.errHas == nil {
		if err != nil {
			t.Fatalf("New(...).Err(): %v", err)
		}
		defer c.Close()
		if got := c.Stats().MaxConns; got != tc.maxConns {
			t.Errorf("MaxConns = %d, want %d", got, tc.maxConns)
		}
		if got := c.String(); got != tc.str {
			t.Errorf("String() = %q, want %q", got, tc.str)
		}
		assertNoSecret(t, "String()", c.String())
		assertNoSecret(t, "Stats", fmt.Sprintf("%+v", c.Stats()))

		// Round trip: the redacted String is itself a valid DSN that
		// prints the same.
		c2 := pooldriver.New(c.String())
		if err := c2.Err(); err != nil {
			t.Fatalf("New(String() = %q).Err(): %v", c.String(), err)
		}
		defer c2.Close()
		if c2.String() != c.String() {
			t.Errorf("round trip: String() %q became %q", c.String(), c2.String())
		}

		// Another New agrees, and Connect hands out a logical conn without I/O.
		n := pooldriver.New(tc.dsn)
		defer n.Close()
		if n.Err() != nil {
			t.Errorf("New(...).Err() = %v", n.Err())
		}
		conn, err := n.Connect(context.Background())
		if err != nil {
			t.Fatalf("New(...).Connect: %v", err)
		}
		conn.Close()
		return
	}

	if err == nil {
		c.Close()
		t.Fatalf("New(...).Err() = nil, want an error containing %q", tc.errHas)
	}
	msg := err.Error()
	if !strings.HasPrefix(msg, "pooldriver: ") && !strings.HasPrefix(msg, "fakedb: ") {
		t.Errorf("error %q has no pooldriver: prefix", msg)
	}
	for _, want := range tc.errHas {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not contain %q", msg, want)
		}
	}
	assertNoSecret(t, "error", msg)

	n := pooldriver.New(tc.dsn) // must not panic
	defer n.Close()
	if n.Err() == nil || n.Err().Error() != msg {
		t.Errorf("New(...).Err() = %v, want %q", n.Err(), msg)
	}
	_, cerr := n.Connect(context.Background())
	if cerr == nil || cerr.Error() != msg {
		t.Errorf("New(...).Connect() = %v, want %q", cerr, msg)
	}
	assertNoSecret(t, "String() of an invalid Connector", n.String())
	assertNoSecret(t, "Stats of an invalid Connector", fmt.Sprintf("%+v", n.Stats()))
}

func assertNoSecret(t *testing.T, what, s string) {
	t.Helper()
	if strings.Contains(s, secret) {
		t.Errorf("%s shows the password: %q", what, s)
	}
}

// FuzzParseDSN feeds arbitrary DSNs to New: nothing may panic, a Connector
// that is built can be used and closed, Err and Connect fail together, and
// when the DSN's password holds the secret no error, String or Stats shows
// it.
func FuzzParseDSN(f *testing.F) {
	for _, tc := range dsnCases {
		f.Add(tc.dsn)
	}
	f.Add("fake://u:" + secret + "@srv?pool_min_conns=1&pool_max_conns=1")
	f.Add("fake://u:" + secret + "@srv?app=" + url.QueryEscape("a b&c"))
	f.Add("fake://u:pa%3Ass" + secret + "@srv")
	f.Add("fake://" + secret + "@srv")
	f.Fuzz(func(t *testing.T, dsn string) {
		var opts []pooldriver.Option
		if tooManyMinConns(dsn) {
			// Each minimum connection is dialled in the background at
			// once; keep the fuzzer from starting millions.
			opts = append(opts, pooldriver.WithMinConns(0))
		}
		hidden := hidesSecret(dsn)
		check := func(what, s string) {
			if hidden && strings.Contains(s, secret) {
				t.Errorf("DSN %q: %s shows the password: %q", dsn, what, s)
			}
		}

		c := pooldriver.New(dsn, opts...)
		err := c.Err()
		if err != nil {
			check("Err()", err.Error())
		} else {
			check("String()", c.String())
			check("Stats", fmt.Sprintf("%+v", c.Stats()))
			if conn, err := c.Connect(context.Background()); err != nil {
				t.Errorf("DSN %q: Connect: %v", dsn, err)
			} else {
				conn.Close()
			}
			c.Close()
		}

		n := pooldriver.New(dsn, opts...)
		defer n.Close()
		check("New String()", n.String())
		check("New Stats", fmt.Sprintf("%+v", n.Stats()))
		_, cerr := n.Connect(context.Background())
		switch {
		case (err == nil) != (cerr == nil):
			t.Errorf("DSN %q: New's Err() %v, its Connect error %v", dsn, err, cerr)
		case cerr != nil:
			// The messages are not compared: with several bad parameters the
			// fake dialect reports whichever its map iteration meets first
			// (TestDSNTable compares them for its cases).
			check("New Connect error", cerr.Error())
		}
	})
}

// tooManyMinConns reports whether dsn may ask for more than a few
// connections opened at once in the background.
func tooManyMinConns(dsn string) bool {
	i := strings.Index(dsn, "?")
	if i < 0 {
		return false
	}
	q, _ := url.ParseQuery(dsn[i+1:])
	for k, vs := range q {
		if !strings.EqualFold(k, "pool_min_conns") {
			continue
		}
		for _, v := range vs {
			if n, err := strconv.Atoi(v); err != nil || n > 8 {
				return true // an error here may still parse elsewhere: be safe
			}
		}
	}
	return false
}

// hidesSecret reports whether dsn is a URL whose password holds the secret
// and no other part of it spells the secret (or a fragment of the
// redaction marker around it), so that any output showing the secret leaks
// the password.
func hidesSecret(dsn string) bool {
	if strings.Count(dsn, "SECRET") != 1 || !strings.Contains(dsn, secret) {
		return false
	}
	u, err := url.Parse(dsn)
	if err != nil {
		// Not a URL: the secret is a password if it lies where a
		// URL's would, between the first ':' after "://" and the last '@'.
		start := strings.Index(dsn, "://")
		if start < 0 {
			return false
		}
		start += 3
		colon := strings.IndexByte(dsn[start:], ':')
		at := strings.LastIndexByte(dsn, '@')
		i := strings.Index(dsn, secret)
		return colon >= 0 && start+colon < i && i+len(secret) <= at
	}
	if u.User == nil {
		return false
	}
	p, ok := u.User.Password()
	if !ok || !strings.Contains(p, secret) {
		return false
	}
	at := strings.LastIndex(dsn, "@"+u.Host)
	if at < 0 {
		return false
	}
	rest := dsn[at:] + " " + u.User.Username() + " " + u.Scheme
	if dec, err := url.QueryUnescape(rest); err == nil {
		rest += " " + dec
	}
	if dec, err := url.PathUnescape(rest); err == nil {
		rest += " " + dec
	}
	return !strings.Contains(rest, "SECRET")
}
