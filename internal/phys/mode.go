package phys

// Mode is how long a task keeps its physical connection, as decide reads
// it; the root's exported Mode is the user's word for it, of which a
// connection is told only whether its task is in session mode (Conn.Bind,
// Conn.Join).
type Mode int

const (
	// TransactionMode: the task keeps the connection only while something
	// pins it (a transaction, open rows).
	TransactionMode Mode = iota
	// SessionMode: the task keeps the connection to its end.
	SessionMode
)
