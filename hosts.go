// The types of a Connector's hosts with pool_reads=standby: the
// standbys, what their looks saw, the primary's positions over time. Their
// behaviour is in replicas.go (looks, choosing a standby), readwait.go
// (waiting for one) and reads.go (routing an operation).

package pooldriver

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pooldriver/pooldriver/dialects"
)

const (
	// positionEvery spaces the looks at the positions: a task that wrote
	// reads from a standby once a look has seen it replay the write.
	positionEvery = 20 * time.Millisecond
	// positionHistory is how many of the primary's positions are kept
	// to tell a standby's lag: positionEvery × positionHistory (5 s) is
	// the longest lag told; a standby further behind lags "too much".
	positionHistory = 256
	// monitorRetry spaces the connects of a look's connection that fail.
	monitorRetry = 250 * time.Millisecond
	// standbyRetry: a standby whose pool failed to connect serves reads
	// again after this long, when its next connect shows whether it can.
	standbyRetry = time.Second
)

// replicas is a Connector's standbys.
type replicas struct {
	c       *Connector // the primary's
	hosts   []*standby
	maxLag  time.Duration
	rr      atomic.Uint32       // spreads reads over the standbys that can serve them
	prover  dialects.ReadProver // the dialect's proofs of reads; nil: none (the caller's word stands)
	selects bool                // pool_reads=selects: a statement the prover proves a read goes to a standby

	onStandby atomic.Int64 // reads served by a standby
	onPrimary atomic.Int64 // reads that went to the primary: no standby could serve them
	// tokensMalformed counts the requests of MiddlewareWithReadToken
	// whose token was malformed (middleware.go).
	tokensMalformed atomic.Int64

	primary    monitor       // the look at the primary
	kick       chan struct{} // look at the primary now (readwait.go)
	primaryTLI atomic.Uint32 // the timeline the primary writes, where known
	mu         sync.Mutex
	seen       [positionHistory]sample // the primary's positions, a ring
	next       int                     // seen's next slot
	n          int                     // how many of seen are filled

	readWait time.Duration // pool_read_wait
	waits    readWaits

	wg sync.WaitGroup // the loops
}

// sample is a position of the primary and when it was seen: the look
// that saw it started at started and answered at at.
type sample struct {
	started, at time.Time
	pos         dialects.Position
}

// standby is one host's Connector and what the last look saw of it.
type standby struct {
	c       *Connector
	host    string
	mon     monitor
	seen    atomic.Pointer[standbySeen]
	refused func(error) bool // dialects.StandbyRefusals; nil: none retried
	tli     uint32           // the timeline it last received, where known (its look's loop only)
	kick    chan struct{}    // a read waits for its next look: look now (readwait.go)
}

// standbySeen is a standby's last look: nil until the first ends.
type standbySeen struct {
	started  time.Time // when the look began
	at       time.Time
	up       bool // answered, as a standby
	primary  bool // answered, as a primary (or refused the look as one): not a standby now
	replayed dialects.Position
	lag      time.Duration
}

// monitor is a connection of a loop's own to one server, for its
// position.
type monitor struct {
	tmpl   dialects.Template
	creds  func(ctx context.Context) (dialects.Credentials, error)
	mu     sync.Mutex // one look at a time: the loop's, or ReadToken's
	dc     dialects.Conn
	retry  time.Time // no connect before
	failed error     // why: the last connect's or look's error, which the looks until retry return wrapped
}

// readWaits wakes the reads that wait for a look.
type readWaits struct {
	mu   sync.Mutex
	next chan struct{} // closed at the end of the next look; nil: nobody waits
}

// await returns a channel closed at the end of the next look at any
// standby.
func (w *readWaits) await() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.next == nil {
		w.next = make(chan struct{})
	}
	return w.next
}

// looked wakes the reads waiting for a look.
func (w *readWaits) looked() {
	w.mu.Lock()
	if w.next != nil {
		close(w.next)
		w.next = nil
	}
	w.mu.Unlock()
}

// readEnd is where a task's read ran (nil: the primary) and when it
// ended.
type readEnd struct {
	on *standby
	at time.Time
}

// pools returns c and its standbys' Connectors (pool_reads=standby).
func (c *Connector) pools() []*Connector {
	out := []*Connector{c}
	if c.reads != nil {
		for _, h := range c.reads.hosts {
			out = append(out, h.c)
		}
	}
	return out
}
