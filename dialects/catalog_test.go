package dialects

import (
	"context"
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

// TestCatalogClaimFirst: one connection reads the first reading while the
// others wait; one that gives up (its connection was killed mid-reading)
// wakes a waiter, which reads in its place, and the waiters get the
// reading it stores. A waiter whose context ends returns without one.
func TestCatalogClaimFirst(t *testing.T) {
	c := CatalogFor[int](fmt.Sprintf("test-first|%d", time.Now().UnixNano()))
	mine, _ := c.ClaimFirst(context.Background())
	if !mine {
		t.Fatal("the first caller does not read")
	}
	type got struct {
		mine bool
		snap *CatalogSnapshot[int]
	}
	const waiters = 4
	results := make(chan got, waiters)
	for range waiters {
		go func() {
			m, s := c.ClaimFirst(context.Background())
			if m {
				s = c.StoreFirst(7)
			}
			results <- got{m, s}
		}()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if m, s := c.ClaimFirst(ctx); m || s != nil {
		t.Fatalf("a waiter whose context ended: mine %v, reading %v", m, s)
	}
	c.ReleaseFirst() // the first reader's connection failed
	readers := 0
	for range waiters {
		select {
		case r := <-results:
			if r.mine {
				readers++
			}
			if r.snap == nil || r.snap.Value != 7 {
				t.Fatalf("a waiter got %v, want the stored reading", r.snap)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("waiters still wait 10s after the first reader gave up")
		}
	}
	if readers != 1 {
		t.Fatalf("%d waiters read in the first reader's place, want 1", readers)
	}
	if m, s := c.ClaimFirst(context.Background()); m || s == nil || s.Value != 7 {
		t.Fatalf("after the first reading: mine %v, reading %v", m, s)
	}
}

// TestCatalogChanges: a reading claimed before a change does not See it,
// one claimed after does; ExpireAll's change is the one every connection
// must see (Changed), Expire's only its caller's; DueSignal closes when
// the reading falls due; ClaimNow waits for a reading in progress.
func TestCatalogChanges(t *testing.T) {
	c := CatalogFor[int](fmt.Sprintf("test|changes|%d", time.Now().UnixNano()))
	select {
	case <-c.DueSignal():
	default:
		t.Fatal("DueSignal before any reading: not closed")
	}
	if !c.Claim(true) {
		t.Fatal("Claim")
	}
	s := c.Store(1)
	select {
	case <-c.DueSignal():
		t.Fatal("DueSignal of a fresh reading: closed")
	default:
	}
	mine := c.Expire()
	if s.Sees(mine) || c.Changed() != 0 {
		t.Fatalf("after Expire: Sees %v, Changed %d", s.Sees(mine), c.Changed())
	}
	select {
	case <-c.DueSignal():
	default:
		t.Fatal("DueSignal after Expire: not closed")
	}
	all := c.ExpireAll()
	if all <= mine || c.Changed() != all {
		t.Fatalf("ExpireAll %d after Expire %d, Changed %d", all, mine, c.Changed())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if !c.ClaimNow(ctx) {
		t.Fatal("ClaimNow with no reading in progress")
	}
	done := make(chan bool)
	go func() { done <- c.ClaimNow(ctx) }()
	time.Sleep(10 * time.Millisecond) // ClaimNow waits meanwhile
	fresh := c.Store(2)
	if !fresh.Sees(all) || fresh.Due() {
		t.Fatalf("a reading claimed after the change: Sees %v, due %v", fresh.Sees(all), fresh.Due())
	}
	if !<-done {
		t.Fatal("ClaimNow did not claim once the reading in progress was stored")
	}
	c.Release()
}

// TestCatalogSeed: a seeded reading (a sibling server's) is due at once,
// wakes the connections waiting for a first reading, and never replaces
// a reading of the server's own: the first reading stored after it
// replaces it, as a Store (the refresh it is due for) does.
func TestCatalogSeed(t *testing.T) {
	c := CatalogFor[int](fmt.Sprintf("test-seed|%d", time.Now().UnixNano()))
	if mine, _ := c.ClaimFirst(context.Background()); !mine {
		t.Fatal("the first caller does not read")
	}
	woke := make(chan *CatalogSnapshot[int], 1)
	go func() {
		_, s := c.ClaimFirst(context.Background())
		woke <- s
	}()
	s := c.Seed(3)
	if s == nil || s.Value != 3 || !s.Due() {
		t.Fatalf("seeded: %v, want 3, due", s)
	}
	select {
	case w := <-woke:
		if w != s {
			t.Fatalf("a waiter woke with %v, want the seeded reading", w)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a waiter for the first reading still waits 10s after the seed")
	}
	if first := c.StoreFirst(5); first == s || first.Value != 5 || first.Due() {
		t.Fatalf("StoreFirst after the seed: %v, want the server's own reading, not due", first)
	}
	c.Expire()
	if !c.Claim(false) {
		t.Fatal("a due reading cannot be claimed for its refresh")
	}
	own := c.Store(9)
	if c.Seed(4) != own || own.Due() {
		t.Fatalf("a seed replaced the server's own reading, or it is due: %v", c.Current())
	}
}

// TestCatalogFresh: a reading vouches for CatalogMaxAge from when it
// began, however long it took or whenever it was stored; a seeded one,
// whose age is not known, for what CatalogMaxAge leaves after
// CatalogTTL.
func TestCatalogFresh(t *testing.T) {
	c := CatalogFor[int](fmt.Sprintf("test-fresh|%d", time.Now().UnixNano()))
	if !c.Claim(true) {
		t.Fatal("no claim")
	}
	s := c.Store(1)
	if !s.Fresh() {
		t.Fatal("a reading just taken is not fresh")
	}
	s.at = time.Now().Add(-CatalogMaxAge)
	if s.Fresh() {
		t.Error("a reading that began CatalogMaxAge ago is fresh")
	}
	if !c.Claim(true) {
		t.Fatal("no claim")
	}
	c.claimAt = time.Now().Add(-CatalogMaxAge) // a reading that took that long
	if c.Store(2).Fresh() {
		t.Error("fresh by when it was stored, not when it began")
	}
	seeded := CatalogFor[int](fmt.Sprintf("test-fresh-seed|%d", time.Now().UnixNano())).Seed(3)
	if !seeded.Fresh() || time.Since(seeded.at) < CatalogTTL {
		t.Errorf("a seeded reading: fresh %v, taken as read %v ago, want fresh and CatalogTTL", seeded.Fresh(), time.Since(seeded.at))
	}
}

// TestCatalogExpireNow: readings are spaced by catalogMinInterval, but
// for one that a connection waits on after ExpireNow or ExpireAll (once:
// the reading after it is spaced again); Expire's are spaced.
func TestCatalogExpireNow(t *testing.T) {
	c := CatalogFor[int](fmt.Sprintf("test-now|%d", time.Now().UnixNano()))
	if !c.Claim(true) {
		t.Fatal("no claim")
	}
	c.Store(1)
	c.Expire()
	if c.Claim(false) {
		t.Fatal("a reading not spaced after Expire")
	}
	c.ExpireAll()
	if !c.Claim(false) {
		t.Fatal("ExpireAll: the next reading is spaced")
	}
	c.Store(2)
	gen := c.ExpireNow()
	if !c.Claim(false) {
		t.Fatal("ExpireNow: the next reading is spaced")
	}
	if s := c.Store(3); !s.Sees(gen) || s.Due() {
		t.Errorf("the reading after ExpireNow: sees it %v, due %v", s.Sees(gen), s.Due())
	}
	c.Expire()
	if c.Claim(false) {
		t.Error("the reading after the one ExpireNow asked for is not spaced")
	}
}

// TestCatalogClaimFresh: where the reading is no longer Fresh, the first
// caller claims the next reading and the others wait for it, within their
// contexts; one that gives up gets the old reading and no claim. A Fresh
// reading is returned at once.
func TestCatalogClaimFresh(t *testing.T) {
	c := CatalogFor[int](fmt.Sprintf("test-claimfresh|%d", time.Now().UnixNano()))
	if !c.Claim(true) {
		t.Fatal("no claim")
	}
	old := c.Store(1)
	old.at = time.Now().Add(-CatalogMaxAge)
	if mine, _ := c.ClaimFresh(t.Context()); !mine {
		t.Fatal("nobody reads, the reading is not Fresh: no claim")
	}
	short, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	if mine, s := c.ClaimFresh(short); mine || s != old {
		t.Fatalf("a caller that gave up waiting: claim %v, reading %v, want none and the old one", mine, s)
	}
	got := waiter(func() (bool, *CatalogSnapshot[int]) { return c.ClaimFresh(t.Context()) })
	time.Sleep(10 * time.Millisecond)
	fresh := c.Store(2)
	if s := <-got; s != fresh {
		t.Fatalf("a waiter got %v, want the reading stored meanwhile", s)
	}
	if mine, s := c.ClaimFresh(t.Context()); mine || s != fresh {
		t.Fatalf("with a Fresh reading: claim %v, reading %v", mine, s)
	}
}

// TestCatalogClaimSince: a caller that needs a reading since a change
// gets the current one where it Sees it; waits for a reading in
// progress, and takes it where it was claimed after the change; reads in
// its place where it was claimed before; and gives up, claiming nothing,
// where the reading it waits for fails (the next would wait on the same
// lock).
func TestCatalogClaimSince(t *testing.T) {
	c := CatalogFor[int](fmt.Sprintf("test-claimsince|%d", time.Now().UnixNano()))
	if !c.Claim(true) {
		t.Fatal("no claim")
	}
	first := c.Store(1)
	if mine, s := c.ClaimSince(t.Context(), 0); mine || s != first {
		t.Fatalf("a reading that Sees the change: claim %v, reading %v", mine, s)
	}

	// Claimed after the change: waited for and taken.
	gen := c.ExpireNow()
	if !c.Claim(true) {
		t.Fatal("no claim")
	}
	got := waiter(func() (bool, *CatalogSnapshot[int]) { return c.ClaimSince(t.Context(), gen) })
	time.Sleep(10 * time.Millisecond)
	since := c.Store(2)
	if s := <-got; s != since {
		t.Fatalf("a waiter got %v, want the reading claimed after the change", s)
	}

	// Claimed before the change: the waiter reads in its place.
	if !c.Claim(true) {
		t.Fatal("no claim")
	}
	gen = c.ExpireNow()
	claimed := make(chan bool, 1)
	go func() {
		mine, _ := c.ClaimSince(t.Context(), gen)
		claimed <- mine
	}()
	time.Sleep(10 * time.Millisecond)
	c.Store(3)
	if !<-claimed {
		t.Fatal("a reading claimed before the change was taken for one since")
	}
	c.Store(4)

	// The reading waited for fails: no claim, the last reading.
	gen = c.ExpireNow()
	if !c.Claim(true) {
		t.Fatal("no claim")
	}
	go func() {
		mine, _ := c.ClaimSince(t.Context(), gen)
		claimed <- mine
	}()
	time.Sleep(10 * time.Millisecond)
	c.Release()
	if <-claimed {
		t.Fatal("a waiter claimed a reading right after the one it waited for failed")
	}
}

// waiter runs claim on a goroutine of its own and sends the reading it
// returns, nil where it claimed the next reading instead.
func waiter(claim func() (bool, *CatalogSnapshot[int])) <-chan *CatalogSnapshot[int] {
	got := make(chan *CatalogSnapshot[int], 1)
	go func() {
		mine, s := claim()
		if mine {
			s = nil
		}
		got <- s
	}()
	return got
}
