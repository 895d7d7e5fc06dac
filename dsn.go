package pooldriver

import (
	"fmt"
	"strconv"
	"time"

	"github.com/pooldriver/pooldriver/dialects"
)

// The pool_* parameters a DSN may carry (the table of them: params, in
// config.go). They are pooldriver's own and are removed before the DSN
// reaches the real driver.
const (
	paramMaxConns          = "pool_max_conns"
	paramMinConns          = "pool_min_conns"
	paramAcquireTimeout    = "pool_acquire_timeout"
	paramHealthCheckPeriod = "pool_health_check_period"
	paramMaxConnLifetime   = "pool_max_conn_lifetime"
	paramMaxConnIdleTime   = "pool_max_conn_idle_time"
	paramMode              = "pool_mode"
	paramConnectTimeout    = "pool_connect_timeout"
	paramLifetimeJitter    = "pool_max_conn_lifetime_jitter"
	paramMinIdleConns      = "pool_min_idle_conns"
	paramLeakThreshold     = "pool_leak_detection_threshold"
	paramName              = "pool_name"
	paramServerPooling     = "pool_server_pooling"
	paramResetAlways       = "pool_reset_always"
	paramTrustFunctions    = "pool_trust_functions"
)

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

func parseInt(name, v string, min int) (int, error) {
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, fmt.Errorf("pooldriver: %s=%q: not an integer", name, v)
	}
	if n < min {
		return 0, fmt.Errorf("pooldriver: %s=%q: must be at least %d", name, v, min)
	}
	return n, nil
}

func parseDuration(name, v string) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, fmt.Errorf("pooldriver: %s=%q: not a duration (want e.g. 500ms, 30s, 5m)", name, v)
	}
	if d < 0 {
		return 0, fmt.Errorf("pooldriver: %s=%q: must not be negative", name, v)
	}
	return d, nil
}
