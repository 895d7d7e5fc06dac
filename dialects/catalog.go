package dialects

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// CatalogTTL is how long what a Catalog holds is used before it is due
// to be read again, off the callers' paths, at once (see CatalogWatcher;
// the pool's health check and the PostgreSQL dialect's session reset
// read a due one too): a function, trigger or policy that another client
// creates is seen within this time and the moment it takes to find an
// idle connection; one created through the process's own connections at
// once (see Catalog.ExpireAll).
const CatalogTTL = 5 * time.Second

// CatalogMaxAge is how long a reading vouches for anything (Fresh): a
// reading is due after CatalogTTL and read again at once off the callers'
// paths; where that fails (a lock held on a catalog table, a server that
// does not answer) or finds no idle connection, a statement judged later
// than this after the last reading began counts as if nothing had been
// read. This bounds the window in which a change another client made to
// the catalog may go unseen.
const CatalogMaxAge = CatalogTTL + time.Second

// catalogMinInterval spaces the readings that a change made due (Expire)
// for the connections that did not make it: a stream of DDL from other
// connections then costs one reading per interval, not one per
// statement. The connection that ran the DDL reads at once (Claim(true)).
const catalogMinInterval = time.Second

// Catalog shares what a dialect read from one server's catalog (the
// names whose use runs code that the statement's text does not show)
// between every connection to that server and database, so that the
// catalog is read once per CatalogTTL, not per connection or statement.
// Connections find it by a key of the dialect's (see CatalogFor). It is
// safe for concurrent use; the value it holds is never changed, only
// replaced.
type Catalog[T any] struct {
	snap    atomic.Pointer[CatalogSnapshot[T]]
	loading atomic.Bool   // a connection claimed the next read (Claim)
	expires atomic.Uint64 // Expire calls, so far
	changed atomic.Uint64 // the number of the last Expire of Changed's
	claimed uint64        // expires when the read in progress was claimed; written by its claimer
	claimAt time.Time     // when it was claimed; written by its claimer
	lastAt  atomic.Int64  // when the last reading was claimed, in Unix nanoseconds
	lastGen atomic.Uint64 // expires when the last reading was claimed
	urgent  atomic.Uint64 // the number of the last ExpireNow
	failAt  atomic.Int64  // when a reading last failed (Release), in Unix nanoseconds

	firstMu sync.Mutex
	// firstCh: non-nil while a connection reads the first reading
	// (ClaimFirst); closed when it stores it or gives up. firstGen:
	// expires when that reading was claimed.
	firstCh  chan struct{}
	firstGen uint64
	firstAt  time.Time
}

// CatalogSnapshot is one reading of the catalog.
type CatalogSnapshot[T any] struct {
	Value   T
	expired atomic.Bool
	gen     uint64    // the Expire calls made before its reading was claimed
	at      time.Time // when its reading was claimed (began)

	due     chan struct{} // closed once it is due (DueSignal)
	dueOnce sync.Once
	seeded  bool // another server's reading (Seed): a first reading replaces it
}

// newSnapshot returns a snapshot of v, read from gen on, its reading
// begun at at.
func newSnapshot[T any](v T, gen uint64, at time.Time) *CatalogSnapshot[T] {
	return &CatalogSnapshot[T]{Value: v, gen: gen, at: at, due: make(chan struct{})}
}

// expire makes s due.
func (s *CatalogSnapshot[T]) expire() {
	s.expired.Store(true)
	s.dueOnce.Do(func() { close(s.due) })
}

// Sees reports whether the snapshot's reading began after the Expire
// that returned gen: it saw what that change made.
func (s *CatalogSnapshot[T]) Sees(gen uint64) bool { return s.gen >= gen }

// Due reports whether the snapshot is older than CatalogTTL or was
// expired by a change: the next connection that can should read the
// catalog again.
func (s *CatalogSnapshot[T]) Due() bool { return s.expired.Load() }

// Fresh reports whether the snapshot's reading began less than
// CatalogMaxAge ago: an older one vouches for nothing. A snapshot is
// Due before it is no longer Fresh, so a caller that keeps what it
// judged with a snapshot until it is Due asks only then.
func (s *CatalogSnapshot[T]) Fresh() bool { return time.Since(s.at) < CatalogMaxAge }

var (
	catalogsMu sync.Mutex
	catalogs   = map[string]any{}
)

// CatalogFor returns the Catalog of key (a dialect's: the server's
// address and the database, say), made empty on first use. Catalogs are
// few (one per server and database a process talks to) and kept for the
// process's life.
func CatalogFor[T any](key string) *Catalog[T] {
	catalogsMu.Lock()
	defer catalogsMu.Unlock()
	if c, ok := catalogs[key].(*Catalog[T]); ok {
		return c
	}
	c := &Catalog[T]{}
	catalogs[key] = c
	return c
}

// Current returns the latest snapshot, nil before the first read. A
// snapshot is due again (Due) once CatalogTTL has passed since it was
// read or Expire was called.
func (c *Catalog[T]) Current() *CatalogSnapshot[T] { return c.snap.Load() }

// Claim reports whether the caller may read the catalog now: no one else
// is reading it, and, unless now (the caller ran DDL, or has no reading
// at all) or an ExpireNow came after the last reading began, the last
// reading began at least catalogMinInterval ago. The caller then calls
// Store or Release.
func (c *Catalog[T]) Claim(now bool) bool {
	t := time.Now().UnixNano()
	if !now && t-c.lastAt.Load() < int64(catalogMinInterval) && c.urgent.Load() <= c.lastGen.Load() {
		return false
	}
	if !c.loading.CompareAndSwap(false, true) {
		return false
	}
	c.claimed = c.expires.Load()
	c.claimAt = time.Now()
	c.lastAt.Store(t)
	c.lastGen.Store(c.claimed)
	return true
}

// ClaimNow is Claim(true) that waits, within ctx, for a reading in
// progress to end: one claimed before the caller's change (Expire) may
// have missed it, and the caller (which ran DDL) reads at once after it.
func (c *Catalog[T]) ClaimNow(ctx context.Context) bool {
	for !c.Claim(true) {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(claimPoll):
		}
	}
	return true
}

// ClaimSince reports whether the caller may read the catalog now, for a
// reading that sees the change numbered gen (an ExpireAll's): where the
// current reading already Sees it, or one in progress that does is
// stored while the caller waits within ctx, the caller reads nothing and
// gets that reading; a reading in progress claimed before the change is
// waited for, and the caller then reads in its place. Connections that
// all find their reading older than another's DDL so share one reading.
func (c *Catalog[T]) ClaimSince(ctx context.Context, gen uint64) (bool, *CatalogSnapshot[T]) {
	return c.claimUnless(ctx, func(s *CatalogSnapshot[T]) bool { return s.Sees(gen) })
}

// ClaimFresh reports whether the caller, which found the latest reading
// no longer Fresh, should read the catalog now (then Store, or Release if
// the read failed): no one else is reading it. Otherwise it waits, within
// ctx, for the reading in progress, and returns what is current then: a
// Fresh reading where one was stored meanwhile. Connections opened
// together after a pause longer than CatalogMaxAge so share one reading,
// as the first ones share ClaimFirst's; the caller bounds the wait.
func (c *Catalog[T]) ClaimFresh(ctx context.Context) (bool, *CatalogSnapshot[T]) {
	return c.claimUnless(ctx, (*CatalogSnapshot[T]).Fresh)
}

// claimUnless is ClaimSince's and ClaimFresh's: the current reading where
// it will do, a claim where nobody reads, else a wait for the reading in
// progress. A reading that fails meanwhile (Failing: one waits on a lock
// held on a catalog table, say) ends the wait with no claim: the caller
// would wait on the same lock.
func (c *Catalog[T]) claimUnless(ctx context.Context, will func(*CatalogSnapshot[T]) bool) (bool, *CatalogSnapshot[T]) {
	for {
		if s := c.snap.Load(); s != nil && will(s) {
			return false, s
		}
		if c.Failing() {
			return false, c.snap.Load()
		}
		if c.Claim(true) {
			return true, nil
		}
		select {
		case <-ctx.Done():
			return false, c.snap.Load()
		case <-time.After(claimPoll):
		}
	}
}

// claimPoll spaces ClaimNow's and ClaimSince's looks at a reading in
// progress.
const claimPoll = 2 * time.Millisecond

// ClaimFirst reports whether the caller, which found no reading, should
// read the first one (then StoreFirst, or ReleaseFirst if the read
// failed); otherwise it waits, within ctx, for the reading another
// connection is taking, and returns what is current then. A reader that
// gives up wakes the waiters, and one of them reads in its place: a
// connection the server killed mid-reading keeps no other waiting. Until
// a reading exists every statement counts as a change, and a dozen
// connections reading at once would load the server for nothing.
func (c *Catalog[T]) ClaimFirst(ctx context.Context) (bool, *CatalogSnapshot[T]) {
	for {
		if s := c.snap.Load(); s != nil {
			return false, s
		}
		c.firstMu.Lock()
		ch := c.firstCh
		if ch == nil && c.snap.Load() == nil {
			c.firstCh = make(chan struct{})
			c.firstGen = c.expires.Load()
			c.firstAt = time.Now()
			c.firstMu.Unlock()
			return true, nil
		}
		c.firstMu.Unlock()
		if ch == nil {
			continue // stored meanwhile
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return false, c.snap.Load()
		}
	}
}

// ReleaseFirst gives up a ClaimFirst whose read failed.
func (c *Catalog[T]) ReleaseFirst() { c.endFirst() }

// endFirst ends the ClaimFirst in progress, waking its waiters.
func (c *Catalog[T]) endFirst() {
	c.firstMu.Lock()
	if c.firstCh != nil {
		close(c.firstCh)
		c.firstCh = nil
	}
	c.firstMu.Unlock()
}

// StoreFirst publishes the first reading (see ClaimFirst). Whichever is
// stored first stays (a seeded one is replaced: it is not the server's);
// the reading then current is returned.
func (c *Catalog[T]) StoreFirst(v T) *CatalogSnapshot[T] {
	c.firstMu.Lock()
	s := newSnapshot(v, c.firstGen, c.firstAt)
	c.firstMu.Unlock()
	if c.expires.Load() != s.gen {
		s.expire()
	}
	for {
		cur := c.snap.Load()
		if cur != nil && !cur.seeded {
			break
		}
		if c.snap.CompareAndSwap(cur, s) {
			if !s.expired.Load() {
				time.AfterFunc(CatalogTTL, s.expire)
			}
			break
		}
	}
	c.failAt.Store(0)
	c.endFirst()
	return c.snap.Load()
}

// Seed publishes v, a reading of another server known to hold the same
// catalog (a standby of the server read, promoted), where there is none
// yet: due at once, so that this server's own reading replaces it off the
// callers' paths (a health check, a session reset), while the first
// connection to the server serves at once rather than read it first. How
// old v is is not known: it is taken as read CatalogTTL ago, fresh for
// what is left of CatalogMaxAge. It wakes the connections waiting for a
// first reading, and returns the reading current then.
func (c *Catalog[T]) Seed(v T) *CatalogSnapshot[T] {
	s := newSnapshot(v, 0, time.Now().Add(-CatalogTTL))
	s.seeded = true
	s.expire()
	c.snap.CompareAndSwap(nil, s)
	c.endFirst()
	return c.snap.Load()
}

// Release gives up a Claim without a new reading (the read failed).
func (c *Catalog[T]) Release() {
	c.failAt.Store(time.Now().UnixNano())
	c.loading.Store(false)
}

// Failing reports whether a reading failed less than CatalogTTL ago, and
// none was stored since: a
// caller that would read on a statement's path does not (a lock held on
// a catalog table makes every reading wait until it times out).
func (c *Catalog[T]) Failing() bool {
	return time.Now().UnixNano()-c.failAt.Load() < int64(CatalogTTL)
}

// Store publishes a new reading, due again after CatalogTTL, and ends
// the caller's Claim. A reading claimed before the last Expire may have
// missed what changed: it is published due, to be read again.
func (c *Catalog[T]) Store(v T) *CatalogSnapshot[T] {
	s := newSnapshot(v, c.claimed, c.claimAt)
	if c.expires.Load() != c.claimed {
		s.expire()
	}
	c.snap.Store(s)
	c.failAt.Store(0)
	c.loading.Store(false)
	if !s.expired.Load() {
		time.AfterFunc(CatalogTTL, s.expire)
	}
	return s
}

// Expire makes the current reading due at once, and a reading in
// progress due when it is stored: a statement may have changed what the
// catalog says (DDL, or code of a user's that may have run DDL). It
// returns the change's number: a snapshot that Sees it was read after.
func (c *Catalog[T]) Expire() uint64 {
	gen := c.expires.Add(1)
	if s := c.snap.Load(); s != nil {
		s.expire()
	}
	return gen
}

// ExpireNow is Expire for a change that a connection waits on before
// its statements are vouched for again (a user's code ran there that no
// reading proves harmless, and may have run DDL through EXECUTE): the
// next reading is not spaced by catalogMinInterval, so that the
// connection waits for one reading, not a second.
func (c *Catalog[T]) ExpireNow() uint64 {
	gen := c.Expire()
	for {
		old := c.urgent.Load()
		if old >= gen || c.urgent.CompareAndSwap(old, gen) {
			return gen
		}
	}
}

// ExpireAll is ExpireNow for a change every connection's judgments must
// see (DDL a statement's text shows): a reading from before it vouches
// for nothing (see Changed) until one that Sees it is stored.
func (c *Catalog[T]) ExpireAll() uint64 {
	gen := c.ExpireNow()
	for {
		old := c.changed.Load()
		if old >= gen || c.changed.CompareAndSwap(old, gen) {
			return gen
		}
	}
}

// Changed returns the number of the last ExpireAll: a snapshot that does
// not See it is older than a change of the catalog.
func (c *Catalog[T]) Changed() uint64 { return c.changed.Load() }

// closedSignal is DueSignal's answer where there is no reading yet.
var closedSignal = func() chan struct{} {
	ch := make(chan struct{})
	close(ch)
	return ch
}()

// DueSignal returns a channel closed once the current reading is due (at
// once where there is none): see CatalogWatcher.
func (c *Catalog[T]) DueSignal() <-chan struct{} {
	if s := c.snap.Load(); s != nil {
		return s.due
	}
	return closedSignal
}

// CatalogDue is a Catalog as CatalogWatcher hands it out.
type CatalogDue interface {
	DueSignal() <-chan struct{}
	Failing() bool
	Wanted() bool
}

// Wanted reports a reading that is due and soon vouches for nothing, or
// already does: it began more than CatalogTTL ago (it stops at
// CatalogMaxAge), or a change since made every connection distrust it
// (ExpireAll). A watcher that finds no idle connection for it takes one
// in use then (see CatalogWatcher); not for the first reading, which a
// new connection takes.
func (c *Catalog[T]) Wanted() bool {
	s := c.snap.Load()
	return s != nil && s.Due() && (time.Since(s.at) > CatalogTTL || !s.Sees(c.changed.Load()))
}

// CatalogWatcher is implemented by a CatalogRefresher whose readings fall
// due (CatalogTTL, Expire): pooldriver waits on its catalog's DueSignal
// and then runs RefreshCatalog on an idle connection at once, off the
// callers' paths, so that a reading is no older than CatalogTTL and the
// time it takes to find an idle connection, rather than the next health
// check's; where none is idle and the reading is Wanted, on one in use,
// in its turn among the callers, unless readings are Failing. CatalogWatch returns the connection's catalog, nil where it
// has none.
type CatalogWatcher interface {
	CatalogWatch() CatalogDue
}

// CatalogRefresher is implemented by a Conn whose dialect reads the
// server's catalog (see Catalog): pooldriver calls RefreshCatalog from
// its health check of an idle connection, off any caller's path, and the
// connection reads the catalog again if its reading is due. A statement's
// connection reads it only when there is no reading yet or the statement
// ran DDL: a reading costs milliseconds, more in a new server process or
// on a loaded machine, and a caller whose context ends meanwhile would
// take the connection down with it. An error means the connection
// failed while reading: pooldriver closes it (a refusal of the server's
// is no error: the last reading stays).
type CatalogRefresher interface {
	RefreshCatalog(ctx context.Context) error
}
