package phys

import "fmt"

// Mode is how long a task keeps its physical connection; the root's
// exported Mode has its values, and documents them.
type Mode int

const (
	// TransactionMode: the task keeps the connection only while something
	// pins it (a transaction, open rows).
	TransactionMode Mode = iota
	// SessionMode: the task keeps the connection to its end.
	SessionMode
)

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
