package pooldriver

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/pooldriver/pooldriver/pool"
)

var (
	// ErrAcquireTimeout is returned when no physical connection became
	// available within pool_acquire_timeout. It also matches
	// context.DeadlineExceeded.
	ErrAcquireTimeout = errors.New("pooldriver: timed out waiting for a connection")

	// ErrClosed is returned by every operation after the Connector (or the
	// *sql.DB over it) was closed.
	ErrClosed = errors.New("pooldriver: connector closed")

	// ErrCircuitOpen is returned while the circuit breaker refuses new
	// acquires because the database keeps failing.
	ErrCircuitOpen = errors.New("pooldriver: circuit open: the database is failing")

	// ErrTaskEnded is returned by a statement, Commit or Rollback of a
	// transaction that the end of its task already rolled back.
	ErrTaskEnded = errors.New("pooldriver: the task ended and rolled the transaction back")

	// ErrSessionBusy is returned by a statement of a session-mode task
	// issued while the task's connection is busy with open rows outside a
	// transaction: run on another connection, it would not see the session,
	// so it is refused, as one busy connection would refuse it. Close the
	// rows first.
	ErrSessionBusy = errors.New("pooldriver: the session task's connection is busy with open rows; close them first")

	// ErrTaskConnBusy is returned by a statement that opened a transaction
	// (a raw BEGIN) on another connection because the task's own was busy
	// with open rows: the task cannot keep two connections, so that
	// transaction was rolled back. Close the rows first.
	ErrTaskConnBusy = errors.New("pooldriver: the task's connection was busy with open rows, so the transaction begun on another connection was rolled back; close the rows first")
)

// acquireError turns the pool's errors into pooldriver's.
func acquireError(err error) error {
	switch {
	case errors.Is(err, pool.ErrTimeout):
		return fmt.Errorf("%w (%w)", ErrAcquireTimeout, context.DeadlineExceeded)
	case errors.Is(err, pool.ErrClosed):
		return ErrClosed
	case errors.Is(err, pool.ErrCircuitOpen):
		return ErrCircuitOpen
	}
	return err
}

// redactedError hides a secret that an underlying error might quote, while
// keeping the error chain for errors.Is and errors.As.
type redactedError struct {
	err    error
	secret string
}

func (e *redactedError) Error() string {
	return strings.ReplaceAll(e.err.Error(), e.secret, "xxxxx")
}

func (e *redactedError) Unwrap() error { return e.err }

// redact wraps err so that its message never shows secret.
func redact(err error, secret string) error {
	if err == nil || secret == "" || !strings.Contains(err.Error(), secret) {
		return err
	}
	return &redactedError{err: err, secret: secret}
}
