// A Config from a DSN (ParseConfig: the dialect's template and the
// pool_* parameters over the defaults, through the table of settings),
// its settings checked together when a Connector is made (settle), and
// its printing (String, LogValue). The Config's type is in config.go, the
// settings in settings.go.

package pooldriver

import (
	"errors"
	"fmt"
	"log/slog"
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

// parseDSN finds the DSN's dialect and lets it split the DSN into a
// credential template and pool parameters. Errors never quote the DSN,
// which may hold a password.
func parseDSN(dsn string) (dialects.Template, map[string]string, error) {
	if dsn == "" {
		return nil, nil, fmt.Errorf("pooldriver: empty DSN")
	}
	scheme, ok := dialects.SchemeOf(dsn)
	if !ok {
		return nil, nil, fmt.Errorf("pooldriver: the DSN has no scheme: want postgres://, postgresql://, mysql://, odbc:// or a key=value PostgreSQL string")
	}
	d, err := dialects.Lookup(scheme)
	if err != nil {
		return nil, nil, err
	}
	t, params, err := d.Parse(dsn)
	if err != nil {
		return nil, nil, err
	}
	return t, params, nil
}

// defaultConfig is a Config with every default, for template t. The
// lifetime jitter derived from the lifetime is worked out once the
// lifetime is final: by applyParams for a DSN's, by settle for the
// Connector's.
func defaultConfig(t dialects.Template) Config {
	c := Config{tmpl: t}
	for i := range settings {
		settings[i].v.setDefault(&c)
	}
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
			return fmt.Errorf("pooldriver: %s (%s) = %s: %w", s.field, by, s.format(c), err)
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

// settle works out what derives from c's final settings, checks them
// together, and returns the template c's physical connections are made
// from: the DSN's, pointed at the server pool_target asks for and
// adapted to the pooler in front of it.
func (c *Config) settle() (dialects.Template, error) {
	c.deriveJitter()
	if err := c.validate(); err != nil {
		return nil, err
	}
	t, err := targeted(c.tmpl, c.Target)
	if err != nil {
		return nil, err
	}
	if t, err = behindPooler(t, c.ServerPooling); err != nil {
		return nil, err
	}
	if err := c.checkHooks(t); err != nil {
		return nil, err
	}
	return t, nil
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
		if v := settings[i].format(c); v != "" {
			attrs = append(attrs, slog.String(settings[i].key, v))
		}
	}
	var set []string
	for _, f := range c.given() {
		if f.set {
			set = append(set, f.name)
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
