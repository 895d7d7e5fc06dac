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

	// ErrCircuitOpen is returned by Acquire while the circuit breaker is
	// Inactive, or Recovering with its one trial acquire under way.
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
