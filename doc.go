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
// or, through the registered driver name,
//
//	db, err := sql.Open("pooldriver", "postgres://app@db:5432/shop?pool_max_conns=20")
//
// or around any other driver's connector: sql.OpenDB(pooldriver.Wrap(connector)).
//
// # Two kinds of connection
//
// Physical connections are real connections to the server, created lazily
// from a credential template and owned by pooldriver's own pool (package
// pool): bounded by pool_max_conns whatever database/sql's settings,
// pre-warmed to pool_min_conns, waited for in FIFO order, health-checked in
// the background, expired by lifetime and idle time. Logical connections are
// what database/sql sees: cheap, without I/O, holding no physical
// connection while idle.
//
// database/sql's contract is kept: a logical connection keeps the physical
// connection of its first statement until database/sql takes it back (a
// hold: one db.Exec, a *sql.Conn until Close, a *sql.Tx until Commit or
// Rollback), so a *sql.Tx is its own transaction and a *sql.Conn one
// session. When a hold ends, a transaction left open is rolled back and a
// changed session reset before anyone else gets the connection.
//
// A hold is in one of a few states, changed by one function (see README,
// "How that works"):
//
//	none ──► own ──► shared (bound to a task)     any ──► lost ──► none
//	          ╰──► reachable (a task's *sql.Tx)    none ──► closed
//
// own: nobody else can reach the physical connection (db.Exec outside a
// task runs without taking its lock); reachable: the task's end may roll
// back a *sql.Tx on it; shared: the task's other holds use it too; lost:
// every later statement of the hold fails with [ErrConnLost].
//
// # Tasks
//
// A context can carry a task ([WithTask], [Middleware]). While a task keeps
// its physical connection, every hold that starts with the task's context
// runs on it, through any *sql.DB method: a raw BEGIN ... COMMIT, or a SET,
// across separate db.ExecContext calls works. In [TransactionMode] the task
// keeps it while a raw transaction is open or after its session changed; in
// [SessionMode] until it ends. When a task ends, every transaction of the
// task is rolled back and its session reset before the connection is
// reused. A *sql.Tx begun with a task's context is still its own
// transaction: the task's other statements do not run inside it. The one
// exception: begun while the task's connection has a raw transaction open,
// it nests in that transaction as a savepoint (an ORM's unit of work
// inside the task's transaction: GORM's default transaction, bun's
// RunInTx), and the task's COMMIT or ROLLBACK decides for it.
//
// A connection goes back unreset only when its session is known to be as
// it started: the server said so, or every statement was provably
// harmless (a call of a function the dialect does not know counts as a
// change unless pool_trust_functions vouches for it). Resets run off the
// caller's path, as the connection goes back to the pool.
//
// # DSN and Config
//
// The scheme picks the dialect, which must be imported: postgres://,
// postgresql:// and key=value strings (dialects/postgres), mysql://
// followed by a go-sql-driver DSN (dialects/mysql), odbc:// followed by an
// ODBC connection string (dialects/odbc). pooldriver's own settings are
// query parameters, removed before the DSN reaches the real driver; each
// is a field of [Config], and the [Option] functions override them:
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
//	pool_server_pooling            ServerPooling          unset
//	pool_reset_always              ResetAlways            false
//	pool_trust_functions           TrustFunctions         false
//
// [ParseConfig] reads a DSN into a Config, to read, change and log before
// [NewConnectorWithConfig] opens a Connector with it, as with pgxpool.
package pooldriver
