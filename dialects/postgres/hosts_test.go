package postgres

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// TestHostOrder: a host whose try failed slowly goes behind the others
// for 2s, then 4s after another slow failure; a fast failure (a refusal, a
// standby's answer) keeps its place; a try that opens the connection puts
// its host back; a DSN of one host is left alone.
func TestHostOrder(t *testing.T) {
	cfg, err := pgconn.ParseConfig("postgres://app@a:5432,b:5433,c:5434/shop?sslmode=disable&connect_timeout=1")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1000, 0)
	o := newHostOrder(cfg)
	o.now = func() time.Time { return now }
	hosts := func() string {
		c := cfg.Copy()
		o.order(c)
		s := c.Host
		for _, f := range c.Fallbacks {
			s += "," + f.Host
		}
		return s
	}
	// tries runs one connection's tries: each host with how long it took.
	tries := func(ok bool, steps ...any) {
		a := &attempts{o: o, timeout: time.Second, byIP: map[string]string{"10.0.0.1": "a", "10.0.0.2": "b", "10.0.0.3": "c"}}
		for i := 0; i < len(steps); i += 2 {
			a.begin(steps[i].(string))
			now = now.Add(steps[i+1].(time.Duration))
		}
		a.end(ok)
	}
	if got := hosts(); got != "a,b,c" {
		t.Fatalf("at first: %s", got)
	}
	tries(true, "10.0.0.1:5432", time.Second, "10.0.0.2:5433", 10*time.Millisecond)
	if got := hosts(); got != "b,c,a" {
		t.Fatalf("after a timed out: %s, want b,c,a", got)
	}
	tries(true, "10.0.0.2:5433", time.Millisecond, "10.0.0.3:5434", time.Millisecond) // b refused at once: keeps its place
	if got := hosts(); got != "b,c,a" {
		t.Fatalf("after b failed fast: %s, want b,c,a", got)
	}
	now = now.Add(2 * time.Second)
	if got := hosts(); got != "a,b,c" {
		t.Fatalf("2s later: %s, want a,b,c", got)
	}
	tries(true, "10.0.0.1:5432", time.Second, "10.0.0.2:5433", time.Millisecond)
	now = now.Add(3 * time.Second)
	if got := hosts(); got != "b,c,a" {
		t.Fatalf("3s after a second slow failure: %s, want b,c,a (4s)", got)
	}
	tries(true, "10.0.0.1:5432", time.Millisecond) // a answers again
	if got := hosts(); got != "a,b,c" {
		t.Fatalf("after a opened a connection: %s, want a,b,c", got)
	}
	one, err := pgconn.ParseConfig("postgres://app@a:5432/shop")
	if err != nil {
		t.Fatal(err)
	}
	if newHostOrder(one) != nil {
		t.Fatal("a DSN of one host (tried twice with sslmode=prefer) has a hostOrder")
	}
}
