package pool

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"time"
)

// Default back-off after failed factory calls; see Config.BackoffMin. The
// cap bounds how long after the backend is back callers needing a new
// resource are still told of the back-off: half a second, not more.
const (
	DefaultBackoffMin = 50 * time.Millisecond
	DefaultBackoffMax = 500 * time.Millisecond
)

// ErrBackoff is matched by the error of an Acquire that would have had to
// create a resource while the pool waits out its back-off after failed
// factory calls. The error also wraps the last factory error.
var ErrBackoff = errors.New("pool: not creating: the last attempts failed, waiting before the next")

// backoff spaces factory calls after consecutive failures: after the n-th
// failure in a row, no factory call starts for a random time between half
// and all of min·2^(n-1), capped at max. A success ends it. Its fields are
// guarded by the pool's mu.
type backoff struct {
	failures int           // consecutive failed factory calls
	until    time.Duration // on the pool's clock: no factory call before
	lastErr  error         // the last factory error
}

// failed records a failed factory call at now.
func (b *backoff) failed(now time.Duration, err error, lo, hi time.Duration) {
	b.failures++
	b.lastErr = err
	if lo <= 0 {
		return // disabled
	}
	d := hi
	if shift := b.failures - 1; shift < 30 && lo<<shift < hi {
		d = lo << shift
	}
	d = d/2 + rand.N(d/2+1) // jitter: callers that failed together do not retry together
	b.until = now + d
}

// succeeded ends the back-off.
func (b *backoff) succeeded() { *b = backoff{} }

// active reports whether no factory call may start at now.
func (b *backoff) active(now time.Duration) bool { return b.failures > 0 && now < b.until }

// err is what an Acquire gets while the back-off is active. It is built
// under the pool's lock, by every caller turned away: the message is
// formatted only when asked for.
func (b *backoff) err() error { return &backoffError{failures: b.failures, last: b.lastErr} }

// backoffError is ErrBackoff with the count of failures and the last one.
type backoffError struct {
	failures int
	last     error
}

func (e *backoffError) Error() string {
	return fmt.Sprintf("%v (%d in a row; the last: %v)", ErrBackoff, e.failures, e.last)
}

func (e *backoffError) Is(target error) bool { return target == ErrBackoff }
func (e *backoffError) Unwrap() error        { return e.last }
