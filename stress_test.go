package pooldriver_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pooldriver/pooldriver"
	"github.com/pooldriver/pooldriver/internal/fakedb"
)

// TestStressTasks runs 32 goroutines for about two seconds against one fake
// server through a pool of 4 physical connections, each loop choosing at
// random: no task, a transaction-mode or a session-mode task, and what to
// do in it (transactions begun with BeginTx or by a raw BEGIN, result sets
// read in part, goroutines sharing a task, the task's parent cancelled in
// the middle of a transaction, a panicking handler under Middleware, end
// called twice, Commit after end). Errors the scenario makes legitimate are
// accepted; any other error fails the test.
//
// At the end: no physical connection in use, no overlapping statements, no
// transaction left open, never more than 4 server connections, none left
// after Close, no goroutine leaked, and the committed table holds exactly
// the rows whose Commit (or autocommitted INSERT) reported success.
func TestStressTasks(t *testing.T) { runStress(t, false) }

// TestStressTasksWithKills is TestStressTasks while the server kills every
// connection every 5 to 50 ms: statements fail, but no committed write is
// lost, none is committed that was not reported, and no statement runs in
// another user's transaction or session.
func TestStressTasksWithKills(t *testing.T) { runStress(t, true) }

func runStress(t *testing.T, kills bool) {
	checkNoGoroutineLeak(t)
	srv := newServer(t)
	db, c := newDB(t, srv, "pool_max_conns=4&pool_acquire_timeout=2s")

	duration := 2 * time.Second
	if testing.Short() {
		duration = 300 * time.Millisecond
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)

	s := &stress{t: t, db: db, srv: srv, table: "stress", errs: map[string]int{}, kills: kills}
	// The run lasts duration, and then until it has committed, rolled back
	// and used a *sql.Conn (checked below), which a loaded machine may not
	// do in -short's 300ms; 20s more at most.
	deadline := time.Now().Add(duration)
	done := func() bool {
		now := time.Now()
		if now.Before(deadline) {
			return false
		}
		ss := srv.Stats()
		s.mu.Lock()
		conns := s.ops[opConn]
		s.mu.Unlock()
		return ss.Commits > 0 && ss.Rollbacks > 0 && conns > 0 || now.After(deadline.Add(20*time.Second))
	}
	var wg sync.WaitGroup
	for g := range 32 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(seed, uint64(g)))
			for !done() {
				s.step(rng)
			}
		})
	}
	if kills {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(seed, 1<<20))
			for !done() {
				time.Sleep(time.Duration(5+rng.IntN(46)) * time.Millisecond)
				srv.KillAll()
			}
		})
	}
	wg.Wait()

	// database/sql rolls back a transaction whose context ended in a
	// goroutine of its own; wait for those.
	waitFor(t, "no physical connection in use", func() bool { return c.Stats().Active == 0 })
	st := c.Stats()
	t.Logf("connector: %+v", st)
	t.Logf("ops: %v", s.opCounts())
	t.Logf("accepted errors: %v", s.errCounts())
	if st.Misuses != 0 {
		t.Errorf("%d misuses: a hold changed in a way its state does not allow, or a connection released twice", st.Misuses)
	}

	db.Close()
	waitFor(t, "server connections closed", func() bool { return srv.Stats().Open == 0 })
	ss := srv.Stats()
	t.Logf("server: %+v", ss)
	if ss.Overlaps != 0 {
		t.Errorf("%d statements overlapped on one connection", ss.Overlaps)
	}
	if ss.OpenTx != 0 {
		t.Errorf("%d transactions left open", ss.OpenTx)
	}
	if ss.MaxOpen > 4 {
		t.Errorf("server saw %d connections open at once, pool_max_conns=4", ss.MaxOpen)
	}
	if ss.Commits == 0 || ss.Rollbacks == 0 || s.ops[opConn] == 0 {
		t.Errorf("the stress run committed %d and rolled back %d transactions; want both", ss.Commits, ss.Rollbacks)
	}

	got := srv.Table(s.table)
	slices.Sort(got)
	want := s.committedRows()
	if !slices.Equal(got, want) {
		missing, extra := diffSorted(want, got)
		t.Errorf("committed rows differ: %d reported committed, %d in the table\n"+
			"reported committed but missing: %v\nin the table but never reported committed: %v",
			len(want), len(got), head(missing), head(extra))
	}
}

// stress is the shared state of TestStressTasks.
type stress struct {
	t     *testing.T
	db    *sql.DB
	srv   *fakedb.Server
	table string
	kills bool         // the server kills connections meanwhile
	next  atomic.Int64 // last value inserted; every INSERT writes a new one

	mu        sync.Mutex // protects the fields below
	committed []int64    // values whose commit reported success
	errs      map[string]int
	ops       [numOps]int
}

// The operations a loop of TestStressTasks chooses from.
const (
	opTx = iota
	opRawTx
	opRows
	opAutocommit
	opShared
	opCancelMidTx
	opPanicHandler
	opEndTwice
	opSession
	opConn
	numOps
)

var opNames = [numOps]string{"tx", "raw-tx", "rows", "autocommit", "shared", "cancel-mid-tx", "panic-handler", "end-twice", "session", "sql-conn"}

// allow is a set of errors a scenario makes legitimate.
type allow []error

var (
	// Always legitimate: 32 goroutines share 4 connections.
	baseAllowed = allow{pooldriver.ErrAcquireTimeout}

	// The task ends (end, or its parent cancelled) while it is in use.
	endAllowed = allow{context.Canceled, pooldriver.ErrTaskEnded, sql.ErrTxDone}

	// Goroutines sharing one task share its transaction: one's BEGIN fails
	// inside another's transaction, failing it; in session mode, a
	// statement is refused while another goroutine's rows keep the
	// session's connection busy.
	sharedAllowed = allow{fakedb.ErrInTx, fakedb.ErrTxAborted, fakedb.ErrTxRolledBack, fakedb.ErrBusy, pooldriver.ErrSessionBusy, pooldriver.ErrConnBusy}

	// The server kills connections: statements fail, a task or a
	// *sql.Conn that lost its transaction or session fails until it ends.
	killAllowed = allow{fakedb.ErrKilled, pooldriver.ErrConnLost, driver.ErrBadConn, sql.ErrConnDone}
)

// ok reports whether err is nil; a non-nil error outside base and the
// allowed sets fails the test.
func (s *stress) ok(what string, err error, allowed ...allow) bool {
	if err == nil {
		return true
	}
	sets := append(allowed, baseAllowed)
	if s.kills {
		sets = append(sets, killAllowed)
	}
	for _, set := range sets {
		for _, e := range set {
			if errors.Is(err, e) {
				s.mu.Lock()
				s.errs[e.Error()]++
				s.mu.Unlock()
				return false
			}
		}
	}
	s.t.Errorf("%s: unexpected error: %v", what, err)
	return false
}

func (s *stress) commit(v int64) {
	s.mu.Lock()
	s.committed = append(s.committed, v)
	s.mu.Unlock()
}

func (s *stress) committedRows() []int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := slices.Clone(s.committed)
	slices.Sort(out)
	return out
}

func (s *stress) errCounts() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.errs)
}

func (s *stress) opCounts() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := map[string]int{}
	for i, n := range s.ops {
		m[opNames[i]] = n
	}
	return m
}

// step runs one randomly chosen scenario, in a task of a random mode or in
// none.
func (s *stress) step(rng *rand.Rand) {
	op := rng.IntN(numOps)
	s.mu.Lock()
	s.ops[op]++
	s.mu.Unlock()

	parent, cancelParent := context.WithCancel(context.Background())
	defer cancelParent()
	ctx, end, mode := context.Context(parent), func() {}, rng.IntN(3)
	switch mode {
	case 1:
		ctx, end = pooldriver.WithTask(parent, pooldriver.TransactionMode)
	case 2:
		ctx, end = pooldriver.WithTask(parent, pooldriver.SessionMode)
	}
	defer end()
	hasTask := mode != 0

	switch op {
	case opTx:
		s.txn(ctx, rng)
	case opRawTx:
		if hasTask {
			s.rawTxn(ctx, rng)
		} else {
			s.rawNoTask(ctx)
		}
	case opRows:
		s.readRows(ctx, rng)
	case opAutocommit:
		s.autocommit(ctx)
	case opShared:
		s.shared(ctx, end, rng)
	case opCancelMidTx:
		if !hasTask {
			ctx, end = pooldriver.WithTask(parent)
			defer end()
		}
		s.cancelMidTx(ctx, cancelParent, rng)
	case opPanicHandler:
		s.panicHandler(rng)
	case opEndTwice:
		if !hasTask {
			ctx, end = pooldriver.WithTask(parent)
			defer end()
		}
		s.endTwice(ctx, end, rng)
	case opSession:
		ctx, end := pooldriver.WithTask(parent, pooldriver.SessionMode)
		defer end()
		s.session(ctx, end, rng)
	case opConn:
		s.sqlConn(ctx, rng)
	}
}

// sqlConn uses a *sql.Conn as a session, as migration tools do: every
// statement on one server connection, its SET seen by its own statements
// only, its raw transaction committed by COMMIT and rolled back by Close.
func (s *stress) sqlConn(ctx context.Context, rng *rand.Rand) {
	sc, err := s.db.Conn(ctx)
	if !s.ok("Conn", err) {
		return
	}
	defer sc.Close()
	var id1, id2 int64
	if err := sc.QueryRowContext(ctx, "CONNID").Scan(&id1); !s.ok("conn: CONNID", err, endAllowed) {
		return
	}
	var v sql.NullString
	if err := sc.QueryRowContext(ctx, "GET cv").Scan(&v); !s.ok("conn: GET", err, endAllowed) {
		return
	}
	if v.Valid {
		s.t.Errorf("conn: a *sql.Conn found cv=%q left by another user", v.String)
	}
	val := fmt.Sprint("c", s.next.Add(1))
	if _, err := sc.ExecContext(ctx, "SET cv "+val); !s.ok("conn: SET", err, endAllowed) {
		return
	}
	if _, err := sc.ExecContext(ctx, "BEGIN"); !s.ok("conn: BEGIN", err, endAllowed) {
		return
	}
	x := s.next.Add(1)
	if _, err := sc.ExecContext(ctx, "INSERT "+s.table+" ?", x); !s.ok("conn: INSERT", err, endAllowed) {
		return
	}
	if err := sc.QueryRowContext(ctx, "CONNID").Scan(&id2); !s.ok("conn: CONNID", err, endAllowed) {
		return
	}
	if id1 != id2 {
		s.t.Errorf("conn: the *sql.Conn moved from connection %d to %d", id1, id2)
	}
	if err := sc.QueryRowContext(ctx, "GET cv").Scan(&v); s.ok("conn: GET", err, endAllowed) && v.String != val {
		s.t.Errorf("conn: cv=%q, want %q", v.String, val)
	}
	switch rng.IntN(3) {
	case 0:
		if _, err := sc.ExecContext(ctx, "COMMIT"); s.ok("conn: COMMIT", err, endAllowed) {
			s.commit(x)
		}
	case 1:
		_, err := sc.ExecContext(ctx, "ROLLBACK")
		s.ok("conn: ROLLBACK", err, endAllowed)
	default:
		// Close with the transaction open: rolled back, never committed.
	}
}

// txn begins a transaction with BeginTx, inserts, maybe reads, and commits
// or rolls back.
func (s *stress) txn(ctx context.Context, rng *rand.Rand, allowed ...allow) {
	tx, err := s.db.BeginTx(ctx, nil)
	if !s.ok("BeginTx", err, allowed...) {
		return
	}
	v := s.next.Add(1)
	inserted := true
	if _, err := tx.ExecContext(ctx, "INSERT "+s.table+" ?", v); !s.ok("tx INSERT", err, allowed...) {
		inserted = false
	}
	if rng.IntN(3) == 0 {
		var n int64
		err := tx.QueryRowContext(ctx, "COUNT "+s.table).Scan(&n)
		s.ok("tx COUNT", err, allowed...)
	}
	if rng.IntN(2) == 0 {
		err := tx.Rollback()
		s.ok("Rollback", err, allowed...)
		return
	}
	err = tx.Commit()
	if s.ok("Commit", err, allowed...) && inserted {
		s.commit(v)
	}
}

// rawTxn runs BEGIN, INSERT, COMMIT or ROLLBACK as separate db.ExecContext
// calls, which the task keeps on one connection. Only for a task no other
// goroutine uses: another's statement could fail the transaction, which a
// raw COMMIT then rolls back without an error.
func (s *stress) rawTxn(ctx context.Context, rng *rand.Rand, allowed ...allow) {
	if _, err := s.db.ExecContext(ctx, "BEGIN"); !s.ok("raw BEGIN", err, allowed...) {
		return
	}
	v := s.next.Add(1)
	if _, err := s.db.ExecContext(ctx, "INSERT "+s.table+" ?", v); !s.ok("raw INSERT", err, allowed...) {
		return // the task's end rolls back
	}
	if rng.IntN(3) == 0 {
		s.readRows(ctx, rng, allowed...)
	}
	if rng.IntN(3) == 0 {
		_, err := s.db.ExecContext(ctx, "ROLLBACK")
		s.ok("raw ROLLBACK", err, allowed...)
		return
	}
	if _, err := s.db.ExecContext(ctx, "COMMIT"); s.ok("raw COMMIT", err, allowed...) {
		s.commit(v)
	}
}

// rawNoTask runs a raw BEGIN outside a task: nothing keeps the transaction,
// so it is rolled back before the connection is reused, and the INSERT that
// follows is autocommitted wherever it runs.
func (s *stress) rawNoTask(ctx context.Context) {
	if _, err := s.db.ExecContext(ctx, "BEGIN"); !s.ok("raw BEGIN (no task)", err) {
		return
	}
	s.autocommit(ctx)
	_, err := s.db.ExecContext(ctx, "COMMIT")
	s.ok("raw COMMIT (no task)", err)
}

// autocommit inserts outside any transaction. Only for a context no other
// goroutine shares (a shared task may have a transaction open).
func (s *stress) autocommit(ctx context.Context) {
	v := s.next.Add(1)
	if _, err := s.db.ExecContext(ctx, "INSERT "+s.table+" ?", v); s.ok("autocommit INSERT", err) {
		s.commit(v)
		// Committed at once: it did not run inside another user's
		// transaction.
		if !slices.Contains(s.srv.Table(s.table), v) {
			s.t.Errorf("autocommit INSERT %d returned but is not committed: it ran inside an open transaction", v)
		}
	}
}

// readRows opens SELECT 5, reads some or all of it, and closes it.
func (s *stress) readRows(ctx context.Context, rng *rand.Rand, allowed ...allow) {
	rows, err := s.db.QueryContext(ctx, "SELECT 5")
	if !s.ok("SELECT", err, allowed...) {
		return
	}
	want := rng.IntN(6)
	read := 0
	for read < want && rows.Next() {
		var n int64
		var str string
		if err := rows.Scan(&n, &str); !s.ok("Scan", err, allowed...) {
			break
		}
		read++
		if n != int64(read) || str != fmt.Sprint(read) {
			s.t.Errorf("SELECT 5: row %d is (%d, %q)", read, n, str)
		}
	}
	if want == 5 && read == 5 && rows.Next() {
		s.t.Errorf("SELECT 5 returned a sixth row")
	}
	s.ok("rows.Err", rows.Err(), allowed...)
	s.ok("rows.Close", rows.Close(), allowed...)
}

// shared runs 2 to 4 goroutines on one context; sometimes the task ends
// while they run.
func (s *stress) shared(ctx context.Context, end func(), rng *rand.Rand) {
	n := 2 + rng.IntN(3)
	var wg sync.WaitGroup
	for range n {
		r := rand.New(rand.NewPCG(rng.Uint64(), rng.Uint64()))
		wg.Go(func() {
			for range 1 + r.IntN(4) {
				switch r.IntN(3) {
				case 0:
					s.txn(ctx, r, sharedAllowed, endAllowed)
				case 1:
					s.readRows(ctx, r, sharedAllowed, endAllowed)
				case 2:
					_, err := s.db.ExecContext(ctx, "PING")
					s.ok("PING", err, sharedAllowed, endAllowed)
				}
			}
		})
	}
	if rng.IntN(4) == 0 {
		time.Sleep(time.Duration(rng.IntN(500)) * time.Microsecond) // a random point, not a synchronization
		end()
	}
	wg.Wait()
}

// cancelMidTx cancels the task's parent context in the middle of a
// transaction: before the commit, or racing with it.
func (s *stress) cancelMidTx(ctx context.Context, cancelParent context.CancelFunc, rng *rand.Rand) {
	raw := rng.IntN(2) == 0
	var tx *sql.Tx
	var err error
	if raw {
		_, err = s.db.ExecContext(ctx, "BEGIN")
	} else {
		tx, err = s.db.BeginTx(ctx, nil)
	}
	if !s.ok("cancel: begin", err) {
		return
	}
	v := s.next.Add(1)
	if raw {
		_, err = s.db.ExecContext(ctx, "INSERT "+s.table+" ?", v)
	} else {
		_, err = tx.ExecContext(ctx, "INSERT "+s.table+" ?", v)
	}
	if !s.ok("cancel: INSERT", err) {
		if tx != nil {
			tx.Rollback()
		}
		return
	}
	race := rng.IntN(2) == 0
	var wg sync.WaitGroup
	if race {
		delay := time.Duration(rng.IntN(200)) * time.Microsecond
		wg.Go(func() {
			time.Sleep(delay) // a random point, not a synchronization
			cancelParent()
		})
	} else {
		cancelParent()
	}
	if raw {
		_, err = s.db.ExecContext(ctx, "COMMIT")
	} else {
		err = tx.Commit()
	}
	wg.Wait()
	// A COMMIT that meets the task's end as it undoes the transaction
	// finds the task's connection lost (ErrConnLost: "... or the task
	// ended and undid its transaction").
	if s.ok("cancel: commit", err, endAllowed, allow{pooldriver.ErrConnLost}) {
		if !race {
			s.t.Errorf("commit after the task's parent was cancelled succeeded (raw=%v)", raw)
		}
		s.commit(v)
	}
}

var errBoom = errors.New("boom")

// panicHandler runs a handler under Middleware that begins a transaction
// (BeginTx or raw), inserts, maybe leaves rows open, and panics.
func (s *stress) panicHandler(rng *rand.Rand) {
	raw := rng.IntN(2) == 0
	leaveRows := rng.IntN(3) == 0
	var tx *sql.Tx
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		var err error
		if raw {
			_, err = s.db.ExecContext(ctx, "BEGIN")
		} else {
			tx, err = s.db.BeginTx(ctx, nil)
		}
		if s.ok("handler: begin", err) {
			v := s.next.Add(1)
			if raw {
				_, err = s.db.ExecContext(ctx, "INSERT "+s.table+" ?", v)
			} else {
				_, err = tx.ExecContext(ctx, "INSERT "+s.table+" ?", v)
			}
			s.ok("handler: INSERT", err)
			if leaveRows {
				var rows *sql.Rows
				if raw {
					rows, err = s.db.QueryContext(ctx, "SELECT 5")
				} else {
					rows, err = tx.QueryContext(ctx, "SELECT 5")
				}
				if s.ok("handler: SELECT", err) {
					rows.Next() // and never closed: the task's end must cope
				}
			}
		}
		panic(errBoom)
	})
	var mw http.Handler
	switch rng.IntN(3) {
	case 0:
		mw = pooldriver.Middleware(h)
	case 1:
		mw = pooldriver.MiddlewareWithMode(pooldriver.TransactionMode)(h)
	case 2:
		mw = pooldriver.MiddlewareWithMode(pooldriver.SessionMode)(h)
	}
	recovering := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != errBoom {
				s.t.Errorf("handler: recovered %v, want %v", v, errBoom)
			}
		}()
		mw.ServeHTTP(w, r)
	})
	recovering.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/", nil))
	if tx != nil {
		if err := tx.Commit(); err == nil {
			s.t.Errorf("handler: Commit after the handler's task ended succeeded")
		} else {
			s.ok("handler: Commit after end", err, endAllowed)
		}
	}
}

// endTwice begins a transaction, ends the task twice (in turn or at once),
// and checks that Commit and later statements fail.
func (s *stress) endTwice(ctx context.Context, end func(), rng *rand.Rand) {
	raw := rng.IntN(2) == 0
	var tx *sql.Tx
	var err error
	if raw {
		_, err = s.db.ExecContext(ctx, "BEGIN")
	} else {
		tx, err = s.db.BeginTx(ctx, nil)
	}
	if !s.ok("end twice: begin", err) {
		return
	}
	v := s.next.Add(1)
	if raw {
		_, err = s.db.ExecContext(ctx, "INSERT "+s.table+" ?", v)
	} else {
		_, err = tx.ExecContext(ctx, "INSERT "+s.table+" ?", v)
	}
	s.ok("end twice: INSERT", err)
	if rng.IntN(2) == 0 {
		end()
		end()
	} else {
		var wg sync.WaitGroup
		wg.Go(end)
		wg.Go(end)
		wg.Wait()
	}
	if raw {
		_, err = s.db.ExecContext(ctx, "COMMIT")
	} else {
		err = tx.Commit()
	}
	if err == nil {
		s.t.Errorf("end twice: commit after end succeeded (raw=%v)", raw)
	} else {
		s.ok("end twice: commit after end", err, endAllowed)
	}
	if tx != nil {
		s.ok("end twice: Rollback after end", tx.Rollback(), endAllowed)
	}
	if _, err := s.db.ExecContext(ctx, "PING"); !errors.Is(err, context.Canceled) {
		s.t.Errorf("end twice: statement after end: %v, want context.Canceled", err)
	}
}

// session checks, in a session-mode task no other goroutine uses, that
// the connection it gets carries no session state of an earlier task and
// keeps its own across statements, around a transaction.
func (s *stress) session(ctx context.Context, end func(), rng *rand.Rand) {
	var v sql.NullString
	if err := s.db.QueryRowContext(ctx, "GET sv").Scan(&v); !s.ok("session: GET", err) {
		return
	}
	if v.Valid {
		s.t.Errorf("session: a new session-mode task found sv=%q left by an earlier task", v.String)
	}
	var id1, id2 int64
	if err := s.db.QueryRowContext(ctx, "CONNID").Scan(&id1); !s.ok("session: CONNID", err) {
		return
	}
	val := fmt.Sprint("x", id1)
	if _, err := s.db.ExecContext(ctx, "SET sv "+val); !s.ok("session: SET", err) {
		return
	}
	switch rng.IntN(4) {
	case 0:
		s.txn(ctx, rng)
	case 1:
		s.rawTxn(ctx, rng)
	case 2:
		s.readRows(ctx, rng)
	case 3:
		// The task ends with a transaction open: its end and database/sql's
		// own rollback of the transaction race; the session must still be
		// reset before the connection is reused.
		tx, err := s.db.BeginTx(ctx, nil)
		if s.ok("session: BeginTx", err) {
			end()
			s.ok("session: Rollback after end", tx.Rollback(), endAllowed)
		}
		return
	}
	if err := s.db.QueryRowContext(ctx, "CONNID").Scan(&id2); !s.ok("session: CONNID", err) {
		return
	}
	if id1 != id2 {
		s.t.Errorf("session: the task moved from connection %d to %d", id1, id2)
	}
	if err := s.db.QueryRowContext(ctx, "GET sv").Scan(&v); s.ok("session: GET", err) && v.String != val {
		s.t.Errorf("session: sv=%q, want %q", v.String, val)
	}
}

// diffSorted returns the values of sorted want missing from sorted got,
// and those of got not in want.
func diffSorted(want, got []int64) (missing, extra []int64) {
	i, j := 0, 0
	for i < len(want) || j < len(got) {
		switch {
		case j == len(got) || i < len(want) && want[i] < got[j]:
			missing = append(missing, want[i])
			i++
		case i == len(want) || got[j] < want[i]:
			extra = append(extra, got[j])
			j++
		default:
			i++
			j++
		}
	}
	return missing, extra
}

func head(s []int64) string {
	if len(s) > 20 {
		return fmt.Sprint(s[:20]) + fmt.Sprintf(" ... (%d in all)", len(s))
	}
	return fmt.Sprint(s)
}

// TestSessionResetWhenTxEndRacesTaskEnd: a session-mode task ends while its
// transaction is being ended by database/sql (a Commit racing the end, or
// the rollback database/sql starts when the context is cancelled). Whoever
// lets the connection go last, its session must be reset before another
// task gets it, and a Commit reports exactly whether it committed.
func TestSessionResetWhenTxEndRacesTaskEnd(t *testing.T) {
	checkNoGoroutineLeak(t)
	srv := newServer(t)
	db, _ := newDB(t, srv, "pool_max_conns=1")
	var committed int
	for i := range 200 {
		commit := i%2 == 1
		ctx, end := pooldriver.WithTask(context.Background(), pooldriver.SessionMode)
		if _, err := db.ExecContext(ctx, "SET sv dirty"); err != nil {
			t.Fatal(err)
		}
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec("INSERT raced ?", int64(i)); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() {
			if commit {
				done <- tx.Commit()
			} else {
				done <- tx.Rollback()
			}
		}()
		if i%4 < 2 {
			runtime.Gosched()
		}
		end()
		err = <-done
		if commit && err == nil {
			committed++
		}
		if n := len(srv.Table("raced")); n != committed {
			t.Fatalf("iteration %d (commit=%v, err=%v): %d rows committed, %d Commits returned nil", i, commit, err, n, committed)
		}

		var v sql.NullString
		ctx2, end2 := pooldriver.WithTask(context.Background(), pooldriver.SessionMode)
		err = db.QueryRowContext(ctx2, "GET sv").Scan(&v)
		end2()
		if err != nil {
			t.Fatal(err)
		}
		if v.Valid {
			t.Fatalf("iteration %d (commit=%v): a new session-mode task found sv=%q left by the previous task: its session was not reset", i, commit, v.String)
		}
	}
}

// TestRawBeginWhileTaskConnBusy: in a transaction-mode task whose
// connection is busy with open rows, a raw BEGIN can only run on another
// connection, which the task cannot keep. It must fail rather than report
// success while the transaction is dropped (which made the INSERT after it
// autocommit and the ROLLBACK undo nothing).
func TestRawBeginWhileTaskConnBusy(t *testing.T) {
	checkNoGoroutineLeak(t)
	srv := newServer(t)
	db, _ := newDB(t, srv, "pool_max_conns=2")
	ctx, end := pooldriver.WithTask(context.Background())
	defer end()

	rows, err := db.QueryContext(ctx, "SELECT 5") // binds the task's connection, busy until closed
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	if _, err := db.ExecContext(ctx, "BEGIN"); err != nil {
		t.Logf("BEGIN while the task's connection is busy: %v", err)
		return
	}
	if _, err := db.ExecContext(ctx, "INSERT t 1"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	if got := srv.Table("t"); len(got) != 0 {
		t.Fatalf("BEGIN succeeded, INSERT, ROLLBACK: the table holds %v; the transaction was silently dropped", got)
	}
}

// TestSessionStateNotOnSeparateConn: in a session-mode task whose
// connection is busy with open rows, a SET must fail rather than run on
// another connection, which would go back to the pool with the variable set
// (a dirty session for the next task) while the task does not see it.
func TestSessionStateNotOnSeparateConn(t *testing.T) {
	checkNoGoroutineLeak(t)
	srv := newServer(t)
	db, _ := newDB(t, srv, "pool_max_conns=2")
	ctx, end := pooldriver.WithTask(context.Background(), pooldriver.SessionMode)
	defer end()

	rows, err := db.QueryContext(ctx, "SELECT 5") // binds the session's connection, busy until closed
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, "SET sv mine"); err != nil {
		t.Logf("SET while the session's connection is busy: %v", err)
		rows.Close()
		return
	}

	// Another task, meanwhile, gets the only idle connection.
	ctx2, end2 := pooldriver.WithTask(context.Background(), pooldriver.SessionMode)
	var other sql.NullString
	err = db.QueryRowContext(ctx2, "GET sv").Scan(&other)
	end2()
	if err != nil {
		t.Fatal(err)
	}
	rows.Close()

	var own sql.NullString
	if err := db.QueryRowContext(ctx, "GET sv").Scan(&own); err != nil {
		t.Fatal(err)
	}
	if other.Valid || own.String != "mine" {
		t.Fatalf("after SET sv in a session task: another task reads sv=%v, the task itself reads sv=%v; want NULL and \"mine\"",
			other, own)
	}
}
