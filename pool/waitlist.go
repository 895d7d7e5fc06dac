package pool

import (
	"context"
	"math"
	"sync/atomic"
	"time"
)

// noDeadline is the deadline of a waiter whose context has none.
const noDeadline = time.Duration(math.MaxInt64)

// owed is what a resource handed out still owes before its use.
type owed uint8

const (
	owesNothing owed = iota // just created or checked
	// owesCheck: the BeforeAcquire check. A resource released straight to
	// a waiter owes it as an idle one does: the backend may have closed it
	// right after its last reply.
	owesCheck
	// owesExpiry: the expiry check, then BeforeAcquire (it was parked:
	// parking does not expire resources).
	owesExpiry
)

// result is what a waiter is handed: a resource or an error.
type result[T any] struct {
	r      *Resource[T]
	err    error
	waited time.Duration // with r: how long the waiter waited for it
	owes   owed          // with r: the checks it owes
}

// waiter is one Acquire waiting for a resource. Its fields are guarded by
// the pool's mu.
type waiter[T any] struct {
	ch         chan result[T]  // buffered (1): handing over never blocks
	ctx        context.Context // the Acquire's: a resource is not handed to one that ended
	prev, next *waiter[T]
	queued     bool          // in the pool's wait list
	begun      bool          // it continues work begun (Config.Begun): queued before new work
	reusable   bool          // it left the list with no factory call started on its behalf
	creating   bool          // a factory call was started on its behalf
	call       *factoryCall  // that call, while creating
	start      time.Duration // when it started waiting, on the pool's clock
	deadline   time.Duration // its context's deadline on the pool's clock, or noDeadline
	limit      time.Duration // the earlier of deadline and Config.AcquireTimeout's end
}

// waitList is the queue of waiters: those of work begun (waiter.begun),
// then those of new work, each class in arrival order. It is an intrusive
// doubly linked list, so that a waiter that gives up leaves from the middle
// in O(1); lastBegun ends the first class, so that a waiter joins its class
// in O(1) too. Everything that scans the list from its head (the hand-off,
// the factory calls) thus serves work begun first.
type waitList[T any] struct {
	head, tail *waiter[T]
	lastBegun  *waiter[T]   // the last waiter of work begun, or nil
	n          atomic.Int32 // changed under the pool's mu; read without it by Park
}

func (l *waitList[T]) len() int { return int(l.n.Load()) }

// pushBack queues w last in its class.
func (l *waitList[T]) pushBack(w *waiter[T]) {
	if w.begun {
		l.insertAfter(l.lastBegun, w)
		l.lastBegun = w
		return
	}
	l.insertAfter(l.tail, w)
}

// pushFront queues w first in its class: a waiter put back, older than
// those of its class.
func (l *waitList[T]) pushFront(w *waiter[T]) {
	if w.begun {
		l.insertAfter(nil, w)
		if l.lastBegun == nil {
			l.lastBegun = w
		}
		return
	}
	l.insertAfter(l.lastBegun, w)
}

// insertAfter links w in after at, or first when at is nil.
func (l *waitList[T]) insertAfter(at, w *waiter[T]) {
	w.prev = at
	if at != nil {
		w.next = at.next
		at.next = w
	} else {
		w.next = l.head
		l.head = w
	}
	if w.next != nil {
		w.next.prev = w
	} else {
		l.tail = w
	}
	w.queued = true
	l.n.Add(1)
}

func (l *waitList[T]) remove(w *waiter[T]) {
	if !w.queued {
		return
	}
	if w == l.lastBegun {
		l.lastBegun = w.prev // the first class is the list's front: w.prev is of it
	}
	if w.prev != nil {
		w.prev.next = w.next
	} else {
		l.head = w.next
	}
	if w.next != nil {
		w.next.prev = w.prev
	} else {
		l.tail = w.prev
	}
	w.prev, w.next = nil, nil
	w.queued = false
	// A factory call started on its behalf still refers to it (create
	// clears creating, and tells it of a failure if it still waits): it
	// must not be reused for another Acquire meanwhile.
	w.reusable = !w.creating
	l.n.Add(-1)
}

func (l *waitList[T]) popFront() *waiter[T] {
	w := l.head
	if w != nil {
		l.remove(w)
	}
	return w
}

// firstWithoutFactory returns the oldest waiter with no factory call started
// on its behalf, or nil.
func (l *waitList[T]) firstWithoutFactory() *waiter[T] {
	for w := l.head; w != nil; w = w.next {
		if !w.creating {
			return w
		}
	}
	return nil
}

// holdTime is a moving average of how long a resource is held, from hand-out
// to release: the time a waiter must have left to make use of one.
type holdTime struct{ avg time.Duration }

// maxHoldSample caps one hold's weight in the average: a session held for
// minutes says nothing about the next statement's. It also bounds how far
// from FIFO the pool goes: a waiter with more than useMargin×maxHoldSample
// left is always served in its turn.
const maxHoldSample = 250 * time.Millisecond

// observe adds one hold to the average (weight 1/8: it follows a change of
// load within tens of holds and smooths single outliers).
func (h *holdTime) observe(d time.Duration) {
	h.avg += (min(d, maxHoldSample) - h.avg) / 8
}

// useMargin is how many average holds a waiter must have left to be served
// in its turn. A hold's length varies (a statement, then the rows read);
// four times the average covers most of them.
const useMargin = 4

// nextWaiterLocked picks who gets a resource that is being released: the
// oldest waiter whose context has ended (to be told so), else the oldest
// waiter with time left to use it (FIFO), else — every waiter is about to
// give up — the one with the most time left.
//
// "Time left to use it" is useMargin times the average hold. Strict FIFO would hand
// each resource to the waiter with the least time left: under overload with
// deadlines (a cancellation storm) the oldest waiter has nearly given up, its
// statement is cancelled mid-flight, and a cancelled statement can cost the
// connection itself (pgx closes it). A waiter with no deadline is never
// passed over.
func (p *Pool[T]) nextWaiterLocked(now time.Duration) *waiter[T] {
	margin := useMargin * p.holds.avg
	var best *waiter[T]
	for w := p.waiters.head; w != nil; w = w.next {
		if w.deadline-now >= margin || w.ctx.Err() != nil {
			return w
		}
		if best == nil || w.deadline > best.deadline {
			best = w
		}
	}
	return best
}

// maxFreeWaiters bounds the waiters a pool keeps for later Acquires: as
// many as ever waited at once, up to this.
const maxFreeWaiters = 256

// newWaiter returns a waiter for one Acquire: a reused one, or a new one.
// A wait on the hand-off path (every acquire, once goroutines outnumber
// resources) then allocates nothing. The caller holds mu.
func (p *Pool[T]) newWaiter() *waiter[T] {
	if w := p.freeWaiters; w != nil {
		p.freeWaiters, w.next = w.next, nil
		p.nFree--
		return w
	}
	return &waiter[T]{ch: make(chan result[T], 1)}
}

// freeWaiterLocked keeps w, whose wait is over, for a later Acquire if
// nothing can refer to it any more: every waiter leaves the list through
// remove, and is then sent exactly one result, which its wait received, so
// its channel is empty; only a factory call started on its behalf may
// still refer to it (see remove). The caller holds mu, and frees w only
// once its goroutine is done with it: at the end of a wait without a
// resource, or as the resource it was handed is released (Resource.spare).
// A list under mu, which the waiter's path holds anyway, costs a few
// instructions where a sync.Pool cost about 100 per wait.
func (p *Pool[T]) freeWaiterLocked(w *waiter[T]) {
	if !w.reusable || w.queued || p.nFree >= maxFreeWaiters {
		return
	}
	*w = waiter[T]{ch: w.ch, next: p.freeWaiters}
	p.freeWaiters = w
	p.nFree++
}
