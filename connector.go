package pooldriver

import (
	"database/sql/driver"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pooldriver/pooldriver/dialects"
	"github.com/pooldriver/pooldriver/internal/phys"
	"github.com/pooldriver/pooldriver/pool"
)

// Connector is a database/sql driver.Connector that pools physical
// connections. Use it with sql.OpenDB; database/sql's DB.Close closes it.
type Connector struct {
	tmpl dialects.Template
	err  error  // a configuration error, reported by Connect (see New)
	cfg  Config // as given, validated; tmpl above is its template targeted (pool_target) and adapted to the pooler (settle)
	pool *pool.Pool[*phys.Conn]
	log  *slog.Logger // nil: nothing is logged
	// logLimit holds back repeated lines of log (nil: nothing is logged);
	// Close writes what it holds.
	logLimit *limitedHandler
	name     string // PoolName, once the Connector is made

	leaks   *leakDetector // nil unless leak detection is on
	dials   dialRun       // the failed connects in a row (log.go)
	closing atomic.Bool
	closers sync.WaitGroup // a Shutdown's cuts and close (closeInBackground)
	// gated sends each acquire the slow way (acquireGated): a Tracer
	// traces it, or a Shutdown began (drainMark: 1 + the number of the
	// last task begun before it, see taskSeq). tasks counts the live tasks that ran a
	// statement here (see binding).
	gated     atomic.Bool
	drainMark atomic.Uint64
	tasks     atomic.Int64
	// closed is closed when the Connector closes: the share's and the
	// catalog's loops end then.
	closed  chan struct{}
	atLimit func(error) bool // the dialect's ConnLimitDetector, or nil
	share   serverShare      // the pool's share of a full server (share.go)

	// catalogs reads a due catalog at once (catalogwatch.go).
	catalogs catalogWatch
	// reads: the standbys that serve reads (pool_reads=standby,
	// replicas.go); nil: every statement runs on the primary.
	reads *replicas

	env   phys.Env // what its physical connections need of it
	stats struct {
		leaks   atomic.Int64
		misuses atomic.Int64 // hold events step refused (plan.go)
	}
}

var (
	_ driver.Connector = (*Connector)(nil)
	_ fmt.Stringer     = (*Connector)(nil)
)

// String returns the DSN with the password redacted.
func (c *Connector) String() string {
	if c.tmpl == nil {
		return "pooldriver(invalid: " + c.err.Error() + ")"
	}
	return c.tmpl.String()
}

// Config returns a copy of the Config c uses: the DSN's settings with the
// options applied (a CircuitBreaker left nil is the default one). A
// Connector whose configuration failed (see Err) returns nil.
func (c *Connector) Config() *Config {
	if c.tmpl == nil {
		return nil
	}
	return c.cfg.Copy()
}

// Err returns the configuration error New deferred, or nil: check it
// right after New to validate the DSN and options at once.
func (c *Connector) Err() error { return c.err }

// Breaker returns the circuit breaker of the Connector's pool, to drive it by
// hand (with WithCircuitBreaker(pool.Manual), or the default strategy moves
// it too): while it is open (pool.Inactive) every statement that needs a
// new physical connection fails at once with ErrCircuitOpen; an idle one
// is still used.
// It is nil for a Connector whose configuration failed (see Err).
func (c *Connector) Breaker() pool.Breaker {
	if c.pool == nil {
		return nil
	}
	return c.pool
}

// scheme returns the DSN's scheme ("postgres", "mysql", "odbc"), or "" for
// a wrapped connector.
func (c *Connector) scheme() string {
	s, _, ok := strings.Cut(c.tmpl.String(), "://")
	if !ok || strings.ContainsAny(s, " /") {
		return ""
	}
	return s
}

// dialRun is a Connector's run of failed connects: how many in a row,
// and when the last failed (a standby's pool serves no reads for a while
// after one: replicas.serves).
type dialRun struct {
	failures atomic.Int64
	lastAt   atomic.Int64 // Unix nanoseconds
}

// failed counts a failed connect and returns how many in a row.
func (d *dialRun) failed() int64 {
	d.lastAt.Store(time.Now().UnixNano())
	return d.failures.Add(1)
}

// failedWithin reports whether the last connect failed, less than d ago.
func (d *dialRun) failedWithin(now time.Time, within time.Duration) bool {
	return d.failures.Load() > 0 && now.UnixNano()-d.lastAt.Load() < int64(within)
}

// catalogWatch is a Connector's loop over its catalog.
type catalogWatch struct {
	once sync.Once
	done chan struct{} // closed when the loop ends; nil until it starts
	mu   sync.Mutex    // protects done
	// ready is closed once newConnector has set the Connector's pool (or
	// failed to make one): the pool's first connections, which may start
	// the loop, are made inside pool.New, before it returns.
	ready chan struct{}
}

// admits reports whether the task numbered seq (taskSeq) may take a
// connection from c: c does not shut down, or the task began before it
// did.
func (c *Connector) admits(seq uint64) bool {
	m := c.drainMark.Load()
	return m == 0 || seq < m
}
