package pooldriver

import "fmt"

// Mode says how long a task keeps its physical connection, by analogy with
// PgBouncer's pool_mode.
type Mode int

const (
	// TransactionMode (the default): the task keeps its physical connection
	// only while something pins it (a transaction, begun with BeginTx or by
	// a raw BEGIN the server reports, or an open result set) and gives it
	// back to the pool as soon as nothing does.
	TransactionMode Mode = iota

	// SessionMode: the task keeps one physical connection from its first
	// statement to its end, so SET, session variables, temporary tables,
	// advisory locks and LAST_INSERT_ID() work across calls; at task end the
	// session is reset before the connection is reused.
	SessionMode
)

func (m Mode) valid() bool { return m == TransactionMode || m == SessionMode }

// String returns "transaction" or "session", the pool_mode values.
func (m Mode) String() string {
	switch m {
	case TransactionMode:
		return "transaction"
	case SessionMode:
		return "session"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// ParseMode parses a pool_mode value: "transaction" or "session".
func ParseMode(s string) (Mode, error) {
	switch s {
	case "transaction":
		return TransactionMode, nil
	case "session":
		return SessionMode, nil
	}
	return 0, fmt.Errorf("unknown mode %q (want transaction or session)", s)
}
