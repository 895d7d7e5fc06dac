package pooldriver

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"sync"

	"github.com/pooldriver/pooldriver/dialects"
	"github.com/pooldriver/pooldriver/pool"
)

// maxCachedStmts bounds the prepared statements kept per physical
// connection; past it, one is closed to make room.
const maxCachedStmts = 128

// physConn is one physical connection: a real driver connection owned by the
// pool. Whoever runs anything on it holds sem, so no two statements ever run
// on it at once.
type physConn struct {
	c   *Connector
	dc  dialects.Conn
	drv driver.Conn
	res *pool.Resource[*physConn] // set by whoever acquired it from the pool

	// The optional interfaces of drv, resolved once.
	execer   driver.ExecerContext
	queryer  driver.QueryerContext
	preparer driver.ConnPrepareContext
	beginner driver.ConnBeginTx
	checker  driver.NamedValueChecker
	validity driver.Validator

	sem connLock // held while something runs on drv, and by open rows

	mu         sync.Mutex // protects the fields below; lock order: physConn.mu, then task.mu
	task       *task      // the task it is bound to, or nil
	tx         *tx        // the transaction begun with BeginTx, or nil
	serverTx   bool       // the server reported a transaction open (a raw BEGIN, say)
	rows       int        // open result sets; they hold sem
	doomed     bool       // destroy it instead of reusing it when it is let go
	needsReset bool       // its session-mode task ended: reset it before reuse

	// Touched only by the holder of sem.
	stmts  map[string]driver.Stmt
	broken bool // the driver said it is unusable
}

func newPhysConn(c *Connector, dc dialects.Conn) *physConn {
	drv := dc.Driver()
	pc := &physConn{c: c, dc: dc, drv: drv, sem: newConnLock()}
	pc.execer, _ = drv.(driver.ExecerContext)
	pc.queryer, _ = drv.(driver.QueryerContext)
	pc.preparer, _ = drv.(driver.ConnPrepareContext)
	pc.beginner, _ = drv.(driver.ConnBeginTx)
	pc.checker, _ = drv.(driver.NamedValueChecker)
	pc.validity, _ = drv.(driver.Validator)
	return pc
}

// lock takes sem, waiting until ctx ends.
func (pc *physConn) lock(ctx context.Context) error { return pc.sem.lock(ctx) }

func (pc *physConn) tryLock() bool { return pc.sem.tryLock() }

func (pc *physConn) unlock() { pc.sem.unlock() }

// busyWithRowsOutsideTx reports whether result sets are open on pc while no
// transaction is: a statement that waited for them could wait forever (the
// goroutine reading them may be the one asking).
func (pc *physConn) busyWithRowsOutsideTx() bool {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	return pc.rows > 0 && pc.tx == nil && !pc.serverTx
}

// claimTxForTask marks the BeginTx transaction on pc as ended by task t, if
// pc is bound to t: from then on only t's cleanup rolls it back.
func (pc *physConn) claimTxForTask(t *task) {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	if pc.task == t && pc.tx != nil {
		pc.tx.claim(txEndedByTask)
	}
}

// rollbackClaimedTx rolls back the BeginTx transaction that the end of its
// task claimed while the caller, the holder of sem, was using pc: the task's
// cleanup could not take pc (it may have given up waiting, or pc broke and
// was unbound meanwhile), so whoever lets pc go rolls it back. While result
// sets are open it waits for their Close, which comes back here.
func (pc *physConn) rollbackClaimedTx() {
	x := pc.tx // the holder of sem may read tx and rows without mu
	if x == nil || !x.endedByTask() || pc.rows > 0 {
		return
	}
	pc.c.stats.autoRollbacks.Add(1)
	err := pc.rollback(x.drv)
	pc.mu.Lock()
	pc.tx = nil
	pc.mu.Unlock()
	pc.c.logWarn("rolled back the transaction of an ended task", err)
}

// boundTo reports whether pc is bound to t.
func (pc *physConn) boundTo(t *task) bool {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	return pc.task == t
}

// convert prepares arguments for drv the way database/sql would have: the
// driver's own NamedValueChecker first, then the default converter. The
// logical connection accepted them unconverted because, when database/sql
// checked them, no physical connection was chosen yet.
func (pc *physConn) convert(args []driver.NamedValue) ([]driver.NamedValue, error) {
	for i := 0; i < len(args); i++ {
		nv := &args[i]
		if pc.checker != nil {
			err := pc.checker.CheckNamedValue(nv)
			switch {
			case err == nil:
				continue
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

// prepared returns drv's prepared statement for query, preparing it on this
// connection the first time.
func (pc *physConn) prepared(ctx context.Context, query string) (driver.Stmt, error) {
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
			old.Close()
			delete(pc.stmts, q)
			break
		}
	}
	pc.stmts[query] = s
	return s, nil
}

// closeStmts closes every cached prepared statement.
func (pc *physConn) closeStmts() {
	for q, s := range pc.stmts {
		s.Close()
		delete(pc.stmts, q)
	}
}

// exec runs a statement that returns no rows.
func (pc *physConn) exec(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	args, err := pc.convert(args)
	if err != nil {
		return nil, err
	}
	if pc.execer != nil {
		res, err := pc.execer.ExecContext(ctx, query, args)
		if !errors.Is(err, driver.ErrSkip) {
			return res, err
		}
	}
	s, err := pc.prepared(ctx, query)
	if err != nil {
		return nil, err
	}
	return stmtExec(ctx, s, args)
}

// query runs a statement that returns rows.
func (pc *physConn) query(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	args, err := pc.convert(args)
	if err != nil {
		return nil, err
	}
	if pc.queryer != nil {
		rows, err := pc.queryer.QueryContext(ctx, query, args)
		if !errors.Is(err, driver.ErrSkip) {
			return rows, err
		}
	}
	s, err := pc.prepared(ctx, query)
	if err != nil {
		return nil, err
	}
	return stmtQuery(ctx, s, args)
}

// observe asks the dialect whether a transaction is open on the server after
// query ran outside a BeginTx transaction.
// The caller holds sem.
func (pc *physConn) observe(ctx context.Context, query string) {
	if pc.tx != nil || pc.broken {
		return
	}
	st, err := pc.dc.TxStatus(ctx, query)
	if err != nil {
		// We no longer know the session's state: never reuse it.
		pc.broken = true
		return
	}
	if open := st != dialects.TxIdle; open != pc.serverTx {
		pc.mu.Lock()
		pc.serverTx = open
		pc.mu.Unlock()
	}
}

// checkErr marks pc broken when err, or the driver, says the connection is
// no longer usable.
func (pc *physConn) checkErr(err error) {
	if err == nil {
		return
	}
	if errors.Is(err, driver.ErrBadConn) || pc.validity != nil && !pc.validity.IsValid() {
		pc.broken = true
	}
}

// rollback ends the open transaction, of either kind, on a context detached
// from the caller's (a cancelled context must not abort a cleanup) and
// bounded by the cleanup timeout. drvTx is the driver's transaction object,
// if the transaction was begun with BeginTx.
func (pc *physConn) rollback(drvTx driver.Tx) error {
	ctx, cancel := context.WithTimeout(context.Background(), pc.c.s.cleanupTimeout)
	defer cancel()
	err := pc.dc.Rollback(ctx)
	if errors.Is(err, dialects.ErrUnsupported) {
		if drvTx == nil {
			return err
		}
		err = drvTx.Rollback()
	}
	pc.mu.Lock()
	pc.serverTx = false
	pc.mu.Unlock()
	if err != nil {
		pc.broken = true
	}
	return err
}

// resetSession returns the session to the state of a new connection.
func (pc *physConn) resetSession() error {
	pc.closeStmts()
	ctx, cancel := context.WithTimeout(context.Background(), pc.c.s.cleanupTimeout)
	defer cancel()
	err := pc.dc.ResetSession(ctx)
	if err != nil {
		pc.broken = true
	}
	return err
}

func stmtExec(ctx context.Context, s driver.Stmt, args []driver.NamedValue) (driver.Result, error) {
	if se, ok := s.(driver.StmtExecContext); ok {
		return se.ExecContext(ctx, args)
	}
	vals, err := plainValues(args)
	if err != nil {
		return nil, err
	}
	return s.Exec(vals) //nolint:staticcheck // the driver offers nothing newer
}

func stmtQuery(ctx context.Context, s driver.Stmt, args []driver.NamedValue) (driver.Rows, error) {
	if sq, ok := s.(driver.StmtQueryContext); ok {
		return sq.QueryContext(ctx, args)
	}
	vals, err := plainValues(args)
	if err != nil {
		return nil, err
	}
	return s.Query(vals) //nolint:staticcheck // the driver offers nothing newer
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
