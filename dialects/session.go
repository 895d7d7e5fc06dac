package dialects

import (
	"context"
	"database/sql/driver"
	"sync"
)

// SessionTracker is implemented by a Conn whose dialect can tell, from a
// statement's text, that the statement may have left state in the session
// that outlives it: a setting or variable changed for the session, a
// session-level lock taken, a temporary table created, a server-side
// prepared statement, a LISTEN, a cursor WITH HOLD, a USE. pooldriver asks
// after every statement that ran without error; a connection whose session
// changed is reset before anyone else may use it, and in a transaction-mode
// task it stays with the task until the task ends.
//
// The answer must be conservative: true when in doubt. A false true costs a
// session reset; a false false hands the next user a dirty session.
type SessionTracker interface {
	ChangesSession(query string) bool
}

// StatementObserver is implemented by a SessionTracker that answers, for
// one statement, both ChangesSession and (when askTx) TxStatus in one call,
// from one look at its text: pooldriver asks both after every statement,
// and prefers this when a Conn has it. The answers are those the two
// methods would give.
type StatementObserver interface {
	Observe(ctx context.Context, query string, askTx bool) (changesSession bool, tx TxStatus, err error)
}

// SessionBaseline is implemented by a Conn whose SessionTracker compares
// the session with the state it had when the connection opened (PostgreSQL's
// reported parameters) or caches what it knows of it (MySQL's transaction
// state). MarkBaseline takes the session as it is now for that state, and
// forgets what it cached: pooldriver calls it after its AfterConnect hook ran
// statements of its own on the raw connection.
type SessionBaseline interface {
	MarkBaseline()
}

// StaleStatementDetector is implemented by a Conn that can tell that an
// error returned by a prepared statement means the server no longer accepts
// that statement as prepared (PostgreSQL: "cached plan must not change
// result type" after DDL, or a statement the server no longer knows).
// pooldriver then drops the statement from its cache, so the next attempt
// prepares it afresh, as pgx's own statement cache does.
type StaleStatementDetector interface {
	StaleStatement(err error) bool
}

// A ConnAdapter recognizes a driver connection made by a driver it knows
// (pgx's stdlib, go-sql-driver/mysql) and returns a Conn that tracks its
// transactions and session as the dialect does. See RegisterConnAdapter.
type ConnAdapter func(dc driver.Conn) (Conn, bool)

var (
	adaptersMu sync.RWMutex
	adapters   []ConnAdapter
)

// RegisterConnAdapter registers f, which Wrap's connections consult: a
// connector wrapped with pooldriver.Wrap whose connections f recognizes gets
// the dialect's tracking instead of the generic one. A dialect package calls
// it from init.
func RegisterConnAdapter(f ConnAdapter) {
	if f == nil {
		return
	}
	adaptersMu.Lock()
	adapters = append(adapters, f)
	adaptersMu.Unlock()
}

// adapt returns the registered dialect's Conn for dc, if one recognizes it.
func adapt(dc driver.Conn) (Conn, bool) {
	adaptersMu.RLock()
	defer adaptersMu.RUnlock()
	for _, f := range adapters {
		if c, ok := f(dc); ok {
			return c, true
		}
	}
	return nil, false
}

// BeginTxRollbacker is implemented by a Conn that can end a transaction
// begun with the driver's BeginTx by a ROLLBACK of its own, under a context
// of pooldriver's choosing. pooldriver uses it when it ends such a
// transaction itself (a task ended, or a hold let go of it still open):
// pgx's Tx.Rollback runs under the context BeginTx was given, which is
// cancelled by then (and a failed rollback costs the connection), and
// go-sql-driver's takes no context at all, so its wait is unbounded.
type BeginTxRollbacker interface {
	RollbackBeginTx(ctx context.Context) error
}
