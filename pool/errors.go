package pool

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

var (
	// ErrClosed is returned by Acquire on a closed pool, and to every
	// waiter when the pool closes.
	ErrClosed = errors.New("pool: closed")

	// ErrTimeout is matched by the error of an Acquire that waited
	// Config.AcquireTimeout in vain: an *AcquireError, which also matches
	// context.DeadlineExceeded.
	ErrTimeout = errors.New("pool: acquire timeout")

	// ErrCircuitOpen is matched by the error of an Acquire that found no
	// idle resource and would have needed a new one while the circuit
	// breaker is open (Inactive: the backend looks unreachable), with no
	// resource in use to wait for or room for none. The error is an
	// *AcquireError that wraps the last factory error.
	ErrCircuitOpen = errors.New("pool: circuit breaker open: not creating new resources, the backend looks unreachable")

	// ErrPermanent is matched by the error of an Acquire that only a new
	// resource could serve while creating them fails for a permanent
	// cause (Config.Permanent): refused at once, or failed as it waited
	// when the factory call it waited for failed so. The error is an
	// *AcquireError that wraps the factory's error.
	ErrPermanent = errors.New("pool: creating resources fails for a permanent cause: failing at once until an attempt succeeds")
)

// AcquireError is the error of an Acquire that ended without a resource
// for a reason of the pool's (not a factory call made for it, whose error
// comes back as it is): refused at once, timed out, or whose context ended
// while creating resources failed. It says which rule refused, the pool's
// counts at that moment, and the last factory error, so that "the backend
// is full" reads apart from "the backend is down" and "the pool is too
// small". errors.Is matches Reason (and context.DeadlineExceeded for
// ErrTimeout); Unwrap returns Cause.
type AcquireError struct {
	// Reason is ErrBackoff, ErrCircuitOpen, ErrPermanent or ErrTimeout, or the caller's
	// context's error when that ended the wait.
	Reason error
	// State is the circuit breaker's state, and Failures the factory
	// calls failed in a row (0: the last one succeeded).
	State    State
	Failures int
	// The pool's counts when the Acquire ended: resources in existence,
	// in use (parked ones not included), other Acquire calls waiting, and
	// Config.Max.
	Total, InUse, Waiting, Max int
	// Cause is the last factory error since the last success, or nil.
	Cause error
}

func (e *AcquireError) Error() string {
	var b strings.Builder
	b.WriteString(e.Reason.Error())
	switch e.Reason {
	case ErrTimeout:
		b.WriteString(": " + context.DeadlineExceeded.Error())
	case context.Canceled, context.DeadlineExceeded:
		b.WriteString(" while waiting for a resource")
	}
	fmt.Fprintf(&b, " (circuit breaker %s; total=%d, in use=%d, waiting=%d, max=%d", e.State, e.Total, e.InUse, e.Waiting, e.Max)
	if e.Failures > 0 {
		fmt.Fprintf(&b, "; %d attempts to create one failed in a row", e.Failures)
	}
	b.WriteString(")")
	if e.Cause != nil {
		b.WriteString(": the last attempt: " + e.Cause.Error())
	}
	return b.String()
}

// Is matches Reason, and context.DeadlineExceeded for ErrTimeout.
func (e *AcquireError) Is(target error) bool {
	return target == e.Reason || e.Reason == ErrTimeout && target == context.DeadlineExceeded
}

// Unwrap returns the last factory error.
func (e *AcquireError) Unwrap() error { return e.Cause }

// Timeout reports whether the Acquire ran out of time, as net.Error's
// timeouts do.
func (e *AcquireError) Timeout() bool {
	return e.Reason == ErrTimeout || e.Reason == context.DeadlineExceeded
}

// acquireErrorLocked builds the error of an Acquire that ends for reason.
// The caller holds mu.
func (p *Pool[T]) acquireErrorLocked(reason error) *AcquireError {
	parked := p.parkedLocked()
	return &AcquireError{
		Reason: reason, State: p.state, Failures: p.backoff.failures,
		Total: p.total, InUse: p.acquired - parked, Waiting: p.waiters.len(), Max: p.cfg.Max,
		Cause: p.lastFailure,
	}
}
