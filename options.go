package pooldriver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/pooldriver/pooldriver/dialects"
	"github.com/pooldriver/pooldriver/pool"
)

// Option sets a field of a Connector's Config, over the DSN's pool_*
// parameters: a shorthand for [ParseConfig], a change of the field and
// [NewConnectorWithConfig]. A value is checked as the field's is (the table
// of settings); a bad one is reported by the Connector's Err and its first
// Connect (Open returns it), naming the option and the value.
type Option func(*Config) error

// WithMaxConns sets the maximum number of physical connections (pool_max_conns);
// n must be at least 1.
func WithMaxConns(n int) Option {
	return option("WithMaxConns", n, func(c *Config) { c.MaxConns = n })
}

// WithMinConns sets the number of physical connections kept open and created
// in the background after start (pool_min_conns); 0 ≤ n ≤ max conns.
func WithMinConns(n int) Option {
	return option("WithMinConns", n, func(c *Config) { c.MinConns = n })
}

// WithAcquireTimeout bounds the wait for a physical connection
// (pool_acquire_timeout); 0 leaves only the caller's context.
func WithAcquireTimeout(d time.Duration) Option {
	return option("WithAcquireTimeout", d, func(c *Config) { c.AcquireTimeout = d })
}

// WithConnectTimeout bounds each attempt to open a physical connection
// (pool_connect_timeout; default 10s), on top of the
// driver's own connect_timeout or timeout: a server that does not answer
// (a network black hole) then frees the pool's slot in bounded time
// instead of holding it forever. 0: only the driver's own limit. The
// attempt still outlives the caller that started it and gave up: the next
// waiter gets the connection.
func WithConnectTimeout(d time.Duration) Option {
	return option("WithConnectTimeout", d, func(c *Config) { c.ConnectTimeout = d })
}

// WithHealthCheckPeriod sets how often idle connections are checked,
// expired and topped up to the minimum (pool_health_check_period); 0
// disables the background check.
func WithHealthCheckPeriod(d time.Duration) Option {
	return option("WithHealthCheckPeriod", d, func(c *Config) { c.HealthCheckPeriod = d })
}

// WithMaxConnLifetime closes a physical connection this long after it was
// opened, once it is idle (pool_max_conn_lifetime); 0: unlimited. The
// jitter, unless given, is a tenth of it.
func WithMaxConnLifetime(d time.Duration) Option {
	return option("WithMaxConnLifetime", d, func(c *Config) { c.MaxConnLifetime = d })
}

// WithMaxConnLifetimeJitter adds to each physical connection's lifetime a
// random duration below d, drawn when it is opened
// (pool_max_conn_lifetime_jitter), so that connections opened together
// (pool_min_conns) are not all closed and reopened together. Default: a
// tenth of the lifetime, however the lifetime was set (worked out when the
// Connector is made); 0: none.
func WithMaxConnLifetimeJitter(d time.Duration) Option {
	return option("WithMaxConnLifetimeJitter", d, func(c *Config) { c.MaxConnLifetimeJitter, c.jitterGiven = d, true })
}

// WithMinIdleConns keeps n physical connections idle, ready for the next
// statements, as far as pool_max_conns allows (pool_min_idle_conns): the
// healthcheck opens more while fewer are idle. Default 0.
func WithMinIdleConns(n int) Option {
	return option("WithMinIdleConns", n, func(c *Config) { c.MinIdleConns = n })
}

// WithMaxConnIdleTime closes a physical connection idle this long
// (pool_max_conn_idle_time); 0: unlimited.
func WithMaxConnIdleTime(d time.Duration) Option {
	return option("WithMaxConnIdleTime", d, func(c *Config) { c.MaxConnIdleTime = d })
}

// WithCleanupTimeout bounds each rollback and session reset run when a task
// ends or a connection comes back dirty (default 5s); it
// must be positive. A connection whose cleanup does not finish in time is
// closed, never reused.
func WithCleanupTimeout(d time.Duration) Option {
	return option("WithCleanupTimeout", d, func(c *Config) { c.CleanupTimeout = d })
}

// WithMode sets the default mode of tasks that do not choose one (pool_mode).
func WithMode(m Mode) Option {
	return option("WithMode", int(m), func(c *Config) { c.Mode = m }) // the number: an unknown Mode has no word
}

// WithResetAlways, when on, resets the session of every connection at the
// end of every hold before another user can have it (pool_reset_always;
// PgBouncer's server_reset_query_always): DISCARD ALL on PostgreSQL,
// COM_RESET_CONNECTION on MySQL/MariaDB, a new connection where the dialect
// cannot reset one. Without it, pooldriver resets a connection only when it
// saw the session change, from what the server reports and the statement's
// text; a change made where neither shows (PostgreSQL 15 does not report
// search_path, which a function may set) then reaches the next user, as
// with the plain driver. A task's connection is reset when the task lets
// go of it. It costs a round trip or two per hold (docs/design.md gives
// the measured cost).
// Default: off.
func WithResetAlways(on bool) Option {
	return option("WithResetAlways", on, func(c *Config) { c.ResetAlways = on })
}

// WithTrustFunctions, when on, vouches for every function and procedure the
// service's statements call (pool_trust_functions): a call of one the
// dialect does not know to leave the session alone then counts as a
// session change only for what its text or the server shows. By default
// (off) such a call counts as one, and the connection is reset before
// anyone else uses it: a function may switch the role, the search_path or
// the encoding, or take a lock, where neither the statement's text nor
// the server says so. Turn it on only for functions that change no session
// state; what one changes then reaches the next user.
func WithTrustFunctions(on bool) Option {
	return option("WithTrustFunctions", on, func(c *Config) { c.TrustFunctions = on })
}

// WithCredentials sets a function called for every new physical connection
// to get the user and password it logs in with, in place of the DSN's: a
// rotated password is picked up by the next connection opened, while open
// ones keep working.
func WithCredentials(f func(ctx context.Context) (user, password string, err error)) Option {
	return hookOption("WithCredentials", f == nil, func(c *Config) { c.Credentials = f })
}

// WithLogger sets where the Connector reports what it does on its own:
// connections opened, closed (with the reason) and reset (debug); automatic
// rollbacks, failed rollbacks and resets, repeated connect failures,
// acquire timeouts and leaks (warn). Every line carries the attribute
// "pool" (WithPoolName). No password is ever logged. Default: nothing is
// logged.
func WithLogger(l *slog.Logger) Option {
	return func(c *Config) error {
		c.Logger = l
		return nil
	}
}

// WithCircuitBreaker drives the pool's circuit breaker with s.
//
// The default, pool.NewThresholdStrategy(0, 250*time.Millisecond), acts only at the server's connection limit
// (PostgreSQL SQLSTATE 53300, MySQL 1040/1203/1226): no more connections
// are opened, and statements wait for one of the pool's within their
// context instead of failing; after the cool-down (jittered, so that
// several service replicas do not probe together) one trial connection is
// opened, also by a pool that has none. While the server is full a pool
// gives back connections idle for over a second, keeping its minimum, so
// that replicas converge to a fair share. A server that is down or
// unreachable is dialled again one attempt per back-off step (10 ms,
// doubling to 25 ms) while callers wait: a caller waits for a connection in
// use to come back or for its turn of attempt, and fails only when its own
// attempt failed with nothing in use, or its deadline comes first. The
// first success serves every waiting caller.
//
// pool.NewThresholdStrategy(n, coolDown) with n > 0 also opens the circuit
// after n failed or timed-out connection attempts in a row (a failed ping
// of an idle connection counts, but never opens it alone): statements that
// need a new connection then fail at once with ErrCircuitOpen instead of
// each waiting for a dial to fail, until a trial connection, one per
// cool-down, succeeds. It trades fast failure during an outage for up to a
// cool-down of failures after it. Errors of statements never count, and an
// idle connection is handed out in every state. pool.Manual leaves the
// breaker to be driven by hand (Connector.Breaker). Changes are logged
// (WithLogger) and counted in Stats.
func WithCircuitBreaker(s pool.Strategy) Option {
	return func(c *Config) error {
		if s == nil {
			return fmt.Errorf("pooldriver: WithCircuitBreaker(nil): a strategy is required")
		}
		c.CircuitBreaker = s
		return nil
	}
}

// option is the Option name, which sets a setting's field with set, then
// checks it as the table of settings says: the check ParseConfig and
// NewConnectorWithConfig make. v is the value, as the message shows it.
func option[T any](name string, v T, set func(*Config)) Option {
	return func(c *Config) error {
		set(c)
		if err := settingBy(name).checkIn(c); err != nil {
			return fmt.Errorf("pooldriver: %s(%v): %w", name, v, err)
		}
		return nil
	}
}

// durationOption is option, by the name leak.go's WithLeakDetection calls
// it.
func durationOption(name string, d time.Duration, set func(*Config)) Option {
	return option(name, d, set)
}

// hookOption is the Option that sets a hook with set, unless it is missing.
func hookOption(name string, missing bool, set func(*Config)) Option {
	return func(c *Config) error {
		if missing {
			return fmt.Errorf("pooldriver: %s(nil): a function is required", name)
		}
		set(c)
		return nil
	}
}

// Hooks on the life of a physical connection, as pgxpool has them. Each
// gets the real driver connection, raw, as RawConn gives it: a *pgx.Conn
// (dialects/postgres), go-sql-driver/mysql's driver.Conn (dialects/mysql),
// an *odbc.Conn (dialects/odbc), the wrapped driver's driver.Conn (Wrap).
// A hook runs with the connection to itself, never at the same time as a
// statement on it. A hook that panics counts as one that failed. Each
// dialect has a typed adapter of every hook, whose function takes its own
// connection type and which says so when given another dialect's:
// postgres.AfterConnect(func(ctx, *pgx.Conn) error), mysql.AfterRelease,
// odbc.BeforeClose, and so on.

// WithBeforeConnect sets f to shape the driver's configuration of every new
// physical connection before it connects: config is that connection's own
// copy, with the credentials filled in, and f may change it. Use the
// dialect's typed adapter, postgres.BeforeConnect (a *pgx.ConnConfig: a
// tracer, DefaultQueryExecMode, OnNotice, ...). An error fails the
// connection attempt. PostgreSQL only: it is rejected (see Connector.Err)
// for other dialects, and with Wrap (configure the wrapped connector
// instead).
func WithBeforeConnect(f func(ctx context.Context, config any) error) Option {
	return hookOption("WithBeforeConnect", f == nil, func(c *Config) { c.BeforeConnect = f })
}

// WithAfterConnect sets f to run on every new physical connection before
// anyone uses it, and again after every session reset (a reset gives the
// session back the state of a new connection, which undoes what f set):
// register types (pgx's TypeMap), set what every session starts with
// (HikariCP's connectionInitSql). What f leaves in the session is what
// pooldriver resets to; f must not leave a transaction open. A reset does
// not undo what lives in the driver (pgx's TypeMap): f may skip it when it
// is there already, sparing a round trip per reset. An error
// closes the connection unused: on a new one, the statement that needed it
// fails with the error (errors.Is reaches it); after a reset, the
// connection is closed instead of reused.
func WithAfterConnect(f func(ctx context.Context, raw any) error) Option {
	return hookOption("WithAfterConnect", f == nil, func(c *Config) { c.AfterConnect = f })
}

// WithBeforeAcquire sets f to run each time a physical connection is taken
// from the pool for a statement, a *sql.Conn, a *sql.Tx or a task, with the
// context of the statement (pgxpool's PrepareConn): check something of the
// connection, say that the server is still the primary. An error closes the
// connection unused and fails the statement with it; return
// driver.ErrBadConn for database/sql to retry on another connection. f
// must not change the session: pooldriver would not know (use
// WithAfterConnect). It runs on every acquire: keep it cheap.
func WithBeforeAcquire(f func(ctx context.Context, raw any) error) Option {
	return hookOption("WithBeforeAcquire", f == nil, func(c *Config) { c.BeforeAcquire = f })
}

// WithAfterRelease sets f to run each time a physical connection goes back
// to the pool, after pooldriver rolled back and reset what was left on it;
// false closes it instead (pgxpool's AfterRelease). It runs in the
// goroutine that ends the statement or hold: keep it cheap.
func WithAfterRelease(f func(raw any) bool) Option {
	return hookOption("WithAfterRelease", f == nil, func(c *Config) { c.AfterRelease = f })
}

// WithBeforeClose sets f to run just before a physical connection is closed
// (pgxpool's BeforeClose).
func WithBeforeClose(f func(raw any)) Option {
	return hookOption("WithBeforeClose", f == nil, func(c *Config) { c.BeforeClose = f })
}

// WithLeakDetection turns leak detection on (pool_leak_detection_threshold):
// a physical connection kept out of the pool longer than threshold is
// reported once; 0 turns it off. Report times are precise to a quarter of
// the threshold (at most a second).
func WithLeakDetection(threshold time.Duration) Option {
	return durationOption("WithLeakDetection", threshold, func(c *Config) { c.LeakDetectionThreshold = threshold })
}

// WithPoolName names the Connector's pool: the attribute "pool" of every
// log line, and the pool name of the exporters' metrics and spans
// (pool_name in the DSN). Default: see Connector.PoolName.
func WithPoolName(name string) Option {
	return func(c *Config) error {
		if name == "" {
			return errors.New("pooldriver: WithPoolName(\"\"): a name is required")
		}
		c.Name = name
		return nil
	}
}

// WithTracer sets t to trace the pool's acquires and connects (see
// [Tracer]); without one, nothing is traced and nothing is paid for it.
func WithTracer(t Tracer) Option {
	return func(c *Config) error {
		if t == nil {
			return errors.New("pooldriver: WithTracer(nil): a Tracer is required")
		}
		c.Tracer = t
		return nil
	}
}

// WithTarget sets which of the DSN's servers a new connection may go to
// (pool_target): dialects.TargetPrimary, the first that takes writes
// (MySQL/MariaDB: @@global.read_only off; PostgreSQL:
// target_session_attrs=read-write), or dialects.TargetAny, the first that
// answers.
func WithTarget(t dialects.Target) Option {
	return option("WithTarget", int(t), func(c *Config) { c.Target = t })
}

// WithReads sets where reads may go (pool_reads).
func WithReads(r Reads) Option {
	return option("WithReads", int(r), func(c *Config) { c.Reads = r })
}

// WithMaxReplicaLag bounds how far behind the primary a standby that
// serves reads may be (pool_max_replica_lag, default 1s).
func WithMaxReplicaLag(d time.Duration) Option {
	return option("WithMaxReplicaLag", d, func(c *Config) { c.MaxReplicaLag = d })
}

// WithReadWait sets how long a read whose position no standby has
// replayed yet (a task's read after its write) waits for a standby close
// behind to replay it, before the primary serves it (pool_read_wait,
// default 5ms; 0: it does not wait).
func WithReadWait(d time.Duration) Option {
	return option("WithReadWait", d, func(c *Config) { c.ReadWait = d })
}
