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
// The transaction state comes from the ReadyForQuery status that the server
// sends after every statement, so asking for it costs no round trip.
// Resetting a session rolls back any open transaction, runs DISCARD ALL and
// clears pgx's client-side statement and description caches, so that no
// statement the server has forgotten is reused.
package postgres
