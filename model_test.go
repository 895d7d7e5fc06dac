package pooldriver_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pooldriver/pooldriver"
	"github.com/pooldriver/pooldriver/internal/fakedb"
)

// TestModel checks the contract of DESIGN.md ("The contract" and "Tasks")
// with sequences of random operations, each driven by one goroutine from a
// seeded PRNG, against a model of what the fake server must show. The
// actors: plain db calls, *sql.Conn, *sql.Tx (plain, and begun in a task),
// transaction- and session-mode tasks (raw BEGIN/COMMIT/ROLLBACK and SET
// through the task's context; ended by end() or by their parent's
// cancellation, with things still open), and rows left open across
// operations. After every operation the model asserts:
//
//   - the table holds exactly the committed rows: an INSERT autocommits
//     outside a transaction; inside a *sql.Tx or a raw BEGIN (of a
//     *sql.Conn or a task) only that transaction's COUNT sees it, until
//     Commit/COMMIT; Rollback, ROLLBACK, Conn.Close and the task's end
//     discard it. A plain BEGIN lasts one call;
//   - GET returns what the same *sql.Conn, *sql.Tx or task SET (a
//     session-mode task's *sql.Tx shares its session), and NULL to
//     everyone else: never a dirty connection;
//   - CONNID is stable for a *sql.Conn, a *sql.Tx, a session-mode task (its
//     *sql.Tx included) and a transaction-mode task while a raw BEGIN or a
//     SET pins it;
//   - while a session-mode task's *sql.Tx is open, the task's statements
//     fail with ErrSessionBusy, as its BeginTx does inside its raw BEGIN;
//   - after a task's end, Commit of its *sql.Tx and its statements fail;
//   - the server's open transactions are the model's (alone on it).
//
// At the end everything is closed: no open transaction, no physical
// connection in use, no overlapping call.
//
// Misuses of database/sql are never issued: a statement on a *sql.Conn or
// *sql.Tx while its rows are open, nor one of a task whose connection its
// open rows keep busy (that waits 500 ms by design, then fails).
//
// A sequence's seed is logged and in its subtest's name; on failure its
// operations are logged. POOLDRIVER_MODEL_SEED=<seed> replays it.
func TestModel(t *testing.T) { runModels(t, 16, 300, false) }

// TestModelConcurrent runs sequences at once on one DB. Each has a table
// and session values of its own, so each model still holds; server-wide
// counts are checked at the end.
func TestModelConcurrent(t *testing.T) { runModels(t, 4, 300, true) }

func runModels(t *testing.T, seqs, ops int, parallel bool) {
	if testing.Short() {
		seqs, ops = min(seqs, 3), 100
	}
	checkNoGoroutineLeak(t)
	srv := newServer(t)
	// Room for all that every sequence holds at once (13): nothing waits.
	db, c := newDB(t, srv, fmt.Sprintf("pool_max_conns=%d&pool_acquire_timeout=10s", 16*seqs))
	t.Cleanup(func() { modelQuiet(t, srv, c) }) // after parallel subtests too
	for _, seed := range modelSeeds(t, seqs) {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			if parallel {
				t.Parallel()
			}
			runModel(t, db, srv, seed, ops, parallel)
			if !parallel {
				modelQuiet(t, srv, c)
			}
		})
	}
}

const modelSeedEnv = "POOLDRIVER_MODEL_SEED"

func modelSeeds(t *testing.T, n int) []uint64 {
	if s := os.Getenv(modelSeedEnv); s != "" {
		seed, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: %v", modelSeedEnv, s, err)
		}
		return []uint64{seed}
	}
	seeds := make([]uint64, n)
	for i := range seeds {
		seeds[i] = rand.Uint64N(1e9)
	}
	return seeds
}

// modelQuiet checks that the server and the pool are at rest, once
// everything was closed. Cleanups may finish in goroutines of their own.
func modelQuiet(t *testing.T, srv *fakedb.Server, c *pooldriver.Connector) {
	t.Helper()
	waitFor(t, "no open transaction on the server", func() bool { return srv.OpenTxCount() == 0 })
	waitFor(t, "no physical connection in use", func() bool { return c.Stats().Active == 0 })
	if n := srv.Stats().Overlaps; n != 0 {
		t.Fatalf("%d calls overlapped on one server connection", n)
	}
}

// model is one sequence: its actors and what the server must show.
type model struct {
	t         *testing.T
	db        *sql.DB
	srv       *fakedb.Server
	ctx       context.Context // bounds the sequence: a deadlock fails it
	rng       *rand.Rand
	shared    bool // other sequences use the server
	table     string
	next      int64   // the last value inserted or set
	committed []int64 // the table's rows
	actors    []*actor
	started   int
	trace     []string
}

// actor is the model of plain db calls (kind "db": nothing outlives a
// call), a *sql.Conn ("conn"), a *sql.Tx ("tx") or a task ("task").
type actor struct {
	kind, name  string
	q           querier
	ctx         context.Context
	conn        *sql.Conn
	tx          *sql.Tx
	owner       *actor // a *sql.Tx's task, if any
	nested      bool   // a *sql.Tx nested in its task's raw transaction
	taskTx      *actor // a task's open *sql.Tx
	end, cancel func() // a task's
	session     bool   // a session-mode task
	always      bool   // one server connection throughout
	vars        map[string]string
	inTx        bool    // in its *sql.Tx, or its raw BEGIN
	pending     []int64 // inserted in that transaction
	id          *int64  // its server connection while pinned, once seen
	rows        *mRows
}

func (a *actor) pinned() bool { return a.always || a.inTx || len(a.vars) > 0 }

type mRows struct {
	rows    *sql.Rows
	n, read int
	pins    bool // on the connection its task's statements need
}

type querier interface {
	ExecContext(context.Context, string, ...any) (sql.Result, error)
	QueryContext(context.Context, string, ...any) (*sql.Rows, error)
	QueryRowContext(context.Context, string, ...any) *sql.Row
}

func runModel(t *testing.T, db *sql.DB, srv *fakedb.Server, seed uint64, nops int, shared bool) {
	t.Logf("seed %d (%s=%d replays it)", seed, modelSeedEnv, seed)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	m := &model{t: t, db: db, srv: srv, ctx: ctx, shared: shared,
		rng: rand.New(rand.NewPCG(seed, 1)), table: fmt.Sprint("model", seed)}
	m.actors = []*actor{{kind: "db", name: "db", q: db, ctx: ctx, id: new(int64)}}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("operations of seed %d:\n%s", seed, strings.Join(m.trace, "\n"))
		}
		m.abandon()
	})
	for range nops {
		ops := m.candidates()
		op := ops[m.rng.IntN(len(ops))]
		m.trace = append(m.trace, op.name)
		op.run()
		m.check()
	}
	m.trace = append(m.trace, "-- closing everything")
	if m.actors[0].rows != nil {
		m.closeRows(m.actors[0])
	}
	for len(m.actors) > 1 {
		switch a := m.actors[1]; a.kind {
		case "conn":
			m.closeConn(a)
		case "tx":
			m.endTx(a, m.rng.IntN(2) == 0)
		case "task":
			m.endTask(a, m.rng.IntN(2) == 0)
		}
	}
	m.check()
}

// opList is the operations allowed now, one of weight n listed n times:
// starting or ending an actor is rarer than a statement, so that actors
// live a while.
type opList []mOp

type mOp struct {
	name string
	run  func()
}

func (l *opList) op(weight int, name string, run func()) {
	for range weight {
		*l = append(*l, mOp{name, run})
	}
}

func (l *opList) rare(name string, run func()) { l.op(1, name, run) }

func (m *model) candidates() opList {
	var l opList
	open := map[string]int{}
	for _, a := range m.actors {
		if a.owner == nil {
			open[a.kind]++
		}
	}
	if open["conn"] < 2 {
		l.rare("db.Conn", m.openConn)
	}
	if open["tx"] < 2 {
		l.rare("db.BeginTx", func() { m.beginTx(nil) })
	}
	if open["task"] < 2 {
		l.rare("WithTask(TransactionMode)", func() { m.startTask(false) })
		l.rare("WithTask(SessionMode)", func() { m.startTask(true) })
	}
	for _, a := range m.actors {
		m.actorOps(&l, a)
	}
	return l
}

func (m *model) actorOps(l *opList, a *actor) {
	if r := a.rows; r != nil {
		m.rowsOps(l, a, r)
	}
	if a.rows == nil || a.kind == "db" || a.kind == "task" && !a.rows.pins {
		m.statementOps(l, a)
	}
	switch a.kind {
	case "conn":
		l.rare(a.name+" Close", func() { m.closeConn(a) })
	case "tx":
		l.rare(a.name+" Commit", func() { m.endTx(a, true) })
		l.rare(a.name+" Rollback", func() { m.endTx(a, false) })
	case "task":
		if a.taskTx == nil && (!a.session || a.rows == nil) {
			l.rare(a.name+" BeginTx", func() { m.beginTx(a) })
		}
		l.rare(a.name+" end", func() { m.endTask(a, false) })
		l.rare(a.name+" parent cancelled", func() { m.endTask(a, true) })
	}
}

// statementOps are a's statements; plain ones (kind "db") leave nothing
// behind them.
func (m *model) statementOps(l *opList, a *actor) {
	w, plain := 4, a.kind == "db"
	if plain {
		w = 2
	}
	var busy error // what each statement must fail with
	if a.taskTx != nil && (a.session || a.taskTx.nested) {
		busy = pooldriver.ErrSessionBusy
	}
	l.op(w, a.name+" INSERT", func() {
		v := m.value()
		m.note(fmt.Sprint(v))
		if m.exec(a, fmt.Sprintf("INSERT %s %d", m.table, v), busy) {
			if a.inTx {
				a.pending = append(a.pending, v)
			} else {
				m.committed = append(m.committed, v)
			}
		}
	})
	l.op(w, a.name+" COUNT", func() {
		var n int
		err := a.q.QueryRowContext(a.ctx, "COUNT "+m.table).Scan(&n)
		own := len(a.pending)
		if a.nested {
			own += len(a.owner.pending) // the task's transaction, which it is nested in
		}
		if m.expect(a.name+" COUNT", err, busy) && n != len(m.committed)+own {
			m.t.Fatalf("%s COUNT: %d, want %d committed + %d of its own transaction", a.name, n, len(m.committed), own)
		}
	})
	l.op(w, a.name+" GET", func() {
		name := m.varName()
		m.note(name)
		var v sql.NullString
		err := a.q.QueryRowContext(a.ctx, "GET "+name).Scan(&v)
		if w, ok := a.vars[name]; m.expect(a.name+" GET", err, busy) && (v.Valid != ok || v.String != w) {
			m.t.Fatalf("%s GET %s: %v, want %q (set: %v): a session's state leaked or was lost", a.name, name, v, w, ok)
		}
	})
	l.op(w, a.name+" SET", func() {
		name, val := m.varName(), fmt.Sprint("v", m.value())
		m.note(name + "=" + val)
		if m.exec(a, "SET "+name+" "+val, busy) && !plain {
			a.vars[name] = val // not transactional: it outlives a *sql.Tx
		}
	})
	l.op(w, a.name+" CONNID", func() {
		var id int64
		err := a.q.QueryRowContext(a.ctx, "CONNID").Scan(&id)
		if m.expect(a.name+" CONNID", err, busy) && a.pinned() {
			if *a.id != 0 && *a.id != id {
				m.t.Fatalf("%s CONNID: %d, but it ran on connection %d before", a.name, id, *a.id)
			}
			*a.id = id
		}
	})
	if a.rows == nil {
		l.op(w, a.name+" SELECT", func() {
			n := 2 + m.rng.IntN(4)
			rows, err := a.q.QueryContext(a.ctx, fmt.Sprint("SELECT ", n))
			if m.expect(a.name+" SELECT", err, busy) {
				a.rows = &mRows{rows: rows, n: n, pins: a.pinned()}
			}
		})
	}
	switch {
	case a.kind == "tx":
	case !a.inTx:
		l.op(w, a.name+" BEGIN", func() { a.inTx = m.exec(a, "BEGIN", busy) && !plain })
	default:
		end := func(stmt string) {
			if m.exec(a, stmt, busy) {
				if stmt == "COMMIT" {
					m.committed = append(m.committed, a.pending...)
				}
				a.inTx, a.pending = false, nil
				if !a.pinned() {
					*a.id = 0 // a transaction-mode task lets go of its connection
				}
			}
		}
		l.op(w, a.name+" COMMIT", func() { end("COMMIT") })
		l.op(w, a.name+" ROLLBACK", func() { end("ROLLBACK") })
	}
}

// rowsOps read one more row of a's rows r, or close them.
func (m *model) rowsOps(l *opList, a *actor, r *mRows) {
	l.op(4, a.name+" rows Next", func() {
		if r.read == r.n {
			if r.rows.Next() {
				m.t.Fatalf("%s rows: more than %d", a.name, r.n)
			}
			m.expect(a.name+" rows Err", r.rows.Err(), nil)
			a.rows = nil // closed by database/sql
			return
		}
		if !r.rows.Next() {
			m.t.Fatalf("%s rows: %d of %d, then none: %v", a.name, r.read, r.n, r.rows.Err())
		}
		var n int64
		var s string
		m.expect(a.name+" rows Scan", r.rows.Scan(&n, &s), nil)
		if r.read++; n != int64(r.read) || s != strconv.Itoa(r.read) {
			m.t.Fatalf("%s rows: row %d is (%d, %q)", a.name, r.read, n, s)
		}
	})
	l.rare(a.name+" rows Close", func() { m.closeRows(a) })
}

func (m *model) closeRows(a *actor) {
	m.expect(a.name+" rows Close", a.rows.rows.Close(), nil)
	a.rows = nil
}

func (m *model) add(a *actor) {
	m.started++
	a.name += strconv.Itoa(m.started)
	if a.vars == nil {
		a.vars, a.id = map[string]string{}, new(int64)
	}
	m.actors = append(m.actors, a)
	m.note(a.name)
}

func (m *model) remove(a *actor) {
	m.actors = slices.DeleteFunc(m.actors, func(b *actor) bool { return b == a })
}

func (m *model) openConn() {
	conn, err := m.db.Conn(m.ctx)
	m.expect("db.Conn", err, nil)
	m.add(&actor{kind: "conn", name: "conn", q: conn, ctx: m.ctx, conn: conn, always: true})
}

// closeConn closes c (and first its rows: Close would wait for them). Its
// raw transaction is rolled back, never committed.
func (m *model) closeConn(c *actor) {
	if c.rows != nil {
		m.closeRows(c)
	}
	m.expect(c.name+" Close", c.conn.Close(), nil)
	m.remove(c)
}

// beginTx begins a *sql.Tx, in task k if not nil.
func (m *model) beginTx(k *actor) {
	x := &actor{kind: "tx", name: "tx", ctx: m.ctx, owner: k, always: true, inTx: true}
	var want error
	if k != nil {
		x.name, x.ctx = k.name+".tx", k.ctx
		switch {
		case k.inTx:
			// The task's raw transaction is open: the *sql.Tx nests in it,
			// on the task's connection, unless rows inside it keep that
			// busy.
			x.vars, x.id, x.nested = k.vars, k.id, true
			if k.rows != nil && k.rows.pins {
				want = pooldriver.ErrConnBusy
			}
		case k.session:
			x.vars, x.id = k.vars, k.id // the session's connection
		}
	}
	tx, err := m.db.BeginTx(x.ctx, nil)
	if !m.expect(x.name+" BeginTx", err, want) {
		return
	}
	x.q, x.tx = tx, tx
	if k != nil {
		k.taskTx = x
	}
	m.add(x)
}

// endTx commits or rolls back x (and first closes its rows: Commit would
// wait for them).
func (m *model) endTx(x *actor, commit bool) {
	if x.rows != nil {
		m.closeRows(x)
	}
	if commit {
		if m.expect(x.name+" Commit", x.tx.Commit(), nil) {
			if x.nested {
				x.owner.pending = append(x.owner.pending, x.pending...) // the task's COMMIT decides
			} else {
				m.committed = append(m.committed, x.pending...)
			}
		}
	} else {
		m.expect(x.name+" Rollback", x.tx.Rollback(), nil)
	}
	if x.owner != nil {
		x.owner.taskTx = nil
	}
	m.remove(x)
}

func (m *model) startTask(session bool) {
	k := &actor{kind: "task", name: "task", q: m.db, session: session, always: session}
	mode := pooldriver.TransactionMode
	if session {
		mode, k.name = pooldriver.SessionMode, "stask"
	}
	parent, cancel := context.WithCancel(m.ctx)
	k.ctx, k.end = pooldriver.WithTask(parent, mode)
	k.cancel = cancel
	m.add(k)
}

// endTask ends k with whatever it has open: its transactions roll back,
// its rows close, its statements and Commit fail from now on.
func (m *model) endTask(k *actor, byParent bool) {
	if byParent {
		k.cancel()
	}
	k.end() // returns once the end is done, whoever started it
	if err := context.Cause(k.ctx); err == nil || !byParent && !errors.Is(err, pooldriver.ErrTaskEnded) {
		m.t.Fatalf("%s: after its end, its context's cause is %v, want ErrTaskEnded", k.name, err)
	}
	k.cancel()
	if k.rows != nil {
		m.ended(k.name+" rows Close", k.rows.rows.Close())
	}
	if x := k.taskTx; x != nil {
		if x.rows != nil {
			m.ended(x.name+" rows Close", x.rows.rows.Close())
		}
		err := x.tx.Commit()
		if err == nil {
			m.t.Fatalf("%s Commit after its task ended succeeded", x.name)
		}
		m.ended(x.name+" Commit after its task ended", err)
		m.remove(x)
	}
	v := m.value()
	m.note(fmt.Sprint("(then INSERT ", v, " refused)"))
	if _, err := m.db.ExecContext(k.ctx, fmt.Sprintf("INSERT %s %d", m.table, v)); err == nil {
		m.t.Fatalf("%s: INSERT with the context of the ended task succeeded", k.name)
	} else {
		m.ended(k.name+" INSERT after its end", err)
	}
	m.remove(k)
}

// ended fails the test unless err is nil or says that the task ended.
func (m *model) ended(what string, err error) {
	m.t.Helper()
	if err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, pooldriver.ErrTaskEnded) && !errors.Is(err, sql.ErrTxDone) {
		m.t.Fatalf("%s: %v, want an error saying the task ended", what, err)
	}
}

// abandon lets go of whatever a failed sequence left open.
func (m *model) abandon() {
	for _, a := range m.actors {
		if a.rows != nil {
			a.rows.rows.Close()
		}
		switch a.kind {
		case "conn":
			a.conn.Close()
		case "tx":
			a.tx.Rollback()
		case "task":
			a.end()
			a.cancel()
		}
	}
}

// check compares the server with the model.
func (m *model) check() {
	m.t.Helper()
	got, want := m.srv.Table(m.table), slices.Clone(m.committed)
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		m.t.Fatalf("the table holds %v, want the committed %v", got, want)
	}
	if m.shared {
		return
	}
	open := 0
	for _, a := range m.actors {
		open += btoi(a.inTx && !a.nested) // a nested one is its task's
	}
	// Rollbacks at the end of a hold or task may finish in a goroutine;
	// nothing begins a transaction in one.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		n := m.srv.OpenTxCount()
		if n == open {
			return
		}
		if n < open || time.Now().After(deadline) {
			m.t.Fatalf("%d transactions open on the server, want %d", n, open)
		}
	}
}

// expect fails the test unless err is want (nil: success); it reports
// whether the operation succeeded.
func (m *model) expect(what string, err, want error) bool {
	m.t.Helper()
	if want == nil && err != nil || want != nil && !errors.Is(err, want) {
		m.t.Fatalf("%s: error %v, want %v", what, err, want)
	}
	return err == nil
}

func (m *model) exec(a *actor, stmt string, want error) bool {
	m.t.Helper()
	_, err := a.q.ExecContext(a.ctx, stmt)
	return m.expect(a.name+" "+stmt, err, want)
}

func (m *model) value() int64 {
	m.next++
	return m.next
}

func (m *model) varName() string { return []string{"a", "b"}[m.rng.IntN(2)] }

// note adds detail to the current operation's line of the trace.
func (m *model) note(s string) {
	if len(m.trace) > 0 {
		m.trace[len(m.trace)-1] += " " + s
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
