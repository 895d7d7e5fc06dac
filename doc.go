// Package pooldriver is a transparent connection-pooling driver for
// database/sql. A service swaps it in with one line and keeps its queries,
// its ORM and its tests:
//
//	import (
//		"database/sql"
//
//		"github.com/pooldriver/pooldriver"
//		_ "github.com/pooldriver/pooldriver/dialects/postgres"
//	)
//
//	db := sql.OpenDB(pooldriver.New("postgres://app@db:5432/shop?pool_max_conns=20"))
//
// Underneath, pooldriver owns the real server connections in a pool of its
// own: at most pool_max_conns of them whatever database/sql's settings,
// opened lazily, waited for in arrival order, checked before use, expired
// by lifetime and idle time. database/sql's contract is kept: a *sql.Tx is
// its own transaction, a *sql.Conn one server session, and no statement
// runs in another user's transaction or sees another user's session
// state.
//
// # Opening
//
// Each way takes a DSN whose scheme picks the dialect, which must be
// imported as a driver would be: postgres://, postgresql:// and key=value
// strings (dialects/postgres), mysql:// (dialects/mysql), odbc://
// (dialects/odbc, a module of its own).
//
//	db := sql.OpenDB(pooldriver.New(dsn))             // errors surface at first use
//	c := pooldriver.New(dsn, opts...); err := c.Err() // validated now
//	db, err := sql.Open("pooldriver", dsn)            // the registered driver
//	db, err := pooldriver.Open(dsn, opts...)          // sql.OpenDB, with database/sql's settings for it
//	db := sql.OpenDB(pooldriver.Wrap(otherConnector)) // any database/sql driver, pooled
//
// [ParseConfig] reads a DSN into a [Config], to read, change and log before
// [NewConnectorWithConfig] opens a [Connector] with it, as with pgxpool.
// Read the pool's state with [Connector.Stats] ([ConnectorOf] finds the
// Connector under any *sql.DB of pooldriver's), not db.Stats(), which
// describes database/sql's own logical connections; and leave
// SetMaxOpenConns unset, since pool_max_conns bounds the server
// connections.
//
// # Tasks
//
// A context can carry a task ([WithTask], or [Middleware] for one task per
// HTTP request). While a task keeps its connection, every statement run
// with its context runs on it, through any *sql.DB method, so a raw
// BEGIN ... COMMIT, a SET, a temporary table or an advisory lock works
// across separate db.ExecContext calls (or ORM calls) without threading a
// *sql.Conn through every layer:
//
//	ctx, end := pooldriver.WithTask(ctx)
//	defer end() // rolls back what is left open
//	db.ExecContext(ctx, "BEGIN")
//	db.ExecContext(ctx, "UPDATE accounts SET balance = balance - $1 WHERE id = $2", amount, from)
//	db.ExecContext(ctx, "COMMIT")
//
// In [TransactionMode] (the default) the task keeps its connection while a
// raw transaction is open or once its session changed; in [SessionMode]
// from its first statement until it ends. When a task ends (end called,
// its context done, the handler returned), every transaction of the task
// is rolled back and its session reset before the connection is reused.
// A *sql.Tx begun with a task's context is its own transaction, except
// that one begun while the task has a raw transaction open (an ORM's unit
// of work) nests in it as a savepoint.
//
// A connection goes back to the pool unreset only when its session is
// known to be as it started. A call of a function or procedure the dialect
// does not know counts as a change (default-deny), unless you vouch for
// your functions with pool_trust_functions; with pool_reset_always every
// session is reset at the end of every hold.
//
// # Settings
//
// pooldriver's settings are query parameters of the DSN, removed before it
// reaches the real driver; each is a field of [Config], and the [Option]
// functions set the same fields:
//
//	pool_max_conns                 MaxConns               10
//	pool_min_conns                 MinConns               0
//	pool_min_idle_conns            MinIdleConns           0
//	pool_acquire_timeout           AcquireTimeout         30s
//	pool_connect_timeout           ConnectTimeout         10s
//	pool_health_check_period       HealthCheckPeriod      30s
//	pool_max_conn_lifetime         MaxConnLifetime        1h
//	pool_max_conn_lifetime_jitter  MaxConnLifetimeJitter  a tenth of the lifetime
//	pool_max_conn_idle_time        MaxConnIdleTime        30m
//	pool_leak_detection_threshold  LeakDetectionThreshold 0
//	pool_name                      Name                   host:port/database
//	pool_mode                      Mode                   transaction
//	pool_reads                     Reads                  primary
//	pool_max_replica_lag           MaxReplicaLag          1s
//	pool_read_wait                 ReadWait               5ms
//	pool_server_pooling            ServerPooling          unset
//	pool_target                    Target                 any
//	pool_reset_always              ResetAlways            false
//	pool_trust_functions           TrustFunctions         false
//
// Hooks on a connection's life (AfterConnect, BeforeAcquire, AfterRelease,
// BeforeClose, BeforeConnect), credentials fetched per connection, a
// logger, a circuit breaker and a [Tracer] are Config fields too. A value
// that makes no sense is an error naming the parameter and the value; no
// password appears in any error, log line or printed Config.
//
// # Errors
//
// These match with [errors.Is], through database/sql too:
// [ErrAcquireTimeout] (an [AcquireTimeoutError] with the pool's state; it
// also matches [context.DeadlineExceeded]), [ErrServerRefused] (a connect
// error that trying again does not cure, wrapping the server's), [ErrBackoff],
// [ErrCircuitOpen], [ErrClosed], [ErrConnLost] (a statement whose
// transaction or session was lost, or whose reply was lost after it was
// sent: never retried elsewhere, never a silent autocommit),
// [ErrTaskEnded], [ErrConnBusy], [ErrSessionBusy], [ErrTaskConnBusy] and
// [ErrNoServerSession].
//
// The README has the whole contract, side by side with plain database/sql,
// and how to operate the pool; docs/design.md in the repository, how it is
// kept.
package pooldriver
