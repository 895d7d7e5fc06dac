package pooldriver

import (
	"time"

	"github.com/pooldriver/pooldriver/pool"
)

// Stats is a snapshot of a Connector's physical connections and counters.
type Stats struct {
	MaxConns int // pool_max_conns
	Total    int // physical connections open or being opened
	Idle     int // idle in the pool
	Active   int // in use: held by a statement, *sql.Conn, *sql.Tx or open rows, or kept for a task
	Waiting  int // operations waiting for a physical connection

	Acquires        int64         // physical connections handed out
	Waits           int64         // acquires that had to wait
	WaitDuration    time.Duration // total time spent waiting
	AcquireTimeouts int64         // waits that ended with ErrAcquireTimeout
	Created         int64         // physical connections opened
	ConnectErrors   int64         // failed attempts to open one
	Destroyed       int64         // physical connections closed
	HealthFailures  int64         // closed because a ping failed
	BackoffRejects  int64         // statements failed at once with ErrBackoff
	CircuitRejects  int64         // statements failed at once with ErrCircuitOpen
	BreakerState    pool.State    // the circuit breaker's state now
	BreakerChanges  int64         // changes of the circuit breaker's state
	AutoRollbacks   int64         // transactions pooldriver rolled back: at task end, or left open when a hold ended
	SessionResets   int64         // sessions reset before reuse: changed by a statement, or a session-mode task's
	Leaks           int64         // connections kept out of the pool past the leak detection threshold, each counted once
}

// Stats returns a snapshot of the Connector's state. It never contains
// credentials.
func (c *Connector) Stats() Stats {
	if c.pool == nil {
		return Stats{}
	}
	p := c.pool.Stats()
	return Stats{
		MaxConns:        p.Max,
		Total:           p.Total,
		Idle:            p.Idle,
		Active:          p.Active,
		Waiting:         p.Waiting,
		Acquires:        p.Acquires,
		Waits:           p.Waits,
		WaitDuration:    p.WaitDuration,
		AcquireTimeouts: p.Timeouts,
		Created:         p.Created,
		ConnectErrors:   p.CreateErrors,
		Destroyed:       p.Destroyed,
		HealthFailures:  p.HealthcheckFailures,
		BackoffRejects:  p.BackoffRejects,
		CircuitRejects:  p.CircuitRejects,
		BreakerState:    p.State,
		BreakerChanges:  p.StateChanges,
		AutoRollbacks:   c.stats.autoRollbacks.Load(),
		SessionResets:   c.stats.sessionResets.Load(),
		Leaks:           c.stats.leaks.Load(),
	}
}
