package pooldriver

import (
	"context"
	"database/sql/driver"
	"errors"

	"github.com/pooldriver/pooldriver/dialects"
)

// A physical connection is pinned, and stays out of the pool, while
//
//   - a logical connection has a transaction open on it (BeginTx), or a
//     result set: database/sql holds that logical connection meanwhile;
//   - it is bound to a task and the server reports a transaction open on it
//     (a raw BEGIN), or the task is in session mode.
//
// Without a task, a transaction the server reports after a statement pins
// nothing: there is nobody to keep it for. The connection is rolled back
// before it goes back to the pool (and the rollback is counted).

// lease is one operation's hold on a physical connection.
type lease struct {
	pc     *physConn
	t      *task // the task of the operation's context, or nil
	locked bool  // the operation took pc.sem itself (false: the logical conn's open rows hold it)
	pinned bool  // the connection was pinned before the operation: its session matters
}

// acquire finds the physical connection an operation of l runs on, and takes
// its lock:
//  1. l has a transaction or rows open: their connection;
//  2. ctx carries a task with a bound connection: that one, waiting its
//     turn if another statement runs on it; but if it is busy with open
//     rows outside a transaction, another connection from the pool rather
//     than a deadlock (in session mode that statement does not see the
//     session);
//  3. otherwise a connection from the pool, bound to the task at once in
//     session mode.
func (l *conn) acquire(ctx context.Context) (lease, error) {
	if l.closed {
		return lease{}, driver.ErrBadConn
	}
	t := taskFrom(ctx)
	if t != nil && t.err != nil {
		return lease{}, t.err
	}
	if pc := l.pinnedConn(); pc != nil {
		if l.tx != nil && l.tx.endedByTask() {
			return lease{}, ErrTaskEnded
		}
		if l.rows > 0 {
			return lease{pc: pc, t: t, pinned: true}, nil
		}
		if err := pc.lock(ctx); err != nil {
			return lease{}, err
		}
		if l.tx != nil && l.tx.endedByTask() {
			pc.unlock()
			return lease{}, ErrTaskEnded
		}
		return lease{pc: pc, t: t, locked: true, pinned: true}, nil
	}
	separate := false // the task's connection is busy: use another, unbound
	for {
		if t != nil && !separate {
			if pc := t.bound(l.c); pc != nil {
				if !pc.tryLock() {
					if pc.busyWithRowsOutsideTx() {
						if t.modeFor(l.c) == SessionMode {
							// Another connection would not have the
							// session (an RLS setting, say): refuse, as a
							// single busy connection would.
							return lease{}, ErrSessionBusy
						}
						separate = true
						continue
					}
					if err := pc.lock(ctx); err != nil {
						return lease{}, err
					}
				}
				if !pc.boundTo(t) {
					pc.unlock() // unbound while we waited: look again
					continue
				}
				return lease{pc: pc, t: t, locked: true, pinned: true}, nil
			}
		}
		pc, err := l.c.acquire(ctx)
		if err != nil {
			return lease{}, err
		}
		if !pc.tryLock() {
			// A caller that found it through a binding just ended holds
			// the lock for an instant.
			if err := pc.lock(ctx); err != nil {
				pc.res.Release()
				return lease{}, err
			}
		}
		if t != nil && !separate && t.modeFor(l.c) == SessionMode {
			pc.mu.Lock()
			ok := t.bindLocked(pc)
			pc.mu.Unlock()
			if !ok && t.bound(l.c) != nil {
				// Another goroutine of the task bound one first: the
				// session lives there.
				pc.mu.Lock()
				rs := pc.releaseStateLocked()
				pc.mu.Unlock()
				l.c.release(pc, rs)
				continue
			}
		}
		return lease{pc: pc, t: t, locked: true}, nil
	}
}

// pinnedConn returns the connection l's transaction or rows are on, or nil.
func (l *conn) pinnedConn() *physConn {
	if l.tx != nil {
		return l.tx.pc
	}
	if l.rows > 0 {
		return l.rowsPC
	}
	return nil
}

// finish ends an operation's hold on le.pc: it binds the connection to the
// task if something now pins it, and otherwise unbinds it and gives it back
// to the pool. It returns ErrTaskConnBusy when the operation opened a
// transaction on the server that the task cannot keep (see below).
func (l *conn) finish(le lease) error {
	pc, c := le.pc, l.c
	pc.rollbackClaimedTx()
	var err error
	pc.mu.Lock()
	if le.t != nil && pc.task == nil && !pc.doomed && le.t.modeFor(c) == TransactionMode &&
		(pc.tx != nil || pc.serverTx || pc.rows > 0) {
		// Transaction mode: bind while pinned. If the task already has a
		// connection here (its own is busy with open rows, or two
		// goroutines raced), this one stays unbound: a transaction the
		// server now reports on it has no home, is rolled back when it is
		// let go, and the caller is told rather than left to believe the
		// next statements join it.
		if !le.t.bindLocked(pc) && pc.serverTx && pc.tx == nil {
			err = ErrTaskConnBusy
		}
	}
	pinned := pc.tx != nil || pc.rows > 0 // by the logical conn
	taskKeeps := pc.task != nil && !pc.broken &&
		(pinned || pc.serverTx || pc.task.modeFor(c) == SessionMode)
	if pc.task != nil && !taskKeeps {
		pc.task.unbindLocked(pc)
	}
	keep := pinned || taskKeeps
	rowsHoldLock := pc.rows > 0
	var rs releaseState
	if !keep {
		rs = pc.releaseStateLocked()
	}
	pc.mu.Unlock()
	if keep {
		if le.locked && !rowsHoldLock {
			pc.unlock()
		}
		return err
	}
	c.release(pc, rs) // nothing pins it, so we hold its lock
	return err
}

// releaseState is what release needs to know, read under physConn.mu.
type releaseState struct {
	serverTx, doomed, reset bool
}

// releaseStateLocked reads pc's release state and consumes its reset mark.
func (pc *physConn) releaseStateLocked() releaseState {
	rs := releaseState{serverTx: pc.serverTx, doomed: pc.doomed, reset: pc.needsReset}
	pc.needsReset = false
	return rs
}

// release gives back a connection nothing pins; the caller holds its lock.
// A transaction still open on the server is rolled back first, a session
// whose task ended is reset, and a broken or doomed connection is destroyed.
func (c *Connector) release(pc *physConn, rs releaseState) {
	serverTx, doomed, reset := rs.serverTx, rs.doomed, rs.reset
	if serverTx && !pc.broken && !doomed {
		c.stats.autoRollbacks.Add(1)
		err := pc.rollback(nil)
		c.logWarn("rolled back a transaction left open", err)
	}
	if reset && !pc.broken && !doomed {
		c.stats.sessionResets.Add(1)
		if err := pc.resetSession(); err != nil && !errors.Is(err, dialects.ErrUnsupported) {
			c.logWarn("session reset failed; the connection will be closed", err)
		}
	}
	broken := pc.broken || doomed
	pc.unlock()
	if broken {
		pc.res.Destroy()
		return
	}
	pc.res.Release()
}

// endBinding cleans up pc when task t ends: it rolls back the open
// transaction, has the session reset in session mode, and gives pc back.
func (c *Connector) endBinding(t *task, pc *physConn) {
	ctx, cancel := context.WithTimeout(context.Background(), c.s.cleanupTimeout)
	defer cancel()
	if err := pc.lock(ctx); err != nil {
		// Still busy (a result set nobody closes): nobody may reuse it.
		// Whoever lets it go last destroys it.
		pc.mu.Lock()
		if pc.task == t {
			pc.task = nil
			pc.doomed = true
		}
		pc.mu.Unlock()
		c.logWarn("connection still busy when its task ended; it will be closed", err)
		return
	}
	pc.mu.Lock()
	if pc.task != t {
		pc.mu.Unlock()
		pc.unlock()
		return
	}
	pc.task = nil
	pc.needsReset = t.modeFor(c) == SessionMode
	x := pc.tx
	claimed := x != nil && (x.claim(txEndedByTask) || x.endedByTask())
	serverTx := pc.serverTx
	pc.mu.Unlock()

	if x != nil && !claimed {
		// A Commit or Rollback of that transaction is under way and waits
		// for the lock; when it is done, the connection is let go through
		// release, which resets the session.
		pc.unlock()
		return
	}
	if claimed || serverTx {
		c.stats.autoRollbacks.Add(1)
		err := pc.rollback(txDriver(x, claimed))
		pc.mu.Lock()
		pc.tx = nil
		pc.mu.Unlock()
		c.logWarn("rolled back the transaction of an ended task", err)
	}
	pc.mu.Lock()
	rs := pc.releaseStateLocked()
	pc.mu.Unlock()
	c.release(pc, rs)
}

func txDriver(x *tx, claimed bool) driver.Tx {
	if claimed {
		return x.drv
	}
	return nil
}

// lostSession turns driver.ErrBadConn into an error database/sql does not
// retry when the connection carried state the caller relied on (a
// transaction, a session): a retry would run on a fresh connection that
// lacks it.
func lostSession(le lease, err error) error {
	if err == nil || !le.pinned || !errors.Is(err, driver.ErrBadConn) {
		return err
	}
	return lostConnError{err}
}

// lostConnError matches everything its cause matches, except
// driver.ErrBadConn.
type lostConnError struct{ err error }

func (e lostConnError) Error() string {
	return "pooldriver: the connection of this transaction or session was lost: " + e.err.Error()
}

func (e lostConnError) Is(target error) bool {
	return target != driver.ErrBadConn && errors.Is(e.err, target)
}
