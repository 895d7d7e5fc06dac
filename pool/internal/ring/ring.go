// Package ring is a growable ring buffer: a double-ended queue with O(1)
// push and pop at both ends and no allocation once it has grown to its
// working size.
package ring

const minCap = 8

// Ring is a double-ended queue. The zero value is empty and ready to use.
// It is not safe for concurrent use.
type Ring[T any] struct {
	buf  []T // len(buf) is 0 or a power of two
	head int // index of the first element
	n    int // number of elements
}

// Len returns the number of elements.
func (r *Ring[T]) Len() int { return r.n }

// Cap returns the number of elements the ring holds before it grows.
func (r *Ring[T]) Cap() int { return len(r.buf) }

// PushBack adds v at the back.
func (r *Ring[T]) PushBack(v T) {
	if r.n == len(r.buf) {
		r.grow()
	}
	r.buf[(r.head+r.n)&(len(r.buf)-1)] = v
	r.n++
}

// PushFront adds v at the front.
func (r *Ring[T]) PushFront(v T) {
	if r.n == len(r.buf) {
		r.grow()
	}
	r.head = (r.head - 1) & (len(r.buf) - 1)
	r.buf[r.head] = v
	r.n++
}

// PopBack removes and returns the element at the back.
func (r *Ring[T]) PopBack() (v T, ok bool) {
	if r.n == 0 {
		return v, false
	}
	r.n--
	i := (r.head + r.n) & (len(r.buf) - 1)
	v = r.buf[i]
	var zero T
	r.buf[i] = zero // drop the reference for the garbage collector
	return v, true
}

// PopFront removes and returns the element at the front.
func (r *Ring[T]) PopFront() (v T, ok bool) {
	if r.n == 0 {
		return v, false
	}
	v = r.buf[r.head]
	var zero T
	r.buf[r.head] = zero
	r.head = (r.head + 1) & (len(r.buf) - 1)
	r.n--
	return v, true
}

// PeekFront returns the element at the front without removing it.
func (r *Ring[T]) PeekFront() (v T, ok bool) {
	if r.n == 0 {
		return v, false
	}
	return r.buf[r.head], true
}

// At returns the i-th element from the front; i must be in [0, Len()).
func (r *Ring[T]) At(i int) T {
	if i < 0 || i >= r.n {
		panic("ring: index out of range")
	}
	return r.buf[(r.head+i)&(len(r.buf)-1)]
}

// Filter keeps, in order, the elements for which keep returns true and
// appends the others to removed, which it returns.
func (r *Ring[T]) Filter(keep func(T) bool, removed []T) []T {
	n := r.n
	w := 0
	mask := len(r.buf) - 1
	for i := 0; i < n; i++ {
		v := r.buf[(r.head+i)&mask]
		if keep(v) {
			r.buf[(r.head+w)&mask] = v
			w++
		} else {
			removed = append(removed, v)
		}
	}
	var zero T
	for i := w; i < n; i++ {
		r.buf[(r.head+i)&mask] = zero
	}
	r.n = w
	return removed
}

func (r *Ring[T]) grow() {
	newCap := minCap
	if len(r.buf) > 0 {
		newCap = 2 * len(r.buf)
	}
	buf := make([]T, newCap)
	for i := 0; i < r.n; i++ {
		buf[i] = r.buf[(r.head+i)&(len(r.buf)-1)]
	}
	r.buf = buf
	r.head = 0
}
