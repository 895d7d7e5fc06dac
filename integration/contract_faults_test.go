package integration

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pooldriver/pooldriver"
)

// The contract under faults: contexts that expire in the middle of a
// transaction's statements and server sessions killed under it.

// connLost reports whether err is pooldriver's error for a statement of a
// task or *sql.Conn whose server session was lost.
func connLost(err error) bool { return errors.Is(err, pooldriver.ErrConnLost) }

// TestContractNoSilentAutocommit (contract 4): a statement that belonged to
// a raw transaction never runs outside it. Under short contexts on BEGIN
// and many tasks (a *sql.Conn each, under the plain driver), no row is
// there whose task's COMMIT did not return nil, and every task whose
// statements all returned nil has its row; with the task's session killed
// between INSERT and COMMIT, every later statement of the task fails and
// nothing is committed.
func TestContractNoSilentAutocommit(t *testing.T) {
	t.Parallel()
	forEachServer(t, func(t *testing.T, s server) {
		t.Parallel()
		t.Run("short contexts", func(t *testing.T) {
			t.Parallel()
			forEachFlavour(t, s, allFlavours, dbOpts{}, contractShortContexts)
		})
		t.Run("killed", func(t *testing.T) {
			t.Parallel()
			forEachFlavour(t, s, allFlavours, dbOpts{}, contractKilledRawTx)
		})
	})
}

// taskOutcome is what one task's statements returned.
type taskOutcome struct {
	start, begin, insert, commit error
}

func contractShortContexts(t *testing.T, s server, db *subject) {
	const workers = 4
	tasks := 500
	if testing.Short() {
		tasks = 150
	}
	table := db.table(t, s, "cauto", "id int PRIMARY KEY")
	insert := "INSERT INTO " + table + " VALUES (" + s.placeholder(1) + ")"
	c := timeout(t, hangTimeout)
	// BEGIN's context ends at a random point up to 1.5ms, or up to twice
	// what a statement takes on this machine now if that is longer: some
	// end before the BEGIN is sent, some while it runs, some after, and
	// some tasks get through, however loaded the machine.
	window := max(1500*time.Microsecond, 2*statementTime(t, db))

	outcomes := make([]taskOutcome, tasks)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				id := int(next.Add(1)) - 1
				if id >= tasks {
					return
				}
				o := &outcomes[id]
				tc, cancel := context.WithTimeout(c, 10*time.Second)
				task, r, end, err := db.startTask(tc, pooldriver.TransactionMode)
				if err != nil {
					o.start = err
					cancel()
					continue
				}
				bc, cancelBegin := context.WithTimeout(task, rand.N(window))
				_, o.begin = r.ExecContext(bc, "BEGIN")
				cancelBegin()
				_, o.insert = r.ExecContext(task, insert, id)
				_, o.commit = r.ExecContext(task, "COMMIT")
				end()
				cancel()
			}
		})
	}
	wg.Wait()

	present := map[int]bool{}
	rows, err := s.admin(t).QueryContext(ctx(t), "SELECT id FROM "+table)
	require.NoError(t, err)
	for rows.Next() {
		var id int
		require.NoError(t, rows.Scan(&id))
		present[id] = true
	}
	require.NoError(t, rows.Err())
	rows.Close()

	var stray, missing []int
	var started, begun, committed int
	for id, o := range outcomes {
		if o.start != nil {
			assert.False(t, present[id], "task %d could not start but has a row", id)
			continue
		}
		started++
		if o.begin == nil {
			begun++
		}
		switch {
		case o.commit != nil && present[id]:
			stray = append(stray, id)
		case o.begin == nil && o.insert == nil && o.commit == nil:
			committed++
			if !present[id] {
				missing = append(missing, id)
			}
		}
	}
	t.Logf("%d tasks started, %d BEGINs returned nil, %d tasks committed, %d rows (BEGIN's contexts: up to %v)", started, begun, committed, len(present), window)
	for _, id := range firstN(stray, 5) {
		o := outcomes[id]
		t.Logf("stray row %d: BEGIN %v; INSERT %v; COMMIT %v", id, o.begin, o.insert, o.commit)
	}
	assert.Empty(t, stray, "rows of tasks whose COMMIT failed")
	assert.Empty(t, missing, "tasks whose BEGIN, INSERT and COMMIT returned nil but have no row")
	assert.NotZero(t, committed, "no task got through")
	assert.Equal(t, tasks, started)
	db.waitNoOpenTxs(t)
}

func firstN(ids []int, n int) []int { return ids[:min(n, len(ids))] }

// statementTime is the median time of a short statement through db, now.
func statementTime(t *testing.T, db *subject) time.Duration {
	t.Helper()
	times := make([]time.Duration, 15)
	for i := range times {
		start := time.Now()
		_, err := db.ExecContext(ctx(t), "SELECT 1")
		require.NoError(t, err)
		times[i] = time.Since(start)
	}
	slices.Sort(times)
	return times[len(times)/2]
}

func contractKilledRawTx(t *testing.T, s server, db *subject) {
	table := db.table(t, s, "ckill", "id int")
	insert := "INSERT INTO " + table + " VALUES (" + s.placeholder(1) + ")"
	task, r, end, err := db.startTask(timeout(t, hangTimeout), pooldriver.TransactionMode)
	require.NoError(t, err)
	defer end()

	_, err = r.ExecContext(task, "BEGIN")
	require.NoError(t, err)
	_, err = r.ExecContext(task, insert, 1)
	require.NoError(t, err)
	var pid int64
	require.NoError(t, r.QueryRowContext(task, s.backendID).Scan(&pid))
	db.tn.kill(t, pid)
	waitFor(t, "the session gone", func() bool { return !contains(db.tn.backends(t), pid) })

	_, err = r.ExecContext(task, insert, 2)
	checkLost(t, db, err, "INSERT after the kill")
	var one int
	err = r.QueryRowContext(task, "SELECT 1").Scan(&one)
	checkLost(t, db, err, "SELECT after the kill")
	_, err = r.ExecContext(task, "COMMIT")
	checkLost(t, db, err, "COMMIT after the kill")
	end()
	assert.Zero(t, s.adminInt(t, "SELECT count(*) FROM "+table), "rows of the killed transaction")
	db.waitNoOpenTxs(t)
}

// checkLost asserts that a statement of a task whose session was killed
// failed, with ErrConnLost under pooldriver.
func checkLost(t *testing.T, db *subject, err error, what string) {
	t.Helper()
	if !assert.Error(t, err, "%s succeeded", what) {
		return
	}
	t.Logf("%s: %v", what, err)
	if db.pooled() {
		assert.True(t, connLost(err), "%s: want ErrConnLost, got %v", what, err)
	}
}

// TestContractKillsKeepBalance (contracts 1 and 4 under fire): eight
// goroutines move money between ten accounts, each transfer in a task (a
// *sql.Conn under the plain driver) with a raw BEGIN … COMMIT, or a
// *sql.Tx, and records itself in a ledger in the same transaction, while
// the server kills one of the pool's sessions every 5–50ms. Afterwards the
// balances are exactly what the ledger says (so the total is unchanged),
// every transfer whose COMMIT returned nil is in the ledger, and none that
// failed before its COMMIT was sent is.
func TestContractKillsKeepBalance(t *testing.T) {
	t.Parallel()
	forEachServer(t, func(t *testing.T, s server) {
		t.Parallel()
		for _, v := range []string{"raw", "BeginTx"} {
			t.Run(v, func(t *testing.T) {
				t.Parallel()
				forEachFlavour(t, s, allFlavours, dbOpts{}, func(t *testing.T, s server, db *subject) {
					contractKillsKeepBalance(t, s, db, v == "raw")
				})
			})
		}
	})
}

const (
	balanceAccounts = 10
	balanceInitial  = 100
	balanceWorkers  = 8
	balanceRun      = 5 * time.Second
	balanceRunShort = 2 * time.Second // under -short (make test)
)

// transferStage is how far a transfer got.
type transferStage int

const (
	failedBeforeCommit transferStage = iota // a statement before COMMIT failed; COMMIT was not sent
	commitFailed                            // COMMIT returned an error: it may or may not have committed
	committed                               // COMMIT returned nil
)

type transfer struct {
	id, from, to, amount int
	stage                transferStage
	err                  error
}

func contractKillsKeepBalance(t *testing.T, s server, db *subject, raw bool) {
	accounts := db.table(t, s, "cacct", "id int PRIMARY KEY, balance int NOT NULL")
	ledger := db.table(t, s, "cledg", "id int PRIMARY KEY, src int NOT NULL, dst int NOT NULL, amount int NOT NULL")
	for i := range balanceAccounts {
		s.adminExec(t, fmt.Sprintf("INSERT INTO %s VALUES (%d, %d)", accounts, i, balanceInitial))
	}
	p := s.placeholder
	debit := fmt.Sprintf("UPDATE %s SET balance = balance - %s WHERE id = %s", accounts, p(1), p(2))
	credit := fmt.Sprintf("UPDATE %s SET balance = balance + %s WHERE id = %s", accounts, p(1), p(2))
	record := fmt.Sprintf("INSERT INTO %s VALUES (%s, %s, %s, %s)", ledger, p(1), p(2), p(3), p(4))

	run := balanceRun
	if testing.Short() {
		run = balanceRunShort
	}
	runCtx, stopRun := context.WithTimeout(context.Background(), run)
	defer stopRun()
	var (
		mu        sync.Mutex // protects transfers
		transfers []transfer
		nextID    atomic.Int64
		kills     atomic.Int64
		wg        sync.WaitGroup
	)
	// The killer.
	wg.Go(func() {
		for {
			select {
			case <-runCtx.Done():
				return
			case <-time.After(5*time.Millisecond + rand.N(45*time.Millisecond)):
			}
			ids, err := db.tn.backendsErr(runCtx)
			if err != nil || len(ids) == 0 {
				continue
			}
			if killSession(runCtx, s, ids[rand.IntN(len(ids))]) == nil {
				kills.Add(1)
			}
		}
	})
	for range balanceWorkers {
		wg.Go(func() {
			for runCtx.Err() == nil {
				// Lower id first, so that transfers never deadlock; the
				// amount's sign picks the direction.
				a, b := rand.IntN(balanceAccounts), rand.IntN(balanceAccounts-1)
				if b >= a {
					b++
				}
				a, b = min(a, b), max(a, b)
				amount := rand.IntN(21) - 10
				tr := transfer{id: int(nextID.Add(1)), from: a, to: b, amount: amount}
				c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				steps := [][]any{{debit, amount, a}, {credit, amount, b}, {record, tr.id, a, b, amount}}
				if raw {
					tr.stage, tr.err = rawTransfer(c, db, steps)
				} else {
					tr.stage, tr.err = txTransfer(c, db, steps)
				}
				cancel()
				mu.Lock()
				transfers = append(transfers, tr)
				mu.Unlock()
			}
		})
	}
	wg.Wait()

	byID := map[int]transfer{}
	count := map[transferStage]int{}
	for _, tr := range transfers {
		byID[tr.id] = tr
		count[tr.stage]++
	}
	t.Logf("%d kills; %d transfers: %d committed, %d with a failed COMMIT, %d failed before COMMIT",
		kills.Load(), len(transfers), count[committed], count[commitFailed], count[failedBeforeCommit])
	logSomeErrors(t, transfers)

	db.waitNoOpenTxs(t)
	want := make([]int64, balanceAccounts)
	for i := range want {
		want[i] = balanceInitial
	}
	inLedger := map[int]bool{}
	rows, err := s.admin(t).QueryContext(ctx(t), "SELECT id, src, dst, amount FROM "+ledger)
	require.NoError(t, err)
	for rows.Next() {
		var id, src, dst, amount int
		require.NoError(t, rows.Scan(&id, &src, &dst, &amount))
		inLedger[id] = true
		want[src] -= int64(amount)
		want[dst] += int64(amount)
		tr, ok := byID[id]
		if assert.True(t, ok, "ledger row %d of no transfer", id) {
			assert.NotEqual(t, failedBeforeCommit, tr.stage,
				"transfer %d failed before its COMMIT was sent (%v) but is in the ledger", id, tr.err)
		}
	}
	require.NoError(t, rows.Err())
	rows.Close()
	for _, tr := range transfers {
		if tr.stage == committed {
			assert.True(t, inLedger[tr.id], "transfer %d: COMMIT returned nil but it is not in the ledger", tr.id)
		}
	}

	got := make([]int64, balanceAccounts)
	var total int64
	rows, err = s.admin(t).QueryContext(ctx(t), "SELECT id, balance FROM "+accounts)
	require.NoError(t, err)
	for rows.Next() {
		var id int
		var balance int64
		require.NoError(t, rows.Scan(&id, &balance))
		got[id] = balance
		total += balance
	}
	require.NoError(t, rows.Err())
	rows.Close()
	assert.EqualValues(t, balanceAccounts*balanceInitial, total, "the total balance changed")
	assert.Equal(t, want, got, "the balances are not what the ledger says")
	assert.NotZero(t, count[committed], "no transfer got through")
}

// rawTransfer runs steps between a raw BEGIN and COMMIT in a task (on a
// *sql.Conn under the plain driver); after a failure it rolls back and stops.
func rawTransfer(c context.Context, db *subject, steps [][]any) (transferStage, error) {
	task, r, end, err := db.startTask(c, pooldriver.TransactionMode)
	if err != nil {
		return failedBeforeCommit, err
	}
	defer end()
	fail := func(err error) (transferStage, error) {
		_, _ = r.ExecContext(task, "ROLLBACK")
		return failedBeforeCommit, err
	}
	if _, err := r.ExecContext(task, "BEGIN"); err != nil {
		return fail(err)
	}
	for _, st := range steps {
		if _, err := r.ExecContext(task, st[0].(string), st[1:]...); err != nil {
			return fail(err)
		}
	}
	if _, err := r.ExecContext(task, "COMMIT"); err != nil {
		return commitFailed, err
	}
	return committed, nil
}

// txTransfer runs steps in a *sql.Tx begun with a task's context.
func txTransfer(c context.Context, db *subject, steps [][]any) (transferStage, error) {
	task, end := pooldriver.WithTask(c)
	defer end()
	tx, err := db.BeginTx(task, nil)
	if err != nil {
		return failedBeforeCommit, err
	}
	for _, st := range steps {
		if _, err := tx.ExecContext(task, st[0].(string), st[1:]...); err != nil {
			_ = tx.Rollback()
			return failedBeforeCommit, err
		}
	}
	if err := tx.Commit(); err != nil {
		return commitFailed, err
	}
	return committed, nil
}

// logSomeErrors logs one transfer error of each kind.
func logSomeErrors(t *testing.T, transfers []transfer) {
	t.Helper()
	seen := map[string]bool{}
	for _, tr := range transfers {
		if tr.err == nil {
			continue
		}
		msg := tr.err.Error()
		if i := strings.IndexAny(msg, "0123456789"); i > 0 {
			msg = msg[:i] // one line per kind, not per session id
		}
		if !seen[msg] && len(seen) < 8 {
			seen[msg] = true
			t.Logf("stage %d: %v", tr.stage, tr.err)
		}
	}
}

// killSession ends server session id from the admin connection; for
// goroutines other than the test's.
func killSession(c context.Context, s server, id int64) error {
	admin := s.adminDB()
	if s.name == "postgres" {
		_, err := admin.ExecContext(c, "SELECT pg_terminate_backend($1)", id)
		return err
	}
	_, err := admin.ExecContext(c, fmt.Sprintf("KILL CONNECTION %d", id))
	var me *mysql.MySQLError
	if errors.As(err, &me) && me.Number == 1094 { // unknown thread: it ended meanwhile
		return errors.New("already gone")
	}
	return err
}
