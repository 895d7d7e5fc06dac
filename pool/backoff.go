package pool

import (
	"errors"
	"math/rand/v2"
	"time"
)

// Default spacing of factory calls after failures; see Config.BackoffMin.
// The cap bounds how long after the backend is back a waiting caller
// still waits for the next attempt: tens of milliseconds, as a caller of
// a plain driver that dials for itself would.
const (
	DefaultBackoffMin = 10 * time.Millisecond
	DefaultBackoffMax = 25 * time.Millisecond
)

// refillBackoffMax caps the spacing of the factory calls nobody waits for
// (the refill to Min and MinIdle): an idle service does not keep dialling
// a backend that is down every few milliseconds.
const refillBackoffMax = 2 * time.Second

// ErrBackoff is matched by the error of an Acquire that could not be served
// while creating resources failed: nothing was in use to wait for, and the
// next attempt to create one would have come after the caller's deadline.
// The error is an *AcquireError that wraps the last factory error.
var ErrBackoff = errors.New("pool: creating resources is failing, and the next attempt comes too late")

// backoff spaces factory calls after consecutive failures. After the n-th
// failure in a row, a factory call for a waiting caller starts no earlier
// than a random time between half and all of min·2^(n-1), capped at max,
// after the newest call started; one for the pool's own refill, capped at
// refillBackoffMax instead. Each call started meanwhile pushes both times
// on by as much, so that calls that hang (a black-holed network) do not
// pile up: the back-off spaces the calls, not the callers. The spacing
// runs from starts, not from failures: calls in flight that fail one after
// another (a failover, each attempt refused by a standby) would otherwise
// each push the next start on, and no new attempt would start until the
// last of them had failed. A success ends it. Its fields are guarded by
// the pool's mu.
type backoff struct {
	failures int           // consecutive failed factory calls
	jitter   float64       // in [0.5, 1], drawn at each failure
	next     time.Duration // on the pool's clock: no call for a waiter before
	refill   time.Duration // no call for the refill before
}

// failed records a failed factory call; from is when the newest call
// started (this one, or one started since).
func (b *backoff) failed(from, lo, hi time.Duration) {
	b.failures++
	if lo <= 0 {
		return // disabled
	}
	b.jitter = 0.5 + rand.Float64()/2 // callers that failed together do not retry together
	b.spaceFrom(from, lo, hi)
}

// started records a factory call started at now while failing.
func (b *backoff) started(now, lo, hi time.Duration) {
	if b.failures > 0 && lo > 0 {
		b.spaceFrom(now, lo, hi)
	}
}

func (b *backoff) spaceFrom(now, lo, hi time.Duration) {
	limit := max(hi, refillBackoffMax)
	d := lo
	for i := 1; i < b.failures && d < limit; i++ {
		d *= 2
	}
	d = min(d, limit)
	b.refill = now + time.Duration(b.jitter*float64(d))
	b.next = now + time.Duration(b.jitter*float64(min(d, hi)))
}

// succeeded ends the back-off.
func (b *backoff) succeeded() { *b = backoff{} }

// active reports whether no factory call for a waiter may start at now.
func (b *backoff) active(now time.Duration) bool { return b.failures > 0 && now < b.next }

// refillActive reports whether no factory call for the refill may start
// at now.
func (b *backoff) refillActive(now time.Duration) bool { return b.failures > 0 && now < b.refill }
