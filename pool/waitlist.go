package pool

import (
	"context"
	"time"
)

// result is what a waiter is handed: a resource or an error.
type result[T any] struct {
	r   *Resource[T]
	err error
}

// waiter is one Acquire waiting for a resource. Its fields are guarded by
// the pool's mu.
type waiter[T any] struct {
	ch         chan result[T]  // buffered (1): handing over never blocks
	ctx        context.Context // the Acquire's: a resource is not handed to one that ended
	prev, next *waiter[T]
	queued     bool          // in the pool's wait list
	creating   bool          // a factory call was started on its behalf
	trial      bool          // the circuit breaker's trial acquire
	start      time.Duration // when it started waiting, on the pool's clock
}

// waitList is a FIFO of waiters: an intrusive doubly linked list, so that a
// waiter that gives up leaves from the middle in O(1).
type waitList[T any] struct {
	head, tail *waiter[T]
	n          int
}

func (l *waitList[T]) len() int { return l.n }

func (l *waitList[T]) pushBack(w *waiter[T]) {
	w.prev, w.next = l.tail, nil
	if l.tail != nil {
		l.tail.next = w
	} else {
		l.head = w
	}
	l.tail = w
	w.queued = true
	l.n++
}

func (l *waitList[T]) pushFront(w *waiter[T]) {
	w.prev, w.next = nil, l.head
	if l.head != nil {
		l.head.prev = w
	} else {
		l.tail = w
	}
	l.head = w
	w.queued = true
	l.n++
}

func (l *waitList[T]) remove(w *waiter[T]) {
	if !w.queued {
		return
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
	l.n--
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
