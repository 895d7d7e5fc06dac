package integration

import (
	"cmp"
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pooldriver/pooldriver"
)

// The contract tests (DESIGN.md, "The contract: database/sql's, kept") run
// one scenario through the server's own driver and through pooldriver and
// assert the same outcome: code that is correct with the plain driver is
// correct under pooldriver. Where the plain driver itself breaks a promise
// of the contract (it hands a dirty session on), the scenario runs on the
// pooldriver flavours only and says so.

// flavour is one way of reaching a server through database/sql.
type flavour string

const (
	// plainFlavour is the server's own driver: pgx stdlib or
	// go-sql-driver/mysql, database/sql's pool only.
	plainFlavour flavour = "plain"
	// poolFlavour is pooldriver.Open(dsn).
	poolFlavour flavour = "pooldriver"
	// wrapFlavour is pooldriver.Wrap around the plain driver's connector.
	wrapFlavour flavour = "wrap"
)

var (
	allFlavours    = []flavour{plainFlavour, poolFlavour, wrapFlavour}
	pooledFlavours = []flavour{poolFlavour, wrapFlavour}
)

// dbOpts configures a subject's *sql.DB.
type dbOpts struct {
	maxConns int             // server connections at most; 10 when 0
	minConns int             // pooldriver flavours: pool_min_conns
	maxIdle  int             // plain: SetMaxIdleConns, when > 0
	mode     pooldriver.Mode // pooldriver flavours: pool_mode
}

// subject is the *sql.DB of one flavour that a scenario runs against. Its
// server connections belong to a tenant of their own, so that they can be
// counted and killed.
type subject struct {
	*sql.DB
	flavour flavour
	mode    pooldriver.Mode
	tn      *tenant
	close   func() // closes the *sql.DB, once; see closeAndCheck
}

// pooled reports whether pooldriver is between the *sql.DB and the server.
func (sub *subject) pooled() bool { return sub.flavour != plainFlavour }

// forEachFlavour runs scenario once per flavour, as parallel subtests named
// after it, each with a *sql.DB of its own.
func forEachFlavour(t *testing.T, s server, flavours []flavour, o dbOpts, scenario func(t *testing.T, s server, db *subject)) {
	t.Helper()
	for _, f := range flavours {
		t.Run(string(f), func(t *testing.T) {
			t.Parallel()
			scenario(t, s, openSubject(t, s, f, o))
		})
	}
}

// openSubject opens the flavour's *sql.DB, closed when the test ends; then
// the server must see none of its connections left.
func openSubject(t *testing.T, s server, f flavour, o dbOpts) *subject {
	t.Helper()
	tn := newTenant(t, s)
	n := cmp.Or(o.maxConns, 10)
	var db *sql.DB
	switch f {
	case plainFlavour:
		var err error
		if s.name == "postgres" {
			db, err = sql.Open("pgx", tn.base)
		} else {
			db, err = sql.Open("mysql", strings.TrimPrefix(tn.base, "mysql://"))
		}
		require.NoError(t, err)
		db.SetMaxOpenConns(n)
		if o.maxIdle > 0 {
			db.SetMaxIdleConns(o.maxIdle)
		}
	case poolFlavour:
		var err error
		db, err = pooldriver.Open(tn.dsn(
			fmt.Sprintf("pool_max_conns=%d", n),
			fmt.Sprintf("pool_min_conns=%d", o.minConns),
			"pool_mode="+o.mode.String()))
		require.NoError(t, err)
	case wrapFlavour:
		c := pooldriver.Wrap(plainConnector(t, s, tn.base),
			pooldriver.WithMaxConns(n), pooldriver.WithMinConns(o.minConns), pooldriver.WithMode(o.mode))
		require.NoError(t, c.Err())
		db = sql.OpenDB(c)
		db.SetMaxIdleConns(n) // as pooldriver.Open does
	default:
		t.Fatalf("unknown flavour %q", f)
	}
	sub := &subject{DB: db, flavour: f, mode: o.mode, tn: tn}
	sub.close = sync.OnceFunc(func() { sub.closeAndCheck(t) })
	t.Cleanup(sub.close)
	return sub
}

// closeAndCheck closes the *sql.DB; then the server must see none of its
// connections left.
func (sub *subject) closeAndCheck(t *testing.T) {
	closeAndDrain(t, sub.DB, sub.tn.backends, sub.tn.kill)
}

// closeAndDrain closes db, then waits until the server lists none of its
// sessions (backends). Any still there after waitLimit are an error, and killed,
// so that they cannot hold locks that would block the cleanup's DROP TABLE.
func closeAndDrain(t *testing.T, db *sql.DB, backends func(*testing.T) []int64, kill func(*testing.T, int64)) {
	_ = db.Close()
	deadline := time.Now().Add(waitLimit)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		ids := backends(t)
		if len(ids) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("%d server connections left open after Close", len(ids))
			for _, id := range ids {
				kill(t, id)
			}
			return
		}
		<-tick.C
	}
}

// table creates a table that is dropped when the test ends, after the
// subject's *sql.DB is closed (a session it left in a transaction would
// block the DROP).
func (sub *subject) table(t *testing.T, s server, prefix, columns string) string {
	t.Helper()
	name := s.table(t, prefix, columns)
	t.Cleanup(sub.close)
	return name
}

// plainConnector returns the plain driver's own connector for a pooldriver
// DSN.
func plainConnector(t *testing.T, s server, dsn string) driver.Connector {
	t.Helper()
	if s.name == "postgres" {
		cfg, err := pgx.ParseConfig(dsn)
		require.NoError(t, err)
		return stdlib.GetConnector(*cfg)
	}
	cfg, err := mysql.ParseDSN(strings.TrimPrefix(dsn, "mysql://"))
	require.NoError(t, err)
	c, err := mysql.NewConnector(cfg)
	require.NoError(t, err)
	return c
}

// runner is what the statements of a task run on.
type runner interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// startTask starts a task in mode: under pooldriver the *sql.DB with a task
// context; under the plain driver its equivalent, a *sql.Conn, on which the
// context has no effect. end ends the task or closes the conn.
func (sub *subject) startTask(c context.Context, mode pooldriver.Mode) (tc context.Context, r runner, end func(), err error) {
	if !sub.pooled() {
		conn, err := sub.Conn(c)
		if err != nil {
			return nil, nil, nil, err
		}
		return c, conn, func() { _ = conn.Close() }, nil
	}
	tc, end = pooldriver.WithTask(c, mode)
	return tc, sub.DB, end, nil
}

// waitNoOpenTxs waits until none of the subject's server sessions holds a
// transaction open.
func (sub *subject) waitNoOpenTxs(t *testing.T) {
	t.Helper()
	waitFor(t, "no transaction open on the server", func() bool { return sub.tn.openTxs(t) == 0 })
}

// timeout returns a context for one scenario step, cancelled when the test
// ends.
func timeout(t *testing.T, d time.Duration) context.Context {
	c, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return c
}

var bothModes = []pooldriver.Mode{pooldriver.TransactionMode, pooldriver.SessionMode}

// TestContractTxsOfOneTask (contract 1): two *sql.Tx begun at once with one
// task's context are two transactions on two server sessions; rolling one
// back does not touch the other, whose Commit returning nil means its row
// is there. In session mode pooldriver may refuse the second with
// ErrSessionBusy (DESIGN.md, "Two kinds of connection"), and then commits
// nothing it should not.
func TestContractTxsOfOneTask(t *testing.T) {
	inBothModes(t, contractTxsOfOneTask)
}

// inBothModes runs scenario on every server, in both pool modes, through
// every flavour, all in parallel.
func inBothModes(t *testing.T, scenario func(t *testing.T, s server, db *subject)) {
	t.Parallel()
	forEachServer(t, func(t *testing.T, s server) {
		t.Parallel()
		for _, mode := range bothModes {
			t.Run(mode.String(), func(t *testing.T) {
				t.Parallel()
				forEachFlavour(t, s, allFlavours, dbOpts{mode: mode}, scenario)
			})
		}
	})
}

func contractTxsOfOneTask(t *testing.T, s server, db *subject) {
	table := db.table(t, s, "ctx2", "id int")
	insert := "INSERT INTO " + table + " VALUES (" + s.placeholder(1) + ")"
	task, end := pooldriver.WithTask(timeout(t, hangTimeout), db.mode)
	defer end()

	var (
		txs  [2]*sql.Tx
		errs [2]error
		wg   sync.WaitGroup
	)
	for i := range txs {
		wg.Go(func() { txs[i], errs[i] = db.BeginTx(task, nil) })
	}
	wg.Wait()
	var live []*sql.Tx // in begin order: the first rolls back, the last commits
	for i, err := range errs {
		if err != nil && db.pooled() && db.mode == pooldriver.SessionMode && errors.Is(err, pooldriver.ErrSessionBusy) {
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
		_, err := tx.ExecContext(task, insert, i)
		require.NoError(t, err)
		require.NoError(t, tx.QueryRowContext(task, s.backendID).Scan(&ids[i]))
	}
	if len(live) == 2 {
		assert.NotEqual(t, ids[0], ids[1], "two open transactions share a server session")
		require.NoError(t, live[0].Rollback())
	}
	last := len(live) - 1
	require.NoError(t, live[last].Commit())

	assert.EqualValues(t, 1, s.adminInt(t, "SELECT count(*) FROM "+table+" WHERE id = "+fmt.Sprint(last)),
		"Commit returned nil but the row is missing")
	if last == 1 {
		assert.Zero(t, s.adminInt(t, "SELECT count(*) FROM "+table+" WHERE id = 0"), "the rolled back row is there")
	}
	end()
	assert.EqualValues(t, 1, s.adminInt(t, "SELECT count(*) FROM "+table), "rows after the task ended")
	db.waitNoOpenTxs(t)
}

// TestContractConnIsOneSession (contract 2): a *sql.Conn outside a task is
// one server session in either mode while other goroutines share the
// *sql.DB: its statements run on one backend, an advisory lock taken on it
// is released on it, SET and temporary tables live across its statements,
// and a raw transaction left open on it is rolled back when it is closed.
func TestContractConnIsOneSession(t *testing.T) {
	inBothModes(t, contractConnIsOneSession)
}

func contractConnIsOneSession(t *testing.T, s server, db *subject) {
	table := db.table(t, s, "csess", "id int")
	c := timeout(t, hangTimeout)

	// Other users of the *sql.DB, all along.
	stop := make(chan struct{})
	var (
		wg        sync.WaitGroup
		hammerMu  sync.Mutex
		hammerErr error
	)
	for range 3 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				var id int64
				if err := db.QueryRowContext(c, s.backendID).Scan(&id); err != nil {
					hammerMu.Lock()
					hammerErr = cmp.Or(hammerErr, err)
					hammerMu.Unlock()
					return
				}
			}
		})
	}
	stopHammer := sync.OnceFunc(func() { close(stop); wg.Wait() })
	t.Cleanup(stopHammer)

	conn, err := db.Conn(c)
	require.NoError(t, err)
	defer conn.Close()
	connID := func() int64 {
		t.Helper()
		var id int64
		require.NoError(t, conn.QueryRowContext(c, s.backendID).Scan(&id))
		return id
	}
	pid := connID()
	for range 5 {
		if !assert.Equal(t, pid, connID(), "a statement of the *sql.Conn ran on another session") {
			break
		}
	}

	lock := unique("lk")
	_, err = conn.ExecContext(c, s.lock, lock) // pg_advisory_lock, GET_LOCK
	require.NoError(t, err)
	assert.False(t, lockFree(t, s, lock), "the lock is free right after the *sql.Conn took it")
	var ok bool
	assert.Equal(t, pid, connID())
	require.NoError(t, conn.QueryRowContext(c, s.unlock, lock).Scan(&ok))
	assert.True(t, ok, "the *sql.Conn could not release its own lock")
	assert.True(t, lockFree(t, s, lock), "the lock is still held after the release")

	_, err = conn.ExecContext(c, s.setSetting)
	require.NoError(t, err)
	var v string
	require.NoError(t, conn.QueryRowContext(c, s.getSetting).Scan(&v))
	assert.Equal(t, s.settingVal, v, "SET on the *sql.Conn not seen by its next statement")
	_, err = conn.ExecContext(c, s.setVar)
	require.NoError(t, err)
	require.NoError(t, conn.QueryRowContext(c, s.getVar).Scan(&v))
	assert.Equal(t, "1", v, "the session variable not seen by the next statement")

	temp := unique("tmp")
	_, err = conn.ExecContext(c, "CREATE TEMPORARY TABLE "+temp+" (id int)")
	require.NoError(t, err)
	_, err = conn.ExecContext(c, "INSERT INTO "+temp+" VALUES (1)")
	require.NoError(t, err, "the temporary table is gone on the next statement")

	_, err = conn.ExecContext(c, "BEGIN")
	require.NoError(t, err)
	_, err = conn.ExecContext(c, "INSERT INTO "+table+" VALUES (1)")
	require.NoError(t, err)
	assert.Equal(t, pid, connID())
	assert.Zero(t, s.adminInt(t, "SELECT count(*) FROM "+table), "the raw transaction's row is visible before COMMIT")
	require.NoError(t, conn.Close())

	// Other users go on; the row never shows up.
	for range 10 {
		_, err := db.ExecContext(c, "SELECT 1")
		require.NoError(t, err)
	}
	stopHammer()
	require.NoError(t, hammerErr, "another user of the *sql.DB failed")
	assert.Zero(t, s.adminInt(t, "SELECT count(*) FROM "+table), "closing the *sql.Conn committed its raw transaction")
	if db.flavour == plainFlavour && s.name == "mysql" {
		// go-sql-driver/mysql keeps the session, transaction open, in
		// database/sql's idle pool (it has no rollback on reuse); the next
		// user runs inside it. pooldriver must not copy that.
		return
	}
	db.waitNoOpenTxs(t)
}

// lockFree reports, from the admin connection, whether nobody holds the
// advisory lock (leaving it free).
func lockFree(t *testing.T, s server, name string) bool {
	t.Helper()
	q := s.lockIsFree
	if s.name == "postgres" {
		q = "SELECT CASE WHEN pg_try_advisory_lock(hashtext($1)) THEN pg_advisory_unlock(hashtext($1)) ELSE false END"
	}
	var free bool
	require.NoError(t, s.admin(t).QueryRowContext(ctx(t), q, name).Scan(&free), q)
	return free
}

// sessionProbe changes a piece of session state, and reads it back.
type sessionProbe struct{ set, get string }

// dirtyingStatements change session state in ways a next user would notice.
func dirtyingStatements(s server) []sessionProbe {
	if s.name == "postgres" {
		return []sessionProbe{{s.setVar, s.getVar}, {"SET statement_timeout = '1ms'", "SHOW statement_timeout"}}
	}
	return []sessionProbe{
		{s.setVar, s.getVar},
		{s.setSetting, s.getSetting},
		// MariaDB's max_execution_time.
		{"SET SESSION max_statement_time = 0.001", "SELECT @@SESSION.max_statement_time"},
	}
}

// TestContractNoDirtyConn (contract 3): with one server connection, so that
// every statement reuses it, session state set in a transaction-mode task
// or by a plain db.Exec, and a raw BEGIN left open by a db.Exec, never
// reach the next user. The plain drivers break this (a SET stays on the
// session for the next user; go-sql-driver/mysql even runs the next user
// inside the open transaction), so it runs on the pooldriver flavours
// only.
func TestContractNoDirtyConn(t *testing.T) {
	t.Parallel()
	forEachServer(t, func(t *testing.T, s server) {
		t.Parallel()
		forEachFlavour(t, s, pooledFlavours, dbOpts{maxConns: 1}, contractNoDirtyConn)
	})
}

// TestContractHiddenSetting (contract 3, PostgreSQL): a setting changed
// where the statement's text does not show it (a function calling
// set_config), outside any transaction and inside a *sql.Tx, with one
// server connection. The plain driver hands the changed TimeZone to the next
// user (checked: the scenario bites); pooldriver sees the server's
// ParameterStatus (from a DSN: as it arrives; through Wrap: by looking the
// settings up) and resets the session first.
func TestContractHiddenSetting(t *testing.T) {
	t.Parallel()
	forServer(t, "postgres", func(t *testing.T, s server) {
		fn := unique("pd_set_tz")
		s.adminExec(t, "CREATE FUNCTION "+fn+"() RETURNS text LANGUAGE sql AS $$ SELECT set_config('TimeZone', 'Pacific/Chatham', false) $$")
		t.Cleanup(func() {
			if _, err := s.adminDB().ExecContext(context.Background(), "DROP FUNCTION "+fn+"()"); err != nil {
				t.Errorf("dropping %s: %v", fn, err)
			}
		})
		forEachFlavour(t, s, allFlavours, dbOpts{maxConns: 1}, func(t *testing.T, s server, db *subject) {
			c := timeout(t, hangTimeout)
			var def string
			require.NoError(t, db.QueryRowContext(c, "SHOW TimeZone").Scan(&def))
			require.NotEqual(t, "Pacific/Chatham", def)
			call := "SELECT " + fn + "()"
			for _, way := range []struct {
				name string
				run  func() error
			}{
				{"statement", func() error { _, err := db.ExecContext(c, call); return err }},
				{"in a *sql.Tx", func() error {
					tx, err := db.BeginTx(c, nil)
					if err != nil {
						return err
					}
					if _, err := tx.ExecContext(c, call); err != nil {
						_ = tx.Rollback()
						return err
					}
					return tx.Commit()
				}},
			} {
				require.NoError(t, way.run(), way.name)
				var got string
				require.NoError(t, db.QueryRowContext(c, "SHOW TimeZone").Scan(&got))
				if db.pooled() {
					assert.Equal(t, def, got, "%s: the next user sees the TimeZone a function set", way.name)
				} else {
					assert.Equal(t, "Pacific/Chatham", got, "%s: the plain driver did not keep the setting: the scenario does not bite", way.name)
					_, err := db.ExecContext(c, "RESET TimeZone")
					require.NoError(t, err)
				}
			}
		})
	})
}

func contractNoDirtyConn(t *testing.T, s server, db *subject) {
	table := db.table(t, s, "cdirty", "id int")
	c := timeout(t, hangTimeout)
	probes := dirtyingStatements(s)
	defaults := make([]string, len(probes))
	for i, p := range probes {
		require.NoError(t, db.QueryRowContext(c, p.get).Scan(&defaults[i]), p.get)
	}
	othersSeeDefaults := func(t *testing.T) {
		t.Helper()
		for i, p := range probes {
			for range 20 {
				var v string
				err := db.QueryRowContext(c, p.get).Scan(&v)
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
			_, err := db.ExecContext(task, p.set)
			require.NoError(t, err, p.set)
		}
		end()
		othersSeeDefaults(t)
	})
	t.Run("outside a task", func(t *testing.T) {
		for _, p := range probes {
			_, err := db.ExecContext(c, p.set)
			require.NoError(t, err, p.set)
			othersSeeDefaults(t)
		}
	})
	t.Run("raw BEGIN outside a task", func(t *testing.T) {
		_, err := db.ExecContext(c, "BEGIN")
		require.NoError(t, err)
		for i := range 5 {
			_, err := db.ExecContext(c, "INSERT INTO "+table+" VALUES ("+s.placeholder(1)+")", i)
			require.NoError(t, err)
		}
		assert.EqualValues(t, 5, s.adminInt(t, "SELECT count(*) FROM "+table),
			"other users' inserts ran inside the open transaction")
		db.waitNoOpenTxs(t)
	})
}

// TestContractNoHang (contract 5): a raw transaction reading rows runs a
// statement in the middle of them on the same session: the statement
// returns at once, an error being fine, instead of waiting for rows only
// its own caller can close. Three ways in: a transaction-mode task, a
// *sql.Conn and a *sql.Tx. A fourth, ConnQuery, has no transaction: the
// *sql.Conn's first operation is the query (whose rows pooldriver runs
// without the connection's lock until the Conn's next operation), and the
// statement amid them carries a task's context; it must neither hang nor
// run on another connection, where it would commit. The plain driver's equivalent of the first two
// is a *sql.Conn, where database/sql itself deadlocks: the driver reports
// the busy session as driver.ErrBadConn and the Conn, closing itself, waits
// for the rows it holds (the same self-deadlock as golang/go#81606). So
// those two run on the pooldriver flavours only, and the plain driver
// shows the pattern through a *sql.Tx.
func TestContractNoHang(t *testing.T) {
	t.Parallel()
	forEachServer(t, func(t *testing.T, s server) {
		t.Parallel()
		for _, way := range []struct {
			name     string
			flavours []flavour
		}{{"task", pooledFlavours}, {"Conn", pooledFlavours}, {"ConnQuery", pooledFlavours}, {"Tx", allFlavours}} {
			t.Run(way.name, func(t *testing.T) {
				t.Parallel()
				forEachFlavour(t, s, way.flavours, dbOpts{}, func(t *testing.T, s server, db *subject) {
					contractNoHang(t, s, db, way.name)
				})
			})
		}
	})
}

// amidRowsTimeout is the context of contractNoHang's statement amid open
// rows. One that waits for the rows to be closed returns only when it
// ends; one that does not returns in a few round trips, which on a loaded
// machine can be a second or more: half of it tells the two apart.
const amidRowsTimeout = 20 * time.Second

func contractNoHang(t *testing.T, s server, db *subject, way string) {
	table := db.table(t, s, "chang", "id int")
	c := timeout(t, hangTimeout)
	task, end := pooldriver.WithTask(c, pooldriver.TransactionMode)
	defer end()
	var (
		r      runner
		sc     = task          // the statements' context
		mid    context.Context // the statement's amid the rows; sc if nil
		finish = func() {}     // ends the *sql.Conn or *sql.Tx
	)
	switch way {
	case "task":
		r = db.DB
		_, err := r.ExecContext(sc, "BEGIN")
		require.NoError(t, err)
	case "Conn":
		sc = c // outside the task
		conn, err := db.Conn(sc)
		require.NoError(t, err)
		defer conn.Close()
		r, finish = conn, func() { _ = conn.Close() }
		_, err = r.ExecContext(sc, "BEGIN")
		require.NoError(t, err)
	case "ConnQuery":
		sc, mid = c, task
		conn, err := db.Conn(sc)
		require.NoError(t, err)
		defer conn.Close()
		r, finish = conn, func() { _ = conn.Close() }
	case "Tx":
		tx, err := db.BeginTx(sc, nil)
		require.NoError(t, err)
		defer tx.Rollback()
		r, finish = tx, func() { _ = tx.Rollback() }
	}
	rows, err := r.QueryContext(sc, "SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3")
	require.NoError(t, err)
	defer rows.Close()

	// The statement runs in a goroutine, so that a hang fails this test
	// rather than the suite.
	type result struct {
		err     error
		elapsed time.Duration
	}
	for rows.Next() {
		done := make(chan result, 1)
		go func() {
			c, cancel := context.WithTimeout(cmp.Or(mid, sc), amidRowsTimeout)
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
	_ = rows.Close()
	finish()
	end()
	assert.Zero(t, s.adminInt(t, "SELECT count(*) FROM "+table), "rows of a transaction never committed")
	db.waitNoOpenTxs(t)
}

// TestContractStaleStatements (PostgreSQL): statements survive a change
// of the table's columns as with pgx: one prepared after the change works
// at once, also after one prepared before it failed; an unprepared query
// (pgx's statement cache) fails at most once. A *sql.Stmt prepared before
// the change may keep failing: pgx's does, with "cached plan must not
// change result type", until it is closed.
func TestContractStaleStatements(t *testing.T) {
	t.Parallel()
	forServer(t, "postgres", func(t *testing.T, s server) {
		t.Parallel()
		forEachFlavour(t, s, allFlavours, dbOpts{}, contractStaleStatements)
	})
}

func contractStaleStatements(t *testing.T, s server, db *subject) {
	table := db.table(t, s, "cstale", "a int")
	s.adminExec(t, "INSERT INTO "+table+" VALUES (1)")
	c := timeout(t, hangTimeout)
	query := "SELECT * FROM " + table
	columns := func(q interface {
		QueryContext(context.Context, ...any) (*sql.Rows, error)
	}) (int, error) {
		rows, err := q.QueryContext(c)
		if err != nil {
			return 0, err
		}
		defer rows.Close()
		cols, err := rows.Columns()
		if err != nil {
			return 0, err
		}
		for rows.Next() {
		}
		return len(cols), rows.Err()
	}
	alter := func(column string) { s.adminExec(t, "ALTER TABLE "+table+" ADD COLUMN "+column+" int") }

	t.Run("prepared again after Close", func(t *testing.T) {
		stmt, err := db.PrepareContext(c, query)
		require.NoError(t, err)
		n, err := columns(stmt)
		require.NoError(t, err)
		require.NoError(t, stmt.Close())
		alter("b")

		stmt, err = db.PrepareContext(c, query)
		require.NoError(t, err)
		defer stmt.Close()
		got, err := columns(stmt)
		require.NoError(t, err, "a statement prepared after the ALTER")
		assert.Equal(t, n+1, got)
	})
	t.Run("kept open across the change", func(t *testing.T) {
		stmt, err := db.PrepareContext(c, query)
		require.NoError(t, err)
		n, err := columns(stmt)
		require.NoError(t, err)
		alter("c")
		for i := range 2 {
			if _, err := columns(stmt); err != nil {
				t.Logf("query %d of the statement prepared before the ALTER: %v", i, err)
			}
		}
		require.NoError(t, stmt.Close())

		stmt, err = db.PrepareContext(c, query)
		require.NoError(t, err)
		defer stmt.Close()
		got, err := columns(stmt)
		require.NoError(t, err, "a statement prepared after the ALTER")
		assert.Equal(t, n+1, got)
	})
	t.Run("unprepared", func(t *testing.T) {
		q := unprepared{db.DB, query}
		n, err := columns(q)
		require.NoError(t, err)
		alter("d")
		got, err := columns(q)
		if err != nil {
			t.Logf("first query after the ALTER: %v", err)
			got, err = columns(q)
		}
		require.NoError(t, err, "the second query after the ALTER")
		assert.Equal(t, n+1, got)
	})
}

// unprepared runs a query with db.QueryContext.
type unprepared struct {
	db    *sql.DB
	query string
}

func (u unprepared) QueryContext(c context.Context, args ...any) (*sql.Rows, error) {
	return u.db.QueryContext(c, u.query, args...)
}

// TestContractKilledWarmConns (contract 4's other side: an error only when
// something was lost): idle connections opened ahead of need and killed by
// the server are not handed out; the next statements succeed.
func TestContractKilledWarmConns(t *testing.T) {
	t.Parallel()
	forEachServer(t, func(t *testing.T, s server) {
		t.Parallel()
		forEachFlavour(t, s, allFlavours, dbOpts{minConns: 3, maxIdle: 3}, contractKilledWarmConns)
	})
}

func contractKilledWarmConns(t *testing.T, s server, db *subject) {
	const warm = 3
	if db.pooled() {
		db.tn.waitConns(t, warm) // pool_min_conns
	} else {
		warmUp(t, db.DB, warm)
		db.tn.waitConns(t, warm)
	}
	killed := db.tn.backends(t)
	sockets := db.tn.sockets(t)
	for _, id := range killed {
		db.tn.kill(t, id)
	}
	// Gone from the server: not "no connection left", since a pool may
	// replace a killed one at once (pool_min_conns) when it next tends an
	// idle connection, which its catalog loop does within a second of a
	// reading falling due, and the suite's DDL keeps readings due.
	waitForSaying(t, "the killed backends gone", func() bool {
		return !slices.ContainsFunc(db.tn.backends(t), func(id int64) bool { return slices.Contains(killed, id) })
	}, func() string { return fmt.Sprintf("backends %v, killed %v", db.tn.backends(t), killed) })
	// The server is done with them; the client's kernel may not be yet:
	// a backend's last message (its FATAL, then the close) goes over
	// loopback, whose delivery a loaded machine defers to a kernel thread,
	// so the backend can leave pg_stat_activity before its goodbye is in
	// the client's socket, where the idle check looks (seen once in CI,
	// with the suite's parallel tests beside it). Connections killed that
	// recently are indistinguishable from live ones for any client that
	// does not ping (pgx's stdlib pings only after 1s idle); wait until
	// the kernel has the close.
	sockets.waitClosed(t)

	c := timeout(t, hangTimeout)
	for i := range 2 * warm {
		var one int
		require.NoError(t, db.QueryRowContext(c, "SELECT 1").Scan(&one), "statement %d after the kill", i)
	}
	var wg sync.WaitGroup
	errs := make([]error, warm)
	for i := range warm {
		wg.Go(func() { _, errs[i] = db.ExecContext(c, "SELECT 1") })
	}
	wg.Wait()
	for _, err := range errs {
		assert.NoError(t, err, "a killed connection surfaced")
	}
	for _, id := range db.tn.backends(t) {
		assert.NotContains(t, killed, id)
	}
}
