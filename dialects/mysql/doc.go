// Package mysql is the pooldriver dialect for MySQL and MariaDB, built on
// github.com/go-sql-driver/mysql.
//
// Import it for its side effect; it registers the scheme "mysql":
//
//	import _ "github.com/pooldriver/pooldriver/dialects/mysql"
//
// A DSN is "mysql://" followed by a go-sql-driver DSN:
//
//	mysql://app:secret@tcp(db:3306)/shop?parseTime=true&pool_max_conns=20
//
// Parameters whose key starts with "pool_" belong to pooldriver and are
// removed; every other parameter reaches the driver exactly as written.
//
// # Transaction state
//
// The driver keeps the server's status flags (SERVER_STATUS_IN_TRANS) to
// itself, so each connection keeps a belief about its session: whether a
// transaction is open and whether autocommit is on. TxStatus answers from
// the belief, and first asks the server (SELECT @@in_transaction,
// @@autocommit: one round trip) when the statement just run may have changed
// it. The rule:
//
//   - autocommit believed off: ask after every statement, since any of them
//     may open a transaction;
//   - otherwise ask unless every statement in the text starts with SELECT,
//     INSERT, UPDATE, DELETE, REPLACE, WITH, VALUES, TABLE, SHOW, DESC,
//     DESCRIBE, EXPLAIN, HELP, DO, USE or '(' (comments skipped). BEGIN,
//     START, COMMIT, ROLLBACK, SET, XA, CALL, LOCK, UNLOCK, SAVEPOINT,
//     RELEASE, PREPARE/EXECUTE, DDL (which commits implicitly) and anything
//     unknown all ask, as does an executable comment (/*! ... */) or a text
//     the lexer cannot split with certainty.
//
// So a plain SELECT or INSERT outside a transaction costs no extra round
// trip. The belief is also read when the connection opens and after a reset.
// It relies on pooldriver reporting every statement run outside a BeginTx
// transaction. Inside a transaction, a plain statement that fails with a
// deadlock makes InnoDB roll back without the belief noticing until the
// next non-plain statement; that errs on the safe side (the connection stays
// pinned, and the final ROLLBACK is harmless).
//
// MySQL servers without @@in_transaction (it is a MariaDB variable) fall
// back to reading @@autocommit and inferring the transaction from the
// keywords; that is best effort.
//
// # Session reset
//
// The driver has no method for COM_RESET_CONNECTION (its ResetSession only
// checks that the socket is alive) and MariaDB has no SQL statement for it.
// The dialect therefore dials the socket itself (through mysql.Config's
// DialFunc) and sends COM_RESET_CONNECTION on it while the driver is idle.
// The server then rolls back, drops temporary tables, user variables,
// prepared statements and GET_LOCK locks, and reverts session variables to
// the global values; the dialect then repeats what the driver did after
// logging in: SET NAMES, the DSN's system variables, the DSN's database.
//
// That needs the plain socket: with TLS, compression or a custom network
// name (mysql.RegisterDialContext) ResetSession returns an error and
// pooldriver closes the connection instead. A dialer registered for "tcp"
// itself is bypassed.
//
// # Session changes
//
// A connection counts as changed, and is reset (or replaced) before anyone
// else uses it, after a statement that may leave state in the session:
// every SET (SET TRANSACTION too, which sets the next transaction of the
// session, whoever runs it), user variables assigned with SELECT … INTO
// @var or :=, GET_LOCK, RELEASE_LOCK and RELEASE_ALL_LOCKS, LOCK and UNLOCK
// TABLES, FLUSH, CREATE and DROP TEMPORARY TABLE, PREPARE, DEALLOCATE and
// DROP PREPARE, USE, HANDLER, XA, and any executable comment (/*! … */).
// Statements are read by a lexer that knows MySQL's quoting and comments;
// where a backslash in a string makes its end depend on
// NO_BACKSLASH_ESCAPES, both readings are tried, and what it cannot read
// with certainty counts as a change. Stored procedures and functions are
// not looked into.
//
// # Wrap
//
// Importing this package also teaches pooldriver.Wrap to recognize
// go-sql-driver/mysql's connections: pooldriver.Wrap(connector) tracks
// transactions (through @@in_transaction, as above) and session changes as
// a mysql:// DSN does. The dialect did not dial such a connection, so its
// session cannot be reset: ResetSession returns an error matching
// dialects.ErrUnsupported, and pooldriver replaces a changed connection
// instead of resetting it.
package mysql
