package pooldriver

import (
	"time"

	"github.com/pooldriver/pooldriver/pool"
)

// Stats is a snapshot of a Connector's physical connections and counters.
// database/sql's DB.Stats describes its own logical connections, which
// cost nothing and never wait for a server connection; these are the real
// ones. Counters and histograms count since the Connector was made.
type Stats struct {
	MaxConns int // pool_max_conns
	MinConns int // pool_min_conns
	MinIdle  int // pool_min_idle_conns
	Total    int // physical connections open or being opened
	Idle     int // idle in the pool
	Active   int // in use: held by a statement, *sql.Conn, *sql.Tx or open rows, or kept for a task
	Opening  int // being opened (counted in Total)
	Waiting  int // operations waiting for a physical connection

	Acquires         int64         // physical connections handed out
	Waits            int64         // acquires that had to wait
	WaitDuration     time.Duration // total time spent waiting: by acquires served, timed out, cancelled or refused
	AcquireTimeouts  int64         // waits that ended with ErrAcquireTimeout
	CanceledAcquires int64         // waits that ended because the statement's context ended
	CircuitRejects   int64         // acquires refused at once with ErrCircuitOpen
	BackoffRejects   int64         // acquires refused with ErrBackoff while connecting failed
	FailFastRejects  int64         // acquires failed at once, nothing in use to wait for, after a permanent connect error (ErrServerRefused) or a timed-out connect
	BreakerState     pool.State    // the circuit breaker's state now: closed, open, half-open or limited (see Connector.Breaker)
	BreakerChanges   int64         // changes of the circuit breaker's state
	Created          int64         // physical connections opened
	ConnectErrors    int64         // failed attempts to open one
	// Connecting now: failed attempts in a row (0 after a success) and the
	// last one's error (nil after a success), the cause an operator reads
	// first: "server full" and "server down" tell apart here.
	ConnectFailuresInRow int
	LastConnectError     error
	Destroyed            int64 // physical connections closed, for any reason
	Expired              int64 // of which: outlived pool_max_conn_lifetime or pool_max_conn_idle_time
	IdleTrimmed          int64 // of which: given back early while the server was at its connection limit: idle ones, and, above the pool's share of a full server (share.go), released ones
	HealthFailures       int64 // of which: the background health check's ping failed
	IdleCheckFailures    int64 // of which: found broken (closed by the server, no answer to a ping) when taken from idle
	AutoRollbacks        int64 // transactions pooldriver rolled back: at task end, or left open when a hold ended
	TaskEndRollbacks     int64 // of which: at a task's end (logged at DEBUG; the others at WARN)
	SessionResets        int64 // sessions reset before reuse: changed by a statement, or a session-mode task's
	CarriedResets        int64 // of which: carried, sent in the same write as the next statement run on the connection, where no other connection was to be had (docs/design.md, "The carried reset")
	SeparateResets       int64 // of which: run in round trips of their own: off the callers' path, or a carried one that the next statement could not carry or that waited idle too long; the rest of SessionResets are carried ones still waiting, or lost with their connection
	Panics               int64 // panics recovered while connecting or closing (a WithCredentials function, a driver) or in a Strategy
	Misuses              int64 // a physical connection released twice, or a hold changed in a way its state does not allow: a pooldriver bug if ever not 0
	Leaks                int64 // connections kept out of the pool past the leak detection threshold, each counted once

	// Durations in the fixed buckets of pool.HistogramBounds (1µs to 1m).
	// Connector.Observe is told of each one as it is measured.
	WaitTime   pool.Histogram // how long each acquire waited (0: a connection was idle), failed waits included
	UseTime    pool.Histogram // how long each physical connection was held before it went back to the pool, for the holds that were timed (see UntimedUses)
	CreateTime pool.Histogram // how long each attempt to open a physical connection took, failed ones included

	// UntimedUses counts the holds that ended without being timed in
	// UseTime: those that parked their connection for their logical
	// conn's next hold or took it back from parking (see docs/pool.md
	// "Parking": parking reads no clock), and connections refused by the
	// idle check as they were handed out. UseTime.Count + UntimedUses =
	// Acquires - Active, every hold that ended, whatever else is
	// configured: an observer (otelpool) does not turn parking off. What
	// does (leak detection, an AfterRelease or BeforeAcquire hook, the
	// server found at its connection limit lately) makes every hold
	// timed: UntimedUses then grows by the idle check's refusals
	// (IdleCheckFailures) only.
	UntimedUses int64

	// With pool_reads=standby (see ReadOnly): the reads a standby served,
	// and those that went to the primary because none could. The
	// standbys' own pools are in Connector.Standbys.
	ReadsOnStandby int64 // reads a standby's pool served (or failed, for the statement's own error)
	ReadsOnPrimary int64
	// ReadTokensMalformed counts the requests of MiddlewareWithReadToken
	// whose token was not one ReadToken writes (a client's or a proxy's
	// mangling, or another value under the header's or cookie's name),
	// among those that ran a statement on this Connector (with
	// pool_reads=standby). Each such request read as one without a
	// token; the Connector logs them at WARN, as a misuse.
	ReadTokensMalformed int64
}

// StandbyStats is one standby's state (Connector.Standbys).
type StandbyStats struct {
	Host     string        // host:port
	Up       bool          // it answered the last look, as a standby
	Replayed string        // the log position it had replayed then ("" before it answered)
	Lag      time.Duration // how long the primary has had a position it has not replayed
	Pool     Stats         // its pool of connections
}

// Stats returns a snapshot of the Connector's state. It never contains
// credentials. A Connector whose configuration failed (see Err) reports
// zeros. For a *sql.DB, however it was opened, ConnectorOf(db) finds the
// Connector to call Stats on; it finds none when db is not pooldriver's,
// or is behind a wrapper that does not expose pooldriver's driver
// (XSAM/otelsql: call Stats on the Connector given to it).
//
// Read the pool here, not in db.Stats(): database/sql counts its own
// logical connections, which cost nothing and never wait, so its
// WaitCount and WaitDuration stay 0 while statements wait for a server
// connection, and a dashboard built on them (client_golang's
// collectors.NewDBStatsCollector) shows zeros; promcollector and otelpool
// export these Stats. db.SetMaxOpenConns at or below pool_max_conns makes
// statements queue in database/sql first, where these Stats cannot see
// them: leave it unset (Open does).
func (c *Connector) Stats() Stats {
	if c.pool == nil {
		return Stats{}
	}
	p := c.pool.Stats()
	s := Stats{
		MaxConns:             p.Max,
		MinConns:             c.cfg.MinConns,
		MinIdle:              c.cfg.MinIdleConns,
		Total:                p.Total,
		Idle:                 p.Idle,
		Active:               p.Active,
		Opening:              p.Creating,
		Waiting:              p.Waiting,
		Acquires:             p.Acquires,
		Waits:                p.Waits,
		WaitDuration:         p.WaitDuration,
		AcquireTimeouts:      p.Timeouts,
		CanceledAcquires:     p.CanceledAcquires,
		CircuitRejects:       p.CircuitRejects,
		BackoffRejects:       p.BackoffRejects,
		FailFastRejects:      p.FailFastRejects,
		BreakerState:         p.State,
		BreakerChanges:       p.StateChanges,
		Created:              p.Created,
		ConnectErrors:        p.CreateErrors,
		ConnectFailuresInRow: p.CreateFailures,
		LastConnectError:     p.LastCreateError,
		Destroyed:            p.Destroyed,
		Expired:              p.Expired,
		IdleTrimmed:          p.IdleTrimmed,
		HealthFailures:       p.HealthcheckFailures,
		IdleCheckFailures:    p.ReleaseRejects, // the Connector sets BeforeAcquire only
		Panics:               p.CallbackPanics,
		Misuses:              p.Misuses + c.stats.misuses.Load(),
		Leaks:                c.stats.leaks.Load(),
		WaitTime:             p.WaitTime,
		UseTime:              p.UseTime,
		UntimedUses:          p.UntimedUses,
		CreateTime:           p.CreateTime,
	}
	s.AutoRollbacks, s.TaskEndRollbacks, s.SessionResets, s.CarriedResets, s.SeparateResets = c.env.Counts()
	if r := c.reads; r != nil {
		s.ReadsOnStandby, s.ReadsOnPrimary = r.onStandby.Load(), r.onPrimary.Load()
		s.ReadTokensMalformed = r.tokensMalformed.Load()
	}
	return s
}

// Standbys returns, with pool_reads=standby, the hosts of the DSN that
// are standbys, in the DSN's order, each as the last look at it saw it,
// with its pool's Stats; nil otherwise. A host whose last look found it a
// primary (it answered, or refused a standby's connection, as one: the
// primary's own host, or a standby promoted) is left out: it serves reads
// as the primary, and is listed again once a look finds it a standby. A
// host that did not answer its last look, or has not been looked at yet,
// is listed, not Up: it may be a standby that is down. Where every host
// is a primary, the list is empty, not nil.
func (c *Connector) Standbys() []StandbyStats {
	if c.reads == nil {
		return nil
	}
	out := make([]StandbyStats, 0, len(c.reads.hosts))
	for _, h := range c.reads.hosts {
		seen := h.seen.Load()
		if seen != nil && seen.primary {
			continue
		}
		st := StandbyStats{Host: h.host, Pool: h.c.Stats()}
		if seen != nil {
			st.Up, st.Lag = seen.up, seen.lag
			if seen.up {
				st.Replayed = seen.replayed.String()
			}
		}
		out = append(out, st)
	}
	return out
}

// Observe calls f with each duration the pool measures (waits, uses and
// creates of physical connections, as in Stats' histograms) until the
// returned stop function is called. f runs on the path of every statement,
// concurrently: it must be quick, and must neither block nor panic. The
// exporters (otelpool) use it; most code wants Stats.
func (c *Connector) Observe(f pool.Observer) (stop func()) {
	if c.pool == nil {
		return func() {}
	}
	return c.pool.Observe(f)
}
