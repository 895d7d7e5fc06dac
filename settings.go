package pooldriver

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/pooldriver/pooldriver/dialects"
	"github.com/pooldriver/pooldriver/internal/logline"
)

// settings is the table of the settings: every field of Config that holds
// a value (the others, hooks and the like, are given or not). The DSN's
// parser (applyParams), the options (option), Config's check (validate),
// String and LogValue, defaultConfig and the tests read it; nothing else
// knows a setting's key, default or check. Each entry's value is typed
// with its field: its default, parse, check and format are of the field's
// type (typed), so that a wrong one does not compile.
//
// A new setting: a field of Config (config.go), an entry here, an option if
// it is to have one (options.go), and the code that uses it.
var settings = []setting{
	{key: "pool_acquire_timeout", field: "AcquireTimeout", option: "WithAcquireTimeout", goes: toPool,
		v: duration(func(c *Config) *time.Duration { return &c.AcquireTimeout }, defaultAcquireTimeout, nonNegative)},
	{key: "pool_connect_timeout", field: "ConnectTimeout", option: "WithConnectTimeout", goes: toConnector,
		v: duration(func(c *Config) *time.Duration { return &c.ConnectTimeout }, defaultConnectTimeout, nonNegative)},
	{key: "pool_health_check_period", field: "HealthCheckPeriod", option: "WithHealthCheckPeriod", goes: toPool,
		v: duration(func(c *Config) *time.Duration { return &c.HealthCheckPeriod }, defaultHealthCheckPeriod, nonNegative)},
	{key: "pool_leak_detection_threshold", field: "LeakDetectionThreshold", option: "WithLeakDetection", goes: toConnector,
		v: duration(func(c *Config) *time.Duration { return &c.LeakDetectionThreshold }, 0, nonNegative)},
	{key: "pool_max_conn_idle_time", field: "MaxConnIdleTime", option: "WithMaxConnIdleTime", goes: toPool,
		v: duration(func(c *Config) *time.Duration { return &c.MaxConnIdleTime }, defaultMaxConnIdleTime, nonNegative)},
	{key: "pool_max_conn_lifetime", field: "MaxConnLifetime", option: "WithMaxConnLifetime", goes: toPool,
		v: duration(func(c *Config) *time.Duration { return &c.MaxConnLifetime }, defaultMaxConnLifetime, nonNegative)},
	{key: "pool_max_conn_lifetime_jitter", field: "MaxConnLifetimeJitter", option: "WithMaxConnLifetimeJitter", words: "a tenth of the lifetime", goes: toPool, // deriveJitter
		v: duration(func(c *Config) *time.Duration { return &c.MaxConnLifetimeJitter }, 0, nonNegative)},
	{key: "pool_max_conns", field: "MaxConns", option: "WithMaxConns", goes: toPool,
		v: count(func(c *Config) *int { return &c.MaxConns }, defaultMaxConns, atLeastOne)},
	{key: "pool_min_conns", field: "MinConns", option: "WithMinConns", goes: toPool,
		v: count(func(c *Config) *int { return &c.MinConns }, defaultMinConns, nonNegative)},
	{key: "pool_min_idle_conns", field: "MinIdleConns", option: "WithMinIdleConns", goes: toPool,
		v: count(func(c *Config) *int { return &c.MinIdleConns }, 0, nonNegative)},
	{key: "pool_mode", field: "Mode", option: "WithMode", goes: toTasks,
		v: &typed[Mode]{at: func(c *Config) *Mode { return &c.Mode }, def: TransactionMode, parse: ParseMode, format: Mode.String, check: knownMode}},
	{key: "pool_name", field: "Name", option: "WithPoolName", words: "host:port/database", goes: toConnector, // Connector.PoolName
		v: &typed[string]{at: func(c *Config) *string { return &c.Name }, parse: nonEmpty, format: func(s string) string { return s }}},
	{key: "pool_reads", field: "Reads", option: "WithReads", goes: toConnector,
		v: &typed[Reads]{at: func(c *Config) *Reads { return &c.Reads }, def: ReadsPrimary, parse: ParseReads, format: Reads.String, check: knownReads}},
	{key: "pool_max_replica_lag", field: "MaxReplicaLag", option: "WithMaxReplicaLag", goes: toConnector,
		v: duration(func(c *Config) *time.Duration { return &c.MaxReplicaLag }, defaultMaxReplicaLag, positive)},
	{key: "pool_read_wait", field: "ReadWait", option: "WithReadWait", goes: toConnector,
		v: duration(func(c *Config) *time.Duration { return &c.ReadWait }, defaultReadWait, nonNegative)},
	{key: "pool_reset_always", field: "ResetAlways", option: "WithResetAlways", goes: toConnections,
		v: boolean(func(c *Config) *bool { return &c.ResetAlways })},
	{key: "pool_trust_functions", field: "TrustFunctions", option: "WithTrustFunctions", goes: toConnections,
		v: boolean(func(c *Config) *bool { return &c.TrustFunctions })},
	{key: "pool_target", field: "Target", option: "WithTarget", goes: toConnector,
		v: &typed[dialects.Target]{at: func(c *Config) *dialects.Target { return &c.Target }, def: dialects.TargetAny, parse: dialects.ParseTarget, format: dialects.Target.String, check: knownTarget}},
	{key: "pool_server_pooling", field: "ServerPooling", words: "unset", goes: toConnections,
		v: &typed[dialects.ServerPooling]{at: func(c *Config) *dialects.ServerPooling { return &c.ServerPooling }, parse: dialects.ParseServerPooling, format: dialects.ServerPooling.String}},
	{key: "cleanup_timeout", configOnly: true, field: "CleanupTimeout", option: "WithCleanupTimeout", goes: toConnections,
		v: duration(func(c *Config) *time.Duration { return &c.CleanupTimeout }, defaultCleanupTimeout, positive)},
}

// setting is one entry of the table of settings.
type setting struct {
	key        string // the DSN's parameter, and the name String and LogValue give it
	configOnly bool   // not a DSN parameter: a field and an option only
	field      string // the Config field's name, for messages
	option     string // the With* option that sets it; "": none
	words      string // the default in words, where its value does not say it
	goes       string // where it takes effect
	v          value  // the field, with its type's default, parse, check and format
}

// value is a setting's field of Config, as its typed entry handles it.
type value interface {
	setDefault(c *Config)
	// parseIn sets the field of c to text, a DSN's value, once parsed and
	// checked.
	parseIn(c *Config, text string) error
	checkIn(c *Config) error // the field of c, as it is
	formatIn(c *Config) string
	checked() bool // it has a check: a value may be refused
	addr(c *Config) any
}

// typed is the value of a setting of type T.
type typed[T comparable] struct {
	at     func(*Config) *T // the field of c
	def    T                // the default; the zero value where the table gives none
	parse  func(string) (T, error)
	format func(T) string // as a DSN writes it
	check  func(T) error  // nil: anything
}

func (s *typed[T]) setDefault(c *Config) { *s.at(c) = s.def }

func (s *typed[T]) parseIn(c *Config, text string) error {
	v, err := s.parse(text)
	if err == nil && s.check != nil {
		err = s.check(v)
	}
	if err != nil {
		return err
	}
	*s.at(c) = v
	return nil
}

func (s *typed[T]) checkIn(c *Config) error {
	if s.check == nil {
		return nil
	}
	return s.check(*s.at(c))
}

func (s *typed[T]) formatIn(c *Config) string { return s.format(*s.at(c)) }

func (s *typed[T]) checked() bool { return s.check != nil }

// addr is the field's address, for the table's test.
func (s *typed[T]) addr(c *Config) any { return s.at(c) }

// duration, count and boolean are the values of the settings of those
// types.
func duration(at func(*Config) *time.Duration, def time.Duration, check func(time.Duration) error) value {
	return &typed[time.Duration]{at: at, def: def, parse: parseDuration, format: logline.Duration, check: check}
}

func count(at func(*Config) *int, def int, check func(int) error) value {
	return &typed[int]{at: at, def: def, parse: parseCount, format: strconv.Itoa, check: check}
}

func boolean(at func(*Config) *bool) value {
	return &typed[bool]{at: at, parse: parseBool, format: strconv.FormatBool}
}

// Where a setting takes effect.
const (
	toPool        = "pool"        // the pool of physical connections (package pool)
	toConnections = "connections" // each physical connection (phys.Env, the dialect's template)
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

// checkIn checks s's field of c.
func (s *setting) checkIn(c *Config) error { return s.v.checkIn(c) }

// parseIn sets s's field of c to text, a DSN's value, once parsed and
// checked; the error names the key and the text.
func (s *setting) parseIn(c *Config, text string) error {
	if err := s.v.parseIn(c, text); err != nil {
		return fmt.Errorf("pooldriver: %s=%q: %w", s.key, text, err)
	}
	return nil
}

// format writes s's field of c as a DSN does.
func (s *setting) format(c *Config) string { return s.v.formatIn(c) }

// The parsers of a DSN's values, by type.

func parseCount(text string) (int, error) {
	n, err := strconv.Atoi(text)
	if err != nil {
		return 0, errors.New("not an integer")
	}
	return n, nil
}

func parseDuration(text string) (time.Duration, error) {
	d, err := time.ParseDuration(text)
	if err != nil {
		return 0, errors.New("not a duration (want e.g. 500ms, 30s, 5m)")
	}
	return d, nil
}

func parseBool(text string) (bool, error) {
	b, err := strconv.ParseBool(text)
	if err != nil {
		return false, errors.New("not a boolean (want true or false)")
	}
	return b, nil
}

func nonEmpty(text string) (string, error) {
	if text == "" {
		return "", errors.New("must not be empty")
	}
	return text, nil
}

// nonNegative is the check of a count or a duration that may be 0.
func nonNegative[T int | time.Duration](v T) error {
	if v < 0 {
		return errors.New("must not be negative")
	}
	return nil
}

// atLeastOne is the check of a count that may not be 0.
func atLeastOne(n int) error {
	if n < 1 {
		return errors.New("must be at least 1")
	}
	return nil
}

// positive is the check of a duration that may not be 0.
func positive(d time.Duration) error {
	if d <= 0 {
		return errors.New("must be positive")
	}
	return nil
}

// knownMode is the check of a Mode.
func knownMode(m Mode) error {
	if !m.valid() {
		return errors.New("unknown mode")
	}
	return nil
}

// knownTarget is pool_target's check.
func knownTarget(t dialects.Target) error {
	if t != dialects.TargetAny && t != dialects.TargetPrimary {
		return errors.New("unknown target")
	}
	return nil
}

// knownReads is pool_reads's check.
func knownReads(r Reads) error {
	if r < ReadsPrimary || r > ReadsSelects {
		return errors.New("unknown reads")
	}
	return nil
}
