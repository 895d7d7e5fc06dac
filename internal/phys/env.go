package phys

import (
	"context"
	"database/sql/driver"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/pooldriver/pooldriver/dialects"
	"github.com/pooldriver/pooldriver/internal/logline"
	"github.com/pooldriver/pooldriver/pool"
)

// Env is what the physical connections of one Connector need of it,
// handed to each when it is made, so that a physical connection never
// reaches up into the Connector, a task or a transaction. Init asks the
// Connector's Owner for it once; nothing changes it after, but its Reset
// generation. It also holds what the connections share among
// themselves, their counters and their cleanups, which the Connector reads
// (Counts) and ends (Close).
type Env struct {
	// lookDue, the Connector's (Owner.LookDue), says it wants to know how
	// full the server is: the next connection let go asks, off the
	// caller's path, before the pool has it back (settle), and is not
	// parked meanwhile.
	lookDue *atomic.Bool

	gen            atomic.Int64 // the Connector's Reset generation (Reset): a connection of an older one is stale (Conn.Stale)
	owner          Owner
	log            *slog.Logger  // nil: nothing is logged
	cleanupTimeout time.Duration // bounds every rollback and reset pooldriver runs by itself
	resetAlways    bool          // reset before the pool has it back, whatever was seen
	trustFuncs     bool          // the dialect's default-deny for unknown calls is off
	// Nothing is told of a connection's release (no leak detection, no
	// AfterRelease or BeforeAcquire hook): a hold may park it (park).
	parkable     bool
	afterRelease bool // the AfterRelease hook is set: owner.AfterRelease has a say
	// carryResets: no hook must see a session just reset (AfterConnect
	// runs again after each reset; AfterRelease and BeforeAcquire get the
	// raw connection), so a dialect may carry a reset (carry.go).
	carryResets bool
	leaks       bool // leak detection is on: owner.Returned is told
	// The BeforeAcquire hook, which Take runs on each connection the pool
	// hands out; nil: the Connector has none.
	beforeAcquire func(context.Context, *Conn) error

	// The connections' own: the zero values serve.
	cleanups Cleanups // runs rollbacks and resets off the goroutine that let go (settle)
	stats    Stats
}

// Init fills e from o, its Connector, before the first connection is
// made: what the connections do by themselves, and what follows for them
// from which of the Connector's hooks see them. hook is the BeforeAcquire
// hook, which Take runs where o says it is set (Owner.Watchers).
//
// It fills in cfg, its Connector's pool's, with the pool's callbacks on
// e's connections: the check of an idle one before it is handed out
// (BeforeAcquire), the healthcheck, and the destructor, which calls
// destroying first, for what the Connector does as a connection goes
// (its leak detection, the BeforeClose hook): destroying reports whether
// the Connector is closing, for the log line that says the connection
// closed.
func (e *Env) Init(o Owner, cfg *pool.Config[*Conn], hook func(context.Context, *Conn) error, destroying func(*Conn) (connectorClosing bool)) {
	e.owner, e.log, e.lookDue = o, o.Logger(), o.LookDue()
	e.cleanupTimeout, e.resetAlways, e.trustFuncs = o.Policy()
	afterConnect, beforeAcquire, afterRelease, leaks := o.Watchers()
	e.afterRelease, e.leaks = afterRelease, leaks
	e.parkable = !leaks && !afterRelease && !beforeAcquire
	e.carryResets = !afterConnect && !afterRelease && !beforeAcquire
	if beforeAcquire {
		e.beforeAcquire = hook
	}
	cfg.BeforeAcquire = func(ctx context.Context, r *pool.Resource[*Conn]) bool {
		return r.Value().checkIdle(ctx, r)
	}
	cfg.Healthcheck = func(ctx context.Context, pc *Conn) error {
		return pc.healthcheck(ctx) // Reset during the check: the pool destroys pc after it (Pool.CloseIdle)
	}
	cfg.Destructor = func(pc *Conn) { pc.close(destroying(pc)) }
}

// Dial makes a physical connection of e from the driver connection dial
// opens. One opened while Reset ran is stale: the pool destroys it and
// dials again (pool.Retire).
func (e *Env) Dial(ctx context.Context, dial func(context.Context) (dialects.Conn, error)) (*Conn, error) {
	gen := e.gen.Load()
	dc, err := dial(ctx)
	if err != nil {
		return nil, err
	}
	pc := newConn(e, dc)
	pc.gen = gen
	return pc, nil
}

// Take makes pc, the connection the pool handed out through r
// (pool.Pool.Acquire), the hold's alone, and runs the BeforeAcquire hook
// on it where the Connector has one: if the hook fails, pc is destroyed
// and Take returns the hook's error.
func (e *Env) Take(ctx context.Context, r *pool.Resource[*Conn]) (*Conn, error) {
	pc := r.Value()
	pc.taken(r)
	if e.beforeAcquire != nil {
		if err := e.beforeAcquire(ctx, pc); err != nil {
			pc.closing(closeHook)
			r.Destroy()
			return nil, err
		}
	}
	return pc, nil
}

// Unpark takes back for a hold the connection it parked through r
// (Conn.Release), if r is still parked (pool.Resource.Unpark), its
// connection is e's, and it passes the check the pool makes of an idle
// connection before it hands it out (checkIdle): then it is the hold's
// alone again. Otherwise Unpark returns nil, and one that failed the
// check is destroyed: rejected, which the pool counts as a failed check,
// unless ctx ended (the caller gave up: nothing to tell the pool's
// breaker).
func (e *Env) Unpark(ctx context.Context, r *pool.Resource[*Conn]) *Conn {
	pc := r.Value()
	if pc.Env != e || !r.Unpark() {
		return nil
	}
	if !pc.checkIdle(ctx, r) {
		if ctx.Err() != nil {
			r.Destroy()
		} else {
			r.Reject()
		}
		return nil
	}
	pc.taken(r)
	return pc
}

// Reset makes every connection of e made so far stale (Conn.Stale),
// those being opened now too.
func (e *Env) Reset() { e.gen.Add(1) }

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

// Owner is what a physical connection asks of its Connector: what it
// needs to know once (Env.Init) and what it asks while it is settled. Its
// Connector implements it (connOwner).
type Owner interface {
	// Policy returns what the connections do by themselves: the bound of
	// every rollback and reset they run (> 0), whether they reset before
	// the pool has them back whatever was seen (WithResetAlways), and
	// whether the dialect's default-deny for unknown calls is off
	// (WithTrustFunctions).
	Policy() (cleanupTimeout time.Duration, resetAlways, trustFunctions bool)
	// Watchers reports who besides the connections' users sees them: the
	// AfterConnect, BeforeAcquire and AfterRelease hooks, and leak
	// detection (told by Returned).
	Watchers() (afterConnect, beforeAcquire, afterRelease, leaks bool)
	// Logger is where the connections log; nil: nowhere.
	Logger() *slog.Logger
	// Released hears of the end of each hold whose acquire was traced
	// (Conn.TraceHold): the acquire's context, how long the hold
	// had the connection, and what became of it: reset (rolled back, reset,
	// or its reset carried with the next statement run on it) or closed;
	// neither: back to the pool as it was.
	Released(ctx context.Context, held time.Duration, reset, closed bool)
	// PrepareSession runs the AfterConnect hook on a session just reset.
	PrepareSession(ctx context.Context, dc dialects.Conn) error
	// AfterRelease is the AfterRelease hook's verdict on a connection about
	// to go back to the pool (asked only when Watchers says afterRelease).
	AfterRelease(pc *Conn) bool
	// Returned tells leak detection that pc is back (only when Watchers
	// says leaks).
	Returned(pc *Conn)
	// LookDue is the flag the Connector sets when it wants to know how full
	// the server is: the next connection let go takes it (clears it) and
	// asks (Look). Asked once, by Init.
	LookDue() *atomic.Bool
	// Look asks the server through pc how full it is (when LookDue was
	// set); false when pc failed to say and is lost.
	Look(pc *Conn) bool
	// LostRole retires every connection the pool has: server, which a
	// connection of the generation just ended reached, left the role the
	// DSN asks for (dialects.RoleLossDetector). Asked once per generation.
	LostRole(server string)
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

// TaskBinder is a task about to bind a physical connection on one of its
// Connectors (Conn.Bind): the root's task and that Connector (taskOn).
type TaskBinder interface {
	// BindConn records pc as the task's connection on the Connector,
	// unless the task ended or has a connection there already (or a lost
	// one), and returns the task, which pc is bound to then, and whether
	// in session mode. pc's mutex is held (the lock order: pc's, then the
	// task's).
	BindConn(pc *Conn) (t TaskBinding, session, ok bool)
}

// TaskClaim is a *sql.Tx as its physical connection sees it: what the
// begin and the end of its transaction ask of it (Conn.BeginTx,
// Conn.EndTx), and whether the end of its task claimed it, with that
// task's context (for the log line). The *sql.Tx's wrapper (the root's
// tx) implements it.
type TaskClaim interface {
	// Admit makes the transaction just begun and recorded on its
	// connection the *sql.Tx's, and its task's where it has one; an error
	// refuses it (its task ended meanwhile): BeginTx rolls it back and
	// returns the error.
	Admit() error
	// CommitOn commits drv, the driver's transaction of the *sql.Tx, on
	// pc, bounded by ctx (EndTx); before is the bytes pc had written
	// just before, against which Conn.Wrote tells whether the COMMIT
	// left. The caller holds sem, or its hold's rows do.
	CommitOn(ctx context.Context, pc *Conn, drv driver.Tx, before uint64) error
	// TaskEnding reports whether the *sql.Tx's task is ending: a rollback
	// of it then is the task's (EndTx counts it so).
	TaskEnding() bool
	// ClaimedByTask reports whether the end of the *sql.Tx's task claimed
	// it, with the task's context: a rollback settle runs then is the
	// task's (see clean).
	ClaimedByTask() (context.Context, bool)
}

func (e *Env) warn(msg string, err error) {
	logline.At(context.Background(), e.log, slog.LevelWarn, msg, err)
}

func (e *Env) debug(msg string) { logline.At(context.Background(), e.log, slog.LevelDebug, msg, nil) }

// Why a physical connection was closed, for the DEBUG line that says so.
const (
	closeLost      = "broken or in an unknown state"
	closeRollback  = "rollback failed"
	closeReset     = "session reset failed"
	closeReject    = "WithAfterRelease said no"
	closeResetAll  = "Connector.Reset"
	closeIdleCheck = "found closed or not answering when taken from idle"
	closeHook      = "a hook failed"
	closePing      = "healthcheck ping failed"
	closeConnector = "connector closed"
	closeExpired   = "expired (pool_max_conn_lifetime or pool_max_conn_idle_time)"
)
