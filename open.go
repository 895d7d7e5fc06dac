// Making a Connector (New, Wrap, NewConnectorWithConfig, Open) and closing
// it. The Connector's type is in connector.go, what its physical
// connections need of it in dial.go.

package pooldriver

import (
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"log/slog"

	"github.com/pooldriver/pooldriver/dialects"
	"github.com/pooldriver/pooldriver/internal/phys"
	"github.com/pooldriver/pooldriver/pool"
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
	t, err := s.settle()
	if err != nil {
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
	atLimit, permanent := dialects.ConnectErrors(t)
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
	// Before the pool: its first connections may start the catalog loop,
	// which ends when closed is closed.
	c.closed = make(chan struct{})
	c.catalogs.ready = make(chan struct{})
	pcfg := pool.Config[*phys.Conn]{
		Factory:             c.open,
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
	}
	// The pool's check of an idle connection, its healthcheck and its
	// destructor are the physical connections' (phys.Env.Init).
	c.env.Init(connOwner{c}, &pcfg, c.beforeAcquire, c.destroying)
	p, err := pool.New(pcfg)
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
		c.share.start(p, s.MinConns, s.MaxConns, c.logAt, c.closed)
	}
	if s.Reads != ReadsPrimary {
		if err := c.openStandbys(t, s); err != nil {
			c.closeNow()
			return nil, err
		}
		c.reads.start()
	}
	c.logAt(slog.LevelInfo, "pool opened", nil, "config", &c.cfg)
	return c, nil
}

// openStandbys opens a Connector per standby of c, whose template is t and
// whose Config is s, and the replicas that send reads to them.
func (c *Connector) openStandbys(t dialects.Template, s Config) error {
	subs, err := standbyConfigs(t, s, c.scheme())
	if err != nil {
		return err
	}
	c.reads = newReplicas(c, t, s)
	for _, sub := range subs {
		sc, err := newConnector(sub, nil)
		if err != nil {
			return err // closeNow closes those opened
		}
		c.reads.add(sc)
	}
	return nil
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
				for _, h := range c.reads.hosts {
					h.c.closeNow()
				}
			}
		}
		c.pool.Close()
		c.env.Close() // the cleanups under way hand their connections back: destroyed now
	}
	if c.leaks != nil {
		c.leaks.stop()
	}
	if c.logLimit != nil {
		c.logLimit.lim.close()
	}
}
