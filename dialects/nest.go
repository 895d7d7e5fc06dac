package dialects

import (
	"context"
	"database/sql/driver"
)

// OpenTxInspector is implemented by a connection that can tell the
// isolation level and access mode of the transaction open on it. pooldriver
// asks it before it nests a *sql.Tx begun with TxOptions inside a task's
// open transaction (a savepoint cannot change either): the options must be
// those of the open transaction, or BeginTx fails naming both. Without it,
// such a BeginTx fails, since nothing can check the options; one without
// options nests everywhere.
type OpenTxInspector interface {
	// OpenTx returns the isolation level and whether the transaction open
	// on the connection is read-only. It may ask the server.
	OpenTx(ctx context.Context) (isolation driver.IsolationLevel, readOnly bool, err error)
}
