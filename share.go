package pooldriver

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pooldriver/pooldriver/dialects"
	"github.com/pooldriver/pooldriver/internal/phys"
	"github.com/pooldriver/pooldriver/pool"
)

// Instances that share a full server. Each instance of a service has its own
// pool, and none sees the others: at a server whose limit the first
// instances' pools fill, an instance started later is refused every
// connection, and the first ones, whose connections are all in use, never
// dial, never hear of it and never give one back. So the server is the
// meeting point: now and then (shareInterval) a pool that holds
// connections asks its server how full it is (dialects.LoadReader). When
// the server is full and someone else is being refused (MariaDB counts
// its failed logins; PostgreSQL does not say, nor MariaDB for a user's
// limit, so a full server that two pools or more hold is taken for one
// that refuses),
// a pool that holds more than a fair share gives the surplus back
// (pool.SetShare): it creates none above the share, and closes connections
// as they are released until it is down to it. The share is the limit
// divided among the pools connected plus one more (the one waiting to get
// in), the number of pools estimated from how many connections this one
// holds; a pool gives back a quarter of what it holds at most at each
// look, so one of three or fewer never does. Once the server has room
// again, the share grows back by an eighth at each look, to MaxConns; but
// not at the first look with room after one that found it full: that room
// is most likely what the pools just gave back, on its way to whoever
// waits to get in (a refused pool tries again within its breaker's
// cool-down, a quarter of a second). Room left a whole look interval is
// room nobody waits for. Without that pause the pools that gave back took
// it again at their next look, all at once (their looks fall in the same
// instant of each second), and under load a refused pool's turn came too
// rarely to get any. The looks are a quarter of an interval early or late
// at random (shareTick), so that pools started together, or a second
// apart as a rolling deploy starts instances, do not look in the same
// instant.
//
// Connections that have sat idle for 5 s (dialects.IdleFor) are no
// pool's: a client holds them that does not use them now (an admin tool, a
// service with room to spare). They count for no pool, and no share is
// made of them: a pool alone beside them keeps what it has. A pool's own
// connections at a full server are never idle that long: a look that finds
// the server full, and someone else connected to it, puts the pool under
// pressure (sharedFull, pool.Pressure), and it gives back what sits idle
// for a second. Without it, on a starved machine, where a pool's callers
// run fewer at a time than it holds connections, those at the back of its
// idle ring (reused most recently released first) sat idle for seconds,
// counted as no pool's, and the pools that held them looked alone.
//
// A pool alone at a server it fills keeps its connections where no refusal
// is counted (PostgreSQL; MariaDB at a user's limit): it cannot tell an
// instance waiting for its first connection from nobody; an instance is seen
// once it holds one. PgBouncer
// in front of the server is the answer past a handful of instances
// (docs/operating.md, PgBouncer).

// shareInterval is how often a pool that holds connections asks its server
// how full it is.
const shareInterval = time.Second

// nextShare is the pool's share after a look at the server: share is the
// one before, total the connections the pool holds, lo and hi its MinConns
// and MaxConns; load is what the server says, and othersRefused whether it
// refused someone else's connection since the last look (where it counts
// refusals), and wasFull whether the look before found it full. Pure.
func nextShare(share, total, lo, hi int, load dialects.ServerLoad, othersRefused, wasFull bool) int {
	if load.Limit <= 0 {
		return hi
	}
	if !atLimit(load) {
		if wasFull {
			return share // room just given back: the others' turn first
		}
		return min(hi, share+max(1, share/8))
	}
	if load.Refused >= 0 && !othersRefused || total <= 0 {
		return share // full, and nobody else waits to get in
	}
	// Idle connections are no pool's; this pool's own are its own, idle
	// or not.
	busy := max(int64(total), load.Connected-load.Idle)
	pools := int64(math.Round(float64(busy) / float64(total)))
	if pools < 2 && load.Refused < 0 {
		return share // alone, as far as PostgreSQL lets us see
	}
	fair := int((load.Limit - (load.Connected - busy)) / (max(pools, 1) + 1))
	if total <= fair {
		return share
	}
	// A quarter at most at each look: the number of pools is estimated
	// from this one's size, which overcounts them when it is small (an
	// instance still getting in would cut itself down).
	return min(share, max(lo, fair, total-total/4, 1))
}

// refusedOthers reports whether the server refused someone else since the
// last look: its count of refusals grew by more than mine, this pool's
// own failed connects since then. prev and prevLimit are the count and the
// limit of the last look (prev -1: none, or not counted). A look whose limit is
// another (max_connections changed, or the user's limit binds where the
// server's did) compares with none. Pure.
func refusedOthers(prev, prevLimit int64, load dialects.ServerLoad, mine int64) bool {
	return load.Refused >= 0 && prev >= 0 && load.Limit == prevLimit && load.Refused-prev > mine
}

// sharedFull reports whether the server is full and someone besides this
// pool, which holds total connections, is connected to it. Then what sits
// idle in the pool is no use to it and may be to someone refused: the pool
// is put under pressure (pool.Pressure) and gives it back after a second
// idle, as a pool refused itself does. So no pool's connection stays idle
// for dialects.IdleFor there, and ServerLoad.Idle counts other clients'. A
// pool that fills the server alone keeps its idle ones (and parks). Pure.
func sharedFull(load dialects.ServerLoad, total int) bool {
	return atLimit(load) && load.Connected > int64(total)
}

// timedOut reports an error that says time ran out: a context deadline,
// or an error that says Timeout (net.Error's convention).
func timedOut(err error) bool {
	var t interface{ Timeout() bool }
	return errors.Is(err, context.DeadlineExceeded) || errors.As(err, &t) && t.Timeout()
}

// atLimit reports whether the server is at its limit or within a
// sixteenth of it: at a full server the connections given back and taken
// again, and the attempts it refuses, leave a few slots free at any
// instant, and a look that lands then must not take them for room (in
// containers, 7 looks of 10 found 1 to 4 of 60 free while late instances
// starved, and the pools that held the most grew their shares back). Pure.
func atLimit(load dialects.ServerLoad) bool {
	return load.Limit > 0 && load.Connected >= load.Limit-load.Limit/16
}

// shareTick is the wait before a pool's next look: shareInterval, a
// quarter more or less at random, so that pools started together (or a
// whole second apart, as a rolling deploy starts instances) do not look in
// the same instant, each finding the room the others just gave back
// before anyone refused could take it.
func shareTick() time.Duration {
	return shareInterval*3/4 + rand.N(shareInterval/2)
}

// serverShare is what a pool knows of its share of a full server: its
// own failed connects since the last look, what the last look read, and
// the share it set. Its loop asks for a look (lookDue) and the next connection let
// go makes it (phys.Conn.settle, fateLook).
type serverShare struct {
	pool    *pool.Pool[*phys.Conn]
	lo, hi  int         // the pool's MinConns and MaxConns
	lookDue atomic.Bool // the loop sets it; the next connection let go clears it and looks (phys.Owner.LookDue)
	logAt   func(level slog.Level, msg string, err error, args ...any)
	done    chan struct{} // closed when the loop ends

	// refusals counts this pool's connects the server refused for its
	// limit since the last look.
	refusals atomic.Int64

	mu      sync.Mutex // protects the fields below (look, loop)
	share   int        // the pool's share: MaxConns unless the server is full
	refused int64      // the server's count of refusals at the last look, or -1
	limit   int64      // the limit the last look read
	full    bool       // the last look found the server full
	failed  int        // looks that failed in a row: at 3 the loop ends
	off     bool       // the server cannot say: no more looks
}

// start starts the loop for pool p, whose MinConns and MaxConns are lo
// and hi, until stop is closed (wait waits for its end).
func (s *serverShare) start(p *pool.Pool[*phys.Conn], lo, hi int,
	logAt func(level slog.Level, msg string, err error, args ...any), stop <-chan struct{},
) {
	s.pool, s.lo, s.hi, s.logAt = p, lo, hi, logAt
	s.share, s.refused = hi, -1
	s.done = make(chan struct{})
	go s.loop(stop)
}

// wait waits for the loop to end, once its stop is closed; at once where
// it never started (pool.New failed).
func (s *serverShare) wait() {
	if s.done != nil {
		<-s.done
	}
}

// loop asks for a look at the server about every shareInterval
// (shareTick) while the pool holds connections. It ends when stop is
// closed, or when the pool's connections cannot say how full the server
// is.
func (s *serverShare) loop(stop <-chan struct{}) {
	defer close(s.done)
	tick := time.NewTimer(shareTick())
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
			tick.Reset(shareTick())
		}
		s.mu.Lock()
		off, share := s.off, s.share
		s.mu.Unlock()
		if off {
			return
		}
		if st := s.pool.Stats(); st.Total >= 2 || share < s.hi {
			s.lookDue.Store(true)
		}
	}
}

// look asks the server through pc, which nobody else can reach (a
// cleanup, see phys.Conn.settle), how full it is, and sets the pool's share
// from the answer. It reports false when pc failed to say: pc is lost.
func (s *serverShare) look(pc *phys.Conn, timeout time.Duration) bool {
	lr, ok := pc.DC.(dialects.LoadReader)
	if !ok {
		s.mu.Lock()
		s.off = true
		s.mu.Unlock()
		return true
	}
	ctx, cancel := context.WithTimeout(context.Background(), min(shareInterval, timeout))
	load, err := lr.ServerLoad(ctx)
	cancel()
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		pc.Lose(err, false)
		// Three failed looks in a row end the looks: the server cannot
		// say. A look that ran out of time says nothing of that (a loaded
		// machine, a busy server), and ending the looks for it left the
		// first instances of a rolling deploy holding all they had while
		// the later ones starved.
		if !timedOut(err) {
			if s.failed++; s.failed == 3 {
				s.off = true
				s.logAt(slog.LevelDebug, "the server does not say how full it is: instances will not share it", err)
			}
		}
		return false
	}
	s.failed = 0
	mine := s.refusals.Swap(0)
	others := refusedOthers(s.refused, s.limit, load, mine)
	s.refused, s.limit = load.Refused, load.Limit
	total := s.pool.Stats().Total
	next := nextShare(s.share, total, s.lo, s.hi, load, others, s.full)
	s.full = atLimit(load)
	if sharedFull(load, total) {
		s.pool.Pressure()
	}
	if next == s.share {
		return true
	}
	if next < s.share {
		s.logAt(slog.LevelInfo, "server full: giving connections back to the others", nil,
			"share", next, "was", s.share, "server_limit", load.Limit, "server_connected", load.Connected)
	}
	s.share = next
	s.pool.SetShare(next)
	return true
}
