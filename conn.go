package pooldriver

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"time"

	"github.com/pooldriver/pooldriver/internal/phys"
	"github.com/pooldriver/pooldriver/pool"
)

// conn is the logical connection pooldriver hands to database/sql. It costs
// no I/O and holds no physical connection between holds (see hold.go).
//
// database/sql serializes every call on a conn, including those of its rows,
// statements and transaction, and IsValid, so its fields need no lock.
type conn struct {
	c *Connector
	// The hold's physical connection, while the state says it has one
	// (holdState.held). Between holds pc still points at the last hold's
	// connection (which may be anyone's by then) and must not be used: it
	// is left in place because most holds take the same connection back,
	// and an unchanged pointer costs no write barrier.
	pc    *phys.Conn
	state holdState // changed only by step (plan.go)
	lost  error     // in holdLost: what every later operation of the hold fails with
	tx    *tx       // open transaction begun with BeginTx
	rows  int       // open result sets
	// The handle of the physical connection a hold of l last parked (see
	// phys.Conn.Release): the next hold takes it back without the pool's lock,
	// unless anyone took it meanwhile. It is not cleared when the hold
	// takes it back, which spares a pointer write, and its write barrier,
	// per hold: a handle someone else took is refused by Unpark, unless
	// its new holder parked it again, when taking it is as good as taking
	// any parked connection. It is cleared when a hold that had its
	// connection alone ends without parking it, so that Close, right
	// after the hold's end, Returns only a connection this logical conn
	// parked.
	parked *pool.Resource[*phys.Conn]
	// standby: the standby whose connection the hold took last, nil
	// where the primary's (pool_reads=standby; see retryOnPrimary).
	standby *standby
	// reader: the task whose read the hold serves, told when it ends
	// (task.readEnded); nil where it serves no task's read.
	reader *task
	// text: the statement the hold's next connection is taken for, where
	// it may be a read's (pool_reads=selects); "" otherwise.
	text string
	// The wrapper of the hold's result set, reused from one query to the
	// next (see newRows).
	rowsBuf rows
}

var (
	_ driver.Conn               = (*conn)(nil)
	_ driver.ConnBeginTx        = (*conn)(nil)
	_ driver.ConnPrepareContext = (*conn)(nil)
	_ driver.ExecerContext      = (*conn)(nil)
	_ driver.QueryerContext     = (*conn)(nil)
	_ driver.Pinger             = (*conn)(nil)
	_ driver.SessionResetter    = (*conn)(nil)
	_ driver.Validator          = (*conn)(nil)
	_ driver.NamedValueChecker  = (*conn)(nil)
)

// ExecContext runs query on the hold's physical connection (exec).
func (l *conn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	return l.exec(ctx, query, args, nil)
}

// QueryContext runs query; the rows keep the physical connection (see
// conn.query).
func (l *conn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	return l.query(ctx, query, args, nil)
}

// BeginTx begins a transaction on the hold's physical connection, which
// never has another *sql.Tx's transaction open (see pick). In a task whose
// connection has a raw transaction open, the *sql.Tx nests in it (see
// nest.go).
func (l *conn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	var x *tx
	le := &lease{}
	// A standby serves a read-only transaction, but not a serializable
	// one: PostgreSQL refuses it in recovery.
	if l.c.reads != nil {
		le.primary = opts.Isolation == driver.IsolationLevel(sql.LevelSerializable)
		le.readTx = opts.ReadOnly && !le.primary
	}
	err := l.do(ctx, opBegin, le, "", func(pc *phys.Conn) error {
		// In a task whose connection has a raw transaction open, pick chose
		// that connection, and the *sql.Tx nests there.
		x = &tx{l: l, pc: pc, task: le.t, ctx: ctx}
		x.tellsPosition = le.t != nil && l.c.reads != nil && !opts.ReadOnly && pc.Env == &l.c.env
		return pc.BeginTx(ctx, opts, le.t != nil, x, &x.open)
	})
	if errors.Is(err, errTaskEndedAtBegin) {
		return nil, ErrTaskEnded
	}
	if err != nil {
		return nil, err
	}
	return x, nil
}

// errTaskEndedAtBegin is what BeginTx's operation returns when the task
// ended as the transaction began (tx.Admit refused it), which was rolled
// back: finish takes it for the statement's error (the connection is
// fine), BeginTx returns ErrTaskEnded.
var errTaskEndedAtBegin = errors.New("pooldriver: the task ended as its transaction began")

// PrepareContext prepares query on the hold's physical connection, which
// reports syntax errors and the number of parameters now, as database/sql
// users expect. The statement is prepared again on every other physical
// connection it later runs on (and cached there).
func (l *conn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	var st *stmt
	err := l.do(ctx, opPrepare, &lease{}, query, func(pc *phys.Conn) error {
		s, err := pc.Prepared(ctx, query)
		if err != nil {
			return err
		}
		st = &stmt{l: l, query: query, numInput: s.NumInput()}
		st.ranOn(pc)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return st, nil
}

// cleanupTimeout bounds what l ends by itself: a rows' close, a rollback
// whose context ended (the Connector's, its standbys' alike).
func (l *conn) cleanupTimeout() time.Duration { return l.c.cfg.CleanupTimeout }

// Ping checks the hold's physical connection.
func (l *conn) Ping(ctx context.Context) error {
	return l.do(ctx, opPing, &lease{}, "", func(pc *phys.Conn) error { return pc.DC.Ping(ctx) })
}

// CheckNamedValue accepts every argument as it is: no physical connection is
// chosen yet when database/sql asks, so the real driver's own checker runs
// on the chosen connection just before the statement (see
// phys.Conn.Convert), and every type the real driver accepts still works.
func (l *conn) CheckNamedValue(*driver.NamedValue) error { return nil }

// ResetSession is database/sql's hook before it reuses this conn. A logical
// conn has no session of its own: the hold that ended settled it.
func (l *conn) ResetSession(context.Context) error {
	if l.state == holdClosed {
		return driver.ErrBadConn
	}
	return nil
}

// IsValid is called by database/sql exactly when it takes the conn back:
// the hold ends here (see endHold). A connection the hold had alone is
// parked, or let go with decide's verdict; a shared one is let go of.
func (l *conn) IsValid() bool {
	if !l.state.held() {
		return l.state != holdClosed
	}
	pc := l.pc
	alone := l.state.alone()
	l.to(evEnd)
	l.readDone()
	if l.lost != nil {
		l.lost = nil // written only when set: see conn.parked
	}
	if r := pc.Release(alone); r != nil {
		if l.parked != r {
			l.parked = r
		}
	} else if alone && l.parked != nil {
		l.parked = nil // see conn.parked: Close must not Return it
	}
	return l.state != holdClosed
}

// Close closes the logical conn, ending its hold. A transaction it still
// has is rolled back, never committed.
func (l *conn) Close() error {
	if l.state == holdClosed {
		return nil
	}
	if x := l.tx; x != nil {
		_ = x.Rollback() // a connection it fails on is settled when the hold ends
	}
	l.endHold()
	l.to(evClose)
	if r := l.parked; r != nil {
		// database/sql closes a logical conn past its idle limit right
		// after the hold ended: the connection goes where everyone finds
		// it (and where it expires), not left parked for nobody.
		l.parked = nil
		r.Return() // nothing, unless it is still parked
	}
	return nil
}

// Prepare is PrepareContext without a context.
func (l *conn) Prepare(query string) (driver.Stmt, error) {
	return l.PrepareContext(context.Background(), query)
}

// Begin is BeginTx without a context or options.
func (l *conn) Begin() (driver.Tx, error) {
	return l.BeginTx(context.Background(), driver.TxOptions{})
}

// Connect returns a logical connection: no I/O happens here (database/sql
// calls it with its own context; a task is bound by each statement).
func (c *Connector) Connect(context.Context) (driver.Conn, error) {
	if c.err != nil {
		return nil, c.err
	}
	l := &conn{c: c}
	l.rowsBuf = rows{l: l, closed: true}
	return l, nil
}

// to moves l's hold by event e (see step). An event step refuses is a
// pooldriver bug: it is counted in Stats.Misuses, and the state kept.
func (l *conn) to(e holdEvent) {
	next, ok := step(l.state, e)
	if !ok {
		l.c.stats.misuses.Add(1)
		return
	}
	l.state = next
}

// readDone tells the task whose read the hold served (reader) that the
// read ended: where the task reads next depends on it (route).
func (l *conn) readDone() {
	if l.reader != nil {
		l.reader.readEnded(l.standby)
		l.reader = nil
	}
}

// source is where an operation of kind k, of task t (or nil), runs that
// needs a connection of the hold's own: the router's choice (replicas.route),
// made before the hold takes one. With standbys (pool_reads=standby), it
// is a standby's Connector where the operation only reads (readTx: it
// begins a read-only *sql.Tx) and one can serve it, unless primary (the
// connection will serve the task's writes, or a standby would refuse the
// operation); else l.c. A task's read is recorded (l.reader) for its end
// (readDone).
func (l *conn) source(ctx context.Context, t *task, k opKind, readTx, primary bool) *Connector {
	if l.c.reads == nil {
		return l.c // inlined: the common case costs a load and a compare
	}
	return l.routed(ctx, t, k, readTx, primary)
}

// routed is source with standbys.
func (l *conn) routed(ctx context.Context, t *task, k opKind, readTx, primary bool) *Connector {
	h, read := l.c.reads.route(ctx, t, k, readTx, primary, l.text, l.parked)
	l.text = ""
	l.standby = h
	if read {
		l.reader = t
	}
	if h == nil {
		return l.c
	}
	return h.c
}

// leaveStandby is start's for a hold that has its connection already
// (a *sql.Conn's later operation), outside a *sql.Tx, with standbys. On
// the primary's connection it records a task's write there (see route).
// On a standby's, an operation that does not only read ends the hold, so
// that a new one starts on the primary, and reports true: the standby's
// session ran reads only (a *sql.Conn's first statement, proven a read,
// took it), so nothing is lost. It stays where the session changed, or
// where rows are open or the task shares the connection: there the
// operation runs on the standby, which refuses a write.
func (l *conn) leaveStandby(ctx context.Context, k opKind, le *lease) bool {
	if !l.state.held() {
		return false
	}
	t := taskFrom(ctx)
	m := readMarkFrom(ctx)
	h := l.standby
	if h == nil {
		if t != nil && writes(k) && !l.c.reads.reads(m, t, k, le.readTx, l.text) {
			t.writeUnseen()
		}
		return false
	}
	if k == opPrepare || k == opPing || l.c.reads.reads(m, t, k, le.readTx, l.text) {
		return false
	}
	if l.state != holdOwn || l.rows != 0 || !l.pc.Untouched() {
		return false
	}
	l.endHold()
	l.standby = nil
	return true
}

// retryOnPrimary reports whether a statement that failed with err on a
// standby's connection runs again on the primary, with the context it
// returns: the standby refused it as a primary would not have (a write,
// a conflict with its recovery), or its connection was lost under it (a
// standby going down: whatever it ran there, it wrote nothing). It must
// have been its hold's first (fresh: a *sql.Conn's later statements keep
// their connection and session), outside a transaction, on a connection of
// the hold's own (not a session-mode task's). The hold ends first: the
// retry starts another.
func (l *conn) retryOnPrimary(ctx context.Context, err error, fresh bool) (context.Context, bool) {
	if !fresh || l.tx != nil || l.rows != 0 {
		return ctx, false
	}
	h := l.standby
	refused := l.state == holdOwn && h.refused != nil && h.refused(err)
	if !refused && l.state != holdLost {
		return ctx, false
	}
	l.endHold()
	m := readMarkFrom(ctx)
	m.primary = true
	return context.WithValue(ctx, readsKey{}, m), true
}
