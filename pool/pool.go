package pool

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pooldriver/pooldriver/pool/internal/ring"
)

// Pool is a pool of resources of type T. It is safe for concurrent use.
type Pool[T any] struct {
	cfg Config[T] // read-only after New

	// bgCtx is cancelled by Close; it stops the background goroutines and
	// aborts factory calls in flight. wg counts those goroutines.
	bgCtx    context.Context
	bgCancel context.CancelFunc
	wg       sync.WaitGroup
	closers  sync.WaitGroup // CloseAsync's goroutine, which waits for wg

	misuses atomic.Int64 // counted outside mu: a misuse must not need the lock
	// Mirrors of mu-guarded state for Park, which takes no lock: closed,
	// onRelease, and the pressure of pressure.go.
	closing       atomic.Bool
	releaseEvents atomic.Bool
	pressured     atomic.Bool
	shareOn       atomic.Bool // share > 0
	// The coarse clock of parking (park.go): the pool's clock as of the
	// last tick, once coarseOn.
	coarse   atomic.Int64
	coarseOn atomic.Bool
	// mayBeParked is false only while no resource is parked (park.go, steal.go):
	// Park sets it, a steal that finds nothing parked clears it, so that
	// a waiter does not scan every resource when none can be parked.
	mayBeParked atomic.Bool
	// tending mirrors tender != nil for Park (a TendNext waits: park.go,
	// steal.go), written under mu before the steal, as the count of
	// waiters is.
	tending   atomic.Bool
	observers observers // read without mu, on every Acquire and Release

	// epoch is the origin of the pool's clock: times are kept as durations
	// since it, read with time.Since, which costs a monotonic clock read
	// only (time.Now also reads the wall clock).
	epoch time.Time

	notifyMu sync.Mutex // serializes state changes with their OnStateChange; taken before mu

	mu         sync.Mutex              // protects every field below; never held while calling user code
	idle       ring.Ring[*Resource[T]] // the back is the most recently released
	waiters    waitList[T]
	total      int // idle + acquired + creating + checking
	acquired   int
	creating   int
	abandoning int // of creating: calls abandoned with their callers (abandonLocked), not yet returned
	checking   int // taken out of idle by the healthcheck, being checked
	// idleCloses counts CloseIdle calls: a resource taken out of idle to
	// be checked or tended while one ran is destroyed when it comes back
	// rather than made idle again (see tend).
	idleCloses uint64
	// retires counts Retire calls: a resource whose factory call began
	// before one is destroyed as it arrives, and the call made again.
	retires     uint64
	tender      *tender[T] // a TendNext waiting for a resource (healthcheck.go)
	closed      bool
	state       State
	trial       bool // Recovering: the one trial factory call is under way
	strategy    Strategy
	onRelease   bool           // the strategy wants to hear of releases (see ignoresReleases)
	all         []*Resource[T] // every resource in existence, for stealLocked (steal.go)
	backoff     backoff
	lastFailure error // the last factory error since the last success, for AcquireError
	// permanent: lastFailure is permanent (Config.Permanent); connected:
	// a factory call ever succeeded; failingSince: when the run of
	// failures that lastFailure ends began. See refusingLocked.
	permanent    bool
	connected    bool
	failingSince time.Duration
	holds        holdTime
	// timeouts fails the waiters whose Config.AcquireTimeout passed (see
	// expireWaiters): one timer for the pool rather than one per wait.
	timeouts      *time.Timer
	timeoutsArmed bool
	// dials starts the factory calls the back-off held back, when it ends
	// (see dialDue): one timer for the pool, armed for dialAt.
	dials      *time.Timer
	dialsArmed bool
	dialAt     time.Duration
	lastStart  time.Duration // when the newest factory call started (see backoff)
	// trim gives back idle resources while the backend is at its limit
	// (pressure.go): until pressureUntil, every half
	// Config.IdleTimeUnderPressure.
	trim          *time.Timer
	trimArmed     bool
	pressureUntil time.Duration
	growthCapped  bool // growthLocked held a factory call back
	share         int  // SetShare's limit below Max, or 0 (share.go)
	// freeWaiters is a stack (through next) of waiters kept for later
	// Acquires, nFree its length: see freeWaiterLocked.
	freeWaiters *waiter[T]
	nFree       int
	stats       counters
}

// goBackground runs f in a goroutine that Close waits for. The caller holds
// mu and has checked that the pool is not closed, so that no goroutine can
// start after Close began waiting.
func (p *Pool[T]) goBackground(f func()) {
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		f()
	}()
}

// every calls f every d until the pool closes.
func (p *Pool[T]) every(d time.Duration, f func()) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-p.bgCtx.Done():
			return
		case <-t.C:
			f()
		}
	}
}

// clock returns the pool's current time.
func (p *Pool[T]) clock() time.Duration { return time.Since(p.epoch) }

// misuse counts the use of a handle its caller does not hold
// ([Stats].Misuses).
func (p *Pool[T]) misuse() { p.misuses.Add(1) }

// tender is a TendNext waiting for the next resource released.
type tender[T any] struct {
	ch     chan *Resource[T] // buffered (1): handing over never blocks
	closes uint64            // the CloseIdle calls when it was handed one
}
