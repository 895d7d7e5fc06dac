package pool

import (
	"context"
	"errors"
)

var (
	// ErrClosed is returned by Acquire on a closed pool, and to every
	// waiter when the pool closes.
	ErrClosed = errors.New("pool: closed")

	// ErrTimeout is returned when Config.AcquireTimeout passes before a
	// resource is available. The error also matches
	// context.DeadlineExceeded.
	ErrTimeout = errors.New("pool: acquire timeout")

	// ErrCircuitOpen is matched by the error of an Acquire that found no
	// idle resource and would have needed a new one while the circuit
	// breaker allows none: Inactive, or Limited (or Recovering with its
	// trial under way) with no resource in use to wait for. The error
	// wraps the last factory error.
	ErrCircuitOpen = errors.New("pool: circuit open")
)

// timeoutError is ErrTimeout with the context error it stands for.
type timeoutError struct{}

func (timeoutError) Error() string {
	return ErrTimeout.Error() + ": " + context.DeadlineExceeded.Error()
}

func (timeoutError) Is(target error) bool {
	return target == ErrTimeout || target == context.DeadlineExceeded
}

// Timeout reports true, as net.Error's timeouts do.
func (timeoutError) Timeout() bool { return true }
