package pooldriver

import (
	"context"
	"log/slog"

	"github.com/pooldriver/pooldriver/dialects"
	"github.com/pooldriver/pooldriver/internal/logline"
	"github.com/pooldriver/pooldriver/pool"
)

// What the Connector logs, when WithLogger gave it a logger. Every line
// carries the attribute "pool" (WithPoolName); none carries a password.
// Each kind of line (level and message) at INFO or above is written at
// most once per logInterval (10s) per pool, with "suppressed", the count
// of the lines of its kind held back since, the last of them written when
// the interval ends (loglimit.go); every WARN line names the statement's
// "site" (its first frame outside database/sql and pooldriver, or the
// function a goroutine of pooldriver's own runs) and, for a misuse, the
// "remedy".
//
//	DEBUG connection opened, connection closed (with the reason), session reset
//	INFO  the pool opened, with its Config; connected again after failed
//	      attempts; a connection reported as leaked came back; the circuit
//	      breaker closed again or half-open (trying one connection)
//	DEBUG (also) a transaction its task's end rolled back, or found gone
//	      with its connection (closed by a statement its context
//	      interrupted), with the task's context for the handler
//	WARN  transactions rolled back because a hold ended with them open,
//	      failed rollbacks and resets,
//	      connect failures in a row (the 2nd, 4th, 8th, ...), acquire timeouts,
//	      leaks (leak.go), the circuit breaker open or limited (the server
//	      at its connection limit)

// PoolName returns the name of c's pool: the one WithPoolName or pool_name
// gave, else host:port/database, the name the OpenTelemetry conventions
// give a pool without one (server.address:server.port/db.namespace), such
// as db.example.com:5432/shop. The host is the DSN's first (PostgreSQL
// tries the others after it); for a unix socket it is the socket's path
// (PostgreSQL: its directory, with the port of the socket's name; MySQL:
// no port); ":port" or "/database" is left out where the DSN has none and
// the driver no default. Where the DSN names no host (Wrap of another
// driver's connector, which hides its configuration; an ODBC data source
// name, whose server is in odbc.ini) it is the DSN without its password,
// as String returns it: give such a pool a name. Log lines carry it, and
// the exporters (otelpool, promcollector) use it when given no name. Two
// pools of one service on the same database need names of their own.
func (c *Connector) PoolName() string {
	if c.name != "" {
		return c.name
	}
	return c.poolName()
}

// poolName works PoolName out.
func (c *Connector) poolName() string {
	if c.cfg.Name != "" {
		return c.cfg.Name
	}
	if a, ok := c.tmpl.(dialects.AddressedTemplate); ok {
		if s := a.Address().String(); s != "" {
			return s
		}
	}
	return c.String()
}

// newLogger returns c's logger, with the pool name on every line, or nil
// when nothing is logged.
func (c *Connector) newLogger() *slog.Logger {
	if c.cfg.Logger == nil {
		return nil
	}
	c.logLimit = newLimitedHandler(c.cfg.Logger.Handler())
	return slog.New(c.logLimit).With("pool", c.PoolName())
}

// logAt logs msg at level with err, when there is one, and args.
func (c *Connector) logAt(level slog.Level, msg string, err error, args ...any) {
	logline.At(context.Background(), c.log, level, msg, err, args...)
}

// logBreaker logs a change of the circuit breaker's state, in the words
// of Stats and the metrics (pool.State's String) and what the state means
// for statements: at Warn when it opens or finds the server at its
// connection limit (with the last connect error), at Info when it closes
// or tries a connection. cause holds no password (open redacts it).
func (c *Connector) logBreaker(from, to pool.State, cause error) {
	level, msg := slog.LevelWarn, "circuit breaker "+to.String()+": "
	switch to {
	case pool.Active:
		level, cause, msg = slog.LevelInfo, nil, msg+"connecting normally again"
	case pool.Recovering:
		level, msg = slog.LevelInfo, msg+"trying one new connection"
	case pool.Inactive:
		msg += "not dialing new connections; statements that need one fail at once (ErrCircuitOpen)"
	case pool.Limited:
		msg += "the server is at its connection limit; statements wait for a connection in use"
	}
	c.logAt(level, msg, cause, "from", from.String(), "to", to.String())
}

func (c *Connector) logWarn(msg string, err error, args ...any) {
	c.logAt(slog.LevelWarn, msg, err, args...)
}

func (c *Connector) logDebug(msg string, args ...any) {
	c.logAt(slog.LevelDebug, msg, nil, args...)
}

// connectFailed counts a failed attempt to open a physical connection and
// logs it: the first at DEBUG (the pool retries), then WARN at the 2nd,
// 4th, 8th, ... in a row, so that a database down for long is reported
// without a line per attempt.
func (c *Connector) connectFailed(err error) {
	// Every failed connect is the share's own: MariaDB counts failed
	// logins, whatever refused them (dialects/mysql's load.go); one that
	// never reached the server makes the count of others' too small, never
	// too large.
	c.share.refusals.Add(1)
	n := c.dials.failed()
	if n == 1 {
		c.logAt(slog.LevelDebug, "connect failed", err)
		return
	}
	if n&(n-1) == 0 {
		// Spaced already: not held back by the limiter.
		logline.At(context.WithValue(context.Background(), spacedKey{}, true), c.log, slog.LevelWarn, "connect failed repeatedly", err, "failures_in_a_row", n)
	}
}

// connected ends a run of failed attempts.
func (c *Connector) connected() {
	if n := c.dials.failures.Swap(0); n > 1 {
		c.logAt(slog.LevelInfo, "connected again", nil, "failures_before", n)
	}
}
