//go:build odbc

package integration

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pooldriver/pooldriver"
)

// The contract (DESIGN.md, "The contract: database/sql's, kept") through
// the ODBC dialect, against PostgreSQL (psqlODBC) and MariaDB (MariaDB
// Connector/ODBC): the scenarios of contract_test.go and
// contract_faults_test.go where the rule applies, run through pooldriver
// over ODBC. There is no plain flavour to compare with: the odbc driver
// under database/sql alone keeps no promise about raw transactions or
// session state, so each scenario asserts the contract's outcome itself.
//
// The odbc driver cannot cancel a statement that returns no rows, so a
// context alone does not bound a step: every statement runs through
// odbcStep, which fails the test when it has not returned a while after
// its context expired.

const (
	// odbcStepTimeout is the context of one statement of a scenario.
	odbcStepTimeout = 10 * time.Second
	// odbcStepGrace is how long a statement may outlive its context.
	odbcStepGrace = 5 * time.Second
)

// odbcStep runs f with a context derived from c that expires after
// odbcStepTimeout, and returns its error; when f has not returned
// odbcStepGrace after that, the test fails (f's goroutine is left behind).
func odbcStep(t *testing.T, c context.Context, what string, f func(c context.Context) error) error {
	t.Helper()
	sc, cancel := context.WithTimeout(c, odbcStepTimeout)
	done := make(chan error, 1)
	go func() {
		defer cancel()
		done <- f(sc)
	}()
	limit := time.NewTimer(odbcStepTimeout + odbcStepGrace)
	defer limit.Stop()
	select {
	case err := <-done:
		return err
	case <-limit.C:
		t.Fatalf("%s: still running %v after its context expired", what, odbcStepGrace)
		return nil
	}
}

// odbcExec runs a statement on r as one bounded step.
func odbcExec(t *testing.T, c context.Context, r runner, query string, args ...any) error {
	t.Helper()
	return odbcStep(t, c, query, func(c context.Context) error {
		_, err := r.ExecContext(c, query, args...)
		return err
	})
}

// odbcScan runs a query on r as one bounded step and scans its first row
// into dest.
func odbcScan(t *testing.T, c context.Context, r runner, dest any, query string, args ...any) error {
	t.Helper()
	return odbcStep(t, c, query, func(c context.Context) error {
		return r.QueryRowContext(c, query, args...).Scan(dest)
	})
}

// odbcSubject is a pooldriver *sql.DB over ODBC, logging in as a tenant of
// its own so that its server sessions can be counted and killed.
type odbcSubject struct {
	*sql.DB
	c     *pooldriver.Connector
	s     odbcServer
	tn    *odbcTenant
	mode  pooldriver.Mode
	close func() // closes the *sql.DB, once; see closeAndCheck
}

// openODBCSubject opens a pooldriver *sql.DB over the server's ODBC DSN
// with pool_max_conns=maxConns and pool_mode=mode, closed when the test
// ends; then the server must see none of its sessions left.
func openODBCSubject(t *testing.T, s odbcServer, mode pooldriver.Mode, maxConns int) *odbcSubject {
	t.Helper()
	tn := newODBCTenant(t, s)
	db, c := tn.open(t, fmt.Sprintf("pool_max_conns=%d;pool_mode=%s", maxConns, mode))
	sub := &odbcSubject{DB: db, c: c, s: s, tn: tn, mode: mode}
	sub.close = sync.OnceFunc(func() { sub.closeAndCheck(t) })
	t.Cleanup(sub.close)
	return sub
}

// closeAndCheck closes the *sql.DB; then the server must see none of its
// sessions left.
func (sub *odbcSubject) closeAndCheck(t *testing.T) {
	closeAndDrain(t, sub.DB, sub.tn.backends, sub.tn.kill)
}

// table creates a table that is dropped when the test ends, after the
// *sql.DB is closed (a session it left in a transaction would block the
// DROP).
func (sub *odbcSubject) table(t *testing.T, prefix, columns string) string {
	t.Helper()
	name := sub.s.table(t, prefix, columns)
	t.Cleanup(sub.close)
	return name
}

// waitNoOpenTxs waits until none of the subject's server sessions holds a
// transaction open.
func (sub *odbcSubject) waitNoOpenTxs(t *testing.T) {
	t.Helper()
	odbcWaitFor(t, "no transaction open on the server", func() bool { return sub.tn.openTxs(t) == 0 })
}

// count returns the number of rows in table, from the admin connection.
func (sub *odbcSubject) count(t *testing.T, table string, where ...string) int64 {
	t.Helper()
	q := "SELECT count(*) FROM " + table
	if len(where) > 0 {
		q += " WHERE " + where[0]
	}
	return sub.s.adminInt(t, q)
}

// odbcContractSQL is the SQL of the contract scenarios that differs between
// the ODBC servers (and from servers_test.go's, whose placeholders are
// pgx's).
type odbcContractSQL struct {
	lock       string // takes an advisory lock named by the only argument
	unlock     string // releases it; true if it was held
	setSetting string // changes a session setting
	getSetting string // reads it back
	settingVal string // what getSetting returns after setSetting
}

func odbcContract(s odbcServer) odbcContractSQL {
	if s.name == "postgres" {
		return odbcContractSQL{
			lock:       "SELECT pg_advisory_lock(hashtext(?))",
			unlock:     "SELECT pg_advisory_unlock(hashtext(?))",
			setSetting: "SET statement_timeout = '42s'",
			getSetting: "SHOW statement_timeout",
			settingVal: "42s",
		}
	}
	return odbcContractSQL{
		lock:       "SELECT GET_LOCK(?, 0)",
		unlock:     "SELECT RELEASE_LOCK(?)",
		setSetting: "SET SESSION wait_timeout = 4242",
		getSetting: "SELECT @@SESSION.wait_timeout",
		settingVal: "4242",
	}
}

// odbcLockFree reports, from the admin connection, whether nobody holds the
// advisory lock (leaving it free).
func odbcLockFree(t *testing.T, s odbcServer, name string) bool {
	t.Helper()
	q, args := "SELECT IS_FREE_LOCK(?)", []any{name}
	if s.name == "postgres" {
		q = "SELECT CASE WHEN pg_try_advisory_lock(hashtext(CAST(? AS text))) THEN pg_advisory_unlock(hashtext(CAST(? AS text))) ELSE false END"
		args = append(args, name)
	}
	var free bool
	require.NoError(t, s.admin(t).QueryRowContext(ctx(t), q, args...).Scan(&free), q)
	return free
}

// odbcDirtyingStatements change session state in ways a next user would
// notice.
func odbcDirtyingStatements(s odbcServer) []sessionProbe {
	if s.name == "postgres" {
		// The timeout last: it would cut the statements after it short.
		return []sessionProbe{{s.setVar, s.getVar}, {"SET statement_timeout = '1ms'", "SHOW statement_timeout"}}
	}
	return []sessionProbe{
		{s.setVar, s.getVar},
		{"SET SESSION wait_timeout = 4242", "SELECT @@SESSION.wait_timeout"},
		// MariaDB's max_execution_time.
		{"SET SESSION max_statement_time = 0.001", "SELECT @@SESSION.max_statement_time"},
	}
}

// checkODBCLost asserts that a statement of a transaction whose session was
// killed failed with ErrConnLost.
func checkODBCLost(t *testing.T, err error, what string) {
	t.Helper()
	if !assert.Error(t, err, "%s succeeded", what) {
		return
	}
	t.Logf("%s: %v", what, err)
	assert.True(t, connLost(err), "%s: want ErrConnLost, got %v", what, err)
}

// TestContractODBCTxsOfOneTask (contract 1): two *sql.Tx begun at once
// with one task's context are two transactions on two server sessions;
// rolling one back does not touch the other, whose Commit returning nil
// means its row is there. In session mode the second may be refused with
// ErrSessionBusy.
func TestContractODBCTxsOfOneTask(t *testing.T) {
	odbcInBothModes(t, contractODBCTxsOfOneTask)
}

// odbcInBothModes runs scenario on every ODBC server, in both pool modes,
// all in parallel.
func odbcInBothModes(t *testing.T, scenario func(t *testing.T, db *odbcSubject)) {
	t.Parallel()
	forEachODBCServer(t, func(t *testing.T, s odbcServer) {
		t.Parallel()
		for _, mode := range bothModes {
			t.Run(mode.String(), func(t *testing.T) {
				t.Parallel()
				scenario(t, openODBCSubject(t, s, mode, 10))
			})
		}
	})
}

func contractODBCTxsOfOneTask(t *testing.T, db *odbcSubject) {
	s := db.s
	table := db.table(t, "octx2", "id int")
	insert := "INSERT INTO " + table + " VALUES (?)"
	task, end := pooldriver.WithTask(timeout(t, hangTimeout), db.mode)
	defer end()

	var (
		txs  [2]*sql.Tx
		errs [2]error
		wg   sync.WaitGroup
	)
	for i := range txs {
		// The task's context, not a step's: it is the transaction's.
		wg.Go(func() { txs[i], errs[i] = db.BeginTx(task, nil) })
	}
	require.NoError(t, odbcStep(t, task, "two BeginTx", func(context.Context) error { wg.Wait(); return nil }))
	var live []*sql.Tx // in begin order: the first rolls back, the last commits
	for i, err := range errs {
		if err != nil && db.mode == pooldriver.SessionMode && errors.Is(err, pooldriver.ErrSessionBusy) {
			continue
		}
		require.NoError(t, err, "BeginTx %d", i)
		live = append(live, txs[i])
	}
	require.NotEmpty(t, live, "both BeginTx refused")
	if len(live) == 1 {
		t.Logf("the second BeginTx was refused with ErrSessionBusy")
	}

	ids := make([]int64, len(live))
	for i, tx := range live {
		require.NoError(t, odbcExec(t, task, tx, insert, i))
		require.NoError(t, odbcScan(t, task, tx, &ids[i], s.backendID))
	}
	assert.Zero(t, db.count(t, table), "rows visible before any Commit")
	if len(live) == 2 {
		assert.NotEqual(t, ids[0], ids[1], "two open transactions share a server session")
		require.NoError(t, odbcStep(t, task, "Rollback", func(context.Context) error { return live[0].Rollback() }))
	}
	last := len(live) - 1
	require.NoError(t, odbcStep(t, task, "Commit", func(context.Context) error { return live[last].Commit() }))

	assert.EqualValues(t, 1, db.count(t, table, fmt.Sprintf("id = %d", last)), "Commit returned nil but the row is missing")
	if last == 1 {
		assert.Zero(t, db.count(t, table, "id = 0"), "the rolled back row is there")
	}
	end()
	assert.EqualValues(t, 1, db.count(t, table), "rows after the task ended")
	db.waitNoOpenTxs(t)
}

// TestContractODBCConnIsOneSession (contract 2): a *sql.Conn outside a
// task is one server session in either mode while other goroutines share
// the *sql.DB: its statements run on one backend, an advisory lock taken on
// it is released on it, SET, session variables and temporary tables live
// across its statements, and a raw transaction left open on it is rolled
// back when it is closed.
func TestContractODBCConnIsOneSession(t *testing.T) {
	odbcInBothModes(t, contractODBCConnIsOneSession)
}

func contractODBCConnIsOneSession(t *testing.T, db *odbcSubject) {
	s, q := db.s, odbcContract(db.s)
	table := db.table(t, "ocsess", "id int")
	c := timeout(t, hangTimeout)

	// Other users of the *sql.DB, all along.
	stop := make(chan struct{})
	var (
		wg        sync.WaitGroup
		hammerMu  sync.Mutex
		hammerErr error
		hammered  int
	)
	for range 3 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				qc, cancel := context.WithTimeout(c, odbcStepTimeout)
				var id int64
				err := db.QueryRowContext(qc, s.backendID).Scan(&id)
				cancel()
				hammerMu.Lock()
				hammered++
				hammerErr = cmp.Or(hammerErr, err)
				hammerMu.Unlock()
				if err != nil {
					return
				}
			}
		})
	}
	stopHammer := sync.OnceFunc(func() {
		close(stop)
		_ = odbcStep(t, c, "stopping the other users", func(context.Context) error { wg.Wait(); return nil })
	})
	t.Cleanup(stopHammer)

	conn, err := db.Conn(c)
	require.NoError(t, err)
	defer conn.Close()
	connID := func() int64 {
		t.Helper()
		var id int64
		require.NoError(t, odbcScan(t, c, conn, &id, s.backendID))
		return id
	}
	pid := connID()
	for range 5 {
		if !assert.Equal(t, pid, connID(), "a statement of the *sql.Conn ran on another session") {
			break
		}
	}

	lock := unique("lk")
	require.NoError(t, odbcExec(t, c, conn, q.lock, lock)) // pg_advisory_lock, GET_LOCK
	assert.False(t, odbcLockFree(t, s, lock), "the lock is free right after the *sql.Conn took it")
	assert.Equal(t, pid, connID())
	var ok bool
	require.NoError(t, odbcScan(t, c, conn, &ok, q.unlock, lock))
	assert.True(t, ok, "the *sql.Conn could not release its own lock")
	assert.True(t, odbcLockFree(t, s, lock), "the lock is still held after the release")

	require.NoError(t, odbcExec(t, c, conn, q.setSetting))
	var v string
	require.NoError(t, odbcScan(t, c, conn, &v, q.getSetting))
	assert.Equal(t, q.settingVal, v, "SET on the *sql.Conn not seen by its next statement")
	require.NoError(t, odbcExec(t, c, conn, s.setVar))
	require.NoError(t, odbcScan(t, c, conn, &v, s.getVar))
	assert.Equal(t, "1", v, "the session variable not seen by the next statement")
	assert.Equal(t, pid, connID())

	temp := unique("tmp")
	require.NoError(t, odbcExec(t, c, conn, "CREATE TEMPORARY TABLE "+temp+" (id int)"))
	require.NoError(t, odbcExec(t, c, conn, "INSERT INTO "+temp+" VALUES (1)"), "the temporary table is gone on the next statement")

	require.NoError(t, odbcExec(t, c, conn, "BEGIN"))
	require.NoError(t, odbcExec(t, c, conn, "INSERT INTO "+table+" VALUES (1)"))
	assert.Equal(t, pid, connID())
	assert.Zero(t, db.count(t, table), "the raw transaction's row is visible before COMMIT")
	require.NoError(t, odbcStep(t, c, "Conn.Close", func(context.Context) error { return conn.Close() }))

	// Other users go on; the row never shows up.
	for range 10 {
		require.NoError(t, odbcExec(t, c, db, "SELECT 1"))
	}
	stopHammer()
	hammerMu.Lock()
	require.NoError(t, hammerErr, "another user of the *sql.DB failed")
	t.Logf("%d statements of other users meanwhile", hammered)
	hammerMu.Unlock()
	assert.Zero(t, db.count(t, table), "closing the *sql.Conn committed its raw transaction")
	db.waitNoOpenTxs(t)
	assert.True(t, odbcLockFree(t, s, lock), "the lock is held after the *sql.Conn was closed")
}

// TestContractODBCNoDirtyConn (contract 3): with one server connection, so
// that every statement reuses it, session state set in a transaction-mode
// task that then ends or by a db.Exec outside any task, and a raw BEGIN
// left open by a db.Exec, never reach the next user.
func TestContractODBCNoDirtyConn(t *testing.T) {
	t.Parallel()
	forEachODBCServer(t, func(t *testing.T, s odbcServer) {
		t.Parallel()
		contractODBCNoDirtyConn(t, openODBCSubject(t, s, pooldriver.TransactionMode, 1))
	})
}

func contractODBCNoDirtyConn(t *testing.T, db *odbcSubject) {
	table := db.table(t, "ocdirty", "id int")
	c := timeout(t, hangTimeout)
	probes := odbcDirtyingStatements(db.s)
	defaults := make([]string, len(probes))
	for i, p := range probes {
		require.NoError(t, odbcScan(t, c, db, &defaults[i], p.get), p.get)
	}
	othersSeeDefaults := func(t *testing.T) {
		t.Helper()
		for i, p := range probes {
			for range 20 {
				var v string
				err := odbcScan(t, c, db, &v, p.get)
				if !assert.NoError(t, err, "another user's %s after %q", p.get, p.set) ||
					!assert.Equal(t, defaults[i], v, "another user sees the session state of %q", p.set) {
					break
				}
			}
		}
	}

	t.Run("transaction-mode task", func(t *testing.T) {
		task, end := pooldriver.WithTask(c, pooldriver.TransactionMode)
		defer end()
		for _, p := range probes {
			require.NoError(t, odbcExec(t, task, db, p.set), p.set)
		}
		end()
		othersSeeDefaults(t)
	})
	t.Run("outside a task", func(t *testing.T) {
		for _, p := range probes {
			require.NoError(t, odbcExec(t, c, db, p.set), p.set)
			othersSeeDefaults(t)
		}
	})
	t.Run("raw BEGIN outside a task", func(t *testing.T) {
		require.NoError(t, odbcExec(t, c, db, "BEGIN"))
		for i := range 5 {
			require.NoError(t, odbcExec(t, c, db, "INSERT INTO "+table+" VALUES (?)", i))
		}
		assert.EqualValues(t, 5, db.count(t, table), "other users' inserts ran inside the open transaction")
		db.waitNoOpenTxs(t)
	})
	t.Logf("stats: %+v", db.c.Stats())
}

// TestContractODBCKilledRawTx (contract 4): a raw transaction whose server
// session is killed between INSERT and COMMIT: every later statement of
// its task (in either mode) or *sql.Conn fails with ErrConnLost until it
// ends, and nothing is committed.
func TestContractODBCKilledRawTx(t *testing.T) {
	t.Parallel()
	forEachODBCServer(t, func(t *testing.T, s odbcServer) {
		t.Parallel()
		for _, way := range []string{"transaction", "session", "Conn"} {
			t.Run(way, func(t *testing.T) {
				t.Parallel()
				mode := pooldriver.TransactionMode
				if way == "session" {
					mode = pooldriver.SessionMode
				}
				contractODBCKilledRawTx(t, openODBCSubject(t, s, mode, 10), way == "Conn")
			})
		}
	})
}

func contractODBCKilledRawTx(t *testing.T, db *odbcSubject, useConn bool) {
	s := db.s
	table := db.table(t, "ockill", "id int")
	insert := "INSERT INTO " + table + " VALUES (?)"
	c := timeout(t, hangTimeout)
	task, end := pooldriver.WithTask(c, db.mode)
	defer end()
	var r runner = db.DB
	if useConn {
		conn, err := db.Conn(c)
		require.NoError(t, err)
		defer conn.Close()
		r, task = conn, c // outside the task
		end = func() { _ = odbcStep(t, c, "Conn.Close", func(context.Context) error { return conn.Close() }) }
	}

	require.NoError(t, odbcExec(t, task, r, "BEGIN"))
	require.NoError(t, odbcExec(t, task, r, insert, 1))
	var pid int64
	require.NoError(t, odbcScan(t, task, r, &pid, s.backendID))
	db.tn.kill(t, pid)
	odbcWaitFor(t, "the session gone", func() bool { return !contains(db.tn.backends(t), pid) })

	checkODBCLost(t, odbcExec(t, task, r, insert, 2), "INSERT after the kill")
	var one int
	checkODBCLost(t, odbcScan(t, task, r, &one, "SELECT 1"), "SELECT after the kill")
	checkODBCLost(t, odbcExec(t, task, r, "COMMIT"), "COMMIT after the kill")
	checkODBCLost(t, odbcExec(t, task, r, insert, 3), "INSERT after the failed COMMIT")
	end()
	assert.Zero(t, db.count(t, table), "rows of the killed transaction")
	db.waitNoOpenTxs(t)

	// The pool recovers.
	for range 3 {
		require.NoError(t, odbcExec(t, c, db, "SELECT 1"))
	}
	assert.Zero(t, db.count(t, table))
}

// TestContractODBCNoHang (contract 5): a raw transaction reading rows runs
// a statement in the middle of them on the same session: the statement
// returns within 2 s, an error being fine, instead of waiting for rows
// only its own caller can close. Three ways in: a transaction-mode task, a
// *sql.Conn and a *sql.Tx.
func TestContractODBCNoHang(t *testing.T) {
	t.Parallel()
	forEachODBCServer(t, func(t *testing.T, s odbcServer) {
		t.Parallel()
		for _, way := range []string{"task", "Conn", "Tx"} {
			t.Run(way, func(t *testing.T) {
				t.Parallel()
				contractODBCNoHang(t, openODBCSubject(t, s, pooldriver.TransactionMode, 10), way)
			})
		}
	})
}

func contractODBCNoHang(t *testing.T, db *odbcSubject, way string) {
	table := db.table(t, "ochang", "id int")
	c := timeout(t, hangTimeout)
	task, end := pooldriver.WithTask(c, pooldriver.TransactionMode)
	defer end()
	var (
		r      runner
		sc     = task      // the statements' context
		finish = func() {} // ends the *sql.Conn or *sql.Tx
	)
	switch way {
	case "task":
		r = db.DB
		require.NoError(t, odbcExec(t, sc, r, "BEGIN"))
	case "Conn":
		sc = c // outside the task
		conn, err := db.Conn(sc)
		require.NoError(t, err)
		defer conn.Close()
		r, finish = conn, func() { _ = conn.Close() }
		require.NoError(t, odbcExec(t, sc, r, "BEGIN"))
	case "Tx":
		tx, err := db.BeginTx(sc, nil)
		require.NoError(t, err)
		defer tx.Rollback()
		r, finish = tx, func() { _ = tx.Rollback() }
	}
	// The rows live as long as the scenario: not a step's context.
	rows, err := r.QueryContext(sc, "SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3")
	require.NoError(t, err)
	defer rows.Close()

	// The statement runs in a goroutine, so that a hang fails this test
	// rather than the suite.
	type result struct {
		err     error
		elapsed time.Duration
	}
	n := 0
	for rows.Next() {
		n++
		done := make(chan result, 1)
		go func() {
			c, cancel := context.WithTimeout(sc, amidRowsTimeout)
			defer cancel()
			start := time.Now()
			_, err := r.ExecContext(c, "INSERT INTO "+table+" VALUES (1)")
			done <- result{err, time.Since(start)}
		}()
		select {
		case res := <-done:
			t.Logf("statement amid open rows: %v after %v", res.err, res.elapsed)
			require.Less(t, res.elapsed, amidRowsTimeout/2, "the statement waited for the open rows")
		case <-time.After(2 * amidRowsTimeout):
			t.Fatal("the statement amid open rows hung past its context")
		}
	}
	require.NoError(t, rows.Err())
	assert.Equal(t, 3, n, "rows read")
	_ = rows.Close()
	require.NoError(t, odbcStep(t, c, "finishing", func(context.Context) error { finish(); end(); return nil }))
	assert.Zero(t, db.count(t, table), "rows of a transaction never committed")
	db.waitNoOpenTxs(t)
}
