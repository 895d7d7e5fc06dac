package phys

// Mode is how long a task keeps its physical connection, as decide reads
// it; the root's exported Mode is the user's word for it (BindLocked).
type Mode int

const (
	// TransactionMode: the task keeps the connection only while something
	// pins it (a transaction, open rows).
	TransactionMode Mode = iota
	// SessionMode: the task keeps the connection to its end.
	SessionMode
)
