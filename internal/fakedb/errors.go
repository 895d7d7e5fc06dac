package fakedb

import "errors"

// Errors returned by conns. Match them with errors.Is.
var (
	// ErrBusy: a statement was issued while a result set of the same conn
	// is still open. The driver refused it; nothing ran.
	ErrBusy = errors.New("fakedb: conn busy: result set open")

	// ErrKilled: the server closed the connection during the statement
	// (see [Server.KillAll]). Whether the statement ran is unknown, so
	// this is deliberately not driver.ErrBadConn.
	ErrKilled = errors.New("fakedb: connection killed by server")

	// ErrTxStatus: an injected failure of the dialect's TxStatus (see
	// Server.FailTxStatus).
	ErrTxStatus = errors.New("fakedb: reading the transaction state failed")

	// ErrTxAborted: a statement other than COMMIT or ROLLBACK was issued
	// inside a failed transaction.
	ErrTxAborted = errors.New("fakedb: current transaction is aborted, commands ignored until end of transaction block")

	// ErrInTx: BEGIN or BeginTx while a transaction is open.
	ErrInTx = errors.New("fakedb: there is already a transaction in progress")

	// ErrNoTx: a savepoint statement outside a transaction.
	ErrNoTx = errors.New("fakedb: savepoints can only be used in transaction blocks")

	// ErrResetInTx: ResetSession while a transaction is open.
	ErrResetInTx = errors.New("fakedb: reset inside transaction")

	// ErrTxRolledBack: Commit of a failed transaction; it was rolled
	// back instead.
	ErrTxRolledBack = errors.New("fakedb: commit of a failed transaction: rolled back")

	// ErrTxDone: Commit or Rollback of a driver.Tx whose transaction was
	// already ended (by a raw COMMIT or ROLLBACK, say).
	ErrTxDone = errors.New("fakedb: transaction already ended")

	// ErrReadOnly: INSERT inside a read-only transaction.
	ErrReadOnly = errors.New("fakedb: cannot execute INSERT in a read-only transaction")

	// ErrFail is what the FAIL statement returns.
	ErrFail = errors.New("fakedb: statement failed (FAIL)")

	// ErrClosed: use of a closed conn, or of a statement or result set
	// whose conn was closed. It is not driver.ErrBadConn on purpose: a
	// caller that does this has a bug that retries must not hide.
	ErrClosed = errors.New("fakedb: use of closed connection")

	// ErrAuthFailed: a dialect login with a wrong user or password. The
	// returned error wraps it and names the user, never the password.
	ErrAuthFailed = errors.New("fakedb: authentication failed")

	// ErrNoServer: no server is registered under the name a DSN or
	// [Driver.Open] gives.
	ErrNoServer = errors.New("fakedb: no such server")
)
