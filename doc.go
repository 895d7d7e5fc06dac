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
// connection while idle. Each statement finds a physical connection — the
// one its transaction or open rows are on, the one bound to its task, or one
// from the pool — and gives it back when nothing pins it.
//
// # Tasks
//
// A context can carry a task ([WithTask], [Middleware]). While a task's
// physical connection is pinned, every statement run with the task's context
// runs on it, through any *sql.DB method: a raw BEGIN ... COMMIT across
// separate db.ExecContext calls works. In [SessionMode] the task keeps its
// connection until it ends, so session state (SET, temporary tables,
// advisory locks) survives across calls. When a task ends, its open
// transaction is rolled back and, in session mode, its session reset, before
// the connection is reused.
//
// # DSN
//
// The scheme picks the dialect, which must be imported: postgres://,
// postgresql:// and key=value strings (dialects/postgres), mysql://
// followed by a go-sql-driver DSN (dialects/mysql), odbc:// followed by an
// ODBC connection string (dialects/odbc). pooldriver's own settings are the
// query parameters pool_max_conns, pool_min_conns, pool_acquire_timeout,
// pool_health_check_period, pool_max_conn_lifetime, pool_max_conn_idle_time
// and pool_mode; they are removed before the DSN reaches the real driver, and
// the [Option] functions override them.
package pooldriver
