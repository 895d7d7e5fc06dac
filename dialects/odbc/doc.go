// Package odbc is the pooldriver dialect for any database reachable
// through unixODBC, built on github.com/alexbrainman/odbc. It is proved
// against PostgreSQL (psqlODBC, Debian's odbc-postgresql) and MariaDB
// (MariaDB Connector/ODBC, Debian's odbc-mariadb).
//
// Import it for its side effect; it registers the scheme "odbc":
//
//	import _ "github.com/pooldriver/pooldriver/dialects/odbc"
//
//	db := sql.OpenDB(pooldriver.New("odbc://Driver={PostgreSQL Unicode};Server=db;Port=5432;Database=shop;UID=app;PWD={s;cr}}t};pool_max_conns=20"))
//	db, err := sql.Open("pooldriver", "odbc://shop-dsn;pool_max_conns=20")
//
// # cgo, and a module of its own
//
// The odbc driver needs cgo and unixODBC's headers and libraries (Debian:
// unixodbc-dev, plus a driver such as odbc-postgresql or odbc-mariadb).
// This package is therefore a Go module of its own,
// github.com/pooldriver/pooldriver/dialects/odbc: building or testing the
// root module (go build ./..., go test ./...) never compiles it, needs no
// cgo and adds nothing to the root's go.mod. Only a program that imports this
// package pays for cgo. Its connection-string reader and writer, package
// [github.com/pooldriver/pooldriver/dialects/odbc/connstr], is pure Go.
//
// # DSN
//
// "odbc://" is followed by an ODBC connection string, or by a data source
// name of odbc.ini (which may be followed by ";" and more attributes).
// Attributes whose keyword starts with "pool_" belong to pooldriver and are
// removed; so are the credentials (UID, USER, USERNAME; PWD, PASSWORD),
// which the template keeps apart. Every other attribute reaches the driver
// exactly as written. FILEDSN and SAVEFILE are refused, and so are a
// connection string that readers could split differently (see connstr) and
// more than one DRIVER or DSN.
//
// Every new physical connection gets a connection string built afresh: the
// attributes as written, for psqlODBC UseServerSidePrepare=0 (see
// Transactions), then UID and PWD for the credentials of that
// connection (the template's, or those of pooldriver.WithCredentials),
// written as the driver reads them: for psqlODBC, which removes braces from
// PWD only and URL-decodes a PWD without them, UID plain and PWD in braces
// ('}' doubled); for MariaDB's driver both in braces; for other drivers each
// plain when it needs no braces, in braces otherwise. A value that its
// driver would read differently is an error, never a silently altered
// string: a ';' or leading '{' in a psqlODBC user name, leading or trailing spaces
// for MariaDB's driver (which trims them even inside braces), a NUL, invalid
// UTF-8, or a character that unixODBC 2.3 misreads when it looks for DRIVER
// and DSN (it narrows UTF-16 to one byte per code unit, so U+017D 'Ž' reads
// as '}'). The built string never appears in an error or a log, and the
// password is scrubbed from the driver's connect errors.
//
// # The server behind the driver
//
// The dialect needs to know the server for transaction state, transaction
// options and session reset. It reads the driver's name (the DRIVER
// attribute, or the data source's Driver entry in odbc.ini) and library
// (odbcinst.ini) through unixODBC on the first Open: a name or library
// containing "postgres" or "psqlodbc" means PostgreSQL; "mariadb", "mysql",
// "maodbc" or "myodbc" means MariaDB/MySQL; anything else is generic.
//
// # No third pool
//
// unixODBC keeps a disconnected connection open for reuse when [ODBC]
// Pooling is on in odbcinst.ini and the driver's section sets CPTimeout
// (alexbrainman/odbc asks for pooling on its environment, but unixODBC 2.3
// ignores that request: only the process-wide switch counts). Such a
// connection would outlive pooldriver's close and form a second pool under
// pooldriver's own, handing back sessions pooldriver believes gone. The first
// Open therefore reads both settings, through unixODBC's own
// SQLGetPrivateProfileString, and refuses to connect when they are on for the
// template's driver. (A program that switches pooling on itself, with
// SQLSetEnvAttr on a null environment, is not detected.) The integration
// tests check on the servers that closing a connection ends its session.
//
// # Transactions
//
// The odbc driver only turns autocommit off and on, and does not track
// anything. The dialect's connection (Conn.Driver) therefore begins
// transactions itself. On PostgreSQL BeginTx runs BEGIN [ISOLATION LEVEL
// ...][, READ ONLY]; on MariaDB/MySQL SET TRANSACTION ISOLATION LEVEL ...
// (for the next transaction) and START TRANSACTION [READ ONLY]; Commit and
// Rollback run COMMIT and ROLLBACK. On other servers it uses the driver's
// Begin, and refuses an isolation level or read-only mode with an error
// before anything runs. sql.LevelSnapshot, LevelWriteCommitted and
// LevelLinearizable are refused everywhere.
//
// psqlODBC, with server-side prepared statements (its default), does not
// notice that a raw BEGIN opened a transaction and, autocommit being on,
// sends COMMIT after the next statement: raw transactions would silently
// commit statement by statement. The dialect therefore adds
// UseServerSidePrepare=0 for psqlODBC (parameters are then interpolated by
// the driver), and refuses a DSN that sets it to anything else. psqlODBC
// also wraps each statement inside a transaction in a savepoint, so an error
// does not abort the transaction, unlike with libpq-based drivers.
//
// For raw statements (BEGIN, COMMIT, ... run with Exec) TxStatus keeps a
// belief, updated from the statements' keywords and checked with the
// server when they leave it unsure:
//
//   - PostgreSQL: BEGIN/START TRANSACTION open, COMMIT/END/ROLLBACK/ABORT/
//     PREPARE TRANSACTION end (not ROLLBACK TO, not AND CHAIN); other
//     statements change nothing, except CALL, DO, a text of several
//     statements that opens or ends one, and a text the lexer cannot split,
//     after which the dialect asks the server: it sets a setting for the
//     current transaction only (set_config(..., true)) and reads it back
//     in the next statement, which sees it only inside a transaction; in a
//     failed transaction the first statement fails with 25P02.
//   - MariaDB/MySQL: as the mysql dialect, SELECT @@in_transaction,
//     @@autocommit after every statement that is not plainly SELECT,
//     INSERT, UPDATE, DELETE, ... (and after every statement while
//     autocommit is off). MySQL lacks @@in_transaction: keywords and
//     @@autocommit, best effort.
//   - generic: keywords only. A text the lexer cannot split, or CALL,
//     counts as opening a transaction: the connection stays pinned and is
//     rolled back (harmlessly) at the task's end.
//
// # Errors and cancellation
//
// The odbc driver reports a lost connection (SQLSTATE 08S01) as
// driver.ErrBadConn even after a statement was sent. The dialect returns
// driver.ErrBadConn only when nothing can have run (Prepare, BeginTx, a
// connection already known lost); otherwise it returns an ordinary error,
// so that database/sql never runs the statement twice, and reports the
// connection invalid (driver.Validator) so that pooldriver closes it.
// SQLSTATE class 08 and MariaDB's "gone away", "lost connection" and
// "killed" errors count as lost, too.
//
// Queries are cancelled (SQLCancel) when their context is done. The odbc
// driver offers no cancellation for statements that return no rows nor for
// connecting: their context is checked before they start. Waiting for a
// connection from the pool is pooldriver's and honours the context.
//
// # Session reset
//
// In session mode, at the end of a task:
//
//   - PostgreSQL: ROLLBACK, DISCARD ALL, then the settings the driver made
//     when it connected are made again (every setting pg_settings listed
//     with source "session" right after connecting: psqlODBC's DateStyle and
//     extra_float_digits, and those of the ConnSettings attribute).
//   - MariaDB/MySQL: there is no reset statement, and COM_RESET_CONNECTION
//     is out of reach through ODBC: the connection is closed and a new one
//     opened.
//   - generic: the connection is closed and a new one opened.
//
// The same happens to a connection whose session a statement changed, once
// no task keeps it. The statement is read with the rules of the server the
// driver serves, as the postgres and mysql dialects read theirs: SET (not
// SET LOCAL on PostgreSQL), set_config(…, false), advisory locks and
// GET_LOCK, temporary tables, PREPARE, LISTEN, USE, LOCK TABLES, user
// variables, ...; for a generic server, the rules of both together, plus
// SQLite's PRAGMA and ATTACH, SQL Server's #temporary tables and
// application locks, and Oracle's ALTER SESSION. What the lexer cannot read
// with certainty counts as a change.
//
// # Health
//
// Ping runs SELECT 1 on PostgreSQL and MariaDB/MySQL. For other servers no
// statement works everywhere: Ping only reports a connection already known
// to be lost.
package odbc
