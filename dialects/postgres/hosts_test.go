package postgres

import (
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pooldriver/pooldriver/dialects"
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
	hosts := func() string { return ordered(o, cfg) }
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

// TestHostOrderSilentTry: a host that a try under way has waited on for
// silentTry goes behind the others for the attempts that start meanwhile
// (a primary killed mid-connect holds its tries until their timeout),
// and takes its place again once that try moved on or ended.
func TestHostOrderSilentTry(t *testing.T) {
	cfg, err := pgconn.ParseConfig("postgres://app@a:5432,b:5433/shop?sslmode=disable&connect_timeout=2")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1000, 0)
	o := newHostOrder(cfg)
	o.now = func() time.Time { return now }
	hosts := func() string { return ordered(o, cfg) }
	a := &attempts{o: o, timeout: 2 * time.Second, byIP: map[string]string{"10.0.0.1": "a", "10.0.0.2": "b"}}
	a.begin("10.0.0.1:5432")
	now = now.Add(silentTry / 2)
	if got := hosts(); got != "a,b" {
		t.Fatalf("a try on a under way for %v: %s, want a,b", silentTry/2, got)
	}
	now = now.Add(silentTry / 2)
	if got := hosts(); got != "b,a" {
		t.Fatalf("a try on a under way for %v: %s, want b,a", silentTry, got)
	}
	a.begin("10.0.0.2:5433") // it gave a up (a fast failure: a keeps its place)
	if got := hosts(); got != "a,b" {
		t.Fatalf("the try moved on to b: %s, want a,b", got)
	}
	now = now.Add(silentTry)
	if got := hosts(); got != "a,b" {
		t.Fatalf("the try on b under way for %v: %s, want a,b (b last)", silentTry, got)
	}
	a.end(true)
	if got := hosts(); got != "a,b" {
		t.Fatalf("after the attempt ended: %s, want a,b", got)
	}
	if len(o.pending) != 0 {
		t.Fatalf("tries left under way: %v", o.pending)
	}
}

// ordered returns the hosts o tries cfg's in, comma-separated.
func ordered(o *hostOrder, cfg *pgconn.Config) string {
	c := cfg.Copy()
	o.order(c)
	s := c.Host
	for _, f := range c.Fallbacks {
		s += "," + f.Host
	}
	return s
}

// TestHostOrderSibling: the first connection to a host without a catalog
// reading starts from the reading of the host the pool reached before
// (due at once) where both servers have the same system identifier (a
// physical copy), and from none where they differ or one is unknown; a
// host with its own reading keeps it.
func TestHostOrderSibling(t *testing.T) {
	cfg, err := pgconn.ParseConfig("postgres://app@a:5432,b:5433/shop?sslmode=disable")
	if err != nil {
		t.Fatal(err)
	}
	o := newHostOrder(cfg)
	key := fmt.Sprintf("postgres|test-sibling-%d|", time.Now().UnixNano())
	old, promoted := dialects.CatalogFor[*pgCatalog](key+"a"), dialects.CatalogFor[*pgCatalog](key+"b")
	read := &pgCatalog{sysid: "7712"}
	old.StoreFirst(read)
	id := func(s string) func() string { return func() string { return s } }
	o.sibling(old, "shop", id("7712"))
	for _, other := range []string{"9999", ""} {
		o.sibling(promoted, "shop", id(other))
		if s := promoted.Current(); s != nil {
			t.Fatalf("a server of system identifier %q started from another's reading", other)
		}
		o.sibling(old, "shop", id("7712"))
	}
	o.sibling(promoted, "shop", id("7712"))
	if s := promoted.Current(); s == nil || s.Value != read || !s.Due() {
		t.Fatalf("the promoted host's catalog: %v, want the old host's reading, due", s)
	}
	own := &pgCatalog{}
	old.Expire()
	if !old.Claim(true) {
		t.Fatal("cannot claim the old host's reading")
	}
	old.Store(own)
	o.sibling(old, "shop", id("7712"))
	if s := old.Current(); s.Value != own {
		t.Fatal("a host's own reading was replaced by a sibling's")
	}
}
