package pooldriver

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/pooldriver/pooldriver/dialects"
)

// ErrShuttingDown is returned, once Shutdown has begun, by a statement that
// would need a connection for work that is new: outside a task, or in a
// task begun after Shutdown. errors.Is(err, ErrClosed) holds for it.
var ErrShuttingDown error = shuttingDown{}

type shuttingDown struct{}

func (shuttingDown) Error() string {
	return "pooldriver: shutting down: new work is refused (a statement outside a task begun before Shutdown)"
}

func (shuttingDown) Is(target error) bool { return target == ErrClosed }

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
// ended and no connection is in use (rollbacks and resets done), c closed
// (a task begun before Shutdown that had run nothing on c by then gets
// ErrClosed). When ctx ends first, each connection still in use is cut and
// c closed: the statement running on it is cancelled on the server and its
// socket closed, so that its caller gets an error at once (an ODBC
// connection cannot be cut: it closes when released). Shutdown then waits
// at most 5s for the connections it cut to close, and returns an error
// that counts them and wraps ctx's cause.
//
// db.Close keeps its meaning: it closes at once, as Close does. Call
// Shutdown before it.
func (c *Connector) Shutdown(ctx context.Context) error {
	if c.pool == nil {
		return c.err
	}
	c.drainMark.CompareAndSwap(0, taskSeq.Load()+1)
	c.gated.Store(true)
	c.pool.Drain()
	c.logAt(slog.LevelInfo, "shutting down: new work refused, waiting for the work under way", nil)
	drained := func() bool { return c.tasks.Load() == 0 && c.pool.Stats().Active == 0 }
	if waitUntil(ctx, drained) {
		_ = c.Close()
		c.logAt(slog.LevelInfo, "shut down: the work under way ended", nil)
		return nil
	}
	c.pool.Close() // waiters fail now, and nothing new is opened for them
	inUse := c.pool.InUse()
	var wg sync.WaitGroup
	cut := 0
	for _, pc := range inUse {
		if ct, ok := pc.dc.(dialects.Cutter); ok {
			cut++
			wg.Go(ct.Cut)
		}
	}
	wg.Wait()
	_ = c.Close()
	gone := func() bool { return c.pool.Count() <= len(inUse)-cut }
	wait, stop := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer stop()
	waitUntil(wait, gone)
	err := fmt.Errorf("pooldriver: shutdown: %d connections in use at the end of the wait were cut, %d left to close when released: %w",
		cut, len(inUse)-cut, context.Cause(ctx))
	c.logWarn("shut down before the work under way ended", err, "cut", cut)
	return err
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

// admits reports whether task t may take a connection from c: c does not
// shut down, or t began before it did.
func (c *Connector) admits(t *task) bool {
	m := c.drainMark.Load()
	return m == 0 || t.seq < m
}
