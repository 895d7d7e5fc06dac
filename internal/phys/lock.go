package phys

import (
	"context"
	"sync/atomic"
)

// connLock is the lock of one physical connection: a mutex whose Lock gives
// up when a context ends. The uncontended path is one atomic operation each
// way; waiters sleep on a one-token channel that an unlock fills only when
// someone waits. It is not fair: a goroutine arriving as the lock is
// released may take it before a sleeping waiter, which then waits again.
type connLock struct {
	State   atomic.Int32  // 1: held
	waiters atomic.Int32  // goroutines inside lock's slow path
	wake    chan struct{} // capacity 1
}

func newConnLock() connLock { return connLock{wake: make(chan struct{}, 1)} }

func (l *connLock) TryLock() bool { return l.State.CompareAndSwap(0, 1) }

// Lock takes the lock, or returns ctx's error if ctx ends first.
func (l *connLock) Lock(ctx context.Context) error {
	if l.TryLock() {
		return nil
	}
	// Counted before the retry below: an unlock that lets the retry fail
	// must see a waiter and leave a token (atomics are sequentially
	// consistent), so no wake-up is lost.
	l.waiters.Add(1)
	defer l.waiters.Add(-1)
	for {
		if l.TryLock() {
			return nil
		}
		select {
		case <-l.wake:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (l *connLock) Unlock() {
	l.State.Store(0)
	if l.waiters.Load() > 0 {
		select {
		case l.wake <- struct{}{}:
		default: // a token is already there
		}
	}
}

// TryClaim takes pc for one thing run on its driver connection (a
// statement, its rows, a rollback, a reset: sem, see Conn's lock rules)
// where nobody has it, without waiting.
func (pc *Conn) TryClaim() bool { return pc.sem.TryLock() }

// Claim takes pc as TryClaim does, waiting for whoever has it, or returns
// ctx's error if ctx ends first.
func (pc *Conn) Claim(ctx context.Context) error { return pc.sem.Lock(ctx) }

// Unclaim lets go of pc after Claim or TryClaim.
func (pc *Conn) Unclaim() { pc.sem.Unlock() }

// Claimed reports whether someone has pc claimed, for tests.
func (pc *Conn) Claimed() bool { return pc.sem.State.Load() != 0 }
