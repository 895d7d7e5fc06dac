// Package dialects holds the [Dialect] interface that every database-specific
// package implements, and the registry through which a dialect makes itself
// known to pooldriver.
//
// A dialect registers itself from an init function when its package is
// imported, as database/sql drivers do:
//
//	import _ "github.com/pooldriver/pooldriver/dialects/postgres"
//
// The root package pooldriver imports no concrete dialect; it looks the DSN's
// scheme up here. This package imports nothing of pooldriver's.
package dialects

import (
	"context"
	"database/sql/driver"
)

// Dialect knows one kind of database: how to read its DSNs and how to open
// physical connections to it.
type Dialect interface {
	// Name is a short name for messages and logs, such as "postgres".
	Name() string

	// Parse reads a DSN whose scheme selected this dialect. It removes every
	// pooldriver parameter (a key starting with "pool_") and returns them
	// in params, unparsed; every other parameter stays in the template
	// untouched. Errors never contain the password.
	Parse(dsn string) (t Template, params map[string]string, err error)
}

// Credentials are the user and password a new physical connection logs in
// with.
type Credentials struct {
	User     string
	Password string
}

// String never shows the password.
func (c Credentials) String() string {
	if c.Password == "" {
		return c.User
	}
	return c.User + ":xxxxx"
}

// Template is a parsed DSN without its pool parameters: everything needed to
// open a physical connection but the credentials. A Template is immutable
// and safe for concurrent use; Open builds a fresh copy of whatever the
// driver needs for every connection, because drivers may rewrite what they
// are handed.
type Template interface {
	// Credentials returns the user and password written in the DSN.
	Credentials() Credentials

	// String returns the DSN with the password redacted.
	String() string

	// Open opens a new physical connection logged in with c. The error
	// never contains the password.
	Open(ctx context.Context, c Credentials) (Conn, error)
}

// ConfigurableTemplate is a Template that lets a hook shape the driver's
// configuration of each new connection: Open, with before called first on
// that connection's own copy of the configuration (credentials filled in).
// config is the dialect's driver configuration: *pgx.ConnConfig for
// postgres. An error of before fails the attempt.
type ConfigurableTemplate interface {
	Template
	OpenConfigured(ctx context.Context, c Credentials, before func(ctx context.Context, config any) error) (Conn, error)
}

// TxStatus is what the server says about the transaction state of a session.
type TxStatus int

const (
	// TxIdle: no transaction is open.
	TxIdle TxStatus = iota
	// TxActive: a transaction is open.
	TxActive
	// TxFailed: a transaction is open and has failed; only a rollback
	// ends it.
	TxFailed
)

// String returns "idle", "in transaction" or "in failed transaction".
func (s TxStatus) String() string {
	switch s {
	case TxIdle:
		return "idle"
	case TxActive:
		return "in transaction"
	case TxFailed:
		return "in failed transaction"
	}
	return "unknown"
}

// Conn is one physical connection opened by a dialect. pooldriver runs
// statements on Driver() directly and uses the other methods to manage the
// session. pooldriver never calls two methods of one Conn at the same time,
// nor a Conn method while a statement runs on Driver().
type Conn interface {
	// Driver returns the real driver connection.
	Driver() driver.Conn

	// TxStatus reports whether a transaction is open on the server.
	// pooldriver asks after every statement run outside a transaction begun
	// with BeginTx; lastQuery is that statement's text ("" when there was
	// none). A dialect whose driver knows the state without a round trip
	// ignores lastQuery; one that must ask the server may use it to decide
	// that the state cannot have changed.
	TxStatus(ctx context.Context, lastQuery string) (TxStatus, error)

	// Rollback ends a transaction opened on the server by a raw statement
	// such as BEGIN.
	Rollback(ctx context.Context) error

	// ResetSession returns the session to the state of a new connection:
	// settings, variables, temporary tables, prepared statements, locks.
	// It is called when a session-mode task ends.
	ResetSession(ctx context.Context) error

	// Ping checks that the connection is alive.
	Ping(ctx context.Context) error

	// Raw returns the driver-specific connection (a *pgx.Conn, say) for
	// features that database/sql does not reach.
	Raw() any

	// Close closes the physical connection.
	Close() error
}
