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
// A tcp address may name several servers, tcp(db1:3306,db2) (in the URL
// form, mysql://app@db1:3306,db2/shop): a connection goes to the first
// that answers or, with pool_target=primary, to the first whose
// @@global.read_only is off; there a write refused because the server
// runs read-only (1290) tells pooldriver to retire every connection
// (LostRole). go-sql-driver's rejectReadOnly=true hides that error behind
// driver.ErrBadConn: leave it off with pool_target=primary.
//
// # Transaction state and session changes, from the wire
//
// The dialect dials the socket of a connection itself (mysql.Config's
// DialFunc) and hands go-sql-driver a watched one: it follows the packets
// the driver writes and the server answers with, and keeps the server
// status flags of every OK and EOF packet, which end every reply:
// SERVER_STATUS_IN_TRANS (a transaction is open), SERVER_STATUS_AUTOCOMMIT
// and SERVER_SESSION_STATE_CHANGED. TxStatus answers from them, with no
// round trip: a raw BEGIN or COMMIT costs the one round trip the plain
// driver makes.
//
// SERVER_SESSION_STATE_CHANGED comes only from a server told to track the
// session (the dialect sets session_track_state_change=ON on every new and
// every reset connection, unless the DSN sets it OFF itself, which the
// dialect then respects; a server or proxy that refuses the SET tracks
// nothing) and to a client that announced
// CLIENT_SESSION_TRACK in its handshake, which go-sql-driver does not: the
// watched socket sets that capability bit in the handshake response it
// writes, when the server offers it. The server then reports, in the OK
// packet of the statement that did it, a user variable set (SET,
// EXECUTE IMMEDIATE, a compound statement, a stored procedure), a session
// variable changed, a temporary table created, a statement prepared, the
// current database changed. go-sql-driver reads OK packets up to their
// status flags and ignores what follows.
//
// On MariaDB the same SET adds last_gtid to session_track_system_variables:
// the OK packet of a statement that committed a write then reports the
// commit's GTID. The watched socket reads it there, and a report that
// tells only that is not a change of the session. It is the position of
// the commit with pool_reads=standby, where a DSN naming several servers
// names a primary and its replicas (gtids.go, standby.go; pooldriver's
// docs/reads.md).
//
// A connection counts as changed, and is reset before anyone else uses it,
// after a statement that may leave state in the session:
//
//   - by its text (a fast hint, and all there is for what the server does
//     not report): every SET (SET TRANSACTION too, which sets the next
//     transaction of the session, whoever runs it), user variables assigned
//     with SELECT ... INTO @var or :=, GET_LOCK, RELEASE_LOCK and
//     RELEASE_ALL_LOCKS, LOCK and UNLOCK TABLES, FLUSH, CREATE and DROP
//     TEMPORARY TABLE, PREPARE, DEALLOCATE and DROP PREPARE, USE, HANDLER,
//     XA, any executable comment (/*! ... */); and EXECUTE (IMMEDIATE or of
//     a prepared statement) and compound statements run outside a stored
//     program (BEGIN NOT ATOMIC ... END, IF, CASE, LOOP, WHILE, REPEAT,
//     FOR, a labelled block), which may take a lock or assign a variable by
//     SELECT ... INTO under a text that shows neither; CALL with an '@'
//     in its text (a user variable given as an OUT or INOUT parameter is
//     assigned) and LOAD DATA or LOAD XML with one (a user variable in its
//     column list is assigned). Statements are read
//     by a lexer that knows MySQL's quoting and comments; where a backslash
//     in a string makes its end depend on NO_BACKSLASH_ESCAPES, both
//     readings are tried, and what it cannot read with certainty counts;
//   - by the server: SERVER_SESSION_STATE_CHANGED in any reply since the
//     last statement (read before the framing was lost, if it was; the
//     loss itself counts too, since what the server said after it is
//     unknown); autocommit other than the session started with (the
//     server's default, or the DSN's autocommit parameter), since the next
//     user's statements would run in a transaction nobody commits; and,
//     after a statement that failed (an ERR packet carries no flags), any
//     statement that is not a plain SELECT, INSERT, UPDATE, DELETE, ...,
//     and any that may have run a user's code (see below), trusted or
//     not: the server's report of what that code did is lost.
//
// What the server does not report: GET_LOCK and RELEASE_LOCK, LOCK TABLES,
// SET TRANSACTION, HANDLER, and user variables assigned by SELECT ... INTO,
// by :=, as OUT parameters or by LOAD DATA (MariaDB 10.11). Within a
// stored procedure or function, these are seen neither by the text nor by
// the server, so tracking is default-deny: CALL, and a call of any
// function that is not a built-in known to leave the session alone, count
// as a change, unless pooldriver's pool_trust_functions vouches for the
// user's functions (see TrustFunctions); EXECUTE IMMEDIATE and compound
// statements count either way.
//
// # Code no statement names: the catalog
//
// The lexer's list of built-ins is no proof: on MariaDB 10.11
// regexp_like, is_uuid, any_value and others are no built-ins, and a
// call runs the current database's stored function of that name.
// Triggers run on INSERT, UPDATE and DELETE, and a view runs what its
// definition calls. So the dialect reads the server's catalog
// (information_schema: stored functions, the tables with triggers,
// views) once per dialects.CatalogTTL for each server (the socket's
// remote address, or the DSN's) and account, shared by the connections
// (dialects.CatalogFor): at connect, on an idle connection off the
// callers' paths as soon as the reading is due (dialects.CatalogWatcher;
// one round trip, by one connection at a time, with autocommit on and no
// transaction open, so that the SELECT can neither open one nor run
// inside one), and at once after DDL run through the pool (CREATE, DROP, ...: every connection's
// reading is then due). Unless the user trusts their functions, a text
// counts as a change that names a stored function (any: a name the list
// lacks counts already), a table with a trigger, or a view whose
// definition changes the session, calls what the list does not vouch
// for, names any of these (views over views), or cannot be read. A name
// is a name: a read of a table with a trigger, or a column that shares a
// function's name, counts too. information_schema.TRIGGERS shows a
// table's triggers only to a user with the TRIGGER privilege on it: in a
// database where the account has it neither globally nor on the
// database (a role's grants, and grants on single tables, are not looked
// for), every statement that may write (anything but SELECT, SHOW,
// EXPLAIN, ...) counts, when that database is the session's or the text
// names it. Before any reading, or where the server refused it, every
// text that names anything counts. A connection whose autocommit is off
// does not read the catalog itself; others to the same server may.
//
// After a failed statement the flags are those of the reply before: they
// stand for a plain statement with autocommit on (a deadlock that rolled
// the transaction back leaves the belief on the safe side: the connection
// stays pinned, and the final ROLLBACK is harmless); after any other, the
// server is asked (SELECT @@in_transaction, @@autocommit: one round trip).
//
// The watched socket also counts the bytes written
// (dialects.WriteCounter), and Interrupt (dialects.Interrupter) fails its
// blocked I/O at once, for the calls of go-sql-driver that take no context
// (Commit, Rollback).
//
// # MariaDB's metadata cache
//
// MariaDB (10.6 and later) offers MARIADB_CLIENT_CACHE_METADATA: the
// server then skips the column definitions when a prepared statement runs
// again, and the client reuses those it kept. go-sql-driver v1.10 asks for
// it, but its Stmt.Exec of a statement that returns rows reads the
// definitions the server skipped, takes the final packet for one, and
// blocks until its context ends. pooldriver keeps the statements it
// prepares (db.Exec with arguments prepares once per connection, then runs
// the statement again), so the dialect's socket clears the capability in
// the server's greeting as the driver reads it: the driver never asks for
// it, and every execution carries its column definitions (a few bytes per
// column more on the wire). A connection of pooldriver.Wrap is the
// driver's own: there db.Exec("SELECT ...", args) run twice on one
// connection blocks until its context ends, as does the plain driver's
// *sql.Stmt Exec'd twice; use Query for such statements, or New.
//
// # rejectReadOnly
//
// With the DSN's rejectReadOnly=true, go-sql-driver answers a server's
// read-only error (1290, 1792: a replica after a failover) with
// driver.ErrBadConn, so that database/sql runs the statement again on
// another connection. The statement's bytes reached the server, and a
// statement that failed may still have done part of its work (error 1290
// is also that of secure_file_priv, after a procedure's INSERT, say), so
// pooldriver does not let it run again: through New, the call returns an
// error (which does not match driver.ErrBadConn), the connection, which
// the driver closed, is replaced, and the caller's next statement gets a
// new one. A connection of pooldriver.Wrap does not count its bytes: there
// the driver's word is taken, and database/sql retries as with the plain
// driver.
//
// # Without the wire: asking the server
//
// Where the packets cannot be read (TLS, compression: the dialect still
// counts the bytes and can interrupt them) or the socket is not the
// dialect's (a custom network registered with mysql.RegisterDialContext, a
// connection of pooldriver.Wrap), and should the framing of a watched
// socket ever make no sense (it then stops reading it for good), each
// connection keeps a belief about its session: whether a transaction is
// open and whether autocommit is on. TxStatus answers from the belief, and
// first asks the server (SELECT @@in_transaction, @@autocommit: one round
// trip) when the statement just run may have changed it. The rule:
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
// Session changes are then those of the statement's text, and autocommit
// other than the session started with, as far as the belief knows it.
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
// logging in: SET NAMES, the DSN's system variables, the DSN's database,
// and turns the session tracking on again.
//
// That needs the plain socket: with TLS, compression or a custom network
// name (mysql.RegisterDialContext) ResetSession returns an error and
// pooldriver closes the connection instead.
//
// # Dialers
//
// The dialect dials the networks tcp, tcp4, tcp6 and unix itself, through
// mysql.Config's DialFunc, which go-sql-driver prefers to its registry: a
// function registered with mysql.RegisterDialContext for one of those
// networks is bypassed (the driver offers no way to look it up). Register
// it with this package's RegisterDialContext instead, which registers it
// with the driver too: the dialect then dials through it and still watches
// the socket. A function registered for a network name of its own
// ("user@tunnel(db:3306)/shop") is left to the driver, as above.
//
// # Wrap
//
// Importing this package also teaches pooldriver.Wrap to recognize
// go-sql-driver/mysql's connections: pooldriver.Wrap(connector) tracks
// transactions (through @@in_transaction, as above) and session changes by
// the statement's text. The dialect did not dial such a connection, so its
// session cannot be reset: ResetSession returns an error matching
// dialects.ErrUnsupported, and pooldriver replaces a changed connection
// instead of resetting it.
package mysql
