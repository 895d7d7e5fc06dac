package phys

import (
	"context"
	"database/sql/driver"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/pooldriver/pooldriver/dialects"
	"github.com/pooldriver/pooldriver/internal/logline"
)

// Env is what the physical connections of one Connector need of it,
// handed to each when it is made, so that a physical connection never
// reaches up into the Connector, a task or a transaction: the Connector
// fills it once (newConnector) and never changes it, but for Gen, which
// Reset bumps, and LookDue. It also holds what the connections share
// among themselves, their counters and their cleanups, which the
// Connector reads (Counts) and ends (Close).
type Env struct {
	CleanupTimeout time.Duration // bounds every rollback and reset pooldriver runs by itself
	ResetAlways    bool          // WithResetAlways: reset before the pool has it back, whatever was seen
	TrustFuncs     bool          // WithTrustFunctions: the dialect's default-deny for unknown calls is off
	// Nothing is told of a connection's release (no leak detection, no
	// AfterRelease or BeforeAcquire hook): a hold may park it (park).
	Parkable     bool
	AfterRelease bool // the AfterRelease hook is set: owner.afterRelease has a say
	// CarryResets: no hook must see a session just reset (AfterConnect
	// runs again after each reset; AfterRelease and BeforeAcquire get the
	// raw connection), so a dialect may carry a reset (carry.go).
	CarryResets bool
	Leaks       bool         // leak detection is on: owner.returned is told
	Gen         atomic.Int64 // the Connector's Reset generation, bumped by Reset: a connection of an older one is stale (Conn.Stale)
	// LookDue: the Connector wants to know how full the server is (the root's share.go):
	// the next connection let go asks, off the caller's path, before the
	// pool has it back (settle), and is not parked meanwhile.
	LookDue atomic.Bool
	// Releases: the Tracer, where it hears of releases too (the root's trace.go).
	Releases ReleaseHook
	Log      *slog.Logger // nil: nothing is logged
	Owner    Owner

	// The connections' own: the zero values serve.
	cleanups Cleanups // runs rollbacks and resets off the goroutine that let go (settle)
	stats    Stats
}

// Counts returns the connections' counters (Stats.Read), for the
// Connector's Stats.
func (e *Env) Counts() (autoRollbacks, taskEndRollbacks, sessionResets, carriedResets, separateResets int64) {
	return e.stats.Read()
}

// Close ends the connections' cleanups (Cleanups.Close), once the
// Connector's pool is closed.
func (e *Env) Close() { e.cleanups.Close() }

// WaitCleanups waits for the cleanups under way (Cleanups.Wait).
func (e *Env) WaitCleanups() { e.cleanups.Wait() }

// Stats are the counters the physical connections keep for their
// Connector's Stats.
type Stats struct {
	autoRollbacks    atomic.Int64 // transactions rolled back by pooldriver (undo)
	taskEndRollbacks atomic.Int64 // of which: at a task's end
	sessionResets    atomic.Int64
	carriedResets    atomic.Int64 // of which: run in the write of the next statement (carry.go)
	separateResets   atomic.Int64 // of which: run in round trips of their own
}

// Read returns the counts: the transactions pooldriver rolled back, of
// which at a task's end, and the sessions it reset, of which carried with
// the next statement and run in round trips of their own.
func (s *Stats) Read() (autoRollbacks, taskEndRollbacks, sessionResets, carriedResets, separateResets int64) {
	return s.autoRollbacks.Load(), s.taskEndRollbacks.Load(), s.sessionResets.Load(), s.carriedResets.Load(), s.separateResets.Load()
}

// Owner is what a physical connection asks of its Connector while it is
// settled: its Connector implements it (connOwner).
type Owner interface {
	// PrepareSession runs the AfterConnect hook on a session just reset.
	PrepareSession(ctx context.Context, dc dialects.Conn) error
	// AfterRelease is the AfterRelease hook's verdict on a connection about
	// to go back to the pool (asked only when Env.AfterRelease).
	AfterRelease(pc *Conn) bool
	// Returned tells leak detection that pc is back (only when
	// Env.Leaks).
	Returned(pc *Conn)
	// Look asks the server through pc how full it is (when lookDue); false
	// when pc failed to say and is lost.
	Look(pc *Conn) bool
	// LostRole retires every connection of pc's generation: pc's server
	// left the role the DSN asks for (dialects.RoleLossDetector).
	LostRole(pc *Conn, server string)
}

// ReleaseHook hears of the end of each hold whose acquire was traced: the
// acquire's context, how long the hold had the connection, and what became
// of it: reset (rolled back, reset, or its reset carried with the next
// statement run on it) or closed; neither: back to the pool as it was.
type ReleaseHook interface {
	Released(ctx context.Context, held time.Duration, reset, closed bool)
}

// TaskBinding is the task a physical connection is bound to, as the
// connection sees it: the task implements it (the root's task.go).
type TaskBinding interface {
	// UnbindConn forgets pc, which goes back to the pool, as the task's.
	UnbindConn(pc *Conn)
	// LostConn records that pc broke while it carried the task's state:
	// the task's later statements on its Connector fail until it ends.
	LostConn(pc *Conn, cause error)
}

// OpenTx is a transaction begun with BeginTx, as its physical connection
// sees it: the driver's, to roll back should the connection be settled
// with it still open. The *sql.Tx's wrapper (tx) holds one.
type OpenTx struct {
	Drv driver.Tx
	// nested: Drv is a savepoint in the task's raw transaction (the root's nest.go),
	// whose rollback is the raw transaction's.
	nested bool
	// of is the *sql.Tx's wrapper (tx), which says whether its task's end
	// claimed it: a rollback settle runs then is the task's (see clean).
	of TaskClaim
}

// TaskClaim is a *sql.Tx as its physical connection sees it: whether the
// end of its task claimed it, and that task's context (for the log line).
type TaskClaim interface {
	ClaimedByTask() (context.Context, bool)
}

func (e *Env) warn(msg string, err error) {
	logline.At(context.Background(), e.Log, slog.LevelWarn, msg, err)
}

func (e *Env) debug(msg string) { logline.At(context.Background(), e.Log, slog.LevelDebug, msg, nil) }

// Why a physical connection was closed, for the DEBUG line that says so.
const (
	closeLost      = "broken or in an unknown state"
	closeRollback  = "rollback failed"
	closeReset     = "session reset failed"
	closeReject    = "WithAfterRelease said no"
	closeResetAll  = "Connector.Reset"
	closeIdleCheck = "found closed or not answering when taken from idle"
	closePing      = "healthcheck ping failed"
	closeConnector = "connector closed"
	closeExpired   = "expired (pool_max_conn_lifetime or pool_max_conn_idle_time)"
)
