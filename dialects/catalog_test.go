package dialects

import (
	"fmt"
	"testing"
	"time"
)

// TestCatalog: one Catalog per key; one reader at a time; a reading is due
// after Expire, and a reading claimed before an Expire is stored due (it
// may have missed the change); a fresh one is not due until CatalogTTL.
func TestCatalog(t *testing.T) {
	key := fmt.Sprintf("test|%d", time.Now().UnixNano())
	c := CatalogFor[int](key)
	if CatalogFor[int](key) != c {
		t.Fatal("two Catalogs for one key")
	}
	if c.Current() != nil {
		t.Fatal("a reading before any was stored")
	}
	if !c.Claim(true) || c.Claim(true) {
		t.Fatal("Claim: the first claims, the second does not")
	}
	s := c.Store(1)
	if s.Due() || c.Current() != s || s.Value != 1 {
		t.Fatalf("a fresh reading: due %v, current %v", s.Due(), c.Current() == s)
	}
	c.Expire()
	if !s.Due() {
		t.Fatal("not due after Expire")
	}
	if c.Claim(false) {
		t.Fatal("Claim within catalogMinInterval of the last reading, not asked for now")
	}
	if !c.Claim(true) {
		t.Fatal("Claim after Store")
	}
	c.Expire() // DDL while the reading runs
	if s2 := c.Store(2); !s2.Due() {
		t.Fatal("a reading claimed before an Expire is stored due")
	}
	if !c.Claim(true) {
		t.Fatal("Claim")
	}
	c.Release()
	if !c.Claim(true) {
		t.Fatal("Claim after Release")
	}
	if s3 := c.Store(3); s3.Due() {
		t.Fatal("a reading claimed after the last Expire is fresh")
	}
}
