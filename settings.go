package pooldriver

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/pooldriver/pooldriver/dialects"
	"github.com/pooldriver/pooldriver/internal/phys"
)

// settings is the table of the settings: every field of Config that holds
// a value (the others, hooks and the like, are given or not). The DSN's
// parser (applyParams), the options (option), Config's check (validate),
// String and LogValue, defaultConfig and the tests read it; nothing else
// knows a setting's key, default or check. A setting's unit is its field's
// type: parse reads it from a DSN, format writes it back.
//
// A new setting: a field of Config (config.go), an entry here (at points
// at the field), an option if it is to have one (options.go), and the code
// that uses it.
var settings = []setting{
	{key: "pool_acquire_timeout", field: "AcquireTimeout", at: func(c *Config) any { return &c.AcquireTimeout }, option: "WithAcquireTimeout", def: defaultAcquireTimeout, check: nonNegative, goes: toPool},
	{key: "pool_connect_timeout", field: "ConnectTimeout", at: func(c *Config) any { return &c.ConnectTimeout }, option: "WithConnectTimeout", def: defaultConnectTimeout, check: nonNegative, goes: toConnector},
	{key: "pool_health_check_period", field: "HealthCheckPeriod", at: func(c *Config) any { return &c.HealthCheckPeriod }, option: "WithHealthCheckPeriod", def: defaultHealthCheckPeriod, check: nonNegative, goes: toPool},
	{key: "pool_leak_detection_threshold", field: "LeakDetectionThreshold", at: func(c *Config) any { return &c.LeakDetectionThreshold }, option: "WithLeakDetection", check: nonNegative, goes: toConnector},
	{key: "pool_max_conn_idle_time", field: "MaxConnIdleTime", at: func(c *Config) any { return &c.MaxConnIdleTime }, option: "WithMaxConnIdleTime", def: defaultMaxConnIdleTime, check: nonNegative, goes: toPool},
	{key: "pool_max_conn_lifetime", field: "MaxConnLifetime", at: func(c *Config) any { return &c.MaxConnLifetime }, option: "WithMaxConnLifetime", def: defaultMaxConnLifetime, check: nonNegative, goes: toPool},
	{key: "pool_max_conn_lifetime_jitter", field: "MaxConnLifetimeJitter", at: func(c *Config) any { return &c.MaxConnLifetimeJitter }, option: "WithMaxConnLifetimeJitter", words: "a tenth of the lifetime", check: nonNegative, goes: toPool}, // deriveJitter
	{key: "pool_max_conns", field: "MaxConns", at: func(c *Config) any { return &c.MaxConns }, option: "WithMaxConns", def: defaultMaxConns, check: positive, goes: toPool},
	{key: "pool_min_conns", field: "MinConns", at: func(c *Config) any { return &c.MinConns }, option: "WithMinConns", def: defaultMinConns, check: nonNegative, goes: toPool},
	{key: "pool_min_idle_conns", field: "MinIdleConns", at: func(c *Config) any { return &c.MinIdleConns }, option: "WithMinIdleConns", check: nonNegative, goes: toPool},
	{key: "pool_mode", field: "Mode", at: func(c *Config) any { return &c.Mode }, option: "WithMode", def: TransactionMode, check: knownMode, goes: toTasks},
	{key: "pool_name", field: "Name", at: func(c *Config) any { return &c.Name }, option: "WithPoolName", words: "host:port/database", goes: toConnector}, // Connector.PoolName
	{key: "pool_reads", field: "Reads", at: func(c *Config) any { return &c.Reads }, option: "WithReads", def: ReadsPrimary, check: knownReads, goes: toConnector},
	{key: "pool_max_replica_lag", field: "MaxReplicaLag", at: func(c *Config) any { return &c.MaxReplicaLag }, option: "WithMaxReplicaLag", def: defaultMaxReplicaLag, check: positive, goes: toConnector},
	{key: "pool_read_wait", field: "ReadWait", at: func(c *Config) any { return &c.ReadWait }, option: "WithReadWait", def: defaultReadWait, check: nonNegative, goes: toConnector},
	{key: "pool_reset_always", field: "ResetAlways", at: func(c *Config) any { return &c.ResetAlways }, option: "WithResetAlways", goes: toConnections},
	{key: "pool_trust_functions", field: "TrustFunctions", at: func(c *Config) any { return &c.TrustFunctions }, option: "WithTrustFunctions", goes: toConnections},
	{key: "pool_server_pooling", field: "ServerPooling", at: func(c *Config) any { return &c.ServerPooling }, words: "unset", goes: toConnections},
	{key: "cleanup_timeout", configOnly: true, field: "CleanupTimeout", at: func(c *Config) any { return &c.CleanupTimeout }, option: "WithCleanupTimeout", def: defaultCleanupTimeout, check: positive, goes: toConnections},
}

// setting is one entry of the table of settings.
type setting struct {
	key        string            // the DSN's parameter, and the name String and LogValue give it
	configOnly bool              // not a DSN parameter: a field and an option only
	field      string            // the Config field's name, for messages
	at         func(*Config) any // a pointer to that field of c
	option     string            // the With* option that sets it; "": none
	def        any               // the default, of the field's type; nil: the zero value
	words      string            // the default in words, where its value does not say it
	check      func(v any) error // what a value must be, from a DSN, an option or the field; nil: anything
	goes       string            // where it takes effect
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

// value returns s's field of c.
func (s *setting) value(c *Config) any {
	switch p := s.at(c).(type) {
	case *int:
		return *p
	case *time.Duration:
		return *p
	case *bool:
		return *p
	case *string:
		return *p
	case *Mode:
		return *p
	case *Reads:
		return *p
	case *dialects.ServerPooling:
		return *p
	}
	panic(fmt.Sprintf("pooldriver: setting %s: a field of type %T", s.key, s.at(c)))
}

// set sets s's field of c to v, a value of the field's type.
func (s *setting) set(c *Config, v any) {
	switch p := s.at(c).(type) {
	case *int:
		*p = v.(int)
	case *time.Duration:
		*p = v.(time.Duration)
	case *bool:
		*p = v.(bool)
	case *string:
		*p = v.(string)
	case *Mode:
		*p = v.(Mode)
	case *Reads:
		*p = v.(Reads)
	case *dialects.ServerPooling:
		*p = v.(dialects.ServerPooling)
	default:
		panic(fmt.Sprintf("pooldriver: setting %s: a field of type %T", s.key, p))
	}
}

// checkIn checks s's field of c.
func (s *setting) checkIn(c *Config) error {
	if s.check == nil {
		return nil
	}
	return s.check(s.value(c))
}

// parseIn sets s's field of c to text, a DSN's value, once parsed and
// checked.
func (s *setting) parseIn(c *Config, text string) error {
	v, err := parse(s.value(c), text)
	if err == nil && s.check != nil {
		err = s.check(v)
	}
	if err != nil {
		return fmt.Errorf("pooldriver: %s=%q: %w", s.key, text, err)
	}
	s.set(c, v)
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
	case Reads:
		r, err := ParseReads(text)
		return r, err
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
		return phys.ShortDuration(v)
	case fmt.Stringer:
		return v.String()
	}
	return fmt.Sprint(v)
}

// nonNegative is the check of a count or a duration that may be 0.
func nonNegative(v any) error {
	switch v := v.(type) {
	case int:
		if v < 0 {
			return errors.New("must not be negative")
		}
	case time.Duration:
		if v < 0 {
			return errors.New("must not be negative")
		}
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

// knownReads is pool_reads's check.
func knownReads(v any) error {
	if r := v.(Reads); r < ReadsPrimary || r > ReadsSelects {
		return errors.New("unknown reads")
	}
	return nil
}
