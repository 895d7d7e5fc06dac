// Package postgres is the pooldriver dialect for PostgreSQL, built on
// github.com/jackc/pgx/v5 and its database/sql adapter pgx/v5/stdlib.
//
// Import it for its side effect; it registers the schemes "postgres" and
// "postgresql" (keyword/value DSNs such as "host=db user=app" also select it):
//
//	import _ "github.com/pooldriver/pooldriver/dialects/postgres"
//
// DSNs are those of pgx: a URL (postgres://app:secret@db:5432/shop?sslmode=disable)
// or a keyword/value string (host=db user=app password=secret dbname=shop).
// Parameters whose key starts with "pool_" belong to pooldriver and are
// removed before pgx sees the DSN; every other parameter reaches pgx exactly
// as written.
//
// Physical connections are *stdlib.Conn values, the same connections that
// sql.Open("pgx", dsn) hands to database/sql, so every argument type pgx
// accepts keeps working. [Conn.Raw] returns the underlying *pgx.Conn.
//
// A query, and a statement with arguments, skip the stdlib's and pgx.Conn's
// per-statement objects and run on pgx's pgconn directly (direct.go): the
// statement prepared once per connection under a name of pooldriver's
// (pooldriver_1, ...; at most statement_cache_capacity of them), its
// arguments encoded and its results converted by pgx's own codecs into the
// same driver values as the stdlib's. It is taken only with the default
// exec mode (cache_statement), no pgx tracer, and no pgx query option
// (QueryExecMode, NamedArgs, ...) among the arguments; everything else runs
// through the stdlib as before.
//
// The transaction state comes from the ReadyForQuery status that the server
// sends after every statement, so asking for it costs no round trip.
// Resetting a session rolls back any open transaction and then, in one
// round trip, does what DISCARD ALL does but for DEALLOCATE ALL and DISCARD
// PLANS: the statements pgx prepared stay (and its caches stay valid),
// those a user prepared with SQL PREPARE are deallocated by name.
//
// # Session changes
//
// A connection counts as changed, and is reset before anyone else uses it,
// after a statement that may leave state in the session: SET and RESET
// (not SET LOCAL, SET TRANSACTION or SET CONSTRAINTS), set_config(…) unless
// its third argument is the literal true, the session advisory lock
// functions (not the *_xact_* ones), CREATE TEMP …, PREPARE, DEALLOCATE,
// LISTEN, UNLISTEN, DECLARE … WITH HOLD, DISCARD, LOAD and DO. Statements
// are read by a lexer that knows PostgreSQL's quoting and comments and
// counts what it cannot read with certainty as a change. Tracking is
// default-deny: a call of any function that is not a built-in known to
// leave the session alone (a user's function, a schema-qualified or quoted
// name), and SQL the server runs from a string (query_to_xml, dblink,
// EXECUTE, a write to pg_settings), count as a change too, unless
// pooldriver's pool_trust_functions vouches for the user's functions (see
// TrustFunctions). Every setting the server reports (ParameterStatus) that
// differs, once no transaction is open, from its value when the connection
// opened counts as well. pooldriver notices these reports as
// they arrive, by reading the framing of the server's messages in front of
// pgx's decoder (a BuildFrontend set in BeforeConnect still decodes them),
// and compares the settings only after one; a connection of Wrap's, opened
// by pgx's stdlib itself, compares them after every statement.
//
// # Statements that may have run
//
// pgx marks an error "safe to retry" when it believes nothing was sent, and
// its stdlib then returns driver.ErrBadConn, on which database/sql runs the
// statement again. pgx v5 also does so when a statement's reply is lost
// after the server ran it: the failed read closes the connection, and the
// read that follows reports "conn closed", which pgx counts as safe. The
// dialect therefore counts the bytes pgx writes to the server, through the
// same frontend hook that reads its messages ([dialects.WriteCounter]), so
// that pooldriver can tell a statement that reached the socket from one
// that did not. A connection of Wrap's, which pgx's stdlib opened by
// itself, cannot count them: there, a statement during which pgx's
// connection closed counts as sent, even where the write failed at its
// first byte.
//
// A prepared statement that fails with "cached plan must not change result
// type" (after DDL) or because the server no longer knows it (SQLSTATE
// 26000) is dropped from pooldriver's statement cache, so the next attempt
// prepares it afresh.
//
// # Behind PgBouncer
//
// The DSN parameter pool_server_pooling says what sits in front of the
// server. pool_server_pooling=transaction (PgBouncer pool_mode=transaction
// or statement) makes pgx's default exec mode cache_describe, which parses
// with the unnamed statement and executes in one round trip, and prepares
// pooldriver's own statements (a *sql.Stmt, re-prepared on every physical
// connection it runs on) unnamed: nothing the server must remember by name
// outlives a transaction, so db.Prepare works where plain pgx fails. A
// default_query_exec_mode of cache_statement or describe_exec in the same DSN
// is an error; exec, simple_protocol and cache_describe are kept.
// pool_server_pooling=session (pool_mode=session) and =none change nothing.
// Without the parameter every new connection checks that it reached the
// server itself (the backend id announced at login is the session's own)
// and is refused with [ErrPoolerFound] when a pooler answered.
//
// # Reads on standbys
//
// A DSN that names several hosts (a primary and its standbys) offers one
// template per host that connects to that host only while it is a standby
// (Standbys; a primary refuses with dialects.ErrNotStandby). A connection
// reads its server's log position in one round trip (LogPosition: the
// replayed position on a standby, the inserted end of the log on a
// primary), and commits a transaction begun through pgx's stdlib with the
// position read in the same round trip (CommitAt), failing as the stdlib's
// Commit does.
//
// # Wrap
//
// Importing this package also teaches pooldriver.Wrap to recognize pgx's
// stdlib connections: pooldriver.Wrap(stdlib.GetConnector(cfg)) tracks
// transactions, session changes and resets as a postgres:// DSN does.
package postgres
