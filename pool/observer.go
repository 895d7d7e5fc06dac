package pool

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Timing names one of the durations the pool measures.
type Timing int

const (
	// TimingWait is the time an Acquire took to get a resource, or waited
	// before it gave up (timed out, cancelled, refused while it waited). An
	// Acquire or TryAcquire served at once from idle is a wait of 0.
	TimingWait Timing = iota
	// TimingUse is the time a resource was held: from Acquire until
	// Release, Destroy or Reject, for the uses the pool times (a use that
	// ends with Park or begins with Unpark is not: see
	// [Stats].UntimedUses).
	TimingUse
	// TimingCreate is the time a factory call took, failed ones included.
	TimingCreate
)

// String returns "wait", "use" or "create".
func (t Timing) String() string {
	switch t {
	case TimingWait:
		return "wait"
	case TimingUse:
		return "use"
	case TimingCreate:
		return "create"
	}
	return "Timing(?)"
}

// Observer is told of each duration the pool measures, as it is measured
// ([Stats] keeps the same durations in histograms). It is called from the
// goroutine that acquired, released or created, concurrently, never with
// the pool's lock held. It runs on the path of every Acquire and Release,
// so it must be quick; it must not block or panic. Observing changes
// neither what the pool measures nor how: holders still park
// ([Resource.Park]), and their untimed uses are counted in
// [Stats].UntimedUses, not told.
type Observer func(t Timing, d time.Duration)

// observers is the copy-on-write list of a pool's observers: the hot path
// pays one atomic load when there is none.
type observers struct {
	mu   sync.Mutex // serializes changes; readers only Load
	list atomic.Pointer[[]*Observer]
}

// notify calls every observer with (t, d). It is small enough to inline
// into the hot paths, where there is usually no observer.
func (o *observers) notify(t Timing, d time.Duration) {
	if l := o.list.Load(); l != nil {
		notifyAll(l, t, d)
	}
}

//go:noinline
func notifyAll(l *[]*Observer, t Timing, d time.Duration) {
	for _, f := range *l {
		(*f)(t, d)
	}
}

// Observe adds f to the pool's observers until the returned function is
// called (it is idempotent). Observations made before Observe are not
// replayed: read [Pool.Stats] for them.
func (p *Pool[T]) Observe(f Observer) (stop func()) {
	if f == nil {
		return func() {}
	}
	entry := &f
	o := &p.observers
	o.mu.Lock()
	var l []*Observer
	if old := o.list.Load(); old != nil {
		l = slices.Clone(*old)
	}
	l = append(l, entry)
	o.list.Store(&l)
	o.mu.Unlock()
	return func() {
		o.mu.Lock()
		defer o.mu.Unlock()
		old := o.list.Load()
		if old == nil || !slices.Contains(*old, entry) {
			return
		}
		l := slices.DeleteFunc(slices.Clone(*old), func(e *Observer) bool { return e == entry })
		if len(l) == 0 {
			o.list.Store(nil)
			return
		}
		o.list.Store(&l)
	}
}
