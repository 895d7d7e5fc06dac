package dialects

import "fmt"

// ServerPooling says what sits between pooldriver and the server: nothing,
// or a connection pooler such as PgBouncer and its pool mode (the DSN
// parameter pool_server_pooling).
type ServerPooling int

const (
	// ServerPoolingUnset: not said. A dialect that can tell a pooler from
	// the server (PostgreSQL) checks, and refuses a pooler it finds.
	ServerPoolingUnset ServerPooling = iota
	// ServerPoolingNone: the server itself; nothing is checked.
	ServerPoolingNone
	// ServerPoolingSession: a pooler that gives each client connection one
	// server session for as long as it is open (PgBouncer pool_mode=session).
	ServerPoolingSession
	// ServerPoolingTransaction: a pooler that may hand each transaction, or
	// each statement outside one, to a different server session (PgBouncer
	// pool_mode=transaction). Nothing the server keeps by name outlives a
	// transaction: no prepared statement, no session setting.
	ServerPoolingTransaction
)

// String returns the pool_server_pooling value: "none", "session",
// "transaction", or "" for ServerPoolingUnset.
func (p ServerPooling) String() string {
	switch p {
	case ServerPoolingUnset:
		return ""
	case ServerPoolingNone:
		return "none"
	case ServerPoolingSession:
		return "session"
	case ServerPoolingTransaction:
		return "transaction"
	}
	return fmt.Sprintf("ServerPooling(%d)", int(p))
}

// ParseServerPooling parses a pool_server_pooling value.
func ParseServerPooling(s string) (ServerPooling, error) {
	switch s {
	case "none":
		return ServerPoolingNone, nil
	case "session":
		return ServerPoolingSession, nil
	case "transaction":
		return ServerPoolingTransaction, nil
	}
	return 0, fmt.Errorf("unknown value %q (want none, session or transaction)", s)
}

// PoolerTemplate is implemented by a Template whose dialect knows how to
// work behind a connection pooler. pooldriver calls BehindPooler once, with
// the pool_server_pooling setting (ServerPoolingUnset included), and uses
// the Template it returns; an error names what in the configuration cannot
// work behind that pooler. A dialect whose Template does not implement it
// accepts only ServerPoolingUnset and ServerPoolingNone.
type PoolerTemplate interface {
	Template
	BehindPooler(p ServerPooling) (Template, error)
}
