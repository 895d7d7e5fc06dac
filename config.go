package pooldriver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pooldriver/pooldriver/dialects"
	"github.com/pooldriver/pooldriver/pool"
)

// Config is a Connector's whole configuration: the pool's settings, its
// hooks, credentials, logger, circuit breaker and tracer, as fields that
// can be read, changed and printed. [ParseConfig] makes one from a DSN,
// every setting filled in (the DSN's pool_* parameters, else the
// defaults); [NewConnectorWithConfig] opens a Connector with it, and
// [Connector.Config] reads back the one a Connector uses. The settings
// carry pgxpool's names where pgxpool has the setting. A Config must be
// made by ParseConfig (it holds the DSN's credential template). What
// derives from other settings (the lifetime jitter, a tenth of the
// lifetime unless given) is worked out again when the Connector is made,
// from the final fields, so that a setting means the same whether a DSN,
// an option or a field set it.
//
// [New], [NewConnector], [Open] and [Wrap] are layers over it: the DSN's
// parameters, then the options ([Option]), which set the same fields.
// String and LogValue print it without the password.
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
	ResetAlways   bool // pool_reset_always: reset every connection at the end of every hold
	// pool_trust_functions: a call of a function or procedure the dialect
	// does not know counts as a session change only for what its text or
	// the server shows; by default it counts as one (default-deny).
	TrustFunctions bool
	Name           string // pool_name: the pool's name in logs, metrics and spans; "": host:port/database (Connector.PoolName)

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
	// pool.NewThresholdStrategy(DefaultBreakerFailures, DefaultBreakerCoolDown).
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
}

// Default settings, the same as the DSN's pool_* parameters' defaults.
const (
	DefaultMaxConns          = 10
	DefaultMinConns          = 0
	DefaultAcquireTimeout    = 30 * time.Second
	DefaultHealthCheckPeriod = 30 * time.Second
	DefaultMaxConnLifetime   = time.Hour
	DefaultMaxConnIdleTime   = 30 * time.Minute
	DefaultCleanupTimeout    = 5 * time.Second
	DefaultConnectTimeout    = 10 * time.Second

	// The default circuit breaker (see WithCircuitBreaker) acts only at
	// the server's connection limit (DefaultBreakerFailures 0: it never
	// opens on failed connection attempts), and tries a new connection
	// DefaultBreakerCoolDown after it stopped opening them.
	DefaultBreakerFailures = 0
	DefaultBreakerCoolDown = 250 * time.Millisecond
)

// defaultConfig is a Config with every default, for template t.
func defaultConfig(t dialects.Template) Config {
	return Config{
		MaxConns:              DefaultMaxConns,
		MinConns:              DefaultMinConns,
		AcquireTimeout:        DefaultAcquireTimeout,
		ConnectTimeout:        DefaultConnectTimeout,
		HealthCheckPeriod:     DefaultHealthCheckPeriod,
		MaxConnLifetime:       DefaultMaxConnLifetime,
		MaxConnLifetimeJitter: DefaultMaxConnLifetime / 10,
		derivedJitter:         DefaultMaxConnLifetime / 10,
		MaxConnIdleTime:       DefaultMaxConnIdleTime,
		CleanupTimeout:        DefaultCleanupTimeout,
		Mode:                  TransactionMode,
		tmpl:                  t,
	}
}

// ParseConfig parses dsn into a Config: the dialect its scheme names (which
// must be imported), its credential template, and its pool_* parameters
// over the defaults. An error names the parameter and the value, never the
// password. What only the settings together can get wrong (pool_min_conns
// above pool_max_conns, say) is NewConnectorWithConfig's to report, once
// the fields are final.
func ParseConfig(dsn string) (*Config, error) {
	t, params, err := parseDSN(dsn)
	if err != nil {
		return nil, err
	}
	cfg := defaultConfig(t)
	if err := cfg.applyParams(params); err != nil {
		return nil, err
	}
	return &cfg, nil
}

// Copy returns a copy of c, which may be changed without changing c.
func (c *Config) Copy() *Config {
	cp := *c
	return &cp
}

// param is one pool_* parameter of a DSN: the table below drives parsing,
// validation, the messages of both, printing (Config.String) and, through
// TestParamsDocumented, the package doc and the README.
type param struct {
	key   string
	field string // the Config field it sets
	def   string // the default, as a DSN writes it (or says it)
	set   func(c *Config, v string) error
	get   func(c *Config) string
}

// params is every pool_* parameter, sorted by key: parsed in this order, so
// that the first error reported is always the same.
var params = []param{
	durationParam(paramAcquireTimeout, "AcquireTimeout", DefaultAcquireTimeout, func(c *Config) *time.Duration { return &c.AcquireTimeout }),
	durationParam(paramConnectTimeout, "ConnectTimeout", DefaultConnectTimeout, func(c *Config) *time.Duration { return &c.ConnectTimeout }),
	durationParam(paramHealthCheckPeriod, "HealthCheckPeriod", DefaultHealthCheckPeriod, func(c *Config) *time.Duration { return &c.HealthCheckPeriod }),
	durationParam(paramLeakThreshold, "LeakDetectionThreshold", 0, func(c *Config) *time.Duration { return &c.LeakDetectionThreshold }),
	durationParam(paramMaxConnIdleTime, "MaxConnIdleTime", DefaultMaxConnIdleTime, func(c *Config) *time.Duration { return &c.MaxConnIdleTime }),
	durationParam(paramMaxConnLifetime, "MaxConnLifetime", DefaultMaxConnLifetime, func(c *Config) *time.Duration { return &c.MaxConnLifetime }),

	{
		key: paramLifetimeJitter, field: "MaxConnLifetimeJitter", def: "a tenth of the lifetime",
		set: func(c *Config, v string) (err error) {
			c.MaxConnLifetimeJitter, err = parseDuration(paramLifetimeJitter, v)
			c.jitterGiven = true
			return err
		},
		get: func(c *Config) string { return shortDuration(c.MaxConnLifetimeJitter) },
	},
	intParam(paramMaxConns, "MaxConns", DefaultMaxConns, 1, func(c *Config) *int { return &c.MaxConns }),
	intParam(paramMinConns, "MinConns", DefaultMinConns, 0, func(c *Config) *int { return &c.MinConns }),
	intParam(paramMinIdleConns, "MinIdleConns", 0, 0, func(c *Config) *int { return &c.MinIdleConns }),
	{
		key: paramMode, field: "Mode", def: TransactionMode.String(),
		set: func(c *Config, v string) (err error) {
			if c.Mode, err = ParseMode(v); err != nil {
				return fmt.Errorf("pooldriver: %s=%q: %w", paramMode, v, err)
			}
			return nil
		},
		get: func(c *Config) string { return c.Mode.String() },
	},
	{
		key: paramName, field: "Name", def: "host:port/database",
		set: func(c *Config, v string) error {
			if v == "" {
				return fmt.Errorf("pooldriver: %s is empty", paramName)
			}
			c.Name = v
			return nil
		},
		get: func(c *Config) string { return c.Name },
	},
	{
		key: paramResetAlways, field: "ResetAlways", def: "false",
		set: func(c *Config, v string) (err error) {
			if c.ResetAlways, err = strconv.ParseBool(v); err != nil {
				return fmt.Errorf("pooldriver: %s=%q: not a boolean (want true or false)", paramResetAlways, v)
			}
			return nil
		},
		get: func(c *Config) string { return fmt.Sprint(c.ResetAlways) },
	},
	{
		key: paramTrustFunctions, field: "TrustFunctions", def: "false",
		set: func(c *Config, v string) (err error) {
			if c.TrustFunctions, err = strconv.ParseBool(v); err != nil {
				return fmt.Errorf("pooldriver: %s=%q: not a boolean (want true or false)", paramTrustFunctions, v)
			}
			return nil
		},
		get: func(c *Config) string { return fmt.Sprint(c.TrustFunctions) },
	},
	{
		key: paramServerPooling, field: "ServerPooling", def: "unset",
		set: func(c *Config, v string) (err error) {
			if c.ServerPooling, err = dialects.ParseServerPooling(v); err != nil {
				return fmt.Errorf("pooldriver: %s=%q: %w", paramServerPooling, v, err)
			}
			return nil
		},
		get: func(c *Config) string { return c.ServerPooling.String() },
	},
}

func durationParam(key, name string, def time.Duration, field func(*Config) *time.Duration) param {
	return param{
		key: key, field: name, def: shortDuration(def),
		set: func(c *Config, v string) (err error) {
			*field(c), err = parseDuration(key, v)
			return err
		},
		get: func(c *Config) string { return shortDuration(*field(c)) },
	}
}

// shortDuration writes d as a DSN would: 1h, 30m, 30s, 0 (Duration.String
// writes 1h0m0s, 30m0s, 0s).
func shortDuration(d time.Duration) string {
	if d == 0 {
		return "0"
	}
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

func intParam(key, name string, def, min int, field func(*Config) *int) param {
	return param{
		key: key, field: name, def: fmt.Sprint(def),
		set: func(c *Config, v string) (err error) {
			*field(c), err = parseInt(key, v, min)
			return err
		},
		get: func(c *Config) string { return fmt.Sprint(*field(c)) },
	}
}

// paramKeys lists the keys of params, for the error naming an unknown one.
func paramKeys() string {
	keys := make([]string, len(params))
	for i, p := range params {
		keys[i] = p.key
	}
	return strings.Join(keys, ", ")
}

// applyParams sets c from the DSN's pool_* parameters, in params' order.
func (c *Config) applyParams(values map[string]string) error {
	keys := make([]string, 0, len(values))
	for k := range values {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		i := slices.IndexFunc(params, func(p param) bool { return p.key == k })
		if i < 0 {
			return fmt.Errorf("pooldriver: unknown parameter %s (known: %s)", k, paramKeys())
		}
		if err := params[i].set(c, values[k]); err != nil {
			return err
		}
	}
	c.deriveJitter()
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

// validate checks what no single setting can: the settings together, and
// the ones only a Config's fields (not a DSN) can get wrong.
func (c *Config) validate() error {
	switch {
	case c.tmpl == nil:
		return errors.New("pooldriver: the Config was not made by ParseConfig")
	case c.MaxConns < 1:
		return fmt.Errorf("pooldriver: MaxConns (%s) = %d: must be at least 1", paramMaxConns, c.MaxConns)
	case c.MinConns < 0 || c.MinIdleConns < 0:
		return fmt.Errorf("pooldriver: MinConns (%s) = %d and MinIdleConns (%s) = %d: must not be negative", paramMinConns, c.MinConns, paramMinIdleConns, c.MinIdleConns)
	case c.MinConns > c.MaxConns:
		return fmt.Errorf("pooldriver: %s/WithMinConns (%d) is greater than %s/WithMaxConns (%d) (Config.MinConns, Config.MaxConns)", paramMinConns, c.MinConns, paramMaxConns, c.MaxConns)
	case c.MinIdleConns > c.MaxConns:
		return fmt.Errorf("pooldriver: %s/WithMinIdleConns (%d) is greater than %s/WithMaxConns (%d) (Config.MinIdleConns, Config.MaxConns)", paramMinIdleConns, c.MinIdleConns, paramMaxConns, c.MaxConns)
	case c.CleanupTimeout <= 0:
		return fmt.Errorf("pooldriver: CleanupTimeout (WithCleanupTimeout) = %v: must be positive", c.CleanupTimeout)
	case !c.Mode.valid():
		return fmt.Errorf("pooldriver: Mode (%s) = %d: unknown mode", paramMode, int(c.Mode))
	case c.ServerPooling == dialects.ServerPoolingTransaction && c.Mode == SessionMode:
		return fmt.Errorf("pooldriver: %s=session (or WithMode(SessionMode)) together with %s=transaction: %w", paramMode, paramServerPooling, ErrNoServerSession)
	case c.Tracer != nil && isNilPointer(c.Tracer):
		return fmt.Errorf("pooldriver: Tracer (WithTracer) is a nil %T", c.Tracer)
	case c.CircuitBreaker != nil && isNilPointer(c.CircuitBreaker):
		return fmt.Errorf("pooldriver: CircuitBreaker (WithCircuitBreaker) is a nil %T", c.CircuitBreaker)
	case c.ResetAlways && c.ServerPooling == dialects.ServerPoolingTransaction:
		return fmt.Errorf("pooldriver: %s (or WithResetAlways) together with %s=transaction: the pooler, not pooldriver, decides which server session a client gets next; set its own reset (PgBouncer: server_reset_query_always = 1)", paramResetAlways, paramServerPooling)
	}
	for _, d := range []struct {
		name string
		d    time.Duration
	}{
		{paramAcquireTimeout, c.AcquireTimeout}, {paramConnectTimeout, c.ConnectTimeout},
		{paramHealthCheckPeriod, c.HealthCheckPeriod}, {paramMaxConnLifetime, c.MaxConnLifetime},
		{paramLifetimeJitter, c.MaxConnLifetimeJitter}, {paramMaxConnIdleTime, c.MaxConnIdleTime},
		{paramLeakThreshold, c.LeakDetectionThreshold},
	} {
		if d.d < 0 {
			return fmt.Errorf("pooldriver: %s = %v: must not be negative", d.name, d.d)
		}
	}
	return nil
}

// isNilPointer reports whether v, not nil itself, holds a nil pointer (a
// typed nil, whose methods would fail on first use).
func isNilPointer(v any) bool {
	r := reflect.ValueOf(v)
	return r.Kind() == reflect.Pointer && r.IsNil()
}

// String prints c as the DSN without its password, then every pool_*
// setting as key=value, then what only a Config has (hooks, credentials, a
// logger, a breaker, a tracer) by name.
func (c *Config) String() string {
	var b strings.Builder
	if c.tmpl != nil {
		b.WriteString(c.tmpl.String())
	} else {
		b.WriteString("(no DSN)")
	}
	for _, p := range params {
		if v := p.get(c); v != "" {
			fmt.Fprintf(&b, " %s=%s", p.key, v)
		}
	}
	fmt.Fprintf(&b, " cleanup_timeout=%s", shortDuration(c.CleanupTimeout))
	if set := c.extras(); len(set) > 0 {
		fmt.Fprintf(&b, " set=%s", strings.Join(set, ","))
	}
	return b.String()
}

// LogValue is c as a group of attributes: dsn (without its password), every
// pool_* setting, cleanup_timeout and, when any, set (the hooks,
// credentials function, logger, breaker and tracer given).
func (c *Config) LogValue() slog.Value {
	attrs := make([]slog.Attr, 0, len(params)+3)
	if c.tmpl != nil {
		attrs = append(attrs, slog.String("dsn", c.tmpl.String()))
	}
	for _, p := range params {
		if v := p.get(c); v != "" {
			attrs = append(attrs, slog.String(p.key, v))
		}
	}
	attrs = append(attrs, slog.String("cleanup_timeout", shortDuration(c.CleanupTimeout)))
	if set := c.extras(); len(set) > 0 {
		attrs = append(attrs, slog.String("set", strings.Join(set, ",")))
	}
	return slog.GroupValue(attrs...)
}

// extras names the fields of c that only a Config (not a DSN) sets.
func (c *Config) extras() []string {
	var set []string
	for _, f := range []struct {
		name string
		on   bool
	}{
		{"BeforeConnect", c.BeforeConnect != nil}, {"AfterConnect", c.AfterConnect != nil},
		{"BeforeAcquire", c.BeforeAcquire != nil}, {"AfterRelease", c.AfterRelease != nil},
		{"BeforeClose", c.BeforeClose != nil}, {"Credentials", c.Credentials != nil},
		{"Logger", c.Logger != nil}, {"CircuitBreaker", c.CircuitBreaker != nil},
		{"Tracer", c.Tracer != nil},
	} {
		if f.on {
			set = append(set, f.name)
		}
	}
	return set
}

var (
	_ fmt.Stringer   = (*Config)(nil)
	_ slog.LogValuer = (*Config)(nil)
)
