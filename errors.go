package pooldriver

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/pooldriver/pooldriver/dialects"
	"github.com/pooldriver/pooldriver/internal/phys"
	"github.com/pooldriver/pooldriver/pool"
)

var (
	// ErrAcquireTimeout is matched by the error of a statement for which
	// no physical connection became available within
	// pool_acquire_timeout: an *AcquireTimeoutError, which tells the
	// pool's state and also matches context.DeadlineExceeded.
	ErrAcquireTimeout = errors.New("pooldriver: timed out waiting for a connection")

	// ErrClosed is returned by every operation after the Connector (or the
	// *sql.DB over it) was closed.
	ErrClosed = errors.New("pooldriver: connector closed")

	// ErrCircuitOpen is matched by the error of a statement that needed a
	// new physical connection while the circuit breaker is Inactive (the
	// database looks unreachable) with none of the pool's connections in
	// use to wait for. The error says the pool's state and wraps the last
	// connect error. At the server's connection limit (Limited) callers
	// wait instead. See WithCircuitBreaker.
	ErrCircuitOpen = errors.New("pooldriver: circuit open: the database is failing")

	// ErrBackoff is matched by the error of a statement that needed a new
	// physical connection while connecting fails, when none of the pool's
	// connections is in use to wait for and the next connect attempt
	// (spaced 10 ms, doubling to 25 ms, while callers wait) would come
	// after the statement's deadline. Otherwise the statement waits for
	// a connection coming back or for its turn of attempt. The error says
	// the pool's state and wraps the last connect error.
	ErrBackoff = pool.ErrBackoff

	// ErrServerRefused is matched by the error of a statement that needed
	// a new physical connection while the server refuses them for a cause
	// that trying again does not cure: the authentication failed, the
	// database or the role does not exist, nothing listens on the port,
	// TLS failed (as the dialect tells: dialects.PermanentErrorDetector).
	// Such statements fail at once, with none of the pool's connections in
	// use to wait for, until a connect attempt succeeds; attempts go on
	// one at a time, spaced by the back-off, and callers that come while
	// one is under way wait for it. A pool that has connected before
	// first waits as for any failure for 5 s (a password rotation, a
	// restart). The error says the pool's state and wraps the connect
	// error (errors.As reaches the driver's: *pgconn.PgError,
	// *mysql.MySQLError), whose message is the server's, without the
	// password.
	ErrServerRefused = errors.New("pooldriver: the server refuses new connections")

	// ErrTaskEnded is returned by every statement run with a task's
	// context after the task ended, and by Commit of a transaction whose
	// task ended and rolled it back. Through database/sql, a task's
	// statement or Commit usually fails first with the context's error
	// (context.Canceled, since the task's context is cancelled when it
	// ends; context.Cause of the task's context is ErrTaskEnded) or with
	// sql.ErrTxDone for a *sql.Tx that database/sql already saw end.
	ErrTaskEnded = errors.New("pooldriver: the task ended; its transactions were rolled back")

	// ErrSessionBusy is returned in a session-mode task by a statement that
	// cannot run on the task's session without running inside a
	// transaction of another statement of the task (a *sql.Tx open on it,
	// or BeginTx while a transaction is open there), or while the session
	// stays busy with open rows of another statement for half a second:
	// on another connection it would not see the session. Finish the
	// transaction or close the rows first.
	ErrSessionBusy = phys.ErrSessionBusy

	// ErrConnBusy is returned by a statement of a task whose connection has
	// a transaction open and stayed busy with open rows of another
	// statement for half a second: waiting longer could wait forever (the
	// rows may be read by the very goroutine asking), and another
	// connection would be outside the transaction. Close the rows first.
	// pgx says "conn busy" here, at once.
	ErrConnBusy = phys.ErrConnBusy

	// ErrTaskConnBusy is returned by a statement that opened a transaction
	// (a raw BEGIN) or changed the session on another connection because
	// the task's own was busy with open rows: the task cannot keep two
	// connections, so that transaction was rolled back (and the session is
	// reset when the statement's hold ends). Close the rows first.
	ErrTaskConnBusy = errors.New("pooldriver: the task's connection was busy with open rows, so what the statement began on another connection was undone; close the rows first")

	// ErrNoServerSession is returned, at once and without running the
	// statement, by a statement of a session-mode task on a Connector whose
	// DSN says the server is behind a transaction pooler
	// (pool_server_pooling=transaction): the pooler hands each transaction
	// to any server session, so the task's SET, temporary table or advisory
	// lock would land in a session its next statement may not see. The
	// Connector itself refuses pool_mode=session there.
	ErrNoServerSession = errors.New("pooldriver: a session-mode task cannot keep a server session behind a transaction pooler (pool_server_pooling=transaction)")

	// ErrConnLost is matched (errors.Is) by the error of every statement of
	// a task or a hold (a *sql.Conn, a *sql.Tx) after the physical
	// connection that carried its transaction or session was lost, until
	// the task or the hold ends: running them on another connection would
	// run them outside that transaction, or without that session. It is
	// also matched by the error of any statement, in a transaction or not,
	// whose connection broke after the statement was sent and before its
	// reply arrived: the server may have run it. A statement whose own
	// context ended it returns the context's error instead, as the plain
	// driver does. The original error stays reachable with errors.As. It
	// never matches driver.ErrBadConn, so database/sql does not retry such
	// a statement on another connection.
	// The message leads with the cause ("context canceled (pooldriver:
	// the connection that held ... was lost)" for a statement its caller
	// cancelled), as the plain driver's error would read.
	ErrConnLost = errors.New("pooldriver: the connection that held this transaction or session was lost")

	// ErrNotCommitted is matched by the error of a *sql.Tx's Commit whose
	// connection broke after the COMMIT was sent and before its reply
	// arrived, where pooldriver then learnt that the transaction did not
	// commit: the server it ran on (or the primary that replaced it) says
	// it rolled back or never saw it, or the COMMIT never left. Nothing of
	// the transaction was applied: the service may run it again. The
	// error also matches ErrConnLost and reaches the cause (errors.As).
	ErrNotCommitted = errors.New("pooldriver: the transaction was not committed")

	// ErrCommitUnknown is matched by the error of a *sql.Tx's Commit whose
	// connection broke after the COMMIT was sent and before its reply
	// arrived, where the server could not say whether it committed: the
	// Commit's context (BeginTx's) ended first, the transaction's id was
	// not learnt, or the server no longer keeps its status. The error also
	// matches ErrConnLost and reaches the cause (errors.As).
	ErrCommitUnknown = errors.New("pooldriver: whether the transaction committed is unknown")

	// ErrResultOpen is matched by the error of a statement the driver
	// refused, without sending anything, because a result of the same
	// *sql.Tx or *sql.Conn is still open on its connection (the server
	// sends one result at a time). The transaction, the session and the
	// open rows go on: read or close the rows, then run the statement
	// again. The plain drivers answer driver.ErrBadConn, which pooldriver
	// never passes on here: database/sql would take the connection for
	// broken.
	ErrResultOpen = dialects.ErrResultOpen
)

// AcquireTimeoutError is the error of a statement that waited
// pool_acquire_timeout for a physical connection in vain. It matches
// ErrAcquireTimeout and context.DeadlineExceeded (errors.Is), and tells
// the pool's state when it gave up (errors.As), as HikariCP's "total=10,
// active=10, idle=0, waiting=33" does, and the last connect error, if
// connecting was failing (Unwrap).
type AcquireTimeoutError struct {
	Timeout time.Duration // pool_acquire_timeout
	Total   int           // physical connections open or being opened
	InUse   int           // taken from the pool
	Idle    int           // idle in the pool (just taken, or being checked)
	Waiting int           // other statements still waiting
	Max     int           // pool_max_conns
	Cause   error         // the last connect error since the last success, or nil
	// LeakDetectionOff: leak detection (WithLeakDetection) was off; when
	// every connection was in use, the message suggests it.
	LeakDetectionOff bool
}

func (e *AcquireTimeoutError) Error() string {
	msg := fmt.Sprintf("%s after %v (pool: total=%d, in use=%d, idle=%d, waiting=%d, max=%d): %v",
		ErrAcquireTimeout.Error(), e.Timeout, e.Total, e.InUse, e.Idle, e.Waiting, e.Max, context.DeadlineExceeded)
	if e.Cause != nil {
		msg += "; the last connect attempt: " + e.Cause.Error()
	}
	if e.LeakDetectionOff && e.InUse >= e.Max {
		msg += leakHint
	}
	return msg
}

// leakHint ends the message of a wait that found every connection in use
// while leak detection is off.
const leakHint = "; every connection was in use: if some are held and never given back, leak detection (pool_leak_detection_threshold, WithLeakDetection) logs who holds them"

// Is matches ErrAcquireTimeout and context.DeadlineExceeded.
func (e *AcquireTimeoutError) Is(target error) bool {
	return target == ErrAcquireTimeout || target == context.DeadlineExceeded
}

// Unwrap returns the last connect error, or nil.
func (e *AcquireTimeoutError) Unwrap() error { return e.Cause }

// waitError is a refusal of the pool's other than a timeout (ErrBackoff,
// ErrCircuitOpen), or a wait that the caller's context ended while
// connecting was failing, told in pooldriver's words: which rule, the
// pool's state, the last connect error. Callers turned away can be many
// and fast: the message is built only when asked for. It matches what the
// pool's error matches (the reason: ErrBackoff, ErrCircuitOpen through
// pooldriver's sentinel, or the context's error) and unwraps to the last
// connect error.
type waitError struct {
	ae       *pool.AcquireError
	leakHint bool // every connection was in use and leak detection is off
}

func (e *waitError) Error() string {
	ae := e.ae
	var b strings.Builder
	switch ae.Reason {
	case pool.ErrBackoff:
		b.WriteString("pooldriver: connecting is failing, no connection is in use to wait for, and the next attempt would come after the deadline")
	case pool.ErrCircuitOpen:
		b.WriteString(ErrCircuitOpen.Error())
	default:
		fmt.Fprintf(&b, "pooldriver: %v while waiting for a connection", ae.Reason)
	}
	b.WriteString(" (")
	writePoolState(&b, ae)
	b.WriteString(")")
	if ae.Cause != nil {
		b.WriteString(": the last connect attempt: " + ae.Cause.Error())
	}
	if e.leakHint {
		b.WriteString(leakHint)
	}
	return b.String()
}

func (e *waitError) Is(target error) bool {
	return target == ErrCircuitOpen && e.ae.Reason == pool.ErrCircuitOpen || e.ae.Is(target)
}

func (e *waitError) Unwrap() error { return e.ae.Cause }

// refusedError is ErrServerRefused with the pool's state and the connect
// error. As waitError, its message is built only when asked for.
type refusedError struct {
	ae     *pool.AcquireError
	scheme string // the DSN's ("postgres", "mysql"), for a cause that does not name its dialect
}

// Error leads with the cause, the connect error (a dialect's starts with
// "pooldriver: <dialect>: "), then what pooldriver does about it, in
// parentheses.
func (e *refusedError) Error() string {
	ae := e.ae
	var b strings.Builder
	if ae.Cause == nil {
		fmt.Fprintf(&b, "%s: failing at once until a connect attempt succeeds (", ErrServerRefused)
		writePoolState(&b, ae)
		b.WriteString(")")
		return b.String()
	}
	cause := ae.Cause.Error()
	if !strings.HasPrefix(cause, "pooldriver: ") {
		b.WriteString("pooldriver: ")
		if e.scheme != "" {
			b.WriteString(e.scheme + ": ")
		}
	}
	fmt.Fprintf(&b, "%s (the server refuses new connections: failing at once until a connect attempt succeeds; ", cause)
	writePoolState(&b, ae)
	b.WriteString(")")
	return b.String()
}

// writePoolState writes the pool's state when ae was refused, in words a
// newcomer reads: "0 of 4 connections open, 1 failed attempt in a row"
// (not "pool: ", the words of the pool package's own errors). What is
// 0 or usual is left out: the connections in use and the waiting callers
// when there are none, the breaker while it is closed.
func writePoolState(b *strings.Builder, ae *pool.AcquireError) {
	fmt.Fprintf(b, "%d of %d connections open", ae.Total, ae.Max)
	if ae.InUse > 0 {
		fmt.Fprintf(b, ", %d in use", ae.InUse)
	}
	if ae.Waiting > 0 {
		fmt.Fprintf(b, ", %d waiting", ae.Waiting)
	}
	switch {
	case ae.Failures == 1:
		b.WriteString(", 1 failed attempt in a row")
	case ae.Failures > 1:
		fmt.Fprintf(b, ", %d failed attempts in a row", ae.Failures)
	}
	if ae.State != pool.Active {
		fmt.Fprintf(b, ", breaker %s", ae.State)
	}
}

// Is matches ErrServerRefused.
func (e *refusedError) Is(target error) bool { return target == ErrServerRefused }

// Unwrap returns the connect error.
func (e *refusedError) Unwrap() error { return e.ae.Cause }

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

// lostError is ErrConnLost with its cause.
type lostError struct{ cause error }

// Error leads with the cause, as the plain driver's error would read
// ("context canceled" for a statement its caller cancelled), then says
// what it cost, in parentheses: "pooldriver" once, wherever the cause
// has it.
func (e *lostError) Error() string {
	if strings.HasPrefix(e.cause.Error(), "pooldriver: ") {
		return "pooldriver: " + e.text()
	}
	return causeText(e.cause) + " (pooldriver: " + lostWhat + ")"
}

// text is the message without "pooldriver".
func (e *lostError) text() string { return causeText(e.cause) + " (" + lostWhat + ")" }

// lostWhat is what ErrConnLost says, without "pooldriver: ".
var lostWhat = strings.TrimPrefix(ErrConnLost.Error(), "pooldriver: ")

// Is matches ErrConnLost and whatever the cause matches, except
// driver.ErrBadConn (see ErrConnLost).
func (e *lostError) Is(target error) bool {
	return target == ErrConnLost || target != driver.ErrBadConn && errors.Is(e.cause, target)
}

// As reaches the cause. lostError has no Unwrap on purpose: through it,
// errors.Is would find driver.ErrBadConn.
func (e *lostError) As(target any) bool { return errors.As(e.cause, target) }

// lost wraps cause as a lostError, once.
func lost(cause error) error {
	if _, ok := cause.(*lostError); ok {
		return cause
	}
	return &lostError{cause: cause}
}

// notRetriedError is the error of a statement whose connection broke where
// database/sql must not run it again on another connection: its bytes had
// reached the server, which may have run it (a reply lost after a
// COMMIT or an INSERT), or it was not the first statement of its hold.
// Where the driver said driver.ErrBadConn, which database/sql takes for
// "never ran, safe to retry", this error does not match it (errors.Is);
// it reaches every other error of the chain. One whose reply was lost
// (lost) matches ErrConnLost, whatever the driver said.
type notRetriedError struct {
	cause error
	sent  bool // the statement's bytes had been written
	lost  bool // and its reply was lost to a broken connection: it matches ErrConnLost
}

func (e *notRetriedError) Error() string {
	if e.sent {
		return "pooldriver: " + causeText(e.cause) + " (the connection broke after the statement was sent: it may have run, and was not retried)"
	}
	return "pooldriver: " + causeText(e.cause) + " (the connection broke; the statement was not retried on another)"
}

// causeText is err's message without a leading "pooldriver: ", for an
// error of pooldriver's that leads with it, so that the word comes once.
func causeText(err error) string {
	if l, ok := err.(*lostError); ok {
		return l.text()
	}
	return strings.TrimPrefix(err.Error(), "pooldriver: ")
}

// Is matches whatever the cause matches, except driver.ErrBadConn, and
// ErrConnLost where the statement's reply was lost.
func (e *notRetriedError) Is(target error) bool {
	return target == ErrConnLost && e.lost || target != driver.ErrBadConn && errors.Is(e.cause, target)
}

// As reaches the cause. There is no Unwrap on purpose: through it,
// errors.Is would find driver.ErrBadConn.
func (e *notRetriedError) As(target any) bool { return errors.As(e.cause, target) }

// commitError is ErrNotCommitted or ErrCommitUnknown (outcome) with the
// error of the lost COMMIT (cause) and, for an unknown outcome, why the
// server could not say (why: the error of the question, or nil).
type commitError struct {
	outcome error
	cause   error
	why     error
}

func (e *commitError) Error() string {
	msg := e.outcome.Error() + " (" + causeText(e.cause)
	if e.why != nil {
		msg += "; asking the server: " + causeText(e.why)
	}
	return msg + ")"
}

// Is matches the outcome, ErrConnLost, and whatever the cause or why
// matches, except driver.ErrBadConn: the transaction must not be run again
// by database/sql.
func (e *commitError) Is(target error) bool {
	if target == e.outcome || target == ErrConnLost {
		return true
	}
	return target != driver.ErrBadConn && (errors.Is(e.cause, target) || e.why != nil && errors.Is(e.why, target))
}

// As reaches the cause, then why.
func (e *commitError) As(target any) bool {
	return errors.As(e.cause, target) || e.why != nil && errors.As(e.why, target)
}

// interruptedError is the error of a driver call that ignores its context
// (go-sql-driver/mysql's Commit and Rollback) and was still waiting on the
// network when the context ended: pooldriver interrupted its I/O and the
// connection is gone. Whether the server committed is unknown. It matches
// the context's error and reaches the driver's.
type interruptedError struct {
	what  string // "COMMIT" or "ROLLBACK"
	ctx   error  // the context's error
	cause error  // the driver's error once interrupted
}

func (e *interruptedError) Error() string {
	return fmt.Sprintf("pooldriver: %v: %s was still waiting for the server; the connection was closed, and whether the server applied it is unknown (%s)", e.ctx, e.what, causeText(e.cause))
}

func (e *interruptedError) Is(target error) bool {
	return target != driver.ErrBadConn && (errors.Is(e.ctx, target) || errors.Is(e.cause, target))
}

func (e *interruptedError) As(target any) bool { return errors.As(e.cause, target) }

// interrupted reports whether err says a Commit or Rollback was
// interrupted: its connection was closed under it.
func interrupted(err error) bool {
	var ie *interruptedError
	return errors.As(err, &ie)
}

// ErrShuttingDown is returned, once Shutdown has begun, by a statement that
// would need a connection for work that is new: outside a task, or in a
// task begun after Shutdown. errors.Is(err, ErrClosed) holds for it.
var ErrShuttingDown error = shuttingDown{}

type shuttingDown struct{}

func (shuttingDown) Error() string {
	return "pooldriver: shutting down: new work is refused (a statement outside a task begun before Shutdown)"
}

func (shuttingDown) Is(target error) bool { return target == ErrClosed }
