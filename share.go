package pooldriver

import (
	"context"
	"log/slog"
	"math"
	"math/rand/v2"
	"time"

	"github.com/pooldriver/pooldriver/dialects"
)

// Replicas that share a full server. Each replica of a service has its own
// pool, and none sees the others: at a server whose limit the first
// replicas' pools fill, a replica started later is refused every
// connection, and the first ones, whose connections are all in use, never
// dial, never hear of it and never give one back. So the server is the
// meeting point: now and then (shareInterval) a pool that holds
// connections asks its server how full it is (dialects.LoadReader). When
// the server is full and someone else is being refused (MariaDB counts its
// refusals for its own limit; PostgreSQL does not say, nor MariaDB for a
// user's limit, so a full server that two pools or more hold is taken for
// one that refuses),
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
// apart as a rolling deploy starts replicas, do not look in the same
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
// is counted (PostgreSQL; MariaDB at a user's limit): it cannot tell a
// replica waiting for its first connection from nobody; a replica is seen
// once it holds one. PgBouncer
// in front of the server is the answer past a handful of replicas
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
	if load.Connected < load.Limit {
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
	// from this one's size, which overcounts them when it is small (a
	// replica still getting in would cut itself down).
	return min(share, max(lo, fair, total-total/4, 1))
}

// refusedOthers reports whether the server refused someone else since the
// last look: its count of refusals grew by more than mine, this pool's own
// refusals since then. prev and prevLimit are the count and the limit of
// the last look (prev -1: none, or not counted). A look whose limit is
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
	return load.Limit > 0 && load.Connected >= load.Limit && load.Connected > int64(total)
}

// shareTick is the wait before a pool's next look: shareInterval, a
// quarter more or less at random, so that pools started together (or a
// whole second apart, as a rolling deploy starts replicas) do not look in
// the same instant, each finding the room the others just gave back
// before anyone refused could take it.
func shareTick() time.Duration {
	return shareInterval*3/4 + rand.N(shareInterval/2)
}

// shareLoop asks for a look at the server about every shareInterval
// (shareTick) while the pool holds connections (physEnv.lookDue: the next
// connection let go takes it, see look). It ends when the Connector closes, or when its
// connections cannot say how full the server is.
func (c *Connector) shareLoop() {
	defer close(c.shareDone)
	tick := time.NewTimer(shareTick())
	defer tick.Stop()
	for {
		select {
		case <-c.shareStop:
			return
		case <-tick.C:
			tick.Reset(shareTick())
		}
		c.shareMu.Lock()
		off, share := c.shareOff, c.share
		c.shareMu.Unlock()
		if off {
			return
		}
		if st := c.pool.Stats(); st.Total >= 2 || share < c.cfg.MaxConns {
			c.env.lookDue.Store(true)
		}
	}
}

// look asks the server through pc, which nobody else can reach (a
// cleanup, see physConn.settle), how full it is, and sets the pool's share
// from the answer. It reports false when pc failed to say: pc is lost.
func (c *Connector) look(pc *physConn) bool {
	lr, ok := pc.dc.(dialects.LoadReader)
	if !ok {
		c.shareMu.Lock()
		c.shareOff = true
		c.shareMu.Unlock()
		return true
	}
	ctx, cancel := context.WithTimeout(context.Background(), min(shareInterval, c.cfg.CleanupTimeout))
	load, err := lr.ServerLoad(ctx)
	cancel()
	c.shareMu.Lock()
	defer c.shareMu.Unlock()
	if err != nil {
		pc.lose(err, false)
		if c.shareFailed++; c.shareFailed == 3 {
			c.shareOff = true
			c.logAt(slog.LevelDebug, "the server does not say how full it is: replicas will not share it", err)
		}
		return false
	}
	c.shareFailed = 0
	mine := c.limitRefusals.Swap(0)
	others := refusedOthers(c.shareRefused, c.shareLimit, load, mine)
	c.shareRefused, c.shareLimit = load.Refused, load.Limit
	total := c.pool.Stats().Total
	next := nextShare(c.share, total, c.cfg.MinConns, c.cfg.MaxConns, load, others, c.shareFull)
	c.shareFull = load.Limit > 0 && load.Connected >= load.Limit
	if sharedFull(load, total) {
		c.pool.Pressure()
	}
	if next == c.share {
		return true
	}
	if next < c.share {
		c.logAt(slog.LevelInfo, "server full: giving connections back to the others", nil,
			"share", next, "was", c.share, "server_limit", load.Limit, "server_connected", load.Connected)
	}
	c.share = next
	c.pool.SetShare(next)
	return true
}
