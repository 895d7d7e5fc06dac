package pooldriver

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"testing"

	"github.com/pooldriver/pooldriver/pool"
)

// TestErrorsLeadWithTheCause (issue 47): the errors pooldriver wraps a
// statement's cause in say it within their first 100 characters and say
// "pooldriver" once, even when the cause is pooldriver's own; errors.Is
// and errors.As reach what they reached.
func TestErrorsLeadWithTheCause(t *testing.T) {
	reset := fmt.Errorf("read tcp 127.0.0.1:5432: %w", io.ErrUnexpectedEOF)
	for _, tc := range []struct {
		err   error
		cause string
		is    error
	}{
		{&notRetriedError{cause: reset, sent: true}, reset.Error(), io.ErrUnexpectedEOF},
		{&notRetriedError{cause: reset}, reset.Error(), io.ErrUnexpectedEOF},
		{&interruptedError{what: "COMMIT", ctx: context.DeadlineExceeded, cause: reset}, "context deadline exceeded", context.DeadlineExceeded},
		{lost(ErrTaskEnded), "the task ended", ErrConnLost},
		{&notRetriedError{cause: lost(reset), sent: true}, "the connection that held", ErrConnLost},
		{lost(reset), reset.Error(), ErrConnLost},
		{lost(context.Canceled), "context canceled", context.Canceled},
		{lost(context.Canceled), "context canceled", ErrConnLost},
	} {
		msg := tc.err.Error()
		if i := strings.Index(msg, tc.cause); i < 0 || i > 100 {
			t.Errorf("%q: the cause %q at %d, want within the first 100 characters", msg, tc.cause, i)
		}
		if n := strings.Count(msg, "pooldriver"); n != 1 {
			t.Errorf("%q: \"pooldriver\" %d times, want once", msg, n)
		}
		if !errors.Is(tc.err, tc.is) {
			t.Errorf("%q: does not match %v", msg, tc.is)
		}
		if errors.Is(tc.err, driver.ErrBadConn) {
			t.Errorf("%q: matches driver.ErrBadConn: database/sql would run the statement again", msg)
		}
	}
}

// TestLostLeadsWithCause: a statement that lost its task's transaction
// because its caller cancelled it reads as the plain driver's would,
// "context canceled" first, and still matches both the context's error and
// ErrConnLost.
func TestLostLeadsWithCause(t *testing.T) {
	for _, cause := range []error{context.Canceled, context.DeadlineExceeded} {
		err := lost(cause)
		if msg := err.Error(); !strings.HasPrefix(msg, cause.Error()+" (pooldriver: ") {
			t.Errorf("%q: does not lead with %q, then pooldriver's words", msg, cause)
		}
		if !errors.Is(err, cause) || !errors.Is(err, ErrConnLost) {
			t.Errorf("%q: errors.Is %v: %v, ErrConnLost: %v", err, cause, errors.Is(err, cause), errors.Is(err, ErrConnLost))
		}
	}
	if msg := lost(ErrTaskEnded).Error(); !strings.HasPrefix(msg, "pooldriver: the task ended") {
		t.Errorf("%q: does not lead with the task's end", msg)
	}
}

// TestPoolStateInWords: a connect error ends with the pool's state in a
// few words a newcomer reads, leaving out what is 0 or usual.
func TestPoolStateInWords(t *testing.T) {
	refused := errors.New("dial tcp 127.0.0.1:5432: connect: connection refused")
	for _, tc := range []struct {
		err  error
		tail string
	}{
		{&refusedError{ae: &pool.AcquireError{Reason: pool.ErrPermanent, State: pool.Active, Failures: 1, Max: 4, Cause: refused}, scheme: "postgres"},
			"; 0 of 4 connections open, 1 failed attempt in a row)"},
		{&waitError{ae: &pool.AcquireError{Reason: pool.ErrCircuitOpen, State: pool.Inactive, Failures: 3, Total: 2, InUse: 2, Waiting: 5, Max: 4, Cause: refused}},
			" (2 of 4 connections open, 2 in use, 5 waiting, 3 failed attempts in a row, breaker open): the last connect attempt: " + refused.Error()},
	} {
		if msg := tc.err.Error(); !strings.HasSuffix(msg, tc.tail) {
			t.Errorf("%q: does not end with %q", msg, tc.tail)
		}
	}
}

// TestCommitErrors: a lost COMMIT's errors match their outcome and
// ErrConnLost, never the other outcome or driver.ErrBadConn, and reach
// the cause and the question's error.
func TestCommitErrors(t *testing.T) {
	cause := fmt.Errorf("read: %w", &net.OpError{Op: "read", Err: syscall.ECONNRESET})
	why := context.DeadlineExceeded
	for _, tc := range []struct {
		err       error
		is, isNot error
		text      string
	}{
		{&commitError{outcome: ErrNotCommitted, cause: cause}, ErrNotCommitted, ErrCommitUnknown,
			"pooldriver: the transaction was not committed (read: read: connection reset by peer)"},
		{&commitError{outcome: ErrCommitUnknown, cause: cause, why: why}, ErrCommitUnknown, ErrNotCommitted,
			"pooldriver: whether the transaction committed is unknown (read: read: connection reset by peer; asking the server: context deadline exceeded)"},
	} {
		if !errors.Is(tc.err, tc.is) || !errors.Is(tc.err, ErrConnLost) || errors.Is(tc.err, tc.isNot) || errors.Is(tc.err, driver.ErrBadConn) {
			t.Errorf("%v: matches %v %v, ErrConnLost %v, %v %v, ErrBadConn %v", tc.err, tc.is, errors.Is(tc.err, tc.is),
				errors.Is(tc.err, ErrConnLost), tc.isNot, errors.Is(tc.err, tc.isNot), errors.Is(tc.err, driver.ErrBadConn))
		}
		var op *net.OpError
		if !errors.As(tc.err, &op) || !errors.Is(tc.err, syscall.ECONNRESET) {
			t.Errorf("%v: the cause is not reached", tc.err)
		}
		if got := tc.err.Error(); got != tc.text {
			t.Errorf("message %q, want %q", got, tc.text)
		}
	}
	if e := (&commitError{outcome: ErrCommitUnknown, cause: cause, why: why}); !errors.Is(e, context.DeadlineExceeded) {
		t.Error("the question's error is not reached")
	}
}
