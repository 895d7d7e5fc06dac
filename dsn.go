package pooldriver

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pooldriver/pooldriver/dialects"
)

// The pool_* parameters a DSN may carry. They are pooldriver's own and are
// removed before the DSN reaches the real driver.
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
)

var knownParams = []string{
	paramAcquireTimeout, paramConnectTimeout, paramHealthCheckPeriod, paramLeakThreshold, paramMaxConnIdleTime,
	paramMaxConnLifetime, paramLifetimeJitter, paramMaxConns, paramMinConns, paramMinIdleConns, paramMode, paramName,
	paramResetAlways, paramServerPooling,
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

// applyParams sets s from the DSN's pool_* parameters, in a fixed order so
// that the first error reported is always the same.
func applyParams(s *settings, params map[string]string) error {
	keys := make([]string, 0, len(params))
	for k := range params {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		v := params[k]
		var err error
		switch k {
		case paramMaxConns:
			s.maxConns, err = parseInt(k, v, 1)
		case paramMinConns:
			s.minConns, err = parseInt(k, v, 0)
		case paramAcquireTimeout:
			s.acquireTimeout, err = parseDuration(k, v)
		case paramConnectTimeout:
			s.connectTimeout, err = parseDuration(k, v)
		case paramHealthCheckPeriod:
			s.healthCheckPeriod, err = parseDuration(k, v)
		case paramMaxConnLifetime:
			s.maxConnLifetime, err = parseDuration(k, v)
		case paramMaxConnIdleTime:
			s.maxConnIdleTime, err = parseDuration(k, v)
		case paramLifetimeJitter:
			s.lifetimeJitter, err = parseDuration(k, v)
		case paramMinIdleConns:
			s.minIdleConns, err = parseInt(k, v, 0)
		case paramLeakThreshold:
			s.leakThreshold, err = parseDuration(k, v)
		case paramName:
			if v == "" {
				err = fmt.Errorf("pooldriver: %s is empty", k)
			}
			s.poolName = v
		case paramMode:
			s.mode, err = ParseMode(v)
			if err != nil {
				err = fmt.Errorf("pooldriver: %s=%q: %w", k, v, err)
			}
		case paramResetAlways:
			s.resetAlways, err = strconv.ParseBool(v)
			if err != nil {
				err = fmt.Errorf("pooldriver: %s=%q: not a boolean (want true or false)", k, v)
			}
		case paramServerPooling:
			s.serverPooling, err = dialects.ParseServerPooling(v)
			if err != nil {
				err = fmt.Errorf("pooldriver: %s=%q: %w", k, v, err)
			}
		default:
			err = fmt.Errorf("pooldriver: unknown parameter %s (known: %s)", k, strings.Join(knownParams, ", "))
		}
		if err != nil {
			return err
		}
	}
	return nil
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

// validate checks what no single parameter can: the settings together.
func (s *settings) validate() error {
	if s.minConns > s.maxConns {
		return fmt.Errorf("pooldriver: pool_min_conns/WithMinConns (%d) is greater than pool_max_conns/WithMaxConns (%d)", s.minConns, s.maxConns)
	}
	if s.serverPooling == dialects.ServerPoolingTransaction && s.mode == SessionMode {
		return fmt.Errorf("pooldriver: pool_mode=session (or WithMode(SessionMode)) together with pool_server_pooling=transaction: %w", ErrNoServerSession)
	}
	if s.resetAlways && s.serverPooling == dialects.ServerPoolingTransaction {
		return fmt.Errorf("pooldriver: pool_reset_always (or WithResetAlways) together with pool_server_pooling=transaction: the pooler, not pooldriver, decides which server session a client gets next; set its own reset (PgBouncer: server_reset_query_always = 1)")
	}
	if s.minIdleConns > s.maxConns {
		return fmt.Errorf("pooldriver: pool_min_idle_conns/WithMinIdleConns (%d) is greater than pool_max_conns/WithMaxConns (%d)", s.minIdleConns, s.maxConns)
	}
	return nil
}
