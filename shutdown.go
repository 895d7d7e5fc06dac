package pooldriver

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/pooldriver/pooldriver/dialects"
	"github.com/pooldriver/pooldriver/internal/phys"
)

// Shutdown closes c gracefully: it refuses new work at once, waits within
// ctx for the work under way, then closes c as Close does.
//
// Work under way is every task begun before Shutdown (WithTask, so every
// request of Middleware): its statements are served, on the connection it
// holds or on another. New work, a statement outside a task or in a task
// begun after, fails with ErrShuttingDown. A *sql.Tx keeps its connection
// to its end; a *sql.Conn outside a task takes a connection for each
// statement, and is refused.
//
// Shutdown returns nil once every task that ran a statement on c has
// ended and no connection is in use (rollbacks and resets done), and c is
// closed (a task begun before Shutdown that had run nothing on c by then
// gets ErrClosed); its idle connections close in the background. When ctx
// ends first, c is closed at once (the statements waiting for a connection
// fail with ErrClosed) and each connection still in use is cut: the
// statement running on it is cancelled on the server and its socket
// closed, so that its caller gets an error (an ODBC connection cannot be
// cut: it closes when released). The cuts and the closes go on in the
// background, without the server holding Shutdown up: it returns at ctx's
// end, with an error that counts the connections it cut and wraps ctx's
// cause. Close (db.Close) waits for that background work.
//
// While Shutdown waits, as under any overload, a statement of a task
// that already ran one is served before one of a task that has not, so
// that the tasks under way finish rather than all advance together.
//
// db.Close keeps its meaning: it closes at once, as Close does. Call
// Shutdown before it.
func (c *Connector) Shutdown(ctx context.Context) error {
	if c.pool == nil {
		return c.err
	}
	mark := taskSeq.Load() + 1
	pools := c.pools()
	for _, pc := range pools {
		pc.drainMark.CompareAndSwap(0, mark)
		pc.gated.Store(true)
		pc.pool.Drain()
	}
	c.logAt(slog.LevelInfo, "shutting down: new work refused, waiting for the work under way", nil)
	drained := func() bool {
		if c.tasks.Load() != 0 {
			return false
		}
		for _, pc := range pools {
			if pc.pool.Stats().Active != 0 {
				return false
			}
		}
		return true
	}
	if waitUntil(ctx, drained) {
		c.logAt(slog.LevelInfo, "shut down: the work under way ended", nil)
		select {
		case <-c.closeInBackground(nil):
		case <-ctx.Done():
		}
		return nil
	}
	var inUse []*phys.Conn
	for _, pc := range pools {
		inUse = append(inUse, pc.pool.CloseAsync()...) // waiters fail now, and nothing new is opened for them
	}
	var cut []dialects.Cutter
	for _, pc := range inUse {
		if ct, ok := pc.DC.(dialects.Cutter); ok {
			cut = append(cut, ct)
		}
	}
	err := fmt.Errorf("pooldriver: shutdown: %d connections in use at the end of the wait were cut, %d left to close when released: %w",
		len(cut), len(inUse)-len(cut), context.Cause(ctx))
	c.logWarn("shut down before the work under way ended", err, "cut", len(cut))
	c.closeInBackground(cut)
	return err
}

// closeInBackground cuts the connections in cut, then closes c, on a
// goroutine of its own that Close waits for; the channel it returns is
// closed when that is done. A cut asks the server to cancel the statement
// (a round trip on a connection of its own), which a loaded server may
// take its time to answer: Shutdown does not wait for it.
func (c *Connector) closeInBackground(cut []dialects.Cutter) <-chan struct{} {
	done := make(chan struct{})
	c.closers.Add(1)
	go func() {
		defer c.closers.Done()
		defer close(done)
		var wg sync.WaitGroup
		for _, ct := range cut {
			wg.Go(ct.Cut)
		}
		wg.Wait()
		c.closeNow()
	}()
	return done
}

// waitUntil polls f until it reports true, or ctx ends; it reports
// whether f did.
func waitUntil(ctx context.Context, f func() bool) bool {
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for !f() {
		select {
		case <-t.C:
		case <-ctx.Done():
			return f()
		}
	}
	return true
}
