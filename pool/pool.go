package pool

import (
	"context"
	"errors"
	"fmt"
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
	observers   observers // read without mu, on every Acquire and Release

	// epoch is the origin of the pool's clock: times are kept as durations
	// since it, read with time.Since, which costs a monotonic clock read
	// only (time.Now also reads the wall clock).
	epoch time.Time

	notifyMu sync.Mutex // serializes state changes with their OnStateChange; taken before mu

	mu          sync.Mutex              // protects every field below; never held while calling user code
	idle        ring.Ring[*Resource[T]] // the back is the most recently released
	waiters     waitList[T]
	total       int // idle + acquired + creating + checking
	acquired    int
	creating    int
	checking    int // taken out of idle by the healthcheck, being checked
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

// New validates cfg, applies its defaults and returns a pool. Min resources
// are created in the background; nothing else is created until needed.
func New[T any](cfg Config[T]) (*Pool[T], error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	p := &Pool[T]{cfg: cfg, epoch: time.Now()}
	p.setStrategyLocked(cfg.Strategy)
	p.bgCtx, p.bgCancel = context.WithCancel(context.Background())
	p.mu.Lock()
	p.fillToMinLocked()
	p.mu.Unlock()
	if cfg.HealthcheckInterval > 0 {
		p.goBackground(p.healthLoop)
	}
	return p, nil
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

// Acquire returns an idle resource, a new one, or waits for one in FIFO
// order (a waiter out of time is passed over: see nextWaiterLocked), those
// of work begun first (Config.Begun).
//
// While new resources cannot be made (the factory fails, the backend is at
// its limit), a caller waits for one in use to come back or for the next
// factory call, within its context and Config.AcquireTimeout: it is refused
// only when neither can serve it. It fails with ErrClosed on a closed
// pool; with the factory's error itself when the factory call made for it
// failed and nothing in use or being created can serve it; otherwise with
// an *AcquireError that says why and wraps the last factory error: the
// context's error when ctx ends first (the bare context error if no
// factory call was failing), ErrTimeout when Config.AcquireTimeout passes,
// ErrBackoff when nothing is in use and the next factory call would come
// after its deadline, ErrCircuitOpen while the circuit breaker is
// Inactive.
func (p *Pool[T]) Acquire(ctx context.Context) (*Resource[T], error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	front := false
	for {
		r, owes, waited, err := p.acquire(ctx, front)
		if err != nil {
			return nil, err
		}
		if owes == owesNothing {
			return r, nil // wait told the observers
		}
		if owes == owesExpiry && p.timedExpiry() && p.expired(r) {
			// Parked, then handed to this waiter: parking does not
			// expire resources, so it is done here.
			p.reject(r, true, true)
			front = true
			continue
		}
		if p.cfg.BeforeAcquire == nil || p.callBeforeAcquire(ctx, r) {
			if !waited {
				p.observers.notify(TimingWait, 0)
			}
			return r, nil
		}
		// It failed BeforeAcquire or expired: destroy it and try again,
		// keeping our place at the head of the queue, unless the caller
		// gave up meanwhile (a check bounded by ctx fails then).
		p.reject(r, false, waited)
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		p.reportCheckFailed()
		front = true
	}
}

// TryAcquire returns an idle resource if one is available at once, and never
// waits. When it finds none and the pool has room, it starts creating one in
// the background so that a later call may succeed.
func (p *Pool[T]) TryAcquire() (*Resource[T], bool) {
	for {
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return nil, false
		}
		r, ok := (*Resource[T])(nil), false
		if p.waiters.len() == 0 {
			r, ok = p.idle.PopBack()
			if !ok {
				r = p.stealLocked()
				ok = r != nil
			}
		}
		if !ok {
			if p.waiters.len() == 0 && p.total < p.maxLocked() {
				if now := p.clock(); p.dialAllowedLocked(now) {
					p.startFactoryLocked(nil, now)
				}
			}
			p.mu.Unlock()
			return nil, false
		}
		p.handOutLocked(r)
		p.stats.immediate++
		r.acquiredAt = p.clock()
		expired := p.expiredLocked(r, r.acquiredAt)
		p.mu.Unlock()
		if expired {
			p.reject(r, true, false)
			continue
		}
		if p.cfg.BeforeAcquire == nil || p.callBeforeAcquire(context.Background(), r) {
			p.observers.notify(TimingWait, 0)
			return r, true
		}
		p.reject(r, false, false)
		p.reportCheckFailed()
	}
}

// acquire gets a resource, and says what it owes: the BeforeAcquire check
// when it was idle (fresh from a pre-warm or parked included) and is not
// expired, or came straight from its release to this waiter; the expiry
// check first when it was parked and handed to this waiter. waited
// reports that it came by waiting, which told the observers already.
func (p *Pool[T]) acquire(ctx context.Context, front bool) (r *Resource[T], owes owed, waited bool, err error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, owesNothing, false, ErrClosed
	}
	if front || p.waiters.len() == 0 {
		r, ok := p.idle.PopBack()
		if !ok {
			r = p.stealLocked()
			ok = r != nil
		}
		if ok {
			p.handOutLocked(r)
			p.stats.immediate++
			fresh := r.fresh
			r.fresh = false
			r.acquiredAt = -1
			if p.timedExpiry() {
				now := p.clock()
				r.acquiredAt = now
				if !fresh && p.expiredLocked(r, now) {
					p.mu.Unlock()
					p.reject(r, true, false)
					return p.acquire(ctx, true)
				}
			}
			p.mu.Unlock()
			// A fresh resource (pre-warmed, or refilled to Min) sat
			// idle too: the server may have closed it meanwhile.
			return r, owesCheck, false, nil
		}
	}
	now := p.clock()
	w := p.newWaiter()
	w.ctx, w.start, w.deadline, w.limit = ctx, now, noDeadline, noDeadline
	w.begun = p.cfg.Begun != nil && p.cfg.Begun(ctx)
	if d, ok := ctx.Deadline(); ok {
		w.deadline = d.Sub(p.epoch)
		w.limit = w.deadline
	}
	if p.cfg.AcquireTimeout > 0 {
		w.limit = min(w.limit, now+p.cfg.AcquireTimeout)
	}
	if p.total < p.maxLocked() && p.waiters.len() == 0 && !p.dialAllowedLocked(now) {
		// It would need a new resource, which may not be created now
		// (the factory just failed, or the circuit breaker says no):
		// say so now, unless something can serve it in time.
		if err := p.refusalLocked(w, now); err != nil {
			w.reusable = true
			p.freeWaiterLocked(w)
			p.mu.Unlock()
			return nil, owesNothing, false, err
		}
	}
	if front {
		p.waiters.pushFront(w)
	} else {
		p.waiters.pushBack(w)
	}
	p.stats.waits++
	p.feedWaitersLocked()
	p.armTimeoutsLocked()
	p.startFactoriesLocked()
	p.mu.Unlock()
	r, owes, err = p.wait(ctx, w)
	return r, owes, true, err
}

// timedExpiry reports whether resources expire with time at all.
func (p *Pool[T]) timedExpiry() bool { return p.cfg.MaxLifetime > 0 || p.cfg.MaxIdleTime > 0 }

// clock returns the pool's current time.
func (p *Pool[T]) clock() time.Duration { return time.Since(p.epoch) }

// wait blocks until w is handed a result, ctx ends or the acquire timeout
// passes. w is then done with: a wait that ends without a resource frees
// it under mu, one handed a resource leaves it to the resource's release
// (see Resource.spare). owes says what the resource handed to w owes
// (see result).
func (p *Pool[T]) wait(ctx context.Context, w *waiter[T]) (r *Resource[T], owes owed, err error) {
	var res result[T] // a resource, an error, or the acquire timeout (expireWaiters)
	var giveUp error
	if done := ctx.Done(); done == nil {
		res = <-w.ch // a context that never ends: a plain receive, not a select
	} else {
		select {
		case res = <-w.ch:
		case <-done:
			giveUp = ctx.Err()
		}
	}
	if giveUp == nil {
		if res.err != nil {
			p.mu.Lock()
			waited := p.waitEndedLocked(w)
			p.freeWaiterLocked(w)
			p.mu.Unlock()
			p.observers.notify(TimingWait, waited)
			return nil, owesNothing, res.err
		}
		p.observers.notify(TimingWait, res.waited)
		return res.r, res.owes, nil
	}

	p.mu.Lock()
	if w.queued {
		p.waiters.remove(w)
		p.stats.canceled++
		waited := p.waitEndedLocked(w)
		p.freeWaiterLocked(w)
		if p.backoff.failures > 0 || p.state != Active {
			// New resources could not be made meanwhile: say why.
			giveUp = p.acquireErrorLocked(giveUp)
		}
		p.mu.Unlock()
		p.observers.notify(TimingWait, waited)
		return nil, owesNothing, giveUp
	}
	p.mu.Unlock()
	// We were handed a result at the same instant we gave up. It is in the
	// channel already (results are sent under mu). A resource must not be
	// lost: give it to the next waiter or back to idle. (Its wait was
	// counted when it was handed over.)
	res = <-w.ch
	if res.r != nil {
		p.observers.notify(TimingWait, res.waited)
		p.mu.Lock()
		p.stats.acquires--
		p.stats.canceled++
		res.r.spare = nil // w: not to be freed twice
		p.freeWaiterLocked(w)
		if p.closed {
			p.mu.Unlock()
			res.r.state.Store(stateDestroyed)
			p.destroy(res.r, false)
			return nil, owesNothing, giveUp
		}
		p.acquired--
		p.putLocked(res.r, p.clock(), res.owes)
		p.mu.Unlock()
		return nil, owesNothing, giveUp
	}
	p.mu.Lock()
	waited := p.waitEndedLocked(w)
	p.freeWaiterLocked(w)
	p.mu.Unlock()
	p.observers.notify(TimingWait, waited)
	return nil, owesNothing, res.err
}

// waitEndedLocked counts the wait of w, which ended without a resource, and
// returns its length. A wait that was handed a resource is counted by
// putLocked, which knows the time already.
func (p *Pool[T]) waitEndedLocked(w *waiter[T]) time.Duration {
	d := p.clock() - w.start
	p.stats.waitDuration += d
	p.stats.waitTime.observe(d)
	return d
}

// handOutLocked marks r as acquired.
func (p *Pool[T]) handOutLocked(r *Resource[T]) {
	r.parkedFor = -1
	if r.stolen {
		r.stolen = false
		r.parkedFor = max(time.Duration(p.coarse.Load())-r.idleSince, 0)
	}
	r.state.Store(stateAcquired)
	p.acquired++
	p.stats.acquires++
}

// putLocked gives a healthy resource to the waiter nextWaiterLocked picks
// (the oldest that can still use it), or makes it idle. owes is what the
// waiter owes it before use (see result). A waiter whose
// context ended is told so and passed over: handing it the resource would
// only wake it to hand the resource on again, and under a storm of
// cancellations the oldest waiters are the likeliest to have given up.
func (p *Pool[T]) putLocked(r *Resource[T], now time.Duration, owes owed) {
	for w := p.nextWaiterLocked(now); w != nil; w = p.nextWaiterLocked(now) {
		p.waiters.remove(w)
		if err := w.ctx.Err(); err != nil {
			p.stats.canceled++
			w.ch <- result[T]{err: err} // it waits for this: it left the queue
			continue
		}
		p.handOutLocked(r)
		r.fresh = false
		r.acquiredAt = now
		waited := now - w.start
		p.stats.waitDuration += waited
		p.stats.waitTime.observe(waited)
		r.spare = w // freed by r's release, once w's goroutine is done with it
		w.ctx = nil // nothing reads it once w left the queue: do not keep the caller's context alive with r
		w.ch <- result[T]{r: r, waited: waited, owes: owes}
		return
	}
	r.state.Store(stateIdle)
	p.idle.PushBack(r)
}

// reject destroys a resource taken from idle that had expired or failed
// BeforeAcquire. It was counted as served at once; the Acquire goes on.
//
// waited says r came by waiting: its wait was counted as such, not as an
// acquire served at once.
func (p *Pool[T]) reject(r *Resource[T], expired, waited bool) {
	r.state.Store(stateDestroyed)
	p.mu.Lock()
	if !waited {
		p.stats.immediate--
	}
	p.stats.untimed++ // a hand-out that ended before its use began
	if expired {
		p.stats.expired++
	} else {
		p.stats.releaseRejects++
	}
	p.mu.Unlock()
	p.destroy(r, false)
}

// expired is expiredLocked for a resource the caller holds.
func (p *Pool[T]) expired(r *Resource[T]) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.expiredLocked(r, p.clock())
}

// expiredLocked reports whether r, idle or just taken from idle, is to be
// destroyed rather than used: it outlived its lifetime, or it sat idle
// MaxIdleTime while the pool holds more than Min resources. Idle time never
// takes the pool below Min (as pgxpool keeps its minimum): the refill would
// open another at once, and a pool at rest would churn its minimum every
// MaxIdleTime. The caller holds mu.
func (p *Pool[T]) expiredLocked(r *Resource[T], now time.Duration) bool {
	return p.outlivedLocked(r, now) || p.idleTooLongLocked(r, now) && p.total > p.cfg.Min
}

// outlivedLocked reports whether r outlived its lifetime (MaxLifetime plus
// its jitter): it goes, whatever the minimum.
func (p *Pool[T]) outlivedLocked(r *Resource[T], now time.Duration) bool {
	return r.lifetime > 0 && now-r.created >= r.lifetime
}

// idleTooLongLocked reports whether r has been idle MaxIdleTime; whether
// it goes depends on the minimums (expiredLocked, CheckNow).
func (p *Pool[T]) idleTooLongLocked(r *Resource[T], now time.Duration) bool {
	return p.cfg.MaxIdleTime > 0 && now-r.idleSince >= p.cfg.MaxIdleTime
}

// release implements Resource.Release for an acquired resource.
func (p *Pool[T]) release(r *Resource[T]) {
	ok := true
	if p.cfg.BeforeRelease != nil {
		ok = p.callCheck(p.cfg.BeforeRelease, r.value)
	}
	now := p.clock()
	p.mu.Lock()
	if w := r.spare; w != nil {
		r.spare = nil
		p.freeWaiterLocked(w)
	}
	held, timed := p.useEndedLocked(r, now)
	strategy := p.strategy
	if !p.onRelease {
		strategy = nil
	}
	if !ok || p.closed || r.lifetime > 0 && now-r.created >= r.lifetime || p.aboveShareLocked() {
		switch {
		case !ok:
			p.stats.releaseRejects++
		case p.closed:
		case p.aboveShareLocked():
			p.stats.trimmed++
		default:
			p.stats.expired++
		}
		p.mu.Unlock()
		if timed {
			p.observers.notify(TimingUse, held)
		}
		r.state.Store(stateDestroyed)
		p.destroy(r, false)
		if !ok && strategy != nil {
			p.report(strategy, EventReleaseFailed, errBeforeRelease)
		}
		return
	}
	p.acquired--
	if timed {
		p.holds.observe(held)
	}
	r.idleSince = now
	p.putLocked(r, now, owesCheck)
	p.mu.Unlock()
	if timed {
		p.observers.notify(TimingUse, held)
	}
	if strategy != nil {
		p.report(strategy, EventReleased, nil)
	}
}

// destroyAcquired implements Resource.Destroy: the end of a use, too.
func (p *Pool[T]) destroyAcquired(r *Resource[T]) {
	now := time.Duration(-1) // no clock read for a use that cannot be timed
	if r.acquiredAt >= 0 {
		now = p.clock()
	}
	p.mu.Lock()
	held, timed := p.useEndedLocked(r, now)
	p.mu.Unlock()
	if timed {
		p.observers.notify(TimingUse, held)
	}
	p.destroy(r, false)
}

// useEndedLocked counts the use of r that ends at now, when its start is
// known, and returns its length; timed is false when it is not, and the use
// counts in UntimedUses. The start is known when the pool read the clock as
// it handed r out (to a waiter, by TryAcquire, or from idle when resources
// expire with time) or IdleFor read it since: the pool reads it for no
// other reason, to keep the acquire of an idle resource free of clock reads
// when nothing expires.
func (p *Pool[T]) useEndedLocked(r *Resource[T], now time.Duration) (held time.Duration, timed bool) {
	if r.acquiredAt < 0 {
		p.stats.untimed++
		return 0, false
	}
	held = now - r.acquiredAt
	p.stats.useTime.observe(held)
	return held, true
}

var errBeforeRelease = fmt.Errorf("pool: resource failed BeforeRelease")

// destroy calls the destructor, then frees r's slot: the slot is freed only
// once the resource is really gone, so that Max holds for the backend too.
// idle tells whether r was idle (not counted in acquired).
func (p *Pool[T]) destroy(r *Resource[T], idle bool) {
	p.destruct(r.value)
	p.mu.Lock()
	p.unregister(r)
	p.total--
	if !idle {
		p.acquired--
	}
	p.stats.destroyed++
	p.startFactoriesLocked()
	p.fillToMinLocked() // at once, not at the next healthcheck
	p.mu.Unlock()
}

// startFactoriesLocked starts a factory call for each waiter that has none,
// as far as Max and the growth limit (growthLocked) allow. When no factory
// call may start (back-off, circuit breaker), see noDialLocked.
func (p *Pool[T]) startFactoriesLocked() {
	now := time.Duration(-1) // read once needed: at Max, which a busy pool is at, never
	for !p.closed && p.total < p.maxLocked() {
		w := p.waiters.firstWithoutFactory()
		if w == nil {
			return
		}
		if now < 0 {
			now = p.clock()
		}
		if !p.growthLocked() && !p.failingFastLocked() {
			return // the next one made starts more (create)
		}
		if !p.dialAllowedLocked(now) {
			p.noDialLocked(now)
			return
		}
		p.startFactoryLocked(w, now)
	}
}

// growthStart is how many factory calls a pool with no resource makes at
// once; see growthLocked.
const growthStart = 4

// growthLocked reports whether another factory call may start beside those
// in flight: at most as many as the resources that exist, and at least
// growthStart. A pool grows at most twofold per round of factory calls, as
// TCP's slow start: a cold pool with 20 callers makes 4, then 8, then the
// rest. Several pools that start together against a backend with room for
// fewer connections than they ask for thus fill it about evenly, and each
// finds it full (which is how it learns to share it: see pressure.go), and
// a restarted fleet does not open every connection in one burst. When it
// says no, growthCapped asks the next success to go on.
func (p *Pool[T]) growthLocked() bool {
	if p.creating < max(growthStart, p.total-p.creating) {
		return true
	}
	p.growthCapped = true
	return false
}

// failingFastLocked reports whether a waiter's factory call may start
// beside those in flight although growthLocked says no: factory calls are
// failing, and the last failure was an answer (a refusal, a standby where a
// primary is wanted), not a timeout. While calls fail so, the backend may
// be moving (a failover: the new primary ready at any moment, the old one
// perhaps silent until its connect timeout), and each waiting caller's call
// is one more chance to find it as soon as it answers, as a caller of a
// plain driver dials for itself; the back-off still spaces the starts, and
// Max and the waiters (one call each) bound how many are in flight. Not
// while the last failure was a timeout: the backend said nothing (a black
// hole, every host silent), and a call started now would wait as long.
func (p *Pool[T]) failingFastLocked() bool {
	return p.backoff.failures > 0 && p.creating > 0 && !isTimeout(p.lastFailure)
}

// noDialLocked tells the waiters that need a new resource, when none may
// be created now, what that means for them. While Inactive they wait for
// a resource in use, being created or being checked (an open circuit
// spaces dials, it does not fail callers who can wait for one), and fail
// at once when there is none: the last to go (destroy) tells them. During
// the back-off they wait for a resource in use or for the next factory
// call, which the dials timer starts; those that nothing can serve before
// their deadline fail at once. While Limited or Recovering they wait for a
// resource in use or for the breaker's next trial.
func (p *Pool[T]) noDialLocked(now time.Duration) {
	switch p.state {
	case Inactive:
		if p.acquired+p.creating+p.checking > 0 {
			return // they wait for one of those, within their context
		}
		for w := p.waiters.firstWithoutFactory(); w != nil; w = p.waiters.firstWithoutFactory() {
			p.waiters.remove(w)
			p.stats.circuitRejects++
			w.ch <- result[T]{err: p.acquireErrorLocked(ErrCircuitOpen)} // it waits for this: it left the queue
		}
	case Active:
		if p.creating > 0 && p.refusingLocked(now) {
			return // one factory call at a time; its end starts the next
		}
		if p.acquired+p.creating == 0 {
			for w := p.waiters.head; w != nil; {
				next := w.next
				if !w.creating && w.limit < p.backoff.next {
					p.waiters.remove(w)
					p.stats.backoffRejects++
					w.ch <- result[T]{err: p.acquireErrorLocked(ErrBackoff)} // it waits for this: it left the queue
				}
				w = next
			}
		}
		if p.waiters.firstWithoutFactory() != nil {
			p.armDialsLocked(p.backoff.next, now)
		}
	}
}

// fillToMinLocked starts factory calls until Min resources exist and MinIdle
// are idle or being created. During the back-off, the dials timer tries
// again when it ends; while the breaker allows no factory call, its next
// state does (setState).
func (p *Pool[T]) fillToMinLocked() {
	if p.cfg.Min == 0 && p.cfg.MinIdle == 0 || p.closed {
		return
	}
	now := time.Duration(-1)
	for !p.closed && p.total < p.maxLocked() && p.belowMinLocked() && p.growthLocked() {
		if now < 0 {
			now = p.clock()
		}
		if !p.refillAllowedLocked(now) {
			if p.state == Active {
				p.armDialsLocked(p.backoff.refill, now)
			}
			return
		}
		p.startFactoryLocked(nil, now)
	}
}

// armDialsLocked makes the pool look again, at at, for the factory calls
// the back-off holds back, unless it will look sooner already.
func (p *Pool[T]) armDialsLocked(at, now time.Duration) {
	if p.dialsArmed && p.dialAt <= at {
		return
	}
	p.dialsArmed, p.dialAt = true, at
	if p.dials == nil {
		p.dials = time.AfterFunc(max(at-now, 0), p.dialDue)
		return
	}
	p.dials.Reset(max(at-now, 0))
}

// dialDue starts the factory calls the back-off held back, now that it
// ended.
func (p *Pool[T]) dialDue() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.dialsArmed = false
	if p.closed {
		return
	}
	p.startFactoriesLocked()
	p.fillToMinLocked()
}

// startFactoryLocked reserves a slot and calls the factory in the
// background on behalf of owner (nil: for the pool itself), with the values
// of owner's context. While Recovering, the call is the circuit breaker's
// trial.
func (p *Pool[T]) startFactoryLocked(owner *waiter[T], now time.Duration) {
	var ctx context.Context
	if owner != nil {
		owner.creating = true
		ctx = owner.ctx
	}
	trial := p.state == Recovering
	if trial {
		p.trial = true
	} else {
		p.backoff.started(now, p.cfg.BackoffMin, p.cfg.BackoffMax)
	}
	p.total++
	p.creating++
	p.lastStart = now
	p.goBackground(func() { p.create(owner, ctx, trial) })
}

// create runs the factory with the values of ctx (nil: none). The new
// resource goes to the next waiter in turn (not necessarily owner: FIFO
// wins) or to idle; an error goes to owner if it still waits and nothing
// else can serve it in time.
func (p *Pool[T]) create(owner *waiter[T], ctx context.Context, trial bool) {
	start := p.clock()
	v, err := p.callFactory(ctx)
	now := p.clock()
	p.mu.Lock()
	p.stats.createTime.observe(now - start)
	strategy := p.strategy
	ended := false // this success ends a back-off
	if err == nil {
		ended = p.backoff.failures > 0
		p.backoff.succeeded()
		p.lastFailure = nil
		p.permanent = false
		p.connected = true
	}
	p.mu.Unlock()
	p.observers.notify(TimingCreate, now-start)
	if err != nil {
		p.createFailed(owner, trial, err, now-start)
		return
	}
	// The strategy hears of the success before anyone uses the resource:
	// a caller it serves meets the breaker as the success left it.
	if strategy != nil {
		p.report(strategy, EventCreated, nil)
	}
	p.mu.Lock()
	p.creating--
	if owner != nil {
		owner.creating = false
	}
	if trial {
		p.trial = false
	}
	p.stats.created++
	if p.closed {
		p.mu.Unlock()
		p.destruct(v)
		p.mu.Lock()
		p.total--
		p.stats.destroyed++
		p.mu.Unlock()
		return
	}
	r := &Resource[T]{value: v, pool: p, created: now, idleSince: now, fresh: true, lifetime: p.lifetime(), parkedFor: -1}
	p.register(r)
	p.putLocked(r, now, owesNothing)
	if (ended || p.growthCapped) && p.state == Active {
		// The back-off is over, or the pool may grow further: the other
		// waiters that need a new resource get their factory calls now.
		// (While Recovering, the breaker's next state decides.)
		p.growthCapped = false
		p.startFactoriesLocked()
	}
	p.fillToMinLocked()
	p.mu.Unlock()
}

// createFailed handles a failed factory call. The strategy hears of it
// before the caller does, so that the caller meets the breaker's reaction.
// Who learns of it at once, while the circuit is closed and nothing is in
// use (parked included) or being checked:
//
//   - a permanent failure while the pool refuses (refusingLocked): every
//     caller without a factory call of its own under way, with
//     ErrPermanent;
//   - a timeout (the backend said nothing within the factory's own time
//     limit, which the call took): the same callers, with the factory's
//     error, those that waited at least half that long, through most of
//     this call. A silent backend gives the next call the same silence: a
//     caller that waited for this one would wait as long again for its
//     own (plain database/sql fails it after one such wait). One that came
//     late in the call's life waits for the next, which may find the
//     backend back (the end of a black hole).
//
// Otherwise the caller it was made for goes on waiting if a resource in
// use or being created can still serve it (see servableLocked), or if the
// backend was at its limit (EventAtLimit) and the circuit is not open:
// it waits, within its deadline, for a resource released or the next
// attempt; it gets the factory's error itself if not (at its deadline,
// the AcquireError wraps the last one).
func (p *Pool[T]) createFailed(owner *waiter[T], trial bool, err error, took time.Duration) {
	ev := p.createEvent(err)
	permanent := ev == EventCreateFailed && p.askAbout("Permanent", p.cfg.Permanent, err)
	now := p.clock()
	p.mu.Lock()
	p.creating--
	p.total--
	if trial {
		p.trial = false
	}
	p.stats.createErrors++
	if p.backoff.failures == 0 {
		p.failingSince = now
	}
	p.backoff.failed(p.lastStart, p.cfg.BackoffMin, p.cfg.BackoffMax)
	p.lastFailure = err
	p.permanent = permanent
	if ev == EventAtLimit {
		p.atLimitLocked(now)
	}
	strategy := p.strategy
	p.mu.Unlock()
	if strategy != nil {
		p.report(strategy, ev, err)
	}
	p.mu.Lock()
	if owner != nil {
		owner.creating = false // kept until now: nobody dials for it twice
	}
	if p.state == Active && p.acquired+p.checking == 0 && !p.closed {
		now = p.clock()
		refusing := p.refusingLocked(now)
		if refusing || ev == EventCreateFailed && isTimeout(err) {
			since := noDeadline // refusing: whenever they came
			if !refusing {
				since = now - took/2
			}
			p.failWaitingLocked(err, refusing, owner, since)
			p.startFactoriesLocked()
			p.fillToMinLocked()
			p.mu.Unlock()
			return
		}
	}
	// At the backend's limit the caller waits on, within its deadline,
	// for a resource released or the next attempt (the breaker's trial,
	// or the end of the back-off): a connection may free any moment, and
	// trying again is what cures this error.
	tell := owner != nil && owner.queued && !p.servableLocked() && (ev != EventAtLimit || p.state == Inactive)
	if tell {
		p.waiters.remove(owner)
	}
	p.startFactoriesLocked()
	p.fillToMinLocked()
	p.mu.Unlock()
	if tell {
		owner.ch <- result[T]{err: err} // it waits for this: it left the queue
	}
}

// failWaitingLocked fails the waiters that have no factory call of their
// own under way, after a failed factory call with nothing in use (see
// createFailed): owner, and those that came by since. With ErrPermanent
// when refusing, else with err itself.
func (p *Pool[T]) failWaitingLocked(err error, refusing bool, owner *waiter[T], since time.Duration) {
	for w := p.waiters.head; w != nil; {
		next := w.next
		if !w.creating && (w == owner || w.start <= since) {
			p.waiters.remove(w)
			p.stats.failFast++
			if refusing {
				w.ch <- result[T]{err: p.acquireErrorLocked(ErrPermanent)} // it waits for this: it left the queue
			} else {
				w.ch <- result[T]{err: err}
			}
		}
		w = next
	}
}

// refusingLocked reports whether the pool fails at once the callers that
// only a new resource could serve: the last factory call failed for a
// permanent cause, the circuit is closed (the breaker's own states rule
// otherwise), and the pool never created a resource, or has failed for
// PermanentGrace.
func (p *Pool[T]) refusingLocked(now time.Duration) bool {
	return p.permanent && p.state == Active && (!p.connected || now-p.failingSince >= p.cfg.PermanentGrace)
}

// isTimeout reports a factory error that says the backend did not answer
// in time: a context deadline, or an error that says Timeout (net.Error's
// convention).
func isTimeout(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}

// servableLocked reports whether a caller whose own factory call just
// failed may go on waiting rather than get that call's error: while a resource is
// in use or being created, which can still serve it. With nothing of the
// kind, the attempt made for it was the one that could serve it, and its
// error is the answer (as a caller of a plain driver gets its own dial's
// error): a factory that fails for good (a bad password, a bad setup
// query) then fails each caller once, not for as long as it would wait.
// While Inactive, and without a back-off (NoBackoff: the next call would
// follow at once), it gets the error: the failure that opened the circuit
// is its answer, as a plain driver's caller gets its own dial's error
// (those that wait without a failed call of their own wait for a resource
// in use: see refusalLocked).
func (p *Pool[T]) servableLocked() bool {
	switch p.state {
	case Inactive:
		return false
	case Active:
		if p.cfg.BackoffMin <= 0 {
			return false
		}
	}
	return p.acquired+p.creating > 0
}

// refusalLocked decides for w, a caller that found no idle resource while
// the pool has room for a new one that may not be created now: nil when
// it may wait (for a resource in use or being checked, the factory call
// under way, the next one or the breaker's next trial), or the error to
// refuse it with at once (counted).
func (p *Pool[T]) refusalLocked(w *waiter[T], now time.Duration) error {
	switch p.state {
	case Inactive:
		if p.acquired+p.creating+p.checking > 0 {
			return nil // an open circuit spaces dials; it waits for one in use
		}
		p.stats.circuitRejects++
		return p.acquireErrorLocked(ErrCircuitOpen)
	case Active:
		if p.acquired+p.creating+p.checking == 0 && p.refusingLocked(now) {
			p.stats.failFast++
			return p.acquireErrorLocked(ErrPermanent)
		}
		if p.acquired+p.creating > 0 || p.backoff.next <= w.limit {
			return nil
		}
		p.stats.backoffRejects++
		return p.acquireErrorLocked(ErrBackoff)
	}
	return nil
}

// Close closes the pool: every waiter fails with ErrClosed, idle resources
// are destroyed, resources in use are destroyed when they are released,
// factory calls in flight are cancelled, and Close returns once every
// background goroutine has stopped (a CloseAsync's included). Later
// Acquire calls fail with ErrClosed. Close is idempotent.
func (p *Pool[T]) Close() {
	if idle, first := p.closeBegin(nil); first {
		p.closeEnd(idle)
	}
	p.wg.Wait()
	p.closers.Wait()
}

// CloseAsync is Close without the waiting: when it returns the pool is
// closed (waiters failed, Acquire refused, factory calls cancelled); the
// idle resources are destroyed, and the background goroutines waited for,
// on a goroutine of its own, which a later Close waits for. It returns the
// values of the resources in use as it closed the pool (InUse's), read
// before the waiters it fails wake to contend for the pool's lock; nil
// when the pool was closed already.
func (p *Pool[T]) CloseAsync() (inUse []T) {
	idle, first := p.closeBegin(&inUse)
	if first {
		p.closers.Add(1)
		go func() {
			defer p.closers.Done()
			p.closeEnd(idle)
		}()
	}
	return inUse
}

// closeBegin closes the pool, unless it is closed already (first is false
// then): it fails the waiters, cancels the factory calls in flight, and
// returns the idle resources, which closeEnd destroys. With inUse, it
// stores there the values of the resources in use first.
func (p *Pool[T]) closeBegin(inUse *[]T) (idle []*Resource[T], first bool) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, false
	}
	if inUse != nil {
		*inUse = p.inUseLocked()
	}
	p.closed = true
	p.closing.Store(true)
	if p.timeouts != nil {
		p.timeouts.Stop()
	}
	if p.dials != nil {
		p.dials.Stop()
	}
	if p.trim != nil {
		p.trim.Stop()
	}
	for w := p.waiters.popFront(); w != nil; w = p.waiters.popFront() {
		w.ch <- result[T]{err: ErrClosed}
	}
	p.unparkAllLocked(p.clock()) // into the ring, destroyed by closeEnd
	for r, ok := p.idle.PopBack(); ok; r, ok = p.idle.PopBack() {
		r.state.Store(stateDestroyed)
		idle = append(idle, r)
	}
	p.mu.Unlock()
	p.bgCancel()
	return idle, true
}

// closeEnd destroys the idle resources closeBegin took and waits for the
// background goroutines.
func (p *Pool[T]) closeEnd(idle []*Resource[T]) {
	for _, r := range idle {
		p.destroy(r, true)
	}
	p.wg.Wait()
}

// Count returns the number of resources in existence: idle, in use and being
// created or checked.
func (p *Pool[T]) Count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.total
}

// IdleCount returns the number of idle resources.
func (p *Pool[T]) IdleCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.idleLocked()
}

// ActiveCount returns the number of resources handed out and not yet
// released or destroyed.
func (p *Pool[T]) ActiveCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.acquired - p.parkedLocked()
}

// Stats returns a snapshot of the pool's gauges and counters.
func (p *Pool[T]) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := p.stats
	// Resources taken back with Unpark are acquires served at once, counted
	// on each resource so that Unpark takes no lock.
	parked := 0
	for _, r := range p.all {
		c.reuses += r.reuses.Load()
		if r.state.Load() == stateParked {
			parked++
		}
	}
	c.acquires += c.reuses
	c.immediate += c.reuses
	// A park ended a use, untimed; it ended since by Unpark (a reuse), by
	// the pool (parkEnds), or not yet (see park.go).
	c.untimed += c.reuses + c.parkEnds + int64(parked)
	// Acquires served at once from idle are waits of 0, counted here
	// rather than on their path.
	c.waitTime.Buckets[0] += c.immediate
	c.waitTime.Count += c.immediate
	return Stats{
		Total:               p.total,
		Idle:                p.idle.Len() + parked,
		Active:              p.acquired - parked,
		Creating:            p.creating,
		Waiting:             p.waiters.len(),
		Max:                 p.cfg.Max,
		State:               p.state,
		CreateFailures:      p.backoff.failures,
		LastCreateError:     p.lastFailure,
		Acquires:            c.acquires,
		Waits:               c.waits,
		WaitDuration:        c.waitDuration,
		CanceledAcquires:    c.canceled,
		Timeouts:            c.timeouts,
		CircuitRejects:      c.circuitRejects,
		Created:             c.created,
		CreateErrors:        c.createErrors,
		Destroyed:           c.destroyed,
		Expired:             c.expired,
		HealthcheckFailures: c.hcFailures,
		ReleaseRejects:      c.releaseRejects,
		CallbackPanics:      c.panics,
		Misuses:             p.misuses.Load(),
		BackoffRejects:      c.backoffRejects,
		FailFastRejects:     c.failFast,
		IdleTrimmed:         c.trimmed,
		StateChanges:        c.stateChanges,
		WaitTime:            c.waitTime,
		UseTime:             c.useTime,
		UntimedUses:         c.untimed,
		CreateTime:          c.createTime,
	}
}

func (p *Pool[T]) misuse() { p.misuses.Add(1) }
