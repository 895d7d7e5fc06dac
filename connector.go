package pooldriver

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/pooldriver/pooldriver/dialects"
	"github.com/pooldriver/pooldriver/internal/phys"
	"github.com/pooldriver/pooldriver/pool"
)

// Connector is a database/sql driver.Connector that pools physical
// connections. Use it with sql.OpenDB; database/sql's DB.Close closes it.
type Connector struct {
	tmpl dialects.Template
	err  error  // a configuration error, reported by Connect (see New)
	cfg  Config // as given, validated; tmpl above is its template adapted to the pooler (behindPooler)
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

	env       phys.Env      // what its physical connections need of it
	physStats phys.Stats    // counted by its physical connections (env.Stats)
	cleanups  phys.Cleanups // its physical connections' rollbacks and resets (env.Cleanups)
	stats     struct {
		leaks atomic.Int64
		// Opened while Reset ran and closed at once by the factory,
		// which then opens another: the pool counts one create and no
		// destroy for the two, so Stats adds these to both.
		openedStale atomic.Int64
		misuses     atomic.Int64 // hold events step refused (plan.go)
	}
}

var (
	_ driver.Connector = (*Connector)(nil)
	_ fmt.Stringer     = (*Connector)(nil)
	_ phys.Owner       = connOwner{}
)

// New returns a Connector for dsn. It never fails: a bad DSN or option is
// reported by the first Connect, that is by the first statement, which
// suits sql.OpenDB(pooldriver.New(dsn)). To validate at once, check Err:
//
//	c := pooldriver.New(dsn, opts...)
//	if err := c.Err(); err != nil {
//		return err
//	}
//
// Nothing is opened until needed, except pool_min_conns connections
// opened in the background.
func New(dsn string, opts ...Option) *Connector {
	cfg, err := ParseConfig(dsn)
	if err != nil {
		return &Connector{err: err}
	}
	c, err := newConnector(*cfg, opts)
	if err != nil {
		return &Connector{err: err}
	}
	return c
}

// NewConnectorWithConfig returns a Connector for cfg, which ParseConfig
// made, after checking the settings together; later changes to cfg do not
// change the Connector. An error names the setting that is wrong.
func NewConnectorWithConfig(cfg *Config) (*Connector, error) {
	if cfg == nil {
		return nil, errors.New("pooldriver: NewConnectorWithConfig(nil): a Config from ParseConfig is required")
	}
	return newConnector(*cfg, nil)
}

// Wrap pools the connections of any database/sql driver's connector. The
// connections of pgx's stdlib and go-sql-driver/mysql get their dialect's
// tracking (import the dialect package: dialects/postgres, dialects/mysql):
// the transaction the server reports, session changes, a real session
// reset. Any other driver's are tracked from the text of their statements
// (a raw BEGIN, COMMIT, a SET, a lock, ...), conservatively: a connection
// left in a raw transaction or with a changed session is replaced, not
// reused. WithCredentials cannot be used: the wrapped connector logs in by
// itself.
func Wrap(c driver.Connector, opts ...Option) *Connector {
	if c == nil {
		return &Connector{err: errors.New("pooldriver: Wrap(nil): a driver.Connector is required")}
	}
	conn, err := newConnector(defaultConfig(dialects.Wrap(c)), opts)
	if err == nil && conn.cfg.Credentials != nil {
		_ = conn.Close() // the error to report is the one below
		err = errors.New("pooldriver: WithCredentials cannot be used with Wrap: the wrapped connector logs in by itself")
	}
	if err != nil {
		return &Connector{err: err}
	}
	return conn
}

// Open returns a *sql.DB over New(dsn, opts...), or New's error (see Err),
// with database/sql's own pool of (cheap, logical) connections set so it
// does not churn them: as many idle ones kept as there are physical
// connections, none expired.
func Open(dsn string, opts ...Option) (*sql.DB, error) {
	c := New(dsn, opts...)
	if err := c.Err(); err != nil {
		return nil, err
	}
	db := sql.OpenDB(c)
	db.SetMaxIdleConns(max(2, c.cfg.MaxConns))
	db.SetConnMaxLifetime(0)
	db.SetConnMaxIdleTime(0)
	return db, nil
}

// connectErrors returns what the dialect of t can tell of a connect's
// error: that the server is at its connection limit, that retrying is
// useless; nil where it cannot.
func connectErrors(t dialects.Template) (atLimit, permanent func(error) bool) {
	if d, ok := t.(dialects.ConnLimitDetector); ok {
		atLimit = d.AtConnLimit
	}
	if d, ok := t.(dialects.PermanentErrorDetector); ok {
		permanent = d.PermanentConnectError
	}
	return atLimit, permanent
}

// newConnector opens a Connector for s with opts applied over it.
func newConnector(s Config, opts []Option) (*Connector, error) {
	for _, o := range opts {
		if o == nil {
			return nil, errors.New("pooldriver: nil Option")
		}
		if err := o(&s); err != nil {
			return nil, err
		}
	}
	s.deriveJitter()
	if err := s.validate(); err != nil {
		return nil, err
	}
	t, err := behindPooler(s.tmpl, s.ServerPooling)
	if err != nil {
		return nil, err
	}
	if err := s.checkHooks(t); err != nil {
		return nil, err
	}
	breaker := s.CircuitBreaker
	if breaker == nil {
		st, err := pool.NewThresholdStrategy(defaultBreakerFailures, defaultBreakerCoolDown)
		if err != nil {
			return nil, fmt.Errorf("pooldriver: %w", err)
		}
		breaker = st
	}
	atLimit, permanent := connectErrors(t)
	if s.standbyPool {
		// A full standby serves no reads (the primary does): its refusal
		// fails the acquire at once rather than waiting for a connection
		// to come free, and its share is not looked at.
		atLimit = nil
	}
	c := &Connector{tmpl: t, cfg: s, atLimit: atLimit}
	c.name = c.poolName()
	c.log = c.newLogger()
	if s.LeakDetectionThreshold > 0 {
		c.leaks = newLeakDetector(c.log, &c.stats.leaks, s.LeakDetectionThreshold)
	}
	c.env = phys.Env{
		CleanupTimeout: s.CleanupTimeout,
		ResetAlways:    s.ResetAlways,
		TrustFuncs:     s.TrustFunctions,
		Cleanups:       &c.cleanups,
		Parkable:       c.leaks == nil && s.AfterRelease == nil && s.BeforeAcquire == nil,
		AfterRelease:   s.AfterRelease != nil,
		CarryResets:    s.AfterConnect == nil && s.AfterRelease == nil && s.BeforeAcquire == nil,
		Leaks:          c.leaks != nil,
		Stats:          &c.physStats,
		Releases:       releaseTracer(s.Tracer, c.name),
		Log:            c.log,
		Owner:          connOwner{c},
	}
	// Before the pool: its first connections may start the catalog loop,
	// which ends when closed is closed.
	c.closed = make(chan struct{})
	c.catalogs.ready = make(chan struct{})
	p, err := pool.New(pool.Config[*phys.Conn]{
		Factory:             c.open,
		Destructor:          c.closePhys,
		Healthcheck:         c.healthcheck,
		BeforeAcquire:       c.checkIdle,
		Begun:               taskBegun,
		Min:                 s.MinConns,
		MinIdle:             s.MinIdleConns,
		Max:                 s.MaxConns,
		AcquireTimeout:      s.AcquireTimeout,
		HealthcheckInterval: s.HealthCheckPeriod,
		HealthcheckTimeout:  s.CleanupTimeout,
		MaxLifetime:         s.MaxConnLifetime,
		MaxLifetimeJitter:   s.MaxConnLifetimeJitter,
		MaxIdleTime:         s.MaxConnIdleTime,
		Strategy:            breaker,
		AtLimit:             atLimit,
		Permanent:           permanent,
		OnStateChange:       c.logBreaker,
		NoBackoff:           s.standbyPool, // its caller's read goes to the primary at once
	})
	if err != nil {
		close(c.catalogs.ready)
		if c.leaks != nil {
			c.leaks.stop()
		}
		return nil, fmt.Errorf("pooldriver: %w", err)
	}
	c.pool = p
	close(c.catalogs.ready)
	c.gated.Store(c.cfg.Tracer != nil)
	if !s.standbyPool {
		c.share.start(p, s.MinConns, s.MaxConns, &c.env.LookDue, c.logAt, c.closed)
	}
	if s.Reads != ReadsPrimary {
		if c.reads, err = newReplicas(c, t, s); err != nil {
			c.closeNow()
			return nil, err
		}
		c.reads.start()
	}
	c.logAt(slog.LevelInfo, "pool opened", nil, "config", &c.cfg)
	return c, nil
}

// behindPooler lets t's dialect adapt to the pooler pool_server_pooling
// names (or check for one), if it knows how.
func behindPooler(t dialects.Template, p dialects.ServerPooling) (dialects.Template, error) {
	if pt, ok := t.(dialects.PoolerTemplate); ok {
		return pt.BehindPooler(p)
	}
	if p == dialects.ServerPoolingSession || p == dialects.ServerPoolingTransaction {
		return nil, fmt.Errorf("pooldriver: pool_server_pooling=%s: this dialect does not support a pooler in front of the server (only PostgreSQL's does)", p)
	}
	return t, nil
}

// open is the pool's factory: a new physical connection, logged in with the
// template's credentials or those WithCredentials returns now, and prepared
// by the AfterConnect hook. One opened while Reset ran is opened again. ctx
// has the values of the acquire that needed it (a trace's span), or none
// when the pool opens one by itself, and not its cancellation.
func (c *Connector) open(ctx context.Context) (*phys.Conn, error) {
	if c.cfg.Tracer != nil {
		return c.openTraced(ctx)
	}
	return c.connect(ctx)
}

// connect is open, untraced.
func (c *Connector) connect(ctx context.Context) (*phys.Conn, error) {
	if c.cfg.ConnectTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.cfg.ConnectTimeout)
		defer cancel()
	}
	for {
		gen := c.env.Gen.Load()
		pc, err := c.dial(ctx)
		if err != nil {
			if c.cfg.ConnectTimeout > 0 && ctx.Err() != nil && errors.Is(err, context.DeadlineExceeded) {
				// Not the caller's deadline (a connect has none of its
				// own) but the attempt's: say so, as the pool tells the
				// waiters of a timed-out attempt.
				err = fmt.Errorf("pooldriver: connecting timed out after %v (pool_connect_timeout): %w", c.cfg.ConnectTimeout, err)
			}
			c.connectFailed(err)
			return nil, err
		}
		c.connected()
		pc.Gen = gen
		if !pc.Stale() {
			if c.leaks != nil {
				c.leaks.add(pc)
			}
			return pc, nil
		}
		pc.CloseReason = phys.CloseResetAll
		c.closePhys(pc)
		c.stats.openedStale.Add(1)
	}
}

// dial opens one physical connection.
func (c *Connector) dial(ctx context.Context) (*phys.Conn, error) {
	secret := c.tmpl.Credentials().Password
	creds, err := c.credentials(ctx)
	if err != nil {
		return nil, err
	}
	dc, err := c.openConfigured(ctx, creds)
	if err == nil {
		if err = c.prepareSession(ctx, dc); err != nil {
			_ = dc.Close()
		}
	}
	if err != nil {
		// The driver's own error, as the plain driver returns it (callers
		// compare it with ==), unless it quotes a password; the log line
		// of the failure names the pool.
		return nil, redact(redact(err, creds.Password), secret)
	}
	c.logDebug("connection opened", "dsn", c.tmpl.String(), "user", creds.User)
	c.watchCatalog(dc)
	return phys.NewConn(&c.env, dc), nil
}

// closePhys is the pool's destructor.
func (c *Connector) closePhys(pc *phys.Conn) {
	pc.Closed.Store(true)
	if c.leaks != nil {
		c.leaks.remove(pc)
	}
	c.beforeClose(pc)
	pc.CloseStmts()
	c.logClosed(pc, pc.DC.Close())
}

// healthcheck is the pool's check of an idle connection.
func (c *Connector) healthcheck(ctx context.Context, pc *phys.Conn) error {
	if pc.Stale() {
		pc.CloseReason = phys.CloseResetAll
		return phys.ErrStale
	}
	if err := pc.DC.Ping(ctx); err != nil {
		pc.CloseReason = phys.ClosePing
		return err
	}
	if r, ok := pc.DC.(dialects.CatalogRefresher); ok {
		if err := r.RefreshCatalog(ctx); err != nil {
			pc.CloseReason = phys.ClosePing
			return err
		}
	}
	return nil // Reset during the check: the pool destroys pc after it (Pool.CloseIdle)
}

// connOwner is a Connector as its physical connections' owner (phys.Owner):
// a type of its own, so that what they ask of it is not the Connector's
// API. Pointer-shaped, it is held in the interface as the *Connector is.
type connOwner struct{ c *Connector }

// PrepareSession runs the AfterConnect hook (Connector.prepareSession).
func (o connOwner) PrepareSession(ctx context.Context, dc dialects.Conn) error {
	return o.c.prepareSession(ctx, dc)
}

// AfterRelease is the AfterRelease hook's verdict (Connector.afterRelease).
func (o connOwner) AfterRelease(pc *phys.Conn) bool { return o.c.afterRelease(pc) }

// Returned tells the leak detection that pc is going back to the pool (or
// being closed).
func (o connOwner) Returned(pc *phys.Conn) { o.c.leaks.returned(pc) }

// Look asks the server through pc, which nobody else can reach (a
// cleanup, see phys.Conn.settle), how full it is, and sets the pool's share
// from the answer (serverShare.look). It reports false when pc failed to
// say: pc is lost.
func (o connOwner) Look(pc *phys.Conn) bool { return o.c.share.look(pc) }

// checkIdle is the pool's BeforeAcquire: see phys.Conn.CheckIdle.
func (c *Connector) checkIdle(ctx context.Context, r *pool.Resource[*phys.Conn]) bool {
	return r.Value().CheckIdle(ctx, r)
}

// acquire takes a physical connection from the pool for a hold. Without a
// Tracer, and before Shutdown, this is one check more than take.
func (c *Connector) acquire(ctx context.Context) (*phys.Conn, error) {
	if c.gated.Load() {
		return c.acquireGated(ctx)
	}
	return c.take(ctx)
}

// acquireGated is acquire once Shutdown began (which refuses new work) or
// with a Tracer.
func (c *Connector) acquireGated(ctx context.Context) (*phys.Conn, error) {
	if c.drainMark.Load() != 0 {
		if t := ctxTaskFrom(ctx); t == nil || !c.admits(t.number()) {
			return nil, ErrShuttingDown
		}
	}
	if c.cfg.Tracer != nil {
		return c.acquireTraced(ctx)
	}
	return c.take(ctx)
}

// take is acquire, untraced.
func (c *Connector) take(ctx context.Context) (*phys.Conn, error) {
	r, err := c.pool.Acquire(ctx)
	if err != nil {
		return nil, c.acquireError(err)
	}
	pc := r.Value()
	if pc.Res == nil {
		pc.Res = r // the pool keeps one handle per connection for its life
	}
	if c.cfg.BeforeAcquire != nil {
		if err := c.beforeAcquire(ctx, pc); err != nil {
			pc.CloseReason = phys.CloseHook
			r.Destroy()
			return nil, err
		}
	}
	if c.leaks != nil {
		c.leaks.taken(pc)
	}
	return pc, nil
}

// Close closes every idle physical connection at once and every other one as
// it is released; later statements fail with ErrClosed. It returns once
// the pool's background work has stopped, a Shutdown's cuts included.
// database/sql's DB.Close calls it.
func (c *Connector) Close() error {
	c.closers.Wait() // a Shutdown's cuts and close, which call closeNow
	c.closeNow()
	return nil
}

// closeNow is Close, but for the wait for a Shutdown's background work.
func (c *Connector) closeNow() {
	if c.pool != nil {
		if c.closing.CompareAndSwap(false, true) {
			close(c.closed)
			c.share.wait()
			c.stopCatalog()
			if c.reads != nil {
				c.reads.close()
			}
		}
		c.pool.Close()
		c.cleanups.Close() // those under way hand their connections back: destroyed now
	}
	if c.leaks != nil {
		c.leaks.stop()
	}
	if c.logLimit != nil {
		c.logLimit.lim.close()
	}
}

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

// acquireError turns the pool's errors into pooldriver's. A connect made
// for the caller that failed comes back as the driver returned it.
func (c *Connector) acquireError(err error) error {
	var ae *pool.AcquireError
	switch {
	case errors.Is(err, pool.ErrClosed):
		return ErrClosed
	case !errors.As(err, &ae) && (err == context.Canceled || err == context.DeadlineExceeded): //nolint:errorlint // the pool returns the context's own error
		// The caller's context ended the wait while connecting was fine:
		// say what it waited for, as for the pool's own refusals.
		st := c.pool.Stats()
		ae = &pool.AcquireError{Reason: err, State: st.State, Total: st.Total, InUse: st.Active, Waiting: st.Waiting, Max: st.Max}
	case !errors.As(err, &ae):
		return err
	case ae.Reason == pool.ErrPermanent:
		return &refusedError{ae: ae, scheme: c.scheme()}
	case ae.Reason == pool.ErrTimeout:
		st := c.pool.Stats()
		e := &AcquireTimeoutError{Timeout: c.cfg.AcquireTimeout, Total: ae.Total, InUse: ae.InUse, Idle: st.Idle, Waiting: ae.Waiting, Max: ae.Max, Cause: ae.Cause}
		e.LeakDetectionOff = c.leaks == nil
		c.logWarn("timed out waiting for a connection", ae.Cause, "timeout", e.Timeout, "total", e.Total, "in_use", e.InUse, "idle", e.Idle, "waiting", e.Waiting, "max", e.Max)
		return e
	}
	return &waitError{ae: ae, leakHint: c.leaks == nil && ae.InUse >= ae.Max}
}
