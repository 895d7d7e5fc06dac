package pooldriver

import (
	"context"
	"database/sql/driver"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pooldriver/pooldriver/dialects"
)

// physEnv is what the physical connections of one Connector need of it,
// handed to each when it is made, so that a physical connection never
// reaches up into the Connector, a task or a transaction: the Connector
// fills it once (newConnector) and never changes it, but for gen, which
// Reset bumps.
type physEnv struct {
	cleanupTimeout time.Duration // bounds every rollback and reset pooldriver runs by itself
	resetAlways    bool          // WithResetAlways: reset before the pool has it back, whatever was seen
	trustFuncs     bool          // WithTrustFunctions: the dialect's default-deny for unknown calls is off
	cleanups       *cleanups     // runs rollbacks and resets off the goroutine that let go (settle)
	// Nothing is told of a connection's release (no leak detection, no
	// AfterRelease or BeforeAcquire hook): a hold may park it (park).
	parkable     bool
	afterRelease bool // the AfterRelease hook is set: owner.afterRelease has a say
	// carryResets: no hook must see a session just reset (AfterConnect
	// runs again after each reset; AfterRelease and BeforeAcquire get the
	// raw connection), so a dialect may carry a reset (carry.go).
	carryResets bool
	leaks       bool         // leak detection is on: owner.returned is told
	gen         atomic.Int64 // the Connector's Reset generation, bumped by Reset: a connection of an older one is stale (physConn.stale)
	// lookDue: the Connector wants to know how full the server is (share.go):
	// the next connection let go asks, off the caller's path, before the
	// pool has it back (settle), and is not parked meanwhile.
	lookDue atomic.Bool
	// releases: the Tracer, where it hears of releases too (trace.go).
	releases releaseHook
	stats    *physStats
	log      *slog.Logger // nil: nothing is logged
	owner    physOwner
}

// physStats are the counters the physical connections keep for their
// Connector's Stats.
type physStats struct {
	autoRollbacks    atomic.Int64 // transactions rolled back by pooldriver (undo)
	taskEndRollbacks atomic.Int64 // of which: at a task's end
	sessionResets    atomic.Int64
	carriedResets    atomic.Int64 // of which: run in the write of the next statement (carry.go)
	separateResets   atomic.Int64 // of which: run in round trips of their own
}

// physOwner is what a physical connection asks of its Connector while it is
// settled: its Connector implements it (connOwner).
type physOwner interface {
	// prepareSession runs the AfterConnect hook on a session just reset.
	prepareSession(ctx context.Context, dc dialects.Conn) error
	// afterRelease is the AfterRelease hook's verdict on a connection about
	// to go back to the pool (asked only when physEnv.afterRelease).
	afterRelease(pc *physConn) bool
	// returned tells leak detection that pc is back (only when
	// physEnv.leaks).
	returned(pc *physConn)
	// look asks the server through pc how full it is (when lookDue); false
	// when pc failed to say and is lost.
	look(pc *physConn) bool
	// lostRole retires every connection of pc's generation: pc's server
	// left the role the DSN asks for (dialects.RoleLossDetector).
	lostRole(pc *physConn, server string)
}

// releaseHook hears of the end of each hold whose acquire was traced: the
// acquire's context, how long the hold had the connection, and the fate
// the connection met (fatePark: parked as it is).
type releaseHook interface {
	released(ctx context.Context, held time.Duration, f fate)
}

// taskBinding is the task a physical connection is bound to, as the
// connection sees it: the task implements it (task.go).
type taskBinding interface {
	// unbindConn forgets pc, which goes back to the pool, as the task's.
	unbindConn(pc *physConn)
	// lostConn records that pc broke while it carried the task's state:
	// the task's later statements on its Connector fail until it ends.
	lostConn(pc *physConn, cause error)
}

// openTx is a transaction begun with BeginTx, as its physical connection
// sees it: the driver's, to roll back should the connection be settled
// with it still open. The *sql.Tx's wrapper (tx) holds one.
type openTx struct {
	drv driver.Tx
	// nested: drv is a savepoint in the task's raw transaction (nest.go),
	// whose rollback is the raw transaction's.
	nested bool
	// of is the *sql.Tx's wrapper (tx), which says whether its task's end
	// claimed it: a rollback settle runs then is the task's (see clean).
	of taskClaim
}

// taskClaim is a *sql.Tx as its physical connection sees it: whether the
// end of its task claimed it, and that task's context (for the log line).
type taskClaim interface {
	claimedByTask() (context.Context, bool)
}

// logAt logs msg on l at level with err, when there is one, and args, with
// ctx for the handler (a task's or request's attributes). A nil l logs
// nothing. Durations are written as the DSN writes them ("5s", "1m30s"),
// whatever the handler: a JSON handler would write a time.Duration in
// nanoseconds.
func logAt(ctx context.Context, l *slog.Logger, level slog.Level, msg string, err error, args ...any) {
	if l == nil || !l.Enabled(ctx, level) {
		return
	}
	for i, a := range args {
		switch v := a.(type) {
		case time.Duration:
			args[i] = shortDuration(v)
		case slog.Attr:
			if v.Value.Kind() == slog.KindDuration {
				args[i] = slog.String(v.Key, shortDuration(v.Value.Duration()))
			}
		}
	}
	if err != nil {
		args = append(args, "error", err)
	}
	l.Log(ctx, level, "pooldriver: "+msg, args...)
}

// shortDuration writes d as a DSN would: 1h, 30m, 30s, 0 (Duration.String
// writes 1h0m0s, 30m0s, 0s).
func shortDuration(d time.Duration) string {
	if d == 0 {
		return "0"
	}
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

func (e *physEnv) warn(msg string, err error) {
	logAt(context.Background(), e.log, slog.LevelWarn, msg, err)
}

func (e *physEnv) debug(msg string) { logAt(context.Background(), e.log, slog.LevelDebug, msg, nil) }

// Why a physical connection was closed, for the DEBUG line that says so.
const (
	closeLost      = "broken or in an unknown state"
	closeRollback  = "rollback failed"
	closeReset     = "session reset failed"
	closeReject    = "WithAfterRelease said no"
	closeResetAll  = "Connector.Reset"
	closeHook      = "a hook failed"
	closeIdleCheck = "found closed or not answering when taken from idle"
	closePing      = "healthcheck ping failed"
	closeConnector = "connector closed"
	closeExpired   = "expired (pool_max_conn_lifetime or pool_max_conn_idle_time)"
)

// leakStackDepth bounds the frames recorded per acquire.
const leakStackDepth = 32

// leakMark is a physical connection's record for the leak detector
// (leak.go).
type leakMark struct {
	takenAt atomic.Int64 // on the detector's clock, plus 1; 0: in the pool

	mu       sync.Mutex // protects the fields below
	reported bool       // this acquisition was reported
	n        int
	pcs      [leakStackDepth]uintptr
}
