package pooldriver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"time"

	"github.com/pooldriver/pooldriver/dialects"
	"github.com/pooldriver/pooldriver/pool"
)

// Config is a Connector's whole configuration: the pool's settings, its
// hooks, credentials, logger, circuit breaker and tracer, as fields that
// can be read, changed and printed. It is the way to configure a
// Connector: [ParseConfig] makes one from a DSN, every setting filled in
// (the DSN's pool_* parameters, else the defaults); [NewConnectorWithConfig]
// opens a Connector with it, and [Connector.Config] reads back the one a
// Connector uses. The settings carry pgxpool's names where pgxpool has the
// setting. A Config must be made by ParseConfig (it holds the DSN's
// credential template). What derives from other settings (the lifetime
// jitter, a tenth of the lifetime unless given) is worked out again when
// the Connector is made, from the final fields, so that a setting means
// the same whether a DSN, an option or a field set it.
//
// [New], [Open] and [Wrap] are layers over it: the DSN's parameters, then
// the options ([Option]), each of which sets one field and is checked as
// the field is. String and LogValue print it without the password.
type Config struct {
	MaxConns               int           // pool_max_conns: at most this many physical connections, ≥ 1
	MinConns               int           // pool_min_conns: kept open, opened in the background
	MinIdleConns           int           // pool_min_idle_conns: kept idle, as far as MaxConns allows
	AcquireTimeout         time.Duration // pool_acquire_timeout: bounds a wait for a connection; 0: only the caller's context
	ConnectTimeout         time.Duration // pool_connect_timeout: bounds each attempt to open one; 0: only the driver's own
	HealthCheckPeriod      time.Duration // pool_health_check_period: how often idle ones are checked; 0: never
	MaxConnLifetime        time.Duration // pool_max_conn_lifetime: close one this old once idle; 0: never
	MaxConnLifetimeJitter  time.Duration // pool_max_conn_lifetime_jitter: up to this much more, per connection; default a tenth of the final MaxConnLifetime
	MaxConnIdleTime        time.Duration // pool_max_conn_idle_time: close one idle this long; 0: never
	LeakDetectionThreshold time.Duration // pool_leak_detection_threshold: report one held longer; 0: off
	CleanupTimeout         time.Duration // bounds each rollback and reset pooldriver runs by itself; > 0
	Mode                   Mode          // pool_mode: the default mode of tasks (WithTask)
	// pool_server_pooling: the pooler in front of the server, if any
	// (PostgreSQL only: PgBouncer's session or transaction pooling).
	ServerPooling dialects.ServerPooling
	// pool_target: which of the DSN's servers a new connection may go
	// to; dialects.TargetPrimary: the first that takes writes
	Target      dialects.Target
	ResetAlways bool // pool_reset_always: reset every connection at the end of every hold
	// pool_trust_functions: a call of a function or procedure the dialect
	// does not know counts as a session change only for what its text or
	// the server shows; by default it counts as one (default-deny).
	TrustFunctions bool
	Name           string // pool_name: the pool's name in logs, metrics and spans; "": host:port/database (Connector.PoolName)
	// pool_reads: where reads may go; ReadsStandby sends them to the
	// standbys of a multi-host PostgreSQL DSN (see ReadOnly, reads.go).
	Reads Reads
	// pool_max_replica_lag: a standby further behind the primary than
	// this serves no reads; > 0.
	MaxReplicaLag time.Duration
	// pool_read_wait: how long a read whose position no standby has
	// replayed yet waits for one that is close behind, before the
	// primary serves it; 0: it does not wait.
	ReadWait time.Duration

	// The hooks on a physical connection's life: see WithBeforeConnect,
	// WithAfterConnect, WithBeforeAcquire, WithAfterRelease and
	// WithBeforeClose. nil: none.
	BeforeConnect func(ctx context.Context, config any) error
	AfterConnect  func(ctx context.Context, raw any) error
	BeforeAcquire func(ctx context.Context, raw any) error
	AfterRelease  func(raw any) bool
	BeforeClose   func(raw any)

	// Credentials, when set, gives the user and password of every new
	// physical connection in place of the DSN's (WithCredentials).
	Credentials func(ctx context.Context) (user, password string, err error)
	// Logger receives what the Connector does on its own (WithLogger);
	// nil: nothing is logged.
	Logger *slog.Logger
	// CircuitBreaker drives the pool's breaker (WithCircuitBreaker); nil:
	// pool.NewThresholdStrategy(0, 250*time.Millisecond).
	CircuitBreaker pool.Strategy
	// Tracer hears of the pool's acquires and connects, for traces
	// (WithTracer, otelpool.WithTracing); nil: nothing is traced.
	Tracer Tracer

	tmpl dialects.Template // the DSN's credential template; nil: not made by ParseConfig
	// The jitter was given (DSN, option). Otherwise it is derived when the
	// Connector is made, from the final MaxConnLifetime, unless the field
	// no longer holds derivedJitter, the value ParseConfig derived from
	// the DSN's lifetime (a user set it).
	jitterGiven   bool
	derivedJitter time.Duration
	// standbyPool: the Config of a standby's pool (replicas.go).
	standbyPool bool
}

// Default settings, the same as the DSN's pool_* parameters' defaults.
const (
	defaultMaxConns          = 10
	defaultMinConns          = 0
	defaultAcquireTimeout    = 30 * time.Second
	defaultHealthCheckPeriod = 30 * time.Second
	defaultMaxConnLifetime   = time.Hour
	defaultMaxConnIdleTime   = 30 * time.Minute
	defaultCleanupTimeout    = 5 * time.Second
	defaultConnectTimeout    = 10 * time.Second
	defaultMaxReplicaLag     = time.Second
	defaultReadWait          = 5 * time.Millisecond

	// The default circuit breaker (see WithCircuitBreaker) acts only at
	// the server's connection limit (defaultBreakerFailures 0: it never
	// opens on failed connection attempts), and tries a new connection
	// defaultBreakerCoolDown after it stopped opening them.
	defaultBreakerFailures = 0
	defaultBreakerCoolDown = 250 * time.Millisecond
)

// checkCounts reports a minimum of connections above the maximum.
func (c *Config) checkCounts() error {
	switch {
	case c.MinConns > c.MaxConns:
		return fmt.Errorf("pooldriver: pool_min_conns/WithMinConns (%d) is greater than pool_max_conns/WithMaxConns (%d) (Config.MinConns, Config.MaxConns)", c.MinConns, c.MaxConns)
	case c.MinIdleConns > c.MaxConns:
		return fmt.Errorf("pooldriver: pool_min_idle_conns/WithMinIdleConns (%d) is greater than pool_max_conns/WithMaxConns (%d) (Config.MinIdleConns, Config.MaxConns)", c.MinIdleConns, c.MaxConns)
	}
	return nil
}

// deriveJitter sets the lifetime jitter, unless it was given, to a tenth of
// MaxConnLifetime (0 for 0): at parse, so that the Config reads true, and
// again when the Connector is made, from the final lifetime, so that a
// lifetime set by an option or on the field gets its own tenth and not
// the one derived from the DSN's. A jitter set on the field after
// ParseConfig (one other than the value derived) counts as given.
func (c *Config) deriveJitter() {
	if c.jitterGiven || c.MaxConnLifetimeJitter != c.derivedJitter {
		return
	}
	c.MaxConnLifetimeJitter = c.MaxConnLifetime / 10
	c.derivedJitter = c.MaxConnLifetimeJitter
}

// targeted points t's new connections at the server pool_target names, if
// its dialect can tell it.
func targeted(t dialects.Template, target dialects.Target) (dialects.Template, error) {
	if target == dialects.TargetAny {
		return t, nil
	}
	if tt, ok := t.(dialects.TargetTemplate); ok {
		return tt.Targeted(target)
	}
	return nil, fmt.Errorf("pooldriver: pool_target=%s (or WithTarget): this connector cannot tell which server takes writes (a postgres:// or mysql:// DSN can; with Wrap, ask the wrapped connector's driver)", target)
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

// checkHooks reports a hook that c's template cannot run.
func (c *Config) checkHooks(t dialects.Template) error {
	if c.BeforeConnect == nil {
		return nil
	}
	if _, ok := t.(dialects.ConfigurableTemplate); !ok {
		return errors.New("pooldriver: WithBeforeConnect: this connector has no driver configuration to shape (postgres:// DSNs have; with Wrap, configure the wrapped connector)")
	}
	return nil
}

// isNilPointer reports whether v, not nil itself, holds a nil pointer (a
// typed nil, whose methods would fail on first use).
func isNilPointer(v any) bool {
	r := reflect.ValueOf(v)
	return r.Kind() == reflect.Pointer && r.IsNil()
}

// Copy returns a copy of c, which may be changed without changing c.
func (c *Config) Copy() *Config {
	cp := *c
	return &cp
}

// given lists the fields of c that hold no setting (hooks, credentials,
// logger, breaker, tracer), in the order of Config, each with whether it
// is set.
func (c *Config) given() []struct {
	name string
	set  bool
} {
	return []struct {
		name string
		set  bool
	}{
		{"BeforeConnect", c.BeforeConnect != nil},
		{"AfterConnect", c.AfterConnect != nil},
		{"BeforeAcquire", c.BeforeAcquire != nil},
		{"AfterRelease", c.AfterRelease != nil},
		{"BeforeClose", c.BeforeClose != nil},
		{"Credentials", c.Credentials != nil},
		{"Logger", c.Logger != nil},
		{"CircuitBreaker", c.CircuitBreaker != nil},
		{"Tracer", c.Tracer != nil},
	}
}

// Reads says where reads may go (pool_reads).
type Reads int

const (
	// ReadsPrimary (the default): everything runs on the primary.
	ReadsPrimary Reads = iota
	// ReadsStandby: with a DSN that names a primary and its standbys
	// (PostgreSQL's multi-host DSN), reads go to a standby that has
	// replayed what they must see: a read-only *sql.Tx, and every
	// statement run with a context from ReadOnly. See docs/reads.md.
	ReadsStandby
	// ReadsSelects: as ReadsStandby, and a statement outside a
	// transaction that the dialect proves only reads by its text (one
	// SELECT of built-ins that write nothing) goes to a standby too,
	// whatever its context says. Outside a task nothing tells a caller's
	// writes: such a read may miss the caller's own write, as with any
	// read/write split; a task's reads never do.
	ReadsSelects
)

// String returns "primary", "standby" or "selects", the pool_reads values.
func (r Reads) String() string {
	switch r {
	case ReadsPrimary:
		return "primary"
	case ReadsStandby:
		return "standby"
	case ReadsSelects:
		return "selects"
	}
	return fmt.Sprintf("Reads(%d)", int(r))
}

// ParseReads parses a pool_reads value: "primary", "standby" or "selects".
func ParseReads(s string) (Reads, error) {
	switch s {
	case "primary":
		return ReadsPrimary, nil
	case "standby":
		return ReadsStandby, nil
	case "selects":
		return ReadsSelects, nil
	}
	return 0, fmt.Errorf("unknown reads %q (want primary, standby or selects)", s)
}
