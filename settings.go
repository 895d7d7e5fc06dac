package pooldriver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"strconv"
	"strings"
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

	// The default circuit breaker (see WithCircuitBreaker) acts only at
	// the server's connection limit (defaultBreakerFailures 0: it never
	// opens on failed connection attempts), and tries a new connection
	// defaultBreakerCoolDown after it stopped opening them.
	defaultBreakerFailures = 0
	defaultBreakerCoolDown = 250 * time.Millisecond
)

// settings is the table of the settings: every field of Config that holds
// a value (the others, hooks and the like, are given or not). The DSN's
// parser (applyParams), the options (option), Config's check (validate),
// String and LogValue, defaultConfig and the tests read it; nothing else
// knows a setting's key, default or check. A setting's unit is its field's
// type: parse reads it from a DSN, format writes it back.
//
// A new setting: a field above, an entry here, an option if it is to have
// one (options.go), and the code that uses it.
var settings = []setting{
	{key: "pool_acquire_timeout", field: "AcquireTimeout", option: "WithAcquireTimeout", def: defaultAcquireTimeout, check: nonNegative, goes: toPool},
	{key: "pool_connect_timeout", field: "ConnectTimeout", option: "WithConnectTimeout", def: defaultConnectTimeout, check: nonNegative, goes: toConnector},
	{key: "pool_health_check_period", field: "HealthCheckPeriod", option: "WithHealthCheckPeriod", def: defaultHealthCheckPeriod, check: nonNegative, goes: toPool},
	{key: "pool_leak_detection_threshold", field: "LeakDetectionThreshold", option: "WithLeakDetection", check: nonNegative, goes: toConnector},
	{key: "pool_max_conn_idle_time", field: "MaxConnIdleTime", option: "WithMaxConnIdleTime", def: defaultMaxConnIdleTime, check: nonNegative, goes: toPool},
	{key: "pool_max_conn_lifetime", field: "MaxConnLifetime", option: "WithMaxConnLifetime", def: defaultMaxConnLifetime, check: nonNegative, goes: toPool},
	{key: "pool_max_conn_lifetime_jitter", field: "MaxConnLifetimeJitter", option: "WithMaxConnLifetimeJitter", words: "a tenth of the lifetime", check: nonNegative, goes: toPool}, // deriveJitter
	{key: "pool_max_conns", field: "MaxConns", option: "WithMaxConns", def: defaultMaxConns, check: positive, goes: toPool},
	{key: "pool_min_conns", field: "MinConns", option: "WithMinConns", def: defaultMinConns, check: nonNegative, goes: toPool},
	{key: "pool_min_idle_conns", field: "MinIdleConns", option: "WithMinIdleConns", check: nonNegative, goes: toPool},
	{key: "pool_mode", field: "Mode", option: "WithMode", def: TransactionMode, check: knownMode, goes: toTasks},
	{key: "pool_name", field: "Name", option: "WithPoolName", words: "host:port/database", goes: toConnector}, // Connector.PoolName
	{key: "pool_reset_always", field: "ResetAlways", option: "WithResetAlways", goes: toConnections},
	{key: "pool_trust_functions", field: "TrustFunctions", option: "WithTrustFunctions", goes: toConnections},
	{key: "pool_server_pooling", field: "ServerPooling", words: "unset", goes: toConnections},
	{key: "cleanup_timeout", configOnly: true, field: "CleanupTimeout", option: "WithCleanupTimeout", def: defaultCleanupTimeout, check: positive, goes: toConnections},
}

// setting is one entry of the table of settings.
type setting struct {
	key        string            // the DSN's parameter, and the name String and LogValue give it
	configOnly bool              // not a DSN parameter: a field and an option only
	field      string            // the Config field
	option     string            // the With* option that sets it; "": none
	def        any               // the default, of the field's type; nil: the zero value
	words      string            // the default in words, where its value does not say it
	check      func(v any) error // what a value must be, from a DSN, an option or the field; nil: anything
	goes       string            // where it takes effect
}

// Where a setting takes effect.
const (
	toPool        = "pool"        // the pool of physical connections (package pool)
	toConnections = "connections" // each physical connection (physEnv, the dialect's template)
	toConnector   = "connector"   // the Connector: connects, leak detection, logs
	toTasks       = "tasks"       // tasks that choose no mode
)

// settingBy returns the setting whose DSN key, option or field is name;
// nil: none.
func settingBy(name string) *setting {
	for i := range settings {
		if s := &settings[i]; (s.key == name && !s.configOnly) || s.option == name || s.field == name {
			return s
		}
	}
	return nil
}

// in returns the field of c that s is.
func (s *setting) in(c *Config) reflect.Value {
	return reflect.ValueOf(c).Elem().FieldByName(s.field)
}

// checkIn checks s's field of c.
func (s *setting) checkIn(c *Config) error {
	if s.check == nil {
		return nil
	}
	return s.check(s.in(c).Interface())
}

// parseIn sets s's field of c to text, a DSN's value, once parsed and
// checked.
func (s *setting) parseIn(c *Config, text string) error {
	f := s.in(c)
	v, err := parse(f.Interface(), text)
	if err == nil && s.check != nil {
		err = s.check(v)
	}
	if err != nil {
		return fmt.Errorf("pooldriver: %s=%q: %w", s.key, text, err)
	}
	f.Set(reflect.ValueOf(v))
	return nil
}

// parse reads text, a DSN's value, as a value of like's type.
func parse(like any, text string) (any, error) {
	switch like.(type) {
	case int:
		n, err := strconv.Atoi(text)
		if err != nil {
			return nil, errors.New("not an integer")
		}
		return n, nil
	case time.Duration:
		d, err := time.ParseDuration(text)
		if err != nil {
			return nil, errors.New("not a duration (want e.g. 500ms, 30s, 5m)")
		}
		return d, nil
	case bool:
		b, err := strconv.ParseBool(text)
		if err != nil {
			return nil, errors.New("not a boolean (want true or false)")
		}
		return b, nil
	case string:
		if text == "" {
			return nil, errors.New("must not be empty")
		}
		return text, nil
	case Mode:
		m, err := ParseMode(text)
		return m, err
	case dialects.ServerPooling:
		p, err := dialects.ParseServerPooling(text)
		return p, err
	}
	return nil, fmt.Errorf("no parser for %T", like)
}

// format writes v as a DSN does.
func format(v any) string {
	switch v := v.(type) {
	case time.Duration:
		return shortDuration(v)
	case fmt.Stringer:
		return v.String()
	}
	return fmt.Sprint(v)
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

// nonNegative is the check of a count or a duration that may be 0.
func nonNegative(v any) error {
	if reflect.ValueOf(v).Int() < 0 {
		return errors.New("must not be negative")
	}
	return nil
}

// positive is the check of a count or a duration that may not be 0.
func positive(v any) error {
	switch v := v.(type) {
	case int:
		if v < 1 {
			return errors.New("must be at least 1")
		}
	case time.Duration:
		if v <= 0 {
			return errors.New("must be positive")
		}
	}
	return nil
}

// knownMode is the check of a Mode.
func knownMode(v any) error {
	if !v.(Mode).valid() {
		return errors.New("unknown mode")
	}
	return nil
}
