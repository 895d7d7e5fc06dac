package phys

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pooldriver/pooldriver/dialects"
	"github.com/pooldriver/pooldriver/internal/logline"
	"github.com/pooldriver/pooldriver/pool"
)

// maxCachedStmts bounds the prepared statements kept per physical
// connection; past it, one is closed to make room.
const maxCachedStmts = 128

// Conn is one physical connection: a real driver connection owned by the
// pool, and the one owner of its state.
type Conn struct {
	Env *Env // its Connector's, for everything it needs of it
	DC  dialects.Conn
	drv driver.Conn
	res *pool.Resource[*Conn] // its pool handle, set at its first acquire (one per connection)
	gen int64                 // the Connector's Reset generation when it was opened (Stale)
	// For the log line that says it closed (Close, why): closeReason is set
	// by whoever destroys it, before the pool's destructor reads it.
	born        time.Time
	closeReason string
	closed      atomic.Bool // destroyed by the pool: for those that keep a pointer (Gone)
	// tracedAt: when the hold that has pc acquired it, where the acquire
	// was traced and its release is to be (traced; the root's trace.go), with the
	// context the acquire was traced with (tracedCtx), for the release's.
	tracedAt  time.Time
	tracedCtx context.Context
	traced    bool

	// The optional interfaces of drv and DC, resolved once.
	execer      driver.ExecerContext
	queryer     driver.QueryerContext
	preparer    driver.ConnPrepareContext
	beginner    driver.ConnBeginTx
	checker     driver.NamedValueChecker
	argsAsIs    bool // the dialect says the driver takes every argument as it is
	oneResult   bool // the dialect says its server sends one result at a time (dialects.OneResult)
	validity    driver.Validator
	tracker     dialects.SessionTracker
	staleErr    dialects.StaleStatementDetector
	roleLoss    dialects.RoleLossDetector // nil: the DSN asks for no role, or the dialect cannot tell
	idleChecker dialects.IdleChecker
	observer    dialects.StatementObserver
	written     dialects.WriteCounter // nil: the driver's ErrBadConn is taken at its word
	interrupter dialects.Interrupter  // nil: the driver honours every context itself
	// carrier: the dialect sends a session reset with the next statement
	// (nil: it cannot, or a hook must see every reset; carry.go);
	// carryDone counts and logs such a reset once it ran, and idleReset
	// runs it on its own once pc sat idle carryIdleBound.
	carrier   dialects.ResetCarrier
	carryDone func(carried bool)
	idleReset *time.Timer // under mu

	// Lock rules, for everything below:
	//
	//   - sem is held by whoever runs something on drv or DC: a statement
	//     (from start to done), open result sets (until their Close), a
	//     rollback or a reset. Statements on one physical conn never overlap.
	//     One exception, a transition of the hold's state machine
	//     (the root's plan.go): the first operation of a hold outside any task runs
	//     without it, as the only one that can reach pc, and so do the rows
	//     of such a query (holdSoloRows) until they close or the hold's next
	//     operation, which takes sem for them before it can let anyone else
	//     reach pc; everything they count as held by sem below, they own
	//     alone.
	//   - st is read and written under mu. Its tx, txOwner and rows fields
	//     are written only by the holder of sem, which may therefore read
	//     them without mu; session is written by the holder of sem too, and
	//     by a task's cleanup that cannot get sem (which marks it lost), so
	//     everyone reads it under mu; holds and task are written by anyone.
	//   - A Conn fresh from the pool is reachable only by its taker
	//     until it binds it to a task; until then the taker may touch st
	//     without mu. (A task that ended may keep a stale pointer to it,
	//     through which it only reads st.task and st.txOwner under mu;
	//     the taker writes those only when they are set.)
	//   - Lock order: mu, then task.mu. Nothing waits for sem while holding
	//     mu.
	sem connLock
	mu  sync.Mutex
	st  ConnState

	// Touched only by the holder of sem.
	stmts map[string]driver.Stmt

	// Statements closed by their logical statements, to drop from stmts at
	// the next chance; guarded by mu, counted in evictions so that the
	// statement path needs no lock to learn there are none.
	evict     []string
	evictions atomic.Int32
}

func newConn(env *Env, dc dialects.Conn) *Conn {
	drv := dc.Driver()
	pc := &Conn{Env: env, DC: dc, drv: drv, sem: newConnLock(), born: time.Now()}
	pc.st.resetAlways, pc.st.parkable = env.resetAlways, env.parkable
	// A dialect that runs queries or prepares statements its own way
	// (PostgreSQL: queries past pgx's stdlib; behind a transaction pooler,
	// statements unnamed on the server) says so by implementing
	// ExecerContext, QueryerContext or ConnPrepareContext itself.
	if e, ok := dc.(driver.ExecerContext); ok {
		pc.execer = e
	} else {
		pc.execer, _ = drv.(driver.ExecerContext)
	}
	if q, ok := dc.(driver.QueryerContext); ok {
		pc.queryer = q
	} else {
		pc.queryer, _ = drv.(driver.QueryerContext)
	}
	if p, ok := dc.(driver.ConnPrepareContext); ok {
		pc.preparer = p
	} else {
		pc.preparer, _ = drv.(driver.ConnPrepareContext)
	}
	if b, ok := dc.(driver.ConnBeginTx); ok {
		pc.beginner = b
	} else {
		pc.beginner, _ = drv.(driver.ConnBeginTx)
	}
	pc.checker, _ = drv.(driver.NamedValueChecker)
	if a, ok := dc.(dialects.ArgumentsAsIs); ok && a.ArgumentsAsIs() {
		pc.argsAsIs = true
	}
	if o, ok := dc.(dialects.OneResult); ok && o.OneResultAtATime() {
		pc.oneResult = true
	}
	if v, ok := dc.(driver.Validator); ok {
		pc.validity = v
	} else {
		pc.validity, _ = drv.(driver.Validator)
	}
	pc.tracker, _ = dc.(dialects.SessionTracker)
	pc.staleErr, _ = dc.(dialects.StaleStatementDetector)
	pc.roleLoss, _ = dc.(dialects.RoleLossDetector)
	pc.idleChecker, _ = dc.(dialects.IdleChecker)
	pc.observer, _ = dc.(dialects.StatementObserver)
	pc.written, _ = dc.(dialects.WriteCounter)
	pc.interrupter, _ = dc.(dialects.Interrupter)
	if c, ok := dc.(dialects.ResetCarrier); ok && env.carryResets {
		pc.carrier, pc.carryDone = c, pc.carriedDone
	}
	if t, ok := dc.(dialects.FunctionTruster); ok && env.trustFuncs {
		t.TrustFunctions(true)
	}
	if r, ok := dc.(dialects.FullResetter); ok && env.resetAlways {
		r.ResetFully()
	}
	return pc
}

// idlePingAfter: a physical connection idle longer than this is pinged
// before it is handed out, so that one the server closed meanwhile is
// replaced instead of failing the caller's statement.
const idlePingAfter = time.Second

// idlePingTimeout caps that ping: a server that does not answer an empty
// query within it is taken as unreachable for this connection.
const idlePingTimeout = time.Second

// checkIdle checks an idle connection before it is handed out (the pool's
// BeforeAcquire, and Env.Unpark), pre-warmed ones included: without a round trip when the dialect can (a connection
// the server closed has an error or end-of-file waiting on its socket), and
// with a ping when it sat idle long. The ping is bounded by the caller's
// context and by idlePingTimeout, so a black-holed server costs a caller at
// most that, and a caller whose context ended gets its error at once (the
// pool stops trying further idle connections for it).
func (pc *Conn) checkIdle(ctx context.Context, r *pool.Resource[*Conn]) bool {
	if pc.Stale() {
		pc.closeReason = closeResetAll
		return false
	}
	// Every idle hand-out is peeked at, one parked moments ago included:
	// the server may have killed it since (TestServerKillsIdle).
	if pc.idleChecker != nil && pc.idleChecker.CheckIdle() != nil {
		pc.closeReason = closeIdleCheck
		return false
	}
	if r.IdleFor() < idlePingAfter {
		return true
	}
	return pc.pingIdle(ctx)
}

// pingIdle is checkIdle's ping of a connection idle idlePingAfter or more.
func (pc *Conn) pingIdle(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, idlePingTimeout)
	defer cancel()
	if pc.DC.Ping(ctx) != nil {
		pc.closeReason = closeIdleCheck
		return false
	}
	return true
}

// closing records why pc is about to be destroyed, for the log line that
// says it closed; whoever destroys it says so first.
func (pc *Conn) closing(reason string) { pc.closeReason = reason }

// why says why pc is being closed, for the log line that says so: what
// whoever destroys it recorded (closing), else what the pool does by
// itself: it closes pc for its Connector's Reset, for its Connector's
// close (connectorClosing), or at the end of its lifetime or idle time.
func (pc *Conn) why(connectorClosing bool) string {
	switch {
	case pc.closeReason != "":
		return pc.closeReason
	case pc.Stale():
		return closeResetAll
	case connectorClosing:
		return closeConnector
	}
	return closeExpired
}

// healthcheck is the pool's check of an idle pc: opened since its
// Connector's last Reset, answering a ping, and its catalog reading
// refreshed (RefreshCatalog). A failure records why pc is to be closed.
func (pc *Conn) healthcheck(ctx context.Context) error {
	if pc.Stale() {
		pc.closing(closeResetAll)
		return ErrStale
	}
	if err := pc.DC.Ping(ctx); err != nil {
		pc.closing(closePing)
		return err
	}
	return pc.RefreshCatalog(ctx)
}

// RefreshCatalog reads again the catalog pc's dialect reads statements
// with, where it keeps one (dialects.CatalogRefresher). A failure records
// why pc is to be closed.
func (pc *Conn) RefreshCatalog(ctx context.Context) error {
	r, ok := pc.DC.(dialects.CatalogRefresher)
	if !ok {
		return nil
	}
	if err := r.RefreshCatalog(ctx); err != nil {
		pc.closing(closePing)
		return err
	}
	return nil
}

// TraceHold records that the hold that has pc traced its acquire at at,
// with ctx, for the trace of its release. The hold has pc alone.
func (pc *Conn) TraceHold(ctx context.Context, at time.Time) {
	pc.tracedAt, pc.tracedCtx, pc.traced = at, ctx, true
}

// Stale reports whether pc was opened before its Connector's last Reset.
func (pc *Conn) Stale() bool { return pc.gen != pc.Env.gen.Load() }

// ErrStale is why a stale connection is not handed out.
var ErrStale = errors.New("pooldriver: opened before Connector.Reset")

// setTx records the transaction now open on the server. The caller holds sem.
func (pc *Conn) setTx(s TxState, owner *OpenTx) {
	pc.mu.Lock()
	pc.st.Tx, pc.st.TxOwner = s, owner
	pc.mu.Unlock()
}

// Untouched reports pc's session as it was opened, or reset since, with
// no transaction open. The caller holds sem.
func (pc *Conn) Untouched() bool { return pc.st.Session == sessionClean && pc.st.Tx == TxNone }

// taken records that pc, just taken from the pool through its handle r
// (acquired or unparked: Env.Take, Env.Unpark), is the hold's that took
// it: nobody else can reach it. The pool gives one handle per connection,
// which pc keeps from its first acquire for its life.
func (pc *Conn) taken(r *pool.Resource[*Conn]) {
	if pc.res == nil {
		pc.res = r
	}
	pc.st.Holds = 1
}

// KeepsTaskState reports whether a raw transaction is open on pc or its
// session changed: what a transaction-mode task keeps its connection for.
// The caller holds sem.
func (pc *Conn) KeepsTaskState() bool {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	return pc.st.Tx == TxRaw || pc.st.Session == SessionDirty
}

// heldByOthers reports whether holds other than the caller's use pc.
func (pc *Conn) heldByOthers() bool {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	return pc.st.Holds > 1
}

// Gone reports whether pc is closed (for whatever reason: its lifetime or
// idle time ran out, an idle check found it dead, the pool closed), or will
// be as soon as its current use ends: lost (broken, or its state unknown)
// or stale (opened before its Connector's last Reset; never handed out
// again).
func (pc *Conn) Gone() bool { return pc.closed.Load() || pc.Stale() || pc.isLost() }

// isLost reports whether pc is lost.
func (pc *Conn) isLost() bool {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	return pc.st.Session == SessionLost
}

// markDirty records that the session changed. The caller holds sem.
func (pc *Conn) markDirty() {
	pc.mu.Lock()
	if pc.st.Session == sessionClean {
		pc.st.Session = SessionDirty
	}
	pc.mu.Unlock()
}

// Lose records that the connection broke or its state is unknown, and
// unbinds it from its task. If it carried something the task relied on (a
// transaction, a changed session, or a session-mode session that was used
// before: fresh says it was just made for the failing statement), the task
// is told: its later statements on this Connector fail until it ends. It
// reports whether the connection carried such state. The caller holds sem
// (or is a task's cleanup that could not get it).
func (pc *Conn) Lose(cause error, fresh bool) (carried bool) {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	if pc.st.Session == SessionLost {
		return false
	}
	carried = pc.st.Tx != TxNone || pc.st.Session == SessionDirty
	pc.st.Session = SessionLost
	if t := pc.st.task; t != nil {
		if carried || !fresh && pc.st.mode == SessionMode {
			t.LostConn(pc, cause)
			carried = true
		} else {
			t.UnbindConn(pc)
		}
		pc.st.task = nil
	}
	return carried
}

// AddRows counts the result sets open on pc. The caller holds sem (rows
// keep it while open), or runs solo (see the lock rules).
//
// shared says whether anything else may reach pc (it is bound to a task,
// or a task's *sql.Tx is open on it, which the task's end reaches):
// otherwise the caller may write st without mu (see the lock rules).
func (pc *Conn) AddRows(n int, shared bool) {
	if !shared {
		pc.st.Rows += n
		return
	}
	pc.mu.Lock()
	pc.st.Rows += n
	pc.mu.Unlock()
}

// Convert prepares arguments for drv the way database/sql would have: the
// driver's own NamedValueChecker first, then the default converter. The
// logical connection accepted them unconverted because, when database/sql
// checked them, no physical connection was chosen yet.
func (pc *Conn) Convert(args []driver.NamedValue) ([]driver.NamedValue, error) {
	if pc.argsAsIs {
		return args, nil // the driver would accept each unchanged
	}
	return pc.convertEach(args)
}

func (pc *Conn) convertEach(args []driver.NamedValue) ([]driver.NamedValue, error) {
	for i := 0; i < len(args); i++ {
		nv := &args[i]
		if pc.checker != nil {
			err := pc.checker.CheckNamedValue(nv)
			switch {
			case err == nil:
				continue
			case err == driver.ErrSkip: //nolint:errorlint // the common case, before errors.Is
			case errors.Is(err, driver.ErrRemoveArgument):
				args = append(args[:i], args[i+1:]...)
				i--
				continue
			case !errors.Is(err, driver.ErrSkip):
				return nil, err
			}
		}
		if driver.IsValue(nv.Value) {
			continue
		}
		v, err := driver.DefaultParameterConverter.ConvertValue(nv.Value)
		if err != nil {
			return nil, fmt.Errorf("sql: converting argument %s type: %w", argName(nv), err)
		}
		nv.Value = v
	}
	return args, nil
}

func argName(nv *driver.NamedValue) string {
	if nv.Name != "" {
		return "$" + nv.Name
	}
	return fmt.Sprintf("$%d", nv.Ordinal)
}

// Prepared returns drv's prepared statement for query, preparing it on this
// connection the first time. The caller holds sem.
func (pc *Conn) Prepared(ctx context.Context, query string) (driver.Stmt, error) {
	pc.dropEvictedDue()
	if s, ok := pc.stmts[query]; ok {
		return s, nil
	}
	var s driver.Stmt
	var err error
	if pc.preparer != nil {
		s, err = pc.preparer.PrepareContext(ctx, query)
	} else {
		s, err = pc.drv.Prepare(query)
	}
	if err != nil {
		return nil, err
	}
	if pc.stmts == nil {
		pc.stmts = make(map[string]driver.Stmt)
	}
	if len(pc.stmts) >= maxCachedStmts {
		for q, old := range pc.stmts {
			_ = old.Close() // best effort: it goes with the connection at the latest
			delete(pc.stmts, q)
			break
		}
	}
	pc.stmts[query] = s
	return s, nil
}

// dropStmt closes and forgets the cached statement for query. The caller
// holds sem.
func (pc *Conn) dropStmt(query string) {
	if s, ok := pc.stmts[query]; ok {
		_ = s.Close() // best effort: it goes with the connection at the latest
		delete(pc.stmts, query)
	}
}

// EvictLater asks for the cached statement for query to be dropped at the
// next chance (its logical statement was closed). Anyone may call it.
func (pc *Conn) EvictLater(query string) {
	pc.mu.Lock()
	pc.evict = append(pc.evict, query)
	pc.evictions.Add(1)
	pc.mu.Unlock()
}

// Ready readies pc for an operation of the hold that has it claimed (or
// runs solo, see the lock rules) and returns what the operation's end
// needs of its start. rows says the hold's own result sets are open on
// pc: the operation runs beside them, which a statement (stmt) cannot
// where the server sends one result at a time (dialects.ErrResultOpen),
// and Ready does nothing else. Otherwise it drops the statements
// EvictLater asked for, first, since the drop writes too: a statement that
// broke before its bytes left must not count as sent. It then returns the
// bytes written so far (sent), against which Wrote tells whether the
// operation's own bytes left, and, where watch asks (an operation of a
// transaction-mode task on a connection not bound to it), whether pc
// keeps task state already (hadState, see KeepsTaskState).
func (pc *Conn) Ready(stmt, rows, watch bool) (sent uint64, hadState bool, err error) {
	if rows {
		if stmt && pc.oneResult {
			return 0, false, dialects.ErrResultOpen
		}
		return 0, false, nil
	}
	pc.dropEvictedDue()
	if watch {
		hadState = pc.KeepsTaskState()
	}
	return pc.sent(), hadState, nil
}

// dropEvictedDue drops the statements EvictLater asked for, if any. The
// caller holds sem. Small enough to be inlined: every statement asks.
func (pc *Conn) dropEvictedDue() {
	if pc.evictions.Load() > 0 {
		pc.dropEvicted()
	}
}

// dropEvicted is dropEvictedDue once there are statements to drop.
func (pc *Conn) dropEvicted() {
	pc.mu.Lock()
	qs := pc.evict
	pc.evict = nil
	pc.evictions.Store(0)
	pc.mu.Unlock()
	for _, q := range qs {
		pc.dropStmt(q)
	}
}

// close closes pc, its prepared statements first, for the pool's
// destructor (Env.Init): pc is the pool's no longer, and nothing else has it. It logs
// that pc closed, why (connectorClosing: its Connector is closing; see
// why) and how old it was, at DEBUG.
func (pc *Conn) close(connectorClosing bool) {
	pc.closed.Store(true)
	pc.closeStmts()
	err := pc.DC.Close()
	if pc.Env.log != nil {
		logline.At(context.Background(), pc.Env.log, slog.LevelDebug, "connection closed", err,
			"reason", pc.why(connectorClosing), "age", time.Since(pc.born).Round(time.Millisecond))
	}
}

// closeStmts closes every cached prepared statement. The caller holds sem.
func (pc *Conn) closeStmts() {
	for q, s := range pc.stmts {
		_ = s.Close() // best effort: it goes with the connection at the latest
		delete(pc.stmts, q)
	}
}

// Exec runs a statement that returns no rows.
func (pc *Conn) Exec(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	args, err := pc.Convert(args)
	if err != nil {
		return nil, err
	}
	if pc.execer != nil {
		res, err := pc.execer.ExecContext(ctx, query, args)
		if err == nil {
			return res, nil
		}
		return pc.execFailed(ctx, query, args, res, err)
	}
	return pc.ExecPrepared(ctx, query, args)
}

// execFailed is exec after the driver's ExecContext returned err (and
// res): its error, unless it is driver.ErrSkip, when the statement is run
// prepared.
func (pc *Conn) execFailed(ctx context.Context, query string, args []driver.NamedValue, res driver.Result, err error) (driver.Result, error) {
	if !errors.Is(err, driver.ErrSkip) {
		pc.checkStale(query, err)
		return res, err
	}
	return pc.ExecPrepared(ctx, query, args)
}

// ExecStmt runs query with args as a cached prepared statement, prepared
// on pc the first time: a prepared statement's execution.
func (pc *Conn) ExecStmt(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	args, err := pc.Convert(args)
	if err != nil {
		return nil, err
	}
	return pc.ExecPrepared(ctx, query, args)
}

// QueryStmt is ExecStmt for a statement that returns rows.
func (pc *Conn) QueryStmt(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	args, err := pc.Convert(args)
	if err != nil {
		return nil, err
	}
	return pc.queryPrepared(ctx, query, args)
}

// ExecPrepared runs query with its converted args as a cached prepared
// statement.
func (pc *Conn) ExecPrepared(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	s, err := pc.Prepared(ctx, query)
	if err != nil {
		return nil, err
	}
	return pc.stmtExec(ctx, s, query, args)
}

// Query runs a statement that returns rows.
func (pc *Conn) Query(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	args, err := pc.Convert(args)
	if err != nil {
		return nil, err
	}
	if pc.queryer != nil {
		rows, err := pc.queryer.QueryContext(ctx, query, args)
		if err == nil {
			return rows, nil
		}
		return pc.queryFailed(ctx, query, args, rows, err)
	}
	return pc.queryPrepared(ctx, query, args)
}

// queryFailed is query after the driver's QueryContext returned err (and
// rows): its error, unless it is driver.ErrSkip, when the statement is run
// prepared.
func (pc *Conn) queryFailed(ctx context.Context, query string, args []driver.NamedValue, rows driver.Rows, err error) (driver.Rows, error) {
	if !errors.Is(err, driver.ErrSkip) {
		pc.checkStale(query, err)
		return rows, err
	}
	return pc.queryPrepared(ctx, query, args)
}

// queryPrepared runs query with its converted args as a cached prepared
// statement.
func (pc *Conn) queryPrepared(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	s, err := pc.Prepared(ctx, query)
	if err != nil {
		return nil, err
	}
	return pc.stmtQuery(ctx, s, query, args)
}

// stmtExec runs the cached prepared statement s of query. An error that
// says the server no longer accepts it drops it from the cache, so that the
// next run prepares it afresh.
func (pc *Conn) stmtExec(ctx context.Context, s driver.Stmt, query string, args []driver.NamedValue) (driver.Result, error) {
	var res driver.Result
	var err error
	if se, ok := s.(driver.StmtExecContext); ok {
		res, err = se.ExecContext(ctx, args)
	} else {
		var vals []driver.Value
		if vals, err = plainValues(args); err == nil {
			res, err = s.Exec(vals) //nolint:staticcheck // the driver offers nothing newer
		}
	}
	pc.checkStale(query, err)
	return res, err
}

func (pc *Conn) stmtQuery(ctx context.Context, s driver.Stmt, query string, args []driver.NamedValue) (driver.Rows, error) {
	var rows driver.Rows
	var err error
	if sq, ok := s.(driver.StmtQueryContext); ok {
		rows, err = sq.QueryContext(ctx, args)
	} else {
		var vals []driver.Value
		if vals, err = plainValues(args); err == nil {
			rows, err = s.Query(vals) //nolint:staticcheck // the driver offers nothing newer
		}
	}
	pc.checkStale(query, err)
	return rows, err
}

// checkStale drops the cached statement for query when err says the server
// no longer accepts it as prepared. Drivers that run a statement prepared
// with the same text in place of the text itself (pgx's stdlib prepares
// under the query text as its name) hit it on plain queries too. When err
// says the server left the role the DSN asks for, every connection opened
// so far is retired.
func (pc *Conn) checkStale(query string, err error) {
	if err == nil {
		return
	}
	if pc.staleErr != nil && pc.staleErr.StaleStatement(err) {
		pc.dropStmt(query)
	}
	if pc.roleLoss == nil {
		return
	}
	if server, lost := pc.roleLoss.LostRole(err); lost {
		pc.lostRole(server)
	}
}

// lostRole retires every connection of pc's generation, once for it: pc's
// server left the role the DSN asks for, and so did the other connections
// opened with pc, while those opened since reach the server that has the
// role now.
func (pc *Conn) lostRole(server string) {
	if pc.Env.gen.CompareAndSwap(pc.gen, pc.gen+1) {
		pc.Env.owner.LostRole(server)
	}
}

func plainValues(args []driver.NamedValue) ([]driver.Value, error) {
	vals := make([]driver.Value, len(args))
	for i, a := range args {
		if a.Name != "" {
			return nil, fmt.Errorf("pooldriver: the driver does not support named parameters ($%s)", a.Name)
		}
		vals[i] = a.Value
	}
	return vals, nil
}

// usable reports whether the driver, if it can tell, says the connection is
// still usable. Only for a connection without open rows (see finish).
func (pc *Conn) usable() bool {
	return pc.validity == nil || pc.validity.IsValid()
}

// Raw runs f with the driver's own connection, for what database/sql
// does not reach: a reset carried with the next statement runs first, on
// its own, since f's use is not a statement pooldriver sends; and what f
// did to the session cannot be seen, so the session counts as changed
// after (reset before anyone else uses pc), unless f's error is the
// connection's end, which the caller loses as after a statement. Where f
// panics, pc is lost: the panic passes by the caller's finish, and a lost
// connection is destroyed without the claim the caller still has. The
// caller holds sem.
func (pc *Conn) Raw(f func(raw any) error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			pc.Lose(errRawPanicked, false)
			panic(p)
		}
		if err == nil || !pc.broken(err) {
			pc.markDirty()
		}
	}()
	if err := pc.resetCarriedNow(); err != nil {
		return err
	}
	return f(pc.DC.Raw())
}

var errRawPanicked = errors.New("pooldriver: RawConn's function panicked: what it left on the connection is unknown")

// What left for the server. Once any byte of a statement left, the
// server may have run it: where its connection broke before the reply,
// its error must not let database/sql run it again, and a COMMIT's
// outcome is to be asked of the server. A reading of the bytes written,
// taken just before the statement is sent (Ready's, RawCommit's, the one
// EndTx hands TaskClaim.CommitOn), is what Wrote compares with once the
// statement failed.

// Wrote reports, for a statement sent on pc once pc had written before
// bytes, whether err, the statement's error, is pc's end (broke: err is
// the driver's driver.ErrBadConn, or the driver says the connection is no
// longer usable) and, where it is, whether bytes of the statement left
// for the server (sent). Where the dialect does not count the bytes
// (dialects.WriteCounter), only the driver's ErrBadConn says none did.
// Only for a connection without open rows (see usable). The caller holds
// sem, or runs solo (see the lock rules).
func (pc *Conn) Wrote(before uint64, err error) (broke, sent bool) {
	if err == nil || !pc.broken(err) {
		return false, false
	}
	if pc.written == nil {
		return true, !errors.Is(err, driver.ErrBadConn)
	}
	return true, pc.written.Written() != before
}

// RawCommit reports whether query, the statement about to run on pc, is a
// COMMIT that ends the raw transaction open there (one a statement began:
// a raw BEGIN the server reports), and where it is, returns the bytes pc
// has written so far, against which Wrote tells whether the COMMIT left.
// Small enough to be inlined: every statement asks, and only those of a
// raw transaction look further. The caller holds sem, or runs solo.
func (pc *Conn) RawCommit(query string) (before uint64, ok bool) {
	if pc.st.Tx != TxRaw {
		return 0, false
	}
	return pc.rawCommit(query)
}

// rawCommit is RawCommit inside a raw transaction.
func (pc *Conn) rawCommit(query string) (before uint64, ok bool) {
	if !commitsAlone(query) {
		return 0, false
	}
	return pc.sent(), true
}

// commitsAlone reports a statement text that is one COMMIT (or END), with
// nothing after it: what ends a raw transaction by committing it, and
// nothing more (COMMIT AND CHAIN, COMMIT PREPARED, a text of several
// statements and one with comments are not: where their connection
// breaks, nothing asks what became of them).
func commitsAlone(query string) bool {
	if len(query) > 32 {
		return false
	}
	words := strings.Fields(strings.TrimRight(strings.TrimSpace(query), ";"))
	if len(words) == 0 || len(words) > 2 {
		return false
	}
	if !strings.EqualFold(words[0], "COMMIT") && !strings.EqualFold(words[0], "END") {
		return false
	}
	return len(words) == 1 || strings.EqualFold(words[1], "WORK") || strings.EqualFold(words[1], "TRANSACTION")
}

// sent returns how many bytes pc has written to the server, where the
// dialect counts them (dialects.WriteCounter); 0 otherwise. The caller
// holds sem, or runs solo (see the lock rules).
func (pc *Conn) sent() uint64 {
	if pc.written == nil {
		return 0
	}
	return pc.written.Written()
}

// broken reports whether err, or the driver, says the connection is no
// longer usable. Only for a connection without open rows (see usable).
func (pc *Conn) broken(err error) bool {
	return errors.Is(err, driver.ErrBadConn) || !pc.usable()
}

// Observe records what the operation that ran query left on pc: the
// transaction the server reports (unless a BeginTx transaction is open,
// whose state is known) and whether the session changed. It reports
// whether pc is still usable: closedRows says the operation is the close
// of its hold's last result set, and rows report a broken connection from
// Next, which the driver's Close may not repeat, so the driver is asked
// first (usable); where it says pc is no longer usable, nothing is
// observed. It returns an error when the transaction state cannot be
// established; the caller then treats the connection as lost. The caller
// holds sem.
func (pc *Conn) Observe(ctx context.Context, query string, closedRows bool) (usable bool, err error) {
	if closedRows && !pc.usable() {
		return false, nil
	}
	askTx := pc.st.Tx != TxBegun
	if o := pc.observer; o != nil {
		// ask's first branch, which the compiler does not inline, and
		// observed only where there is something to record.
		changed, status, err := o.Observe(ctx, query, askTx)
		if !pc.toRecord(changed, askTx, status, err) {
			return true, nil
		}
		return true, pc.observed(changed, askTx, status, err)
	}
	changed, status, err := pc.ask(ctx, query, askTx)
	return true, pc.observed(changed, askTx, status, err)
}

// ask returns what the dialect says query left: its session verdict (the
// dialect's, which combines its facts in sqllex.Verdict) and, when askTx,
// the transaction status or why it is unknown. It records nothing:
// observed does. The caller holds sem.
func (pc *Conn) ask(ctx context.Context, query string, askTx bool) (changed bool, status dialects.TxStatus, err error) {
	if pc.observer != nil {
		return pc.observer.Observe(ctx, query, askTx)
	}
	changed = pc.tracker != nil && pc.tracker.ChangesSession(query)
	if askTx {
		status, err = pc.DC.TxStatus(ctx, query)
	}
	return changed, status, err
}

// observed records what the dialect answered (ask): whether the session
// changed, and, when asked (askTx), the transaction status or why it is
// unknown. It is the one place a statement's session verdict is applied.
// Observe skips it when there is nothing to record (toRecord).
func (pc *Conn) observed(changed, askTx bool, status dialects.TxStatus, err error) error {
	if changed {
		pc.markDirty()
	}
	if !askTx {
		return nil
	}
	if err != nil {
		var rl *dialects.RoleLostError
		if errors.As(err, &rl) {
			pc.lostRole(rl.Server)
			return fmt.Errorf("pooldriver: %w", err)
		}
		return fmt.Errorf("pooldriver: the transaction state after the statement is unknown, so the connection was closed: %w", err)
	}
	if s := rawTx(status); s != pc.st.Tx {
		pc.setTx(s, nil)
	}
	return nil
}

// toRecord reports whether what a StatementObserver said of a statement
// (see observed) changes anything pc knows: the session changed, or,
// where the transaction was asked for, it could not be read or is not
// the one pc believes.
func (pc *Conn) toRecord(changed, askTx bool, status dialects.TxStatus, err error) bool {
	return changed || askTx && (err != nil || rawTx(status) != pc.st.Tx)
}

func rawTx(s dialects.TxStatus) TxState {
	if s == dialects.TxIdle {
		return TxNone
	}
	return TxRaw
}

// rollback ends the open transaction on a context detached from the
// caller's (a cancelled context must not abort a cleanup) and bounded by the
// cleanup timeout: owner's, through the driver's Tx, or else a raw one. The
// caller holds sem. On failure the connection is lost.
func (pc *Conn) rollback(owner *OpenTx) error {
	ctx, cancel := context.WithTimeout(context.Background(), pc.Env.cleanupTimeout)
	defer cancel()
	if owner != nil && owner.nested {
		owner = nil // a savepoint in a raw transaction: roll all of it back
	}
	var err error
	if rb, ok := pc.DC.(dialects.BeginTxRollbacker); ok && owner != nil {
		err = rb.RollbackBeginTx(ctx)
	} else if owner != nil {
		err = owner.drv.Rollback()
	} else {
		err = pc.DC.Rollback(ctx)
	}
	if err != nil {
		pc.Lose(err, false)
		return err
	}
	pc.setTx(TxNone, nil)
	return nil
}

// resetSession returns the session to the state of a new connection. The
// caller holds sem. On failure (or if the dialect cannot reset) the
// connection is lost.
func (pc *Conn) resetSession() error {
	if k, ok := pc.DC.(dialects.StatementKeeper); !ok || !k.ResetKeepsStatements() {
		pc.closeStmts() // the reset drops them on the server
	}
	ctx, cancel := context.WithTimeout(context.Background(), pc.Env.cleanupTimeout)
	defer cancel()
	err := pc.DC.ResetSession(ctx)
	if d, ok := pc.DC.(dialects.StatementDropper); ok && err == nil && d.ResetDroppedStatements() {
		pc.closeStmts() // gone on the server too
	}
	if err == nil {
		err = pc.Env.owner.PrepareSession(ctx, pc.DC)
	}
	if err != nil {
		pc.Lose(err, false)
		return err
	}
	pc.mu.Lock()
	pc.st.Session = sessionClean
	pc.mu.Unlock()
	return nil
}

// Release ends a hold on pc; the caller does not hold sem. alone: the hold
// had pc to itself throughout (never bound to a task, no task's transaction
// on it), so nobody else can reach pc. Such a hold's pc is parked where
// decide says fatePark, and Release returns its handle (see park);
// otherwise it returns nil, and pc was let go with decide's verdict.
func (pc *Conn) Release(alone bool) *pool.Resource[*Conn] {
	if !alone {
		pc.letGo()
		return nil
	}
	if r := pc.park(); r != nil {
		return r
	}
	pc.letGoAlone()
	return nil
}

// letGo ends one hold (or a task's cleanup) on pc and, if that was the last
// thing using it, applies decide's verdict: keep it for its task, or unbind
// it, settle it (roll back, reset) and give it back to the pool, or destroy
// it. The caller does not hold sem.
func (pc *Conn) letGo() {
	pc.mu.Lock()
	pc.st.Holds--
	f := pc.letGoVerdict(&pc.st)
	if f == fateInUse || f == fateKeepForTask {
		pc.mu.Unlock()
		return
	}
	if t := pc.st.task; t != nil {
		t.UnbindConn(pc)
		pc.st.task = nil
	}
	// A task ending now must not find its *sql.Tx here: settle rolls it
	// back.
	owner := pc.st.TxOwner
	pc.st.TxOwner = nil
	pc.mu.Unlock()
	// Nothing reaches pc now: no hold, no rows, no task, no transaction
	// owner, not in the pool.
	pc.settle(f, owner)
}

// letGoAlone is letGo for a hold that had pc to itself throughout: never
// bound to a task, no task's transaction on it. Nobody else can reach pc, so
// it needs no lock.
func (pc *Conn) letGoAlone() {
	pc.st.Holds--
	f := pc.letGoVerdict(&pc.st)
	if f == fateInUse {
		return
	}
	owner := pc.st.TxOwner
	if owner != nil {
		// Written only when set: a task that ended may still hold a stale
		// pointer to pc and read txOwner under mu (cleanUp); a transaction
		// begun outside any task cannot be one of its.
		pc.st.TxOwner = nil
	}
	pc.settle(f, owner)
}

// park is letGoAlone for a connection decide says to park (fatePark: clean,
// and nothing is to be told of its release): it is parked
// (pool.Resource.Park), free for anyone, and the hold's logical conn takes
// it back at its next hold without the pool's lock if nobody took it
// meanwhile. It returns pc's handle for that, or nil when pc was not
// parked: the caller still has it.
func (pc *Conn) park() *pool.Resource[*Conn] {
	r := pc.res
	if pc.Env.lookDue.Load() || pc.carrier != nil && pc.carrier.ResetPending() {
		return nil // settle is to look at the server, or a reset waits
	}
	if pc.st.Holds == 1 && !pc.traced && parksClean(&pc.st) && !pc.Stale() {
		// The usual state: decide says fatePark (parksAsIs), and the
		// release is not traced. Whether anyone waits, r.Park asks.
		pc.st.Holds, pc.st.Stale = 0, false
		if r.Park() {
			return r // someone else may have pc already: it is not to be touched
		}
		pc.st.Holds = 1 // the caller settles pc
		return nil
	}
	if r.Contended() {
		return nil // Park would refuse: spare decide
	}
	pc.st.Holds--
	if parksAsIs(&pc.st) && !pc.Stale() {
		pc.st.Stale = false // decide says fatePark (see decide's test of parksAsIs)
	} else if pc.letGoVerdict(&pc.st) != fatePark {
		pc.st.Holds++
		return nil
	}
	var held time.Duration
	var relCtx context.Context
	traced := pc.traced
	if traced {
		// Taken before Park: then someone else may have pc.
		relCtx, held = pc.releaseTrace()
	}
	if !r.Park() {
		pc.st.Holds = 1
		pc.traced, pc.tracedCtx = traced, relCtx // the caller settles pc, and traces its release
		return nil
	}
	if traced {
		pc.Env.owner.Released(relCtx, held, false, false)
	}
	return r // someone else may have pc already: it is not to be touched
}

// releaseTrace takes what the release of pc's traced hold is told: the
// acquire's context and how long the hold had pc. The caller has pc to
// itself; after it, pc keeps no context.
func (pc *Conn) releaseTrace() (context.Context, time.Duration) {
	ctx := pc.tracedCtx
	pc.traced, pc.tracedCtx = false, nil
	return ctx, time.Since(pc.tracedAt)
}

// traceRelease tells the release hook that pc's hold, whose acquire was
// traced, ends with fate f. The caller has pc to itself.
func (pc *Conn) traceRelease(f Fate) {
	ctx, held := pc.releaseTrace()
	pc.Env.owner.Released(ctx, held, f.resets(), f == fateDestroy)
}

// letGoVerdict is verdict for a connection a hold or a task lets go of,
// with what the share and the carried reset want of it (written into st).
// The caller holds mu, or has pc alone.
func (pc *Conn) letGoVerdict(st *ConnState) Fate {
	st.lookDue = pc.Env.lookDue.Load()
	st.carries = pc.carrier != nil
	st.resetWaits = st.carries && pc.carrier.ResetPending()
	return pc.verdict(st)
}

// verdict is decide on st, pc's state (or what it is about to be), with
// what pc knows besides: whether it is stale (written into st.stale), and
// the mode of its task. The caller holds mu, or has pc alone.
func (pc *Conn) verdict(st *ConnState) Fate {
	st.Stale = pc.Stale()
	mode := TransactionMode
	if st.task != nil {
		mode = st.mode
	}
	return decide(st, mode)
}

// settle applies fate f to pc, which nobody else can reach, and hands it back
// to the pool (or destroys it). owner is the *sql.Tx's transaction open on
// it, if any. A rollback or reset it runs leaves pc either settled or lost;
// the AfterRelease hook's verdict on the settled connection is then decide's
// last input (connState.rejected), so that every close is decide's.
func (pc *Conn) settle(f Fate, owner *OpenTx) {
	if pc.traced {
		pc.traceRelease(f)
	}
	switch f {
	case fateLook:
		// The Connector's look at how full the server is (the root's share.go), as a
		// cleanup: a round trip off the caller's path, once a second at
		// most. Whoever takes lookDue first looks.
		if pc.Env.lookDue.CompareAndSwap(true, false) {
			if pc.Env.cleanups.start(func() {
				g := fateRelease
				if !pc.Env.owner.Look(pc) {
					g = fateDestroy
				}
				pc.settleNow(g, owner)
			}) {
				return
			}
			pc.Env.lookDue.Store(true) // closing: the next one, if any
		}
		f = fateRelease
	case fateCarry:
		// The reset goes with the next statement (carry.go) where no
		// other connection is to be had, so that resetting this one off
		// the callers' path would keep someone waiting.
		if !pc.res.Spare() && pc.carry() {
			pc.settleNow(fateRelease, owner)
			pc.resetWhenIdle()
			return
		}
		f = fateReset
	case fateReleaseCarry:
		pc.settleNow(fateRelease, owner)
		pc.resetWhenIdle()
		return
	}
	if f == fateReset {
		// A session reset, the price of default-deny tracking: a round
		// trip or two, off the caller's path. Nobody can reach pc
		// meanwhile; the pool counts it in use until it is handed back.
		// (A rollback, of a transaction a hold left open, is a misuse's
		// cost and stays on the caller's path, where it is logged.)
		if pc.Env.cleanups.start(func() { pc.settleNow(f, owner) }) {
			return
		}
	}
	pc.settleNow(f, owner)
}

// settleNow is settle on the calling goroutine.
func (pc *Conn) settleNow(f Fate, owner *OpenTx) {
	env := pc.Env
	if env.leaks {
		env.owner.Returned(pc)
	}
	if f == fateRollback || f == fateReset || f == fateRollbackReset {
		f = pc.clean(f, owner)
	}
	if f == fateRelease && env.afterRelease {
		rejected := !env.owner.AfterRelease(pc)
		if f = pc.verdict(&ConnState{rejected: rejected}); f == fateDestroy && rejected && !pc.Stale() {
			pc.closeReason = closeReject
		}
	}
	switch f {
	case fateRelease, fatePark: // park is letGoAlone's to try first
		pc.res.Release()
	default: // fateDestroy
		switch {
		case pc.Stale():
			pc.closeReason = closeResetAll
		case pc.closeReason == "":
			pc.closeReason = closeLost
		}
		pc.res.Destroy()
	}
}

// clean runs what f asks (a rollback, a reset, both, in that order) on pc,
// which nobody else can reach, and returns what is left to do: fateRelease,
// or fateDestroy when a step failed (pc is lost then; closing it ends what
// the server still has).
func (pc *Conn) clean(f Fate, owner *OpenTx) Fate {
	env := pc.Env
	_ = pc.sem.Lock(context.Background()) // free: nobody else can reach pc
	defer pc.sem.Unlock()
	if f == fateRollback || f == fateRollbackReset {
		ctx, why := context.Background(), undoLeftOpen
		if owner != nil && owner.of != nil {
			if tctx, claimed := owner.of.ClaimedByTask(); claimed {
				ctx, why = tctx, undoTaskEnded // its task's end claimed it first
			}
		}
		if err := pc.undo(ctx, owner, why); err != nil {
			pc.closeReason = closeRollback
			return fateDestroy
		}
	}
	if f == fateReset || f == fateRollbackReset {
		if err := pc.resetSession(); err != nil {
			pc.closeReason = closeReset
			if !errors.Is(err, dialects.ErrUnsupported) {
				env.warn("session reset failed; the connection will be closed", err)
			}
			return fateDestroy
		}
		env.stats.sessionResets.Add(1)
		env.stats.separateResets.Add(1)
		env.debug("session reset")
	}
	return fateRelease
}

// undoReason says why pooldriver rolls back a transaction by itself, for
// its log line.
type undoReason uint8

const (
	undoLeftOpen      undoReason = iota // the hold ended with it open (settle)
	undoTaskEnded                       // its task ended (endTask)
	undoBegunAfterEnd                   // a task's *sql.Tx begun as the task ended (BeginTx)
	undoTaskBusy                        // a raw transaction its task cannot keep: it has another connection (bindForTask)
)

// undo rolls back the transaction open on pc (owner's, or a raw one when
// owner is nil), counts it in Stats.autoRollbacks (and TaskEndRollbacks)
// and logs it: what needs attention at WARN (a transaction a hold left
// open, a rollback that failed), a task's end at DEBUG with ctx, the
// task's, for the handler. A task's rollback that finds the connection
// closed already is routine too, and at DEBUG: a statement that the
// request's cancellation (or deadline) interrupted closed it, its caller
// has that error, and the server rolled the transaction back as the
// connection closed. Every rollback pooldriver runs by itself goes through
// it. On failure the connection is lost (see rollback). The caller holds
// sem.
func (pc *Conn) undo(ctx context.Context, owner *OpenTx, why undoReason) error {
	closed := why == undoTaskEnded && !pc.usable()
	err := pc.rollback(owner)
	if err == nil {
		pc.Env.stats.autoRollbacks.Add(1)
		if why == undoTaskEnded || why == undoBegunAfterEnd {
			pc.Env.stats.taskEndRollbacks.Add(1)
		}
	}
	switch {
	case why == undoLeftOpen && err != nil:
		pc.Env.warn("rollback of a transaction left open failed; the connection will be closed", err)
	case why == undoLeftOpen:
		pc.Env.warn("rolled back a transaction left open", nil)
	case why == undoTaskEnded && err != nil && closed:
		logline.At(ctx, pc.Env.log, slog.LevelDebug, "a transaction still open when its task ended went with its connection, closed before the rollback (by a statement its context interrupted); the server rolled it back", err)
	case why == undoTaskEnded && err != nil:
		logline.At(ctx, pc.Env.log, slog.LevelWarn, "rollback at the end of a task failed; the connection will be closed", err)
	case why == undoTaskEnded:
		logline.At(ctx, pc.Env.log, slog.LevelDebug, "rolled back a transaction still open when its task ended", nil)
	}
	return err
}

// UndoTaskBusy rolls back the raw transaction a transaction-mode task's
// statement began on pc, if one is open, which the task cannot keep: it
// has another connection (the root's bindForTask). See undo. The caller
// holds sem.
func (pc *Conn) UndoTaskBusy(ctx context.Context) error {
	if pc.st.Tx != TxRaw {
		return nil
	}
	return pc.undo(ctx, nil, undoTaskBusy)
}

// joinForEnd joins pc for t's end (endTask), unless nothing is left for
// the end to do there; session reports that pc was bound to t in session
// mode, and is unbound now: its session must be reset before reuse.
func (pc *Conn) joinForEnd(t TaskBinding, owner *OpenTx) (ok, session bool) {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	switch {
	case owner != nil && pc.st.TxOwner != owner:
		// Its hold let go of pc meanwhile, and took the transaction along
		// to roll it back (see letGo).
		return false, false
	case owner != nil && pc.st.task == t && owner.nested:
		// A *sql.Tx nested in t's raw transaction: t's end on its bound
		// connection rolls all of it back (with the care it takes for
		// other holds still on it); claimed, the *sql.Tx runs nothing
		// more meanwhile.
		return false, false
	case owner == nil && pc.st.task != t:
		return false, false
	case owner == nil:
		session = pc.st.mode == SessionMode
		pc.st.task = nil
	}
	pc.st.Holds++
	return true, session
}

// EndTask is a task's end on pc (ctx is the task's, for the log's
// handler): it rolls back owner (the transaction of a *sql.Tx of t's) or,
// for pc bound to t, the raw transaction, unbinds pc (a session-mode
// session is then reset before reuse) and lets go of it. It waits for pc's
// lock at most the cleanup timeout: a connection still busy then (rows
// nobody closes) is marked lost and destroyed when its last user lets go.
// ended is the error the statements of holds still on pc after the
// rollback fail with.
func (pc *Conn) EndTask(ctx context.Context, t TaskBinding, owner *OpenTx, ended error) {
	ok, session := pc.joinForEnd(t, owner)
	if !ok {
		return
	}
	lctx, cancel := context.WithTimeout(context.Background(), pc.Env.cleanupTimeout)
	err := pc.sem.Lock(lctx)
	cancel()
	if err != nil {
		pc.Lose(fmt.Errorf("pooldriver: the connection was still busy when its task ended: %w", err), false)
		pc.Env.warn("connection still busy when its task ended; it will be closed", err)
		pc.letGo()
		return
	}
	if session {
		pc.markDirty() // the task's session: reset it before reuse
	}
	undone := false // the task's raw transaction, which other holds may be inside
	if !pc.isLost() && (owner != nil && pc.st.TxOwner == owner || owner == nil && pc.st.Tx == TxRaw) {
		undone = owner == nil
		_ = pc.undo(ctx, owner, undoTaskEnded) // on failure pc is lost
	}
	if undone && pc.heldByOthers() {
		// A *sql.Conn of the task still holds pc: its next statements
		// would run outside the transaction just rolled back, and
		// autocommit. They fail instead, and pc is closed when the last of
		// them lets go.
		pc.Lose(ended, false)
	}
	pc.sem.Unlock()
	pc.letGo()
}
