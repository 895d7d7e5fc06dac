package pooldriver

import (
	"context"
	"time"

	"github.com/pooldriver/pooldriver/dialects"
)

// A task's read after its own write needs a standby that has replayed the
// write, which a look shows at the earliest some 20 ms later
// (positionEvery), while a standby close behind replays it within a
// millisecond or two. So a read whose position no standby has been seen
// to replay waits, up to pool_read_wait, for a standby that is up, within
// its lag bound and at most pool_read_wait behind the primary: it kicks
// that standby's look, which runs at once, and is woken at the end of
// every look to try again. A standby further behind (one that replays
// late on purpose) is not waited for: the primary serves the read at
// once.
//
// ReadToken waits the same way for a look at the server a task's last
// read ran on, begun after the read ended: the token must cover what the
// read saw, which that look tells. Every waiter is woken by one look: the
// callers share the looks' connections, not a round trip each.

// wait waits up to pool_read_wait, and while ctx lasts, for a standby
// close behind (catchingUp) to be seen at after, and returns it; nil
// where none is close behind, or none got there in time.
func (r *replicas) wait(ctx context.Context, after dialects.Position, last *standby, maxLag time.Duration) *standby {
	now := time.Now()
	var timer *time.Timer
	for {
		kicked := false
		woken := r.waits.await()
		for _, h := range r.hosts {
			if r.catchingUp(h, maxLag, now) {
				kicked = true
				select {
				case h.kick <- struct{}{}:
				default: // a kick is pending: its look comes
				}
			}
		}
		if !kicked {
			return nil
		}
		if timer == nil {
			timer = time.NewTimer(r.readWait)
			defer timer.Stop()
		}
		select {
		case <-woken:
		case <-timer.C:
			return nil
		case <-ctx.Done():
			return nil
		}
		now = time.Now()
		if h := r.pick(after, last, maxLag, now); h != nil {
			return h
		}
	}
}

// seenSince waits, while ctx lasts and for at most seenWithin, for a look
// begun after e's read ended at the server it ran on, kicking that
// server's look (which then runs at once), and returns what the look
// told (sawSince); false where none told in time, or the standby no
// longer answers as one.
func (r *replicas) seenSince(ctx context.Context, e *readEnd) (dialects.Position, bool) {
	kick := r.kick
	if e.on != nil {
		kick = e.on.kick
	}
	timer := time.NewTimer(seenWithin)
	defer timer.Stop()
	for {
		woken := r.waits.await()
		if p, ok := r.sawSince(e); ok {
			return p, true
		}
		if e.on != nil {
			if s := e.on.seen.Load(); s != nil && !s.up && s.at.After(e.at) {
				return 0, false // down, or a primary, since the read
			}
		}
		select {
		case kick <- struct{}{}:
		default: // a kick is pending: its look comes
		}
		select {
		case <-woken:
		case <-timer.C:
			return 0, false
		case <-ctx.Done():
			return 0, false
		}
	}
}

// seenWithin bounds seenSince: a look that fails is tried again after
// monitorRetry; a second is four tries.
const seenWithin = time.Second

// catchingUp reports whether h serves reads (near, and its pool connects)
// and lags the primary by at most pool_read_wait: a read that must see
// more than it was last seen at may wait for its next look.
func (r *replicas) catchingUp(h *standby, maxLag time.Duration, now time.Time) bool {
	s := h.seen.Load()
	return r.near(s, maxLag, 1, now) && s.lag <= r.readWait && !h.c.dials.failedWithin(now, standbyRetry)
}

// sawSince returns how far e's server was seen to be by a look begun
// after e's read ended: a standby's replayed position, the primary's
// flushed one; false where no look has told yet (or the standby no
// longer answers as one).
func (r *replicas) sawSince(e *readEnd) (dialects.Position, bool) {
	if e.on != nil {
		s := e.on.seen.Load()
		if s == nil || !s.up || !s.started.After(e.at) {
			return 0, false
		}
		return s.replayed, true
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.n == 0 {
		return 0, false
	}
	s := r.seen[(r.next-1+positionHistory)%positionHistory]
	if !s.started.After(e.at) {
		return 0, false
	}
	return s.pos, true
}
