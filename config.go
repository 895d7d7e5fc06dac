package pooldriver

import (
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"strings"

	"github.com/pooldriver/pooldriver/dialects"
)

// ParseConfig parses dsn into a Config: the dialect its scheme names (which
// must be imported), its credential template, and its pool_* parameters
// over the defaults. An error names the parameter and the value, never the
// password. pool_min_conns or pool_min_idle_conns above pool_max_conns
// (the DSN's, or the default) is an error naming both; what else only the
// settings together can get wrong is NewConnectorWithConfig's to report,
// once the fields are final.
func ParseConfig(dsn string) (*Config, error) {
	t, params, err := parseDSN(dsn)
	if err != nil {
		return nil, err
	}
	cfg := defaultConfig(t)
	if err := cfg.applyParams(params); err != nil {
		return nil, err
	}
	if err := cfg.checkCounts(); err != nil {
		return nil, err
	}
	return &cfg, nil
}

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

// defaultConfig is a Config with every default, for template t.
func defaultConfig(t dialects.Template) Config {
	c := Config{tmpl: t}
	for i := range settings {
		if s := &settings[i]; s.def != nil {
			s.in(&c).Set(reflect.ValueOf(s.def))
		}
	}
	c.deriveJitter()
	return c
}

// applyParams sets c from the DSN's pool_* parameters, in the order of their
// keys, so that the first error reported is always the same.
func (c *Config) applyParams(values map[string]string) error {
	keys := make([]string, 0, len(values))
	for k := range values {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		s := settingBy(k)
		if s == nil {
			return fmt.Errorf("pooldriver: unknown parameter %s (known: %s)", k, paramKeys())
		}
		if err := s.parseIn(c, values[k]); err != nil {
			return err
		}
	}
	_, c.jitterGiven = values["pool_max_conn_lifetime_jitter"]
	c.deriveJitter()
	return nil
}

// paramKeys lists the DSN's keys, for the error naming an unknown one.
func paramKeys() string {
	var keys []string
	for _, s := range settings {
		if !s.configOnly {
			keys = append(keys, s.key)
		}
	}
	return strings.Join(keys, ", ")
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

// validate checks every setting, as the DSN's parser and the options do,
// then what only the settings together can get wrong, and what only a
// Config's fields (not a DSN) can.
func (c *Config) validate() error {
	if c.tmpl == nil {
		return errors.New("pooldriver: the Config was not made by ParseConfig")
	}
	for i := range settings {
		s := &settings[i]
		if err := s.checkIn(c); err != nil {
			by := s.key
			if s.configOnly {
				by = s.option
			}
			return fmt.Errorf("pooldriver: %s (%s) = %s: %w", s.field, by, format(s.in(c).Interface()), err)
		}
	}
	if err := c.checkCounts(); err != nil {
		return err
	}
	switch {
	case c.ServerPooling == dialects.ServerPoolingTransaction && c.Mode == SessionMode:
		return fmt.Errorf("pooldriver: pool_mode=session (or WithMode(SessionMode)) together with pool_server_pooling=transaction: %w", ErrNoServerSession)
	case c.ResetAlways && c.ServerPooling == dialects.ServerPoolingTransaction:
		return errors.New("pooldriver: pool_reset_always (or WithResetAlways) together with pool_server_pooling=transaction: the pooler, not pooldriver, decides which server session a client gets next; set its own reset (PgBouncer: server_reset_query_always = 1)")
	case c.Tracer != nil && isNilPointer(c.Tracer):
		return fmt.Errorf("pooldriver: Tracer (WithTracer) is a nil %T", c.Tracer)
	case c.CircuitBreaker != nil && isNilPointer(c.CircuitBreaker):
		return fmt.Errorf("pooldriver: CircuitBreaker (WithCircuitBreaker) is a nil %T", c.CircuitBreaker)
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

// String prints c as the DSN without its password, then what LogValue
// prints of it as key=value.
func (c *Config) String() string {
	var b strings.Builder
	if c.tmpl != nil {
		b.WriteString(c.tmpl.String())
	} else {
		b.WriteString("(no DSN)")
	}
	for _, a := range c.attrs() {
		fmt.Fprintf(&b, " %s=%s", a.Key, a.Value)
	}
	return b.String()
}

// LogValue is c as a group of attributes: dsn (without its password), every
// setting that has a value and, when any, set (the hooks, credentials
// function, logger, breaker and tracer given).
func (c *Config) LogValue() slog.Value {
	if c.tmpl == nil {
		return slog.GroupValue(c.attrs()...)
	}
	return slog.GroupValue(append([]slog.Attr{slog.String("dsn", c.tmpl.String())}, c.attrs()...)...)
}

// attrs is what String and LogValue print of c after its DSN: every
// setting, then set=, the names of the other fields given, in the order of
// Config.
func (c *Config) attrs() []slog.Attr {
	attrs := make([]slog.Attr, 0, len(settings)+1)
	for i := range settings {
		if v := format(settings[i].in(c).Interface()); v != "" {
			attrs = append(attrs, slog.String(settings[i].key, v))
		}
	}
	var set []string
	v := reflect.ValueOf(c).Elem()
	for i := range v.NumField() {
		f := v.Type().Field(i)
		if f.IsExported() && settingBy(f.Name) == nil && !v.Field(i).IsZero() {
			set = append(set, f.Name)
		}
	}
	if len(set) > 0 {
		attrs = append(attrs, slog.String("set", strings.Join(set, ",")))
	}
	return attrs
}

var (
	_ fmt.Stringer   = (*Config)(nil)
	_ slog.LogValuer = (*Config)(nil)
)
