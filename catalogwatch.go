package pooldriver

import (
	"context"
	"time"

	"github.com/pooldriver/pooldriver/dialects"
	"github.com/pooldriver/pooldriver/internal/phys"
)

// A dialect that reads the server's catalog (dialects.Catalog: the
// PostgreSQL and MySQL dialects') uses each reading for
// dialects.CatalogTTL, then reads it again off the callers' paths. The
// pool's health check does that only every pool_health_check_period
// (30 s by default), so a Connector also waits on its catalog's reading
// falling due and then runs the reading at once on one idle connection,
// or, where none is, on the next one a caller lets go (tendNext):
// what another client changed in the catalog is seen within CatalogTTL
// and the moment it takes to get a connection. The loop starts
// with the first connection whose dialect reads a catalog, and ends with
// Close.

// catalogTakeWait bounds how long the loop waits for a connection in
// use where none is idle (tendNext): a reading not taken within it may
// no longer be Fresh (dialects.CatalogMaxAge) by the time it is stored.
const catalogTakeWait = dialects.CatalogMaxAge - dialects.CatalogTTL

// catalogRetry spaces the tries while a due reading is not taken: no
// connection was idle, or one was tried for a reading still Wanted that
// readings are not failing; catalogRetryRead, one that was tried (a
// reading that failed, or one refused because the last began less than a
// second ago: dialects.Catalog.Claim).
const (
	catalogRetry     = 100 * time.Millisecond
	catalogRetryRead = time.Second
)

// watchCatalog starts the loop, once, for dc's catalog.
func (c *Connector) watchCatalog(dc any) {
	w, ok := dc.(dialects.CatalogWatcher)
	if !ok {
		return
	}
	c.catalogs.once.Do(func() {
		due := w.CatalogWatch()
		if due == nil || c.closing.Load() {
			return
		}
		done := make(chan struct{})
		c.catalogs.mu.Lock()
		c.catalogs.done = done
		c.catalogs.mu.Unlock()
		go c.catalogLoop(due, done)
	})
}

// stopCatalog waits for the loop to end, once the Connector's closed is closed.
func (c *Connector) stopCatalog() {
	c.catalogs.mu.Lock()
	done := c.catalogs.done
	c.catalogs.mu.Unlock()
	if done != nil {
		<-done
	}
}

// catalogLoop reads the catalog again each time its reading falls due,
// on an idle connection (RefreshCatalog, as the health check runs it),
// until the Connector closes.
func (c *Connector) catalogLoop(due dialects.CatalogDue, done chan struct{}) {
	defer close(done)
	<-c.catalogs.ready
	if c.pool == nil {
		return // pool.New failed
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-c.closed:
			cancel()
		case <-ctx.Done():
		}
	}()
	refresh := func(pc *phys.Conn) error {
		rctx, rcancel := context.WithTimeout(ctx, c.cfg.CleanupTimeout)
		defer rcancel()
		return pc.RefreshCatalog(rctx)
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-due.DueSignal():
		}
		wait := catalogRetry
		if c.pool.TendOne(refresh) || due.Wanted() && !due.Failing() && c.drainMark.Load() == 0 && c.tendNext(ctx, refresh) {
			wait = catalogRetryRead
			if due.Wanted() && !due.Failing() {
				// Tried, but not read (another reading was in progress,
				// or began less than a second ago): a second's wait
				// could outlast what is left of the reading's
				// dialects.CatalogMaxAge.
				wait = catalogRetry
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-due.DueSignal():
			// still due: try again after wait
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
		default:
		}
	}
}

// tendNext runs refresh on the next connection a caller lets go, where
// none was idle (pool.Pool.TendNext: none is opened for it, and it is no
// acquire of a caller's): callers that keep every connection busy (a
// serial loop on one connection, more callers than connections) would
// otherwise leave the reading due until it vouches for nothing, and every
// statement that names anything would then count as a change. It waits
// within catalogTakeWait, for a reading that soon vouches for nothing
// (dialects.Catalog.Wanted) only, never while readings fail (each would
// hold the connection until it timed out) or once Shutdown began, and
// holds the connection for one reading.
func (c *Connector) tendNext(ctx context.Context, refresh func(*phys.Conn) error) bool {
	tctx, cancel := context.WithTimeout(ctx, catalogTakeWait)
	defer cancel()
	return c.pool.TendNext(tctx, refresh)
}
