//go:build odbc

package integration

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pooldriver/pooldriver"
	"github.com/pooldriver/pooldriver/dialects/odbc/connstr"
)

// The shared behaviours of pooldriver through the ODBC dialect.

// TestODBCLazyAndBounded: nothing is opened before the first statement;
// 50 goroutines × 10 queries with pool_max_conns=3 never have more than 3
// server connections, and after warm-up none is opened or closed.
func TestODBCLazyAndBounded(t *testing.T) {
	t.Parallel()
	forEachODBCServer(t, func(t *testing.T, s odbcServer) {
		t.Parallel()
		tn := newODBCTenant(t, s)
		const maxConns = 3
		db, c := tn.open(t, fmt.Sprintf("pool_max_conns=%d", maxConns))
		sc, err := db.Conn(ctx(t))
		require.NoError(t, err)
		assert.Zero(t, tn.conns(t), "db.Conn opened a server connection")
		require.NoError(t, sc.Close())
		require.NoError(t, db.PingContext(ctx(t)))
		assert.Equal(t, 1, tn.conns(t))

		var txs []*sql.Tx
		for range maxConns {
			tx, err := db.BeginTx(ctx(t), nil)
			require.NoError(t, err)
			txs = append(txs, tx)
		}
		for _, tx := range txs {
			require.NoError(t, tx.Rollback())
		}
		warm := tn.backends(t)
		require.Len(t, warm, maxConns)

		var maxServer atomic.Int64
		stop := make(chan struct{})
		var sampler sync.WaitGroup
		sampler.Go(func() {
			for {
				if n := int64(tn.conns(t)); n > maxServer.Load() {
					maxServer.Store(n)
				}
				select {
				case <-stop:
					return
				case <-time.After(2 * time.Millisecond):
				}
			}
		})
		var wg sync.WaitGroup
		var failed atomic.Int64
		var first atomic.Value
		for g := range 50 {
			wg.Go(func() {
				for i := range 10 {
					var n int64
					err := db.QueryRowContext(context.Background(), "SELECT ? + 1", int64(g*100+i)).Scan(&n)
					if err == nil && n != int64(g*100+i)+1 {
						err = fmt.Errorf("got %d for %d", n, g*100+i)
					}
					if err != nil {
						failed.Add(1)
						first.CompareAndSwap(nil, err)
					}
				}
			})
		}
		wg.Wait()
		close(stop)
		sampler.Wait()
		require.Zero(t, failed.Load(), "first failure: %v", first.Load())
		assert.LessOrEqual(t, maxServer.Load(), int64(maxConns))
		st := c.Stats()
		assert.EqualValues(t, maxConns, st.Created)
		assert.Zero(t, st.Destroyed)
		assert.Equal(t, warm, tn.backends(t), "server connections replaced")
	})
}

// TestODBCTransactionModePinning: in a task, a raw BEGIN pins the
// connection until COMMIT, across separate db.ExecContext calls; the rows
// are invisible to others until then; afterwards nothing is pinned.
func TestODBCTransactionModePinning(t *testing.T) {
	t.Parallel()
	forEachODBCServer(t, func(t *testing.T, s odbcServer) {
		t.Parallel()
		tn := newODBCTenant(t, s)
		db, c := tn.open(t, "pool_max_conns=3")
		table := s.table(t, "pin", "id int")

		for _, begin := range []string{"BEGIN", "START TRANSACTION", "/* c */ begin"} {
			task, end := pooldriver.WithTask(ctx(t))
			_, err := db.ExecContext(task, begin)
			require.NoError(t, err, begin)
			id := odbcBackendID(t, db, task, s)
			_, err = db.ExecContext(task, "INSERT INTO "+table+" VALUES (?)", 1)
			require.NoError(t, err)
			assert.Equal(t, id, odbcBackendID(t, db, task, s), "the task left its transaction's connection")
			assert.Equal(t, 1, c.Stats().Active, "pinned")
			assert.Zero(t, s.adminInt(t, "SELECT count(*) FROM "+table), "uncommitted row visible")
			_, err = db.ExecContext(task, "COMMIT")
			require.NoError(t, err)
			assert.Zero(t, c.Stats().Active, "still pinned after COMMIT")
			end()
			assert.EqualValues(t, 1, s.adminInt(t, "SELECT count(*) FROM "+table))
			s.adminExec(t, "DELETE FROM "+table)
		}
		assert.Zero(t, c.Stats().AutoRollbacks)

		// Plain statements outside a transaction pin nothing.
		task, end := pooldriver.WithTask(ctx(t))
		defer end()
		_, err := db.ExecContext(task, "INSERT INTO "+table+" VALUES (?)", 2)
		require.NoError(t, err)
		waitFor(t, "the connection to go back to the pool", func() bool { return c.Stats().Active == 0 })
	})
}

// TestODBCBeginTxOptions: isolation levels and read-only transactions are
// honoured, for their transaction only; what cannot be is refused before
// anything runs. The levels are told apart by what the transaction sees
// (READ COMMITTED sees rows committed after its first read) and, on
// MariaDB, by SERIALIZABLE's shared locks; PostgreSQL also names its level.
func TestODBCBeginTxOptions(t *testing.T) {
	t.Parallel()
	forEachODBCServer(t, func(t *testing.T, s odbcServer) {
		t.Parallel()
		tn := newODBCTenant(t, s)
		db, c := tn.open(t, "pool_max_conns=1")
		table := s.table(t, "txopt", "id int")
		s.adminExec(t, "INSERT INTO "+table+" VALUES (0)")

		tx, err := db.BeginTx(ctx(t), &sql.TxOptions{ReadOnly: true})
		require.NoError(t, err)
		_, err = tx.ExecContext(ctx(t), "INSERT INTO "+table+" VALUES (1)")
		assert.Error(t, err, "INSERT in a read-only transaction")
		require.NoError(t, tx.Rollback())

		count := func(tx *sql.Tx) int64 {
			var n int64
			require.NoError(t, tx.QueryRowContext(ctx(t), "SELECT count(*) FROM "+table).Scan(&n))
			return n
		}
		check := func(level sql.IsolationLevel, name string, seesNew, locks bool) {
			t.Helper()
			var opts *sql.TxOptions
			if level != sql.LevelDefault {
				opts = &sql.TxOptions{Isolation: level}
			}
			tx, err := db.BeginTx(ctx(t), opts)
			require.NoError(t, err, name)
			defer tx.Rollback()
			before := count(tx)
			if s.name == "mysql" {
				// SERIALIZABLE's shared locks would make the insert wait.
				assert.Equal(t, locks, odbcRowLocked(t, s, table), "%s: shared locks on what it read", name)
				if locks {
					require.NoError(t, tx.Rollback())
					return
				}
			}
			s.adminExec(t, "INSERT INTO "+table+" VALUES (2)")
			assert.Equal(t, seesNew, count(tx) > before, "%s: sees rows committed since its first read", name)
			if s.name == "postgres" {
				var got string
				require.NoError(t, tx.QueryRowContext(ctx(t), "SHOW transaction_isolation").Scan(&got))
				assert.Equal(t, name, got)
			}
			require.NoError(t, tx.Rollback())
		}
		check(sql.LevelReadCommitted, "read committed", true, false)
		check(sql.LevelRepeatableRead, "repeatable read", false, false)
		check(sql.LevelSerializable, "serializable", false, true)
		// The level was for that transaction only.
		if s.name == "postgres" {
			check(sql.LevelDefault, "read committed", true, false)
		} else {
			check(sql.LevelDefault, "repeatable read", false, false)
		}

		_, err = db.BeginTx(ctx(t), &sql.TxOptions{Isolation: sql.LevelSnapshot})
		require.ErrorContains(t, err, "not supported")
		assert.Zero(t, c.Stats().AutoRollbacks, "a refused BeginTx counted as a raw BEGIN")
		assert.EqualValues(t, 1, c.Stats().Created)
		assert.Zero(t, c.Stats().Destroyed)
		waitFor(t, "the connection to go back to the pool", func() bool { return c.Stats().Active == 0 })
	})
}

// odbcRowLocked reports whether updating table's rows from another session
// waits for a lock (MariaDB).
func odbcRowLocked(t *testing.T, s odbcServer, table string) bool {
	t.Helper()
	conn, err := s.admin(t).Conn(ctx(t))
	require.NoError(t, err)
	defer conn.Close()
	_, err = conn.ExecContext(ctx(t), "SET SESSION innodb_lock_wait_timeout = 1")
	require.NoError(t, err)
	defer func() {
		_, _ = conn.ExecContext(context.Background(), "SET SESSION innodb_lock_wait_timeout = DEFAULT")
	}()
	_, err = conn.ExecContext(ctx(t), "UPDATE "+table+" SET id = id WHERE id = 0")
	if err != nil {
		require.Contains(t, err.Error(), "Lock wait timeout")
		return true
	}
	return false
}

// TestODBCSessionMode: session state survives across calls of a session
// task; at its end the session is reset (PostgreSQL: DISCARD ALL on the
// same connection) or the connection replaced (MariaDB).
func TestODBCSessionMode(t *testing.T) {
	t.Parallel()
	forEachODBCServer(t, func(t *testing.T, s odbcServer) {
		t.Parallel()
		tn := newODBCTenant(t, s)
		extra := "pool_max_conns=1"
		if s.name == "postgres" {
			extra += ";ConnSettings={SET application_name = 'pd_odbc_it'}"
		}
		db, c := tn.open(t, extra)
		temp := unique("tmp")

		task, end := pooldriver.WithTask(ctx(t), pooldriver.SessionMode)
		id := odbcBackendID(t, db, task, s)
		_, err := db.ExecContext(task, s.setVar)
		require.NoError(t, err)
		_, err = db.ExecContext(task, "CREATE TEMPORARY TABLE "+temp+" (a int)")
		require.NoError(t, err)
		var v string
		require.NoError(t, db.QueryRowContext(task, s.getVar).Scan(&v))
		assert.Equal(t, "1", v)
		_, err = db.ExecContext(task, "INSERT INTO "+temp+" VALUES (1)")
		require.NoError(t, err, "temporary table lost between calls")
		assert.Equal(t, id, odbcBackendID(t, db, task, s))
		end()

		require.NoError(t, db.QueryRowContext(ctx(t), s.getVar).Scan(&v))
		assert.Equal(t, "", v, "session variable survived the task")
		_, err = db.ExecContext(ctx(t), "SELECT * FROM "+temp)
		assert.Error(t, err, "temporary table survived the task")
		st := c.Stats()
		if s.name == "postgres" {
			assert.EqualValues(t, 1, st.SessionResets)
		} else {
			// MariaDB Connector/ODBC cannot reset: the connection is
			// replaced, and SessionResets counts only resets done.
			assert.Zero(t, st.SessionResets)
		}
		if s.name == "postgres" {
			assert.Equal(t, id, odbcBackendID(t, db, ctx(t), s), "reset, not replaced")
			assert.Zero(t, st.Destroyed)
			var app, ds string
			require.NoError(t, db.QueryRowContext(ctx(t), "SELECT current_setting('application_name'), current_setting('DateStyle')").Scan(&app, &ds))
			assert.Equal(t, "pd_odbc_it", app, "ConnSettings not restored")
			assert.Equal(t, "ISO, MDY", ds, "psqlODBC's DateStyle not restored")
			var ts time.Time
			require.NoError(t, db.QueryRowContext(ctx(t), "SELECT CAST('2024-05-06 07:08:09' AS timestamp)").Scan(&ts))
			assert.Equal(t, 2024, ts.Year())
		} else {
			assert.NotEqual(t, id, odbcBackendID(t, db, ctx(t), s), "MariaDB connections are replaced")
			assert.EqualValues(t, 1, st.Destroyed)
		}
		tn.waitConns(t, 1)
	})
}

// TestODBCTaskEndRollsBack: a task that ends with a transaction open
// (BeginTx or raw BEGIN) rolls it back, by end() or by its context's
// cancellation.
func TestODBCTaskEndRollsBack(t *testing.T) {
	t.Parallel()
	forEachODBCServer(t, func(t *testing.T, s odbcServer) {
		t.Parallel()
		tn := newODBCTenant(t, s)
		db, c := tn.open(t, "pool_max_conns=2")
		table := s.table(t, "taskend", "id int")
		insert := "INSERT INTO " + table + " VALUES (?)"

		for i, how := range []string{"BeginTx/end", "raw BEGIN/end", "BeginTx/cancel", "raw BEGIN/cancel"} {
			t.Run(how, func(t *testing.T) {
				parent, cancel := context.WithCancel(ctx(t))
				defer cancel()
				task, end := pooldriver.WithTask(parent)
				defer end()
				var tx *sql.Tx
				var err error
				if i%2 == 0 {
					tx, err = db.BeginTx(task, nil)
					require.NoError(t, err)
					_, err = tx.ExecContext(task, insert, i)
				} else {
					_, err = db.ExecContext(task, "BEGIN")
					require.NoError(t, err)
					_, err = db.ExecContext(task, insert, i)
				}
				require.NoError(t, err)
				if i < 2 {
					end()
				} else {
					cancel()
				}
				odbcWaitFor(t, "the task's cleanup", func() bool { return c.Stats().Active == 0 })
				if tx != nil {
					assert.Error(t, tx.Commit(), "commit after the task ended")
				}
				assert.Zero(t, s.adminInt(t, "SELECT count(*) FROM "+table), "the task's row was committed")
				assert.Zero(t, tn.openTxs(t))
				assert.EqualValues(t, i+1, c.Stats().AutoRollbacks)
			})
		}
	})
}

// TestODBCAcquireTimeout: with the only connection held by a task's
// transaction, a statement waits pool_acquire_timeout and fails with
// ErrAcquireTimeout; the caller's shorter deadline wins (TestAcquireTimeout
// says why the timeout is seconds).
func TestODBCAcquireTimeout(t *testing.T) {
	t.Parallel()
	forEachODBCServer(t, func(t *testing.T, s odbcServer) {
		t.Parallel()
		tn := newODBCTenant(t, s)
		const timeout = 2 * time.Second
		db, c := tn.open(t, "pool_max_conns=1;pool_acquire_timeout="+timeout.String())

		task, end := pooldriver.WithTask(ctx(t))
		defer end()
		tx, err := db.BeginTx(task, nil)
		require.NoError(t, err)

		start := time.Now()
		_, err = db.ExecContext(ctx(t), "SELECT 1")
		assert.ErrorIs(t, err, pooldriver.ErrAcquireTimeout)
		assert.GreaterOrEqual(t, time.Since(start), timeout)
		assert.EqualValues(t, 1, c.Stats().AcquireTimeouts)

		short, cancel := context.WithTimeout(ctx(t), 50*time.Millisecond)
		defer cancel()
		start = time.Now()
		_, err = db.ExecContext(short, "SELECT 1")
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.NotErrorIs(t, err, pooldriver.ErrAcquireTimeout, "the caller's shorter deadline did not win")
		assert.Less(t, time.Since(start), timeout)

		require.NoError(t, tx.Commit())
		_, err = db.ExecContext(ctx(t), "SELECT 1")
		require.NoError(t, err)
		assert.Equal(t, 1, tn.conns(t))
	})
}

// TestODBCServerKills: connections killed by the server while idle are
// replaced (once idle long enough to be pinged first, without any statement
// failing); a connection killed under a running statement or a task's
// transaction fails that caller, never retries it silently, and the pool
// recovers.
func TestODBCServerKills(t *testing.T) {
	t.Parallel()
	forEachODBCServer(t, func(t *testing.T, s odbcServer) {
		t.Parallel()
		t.Run("idle", func(t *testing.T) {
			tn := newODBCTenant(t, s)
			const maxConns = 2
			db, c := tn.open(t, fmt.Sprintf("pool_max_conns=%d", maxConns))
			var txs []*sql.Tx
			for range maxConns {
				tx, err := db.BeginTx(ctx(t), nil)
				require.NoError(t, err)
				txs = append(txs, tx)
			}
			for _, tx := range txs {
				require.NoError(t, tx.Commit())
			}
			idleSince := time.Now()
			killed := tn.backends(t)
			for _, id := range killed {
				tn.kill(t, id)
			}
			tn.waitConns(t, 0)
			// pooldriver pings a connection idle for over a second before
			// handing it out; ODBC offers no cheaper look at the socket.
			odbcWaitFor(t, "the connections idle past the ping threshold", func() bool {
				return time.Since(idleSince) > 1100*time.Millisecond
			})
			for range 2 * maxConns {
				_, err := db.ExecContext(ctx(t), "SELECT 1")
				assert.NoError(t, err, "a dead idle connection surfaced")
			}
			assert.GreaterOrEqual(t, c.Stats().Destroyed, int64(1))
			for _, id := range tn.backends(t) {
				assert.NotContains(t, killed, id)
			}
		})

		t.Run("task transaction", func(t *testing.T) {
			tn := newODBCTenant(t, s)
			db, c := tn.open(t, "pool_max_conns=2")
			table := s.table(t, "kill", "id int")
			task, end := pooldriver.WithTask(ctx(t))
			defer end()
			_, err := db.ExecContext(task, "BEGIN")
			require.NoError(t, err)
			_, err = db.ExecContext(task, "INSERT INTO "+table+" VALUES (1)")
			require.NoError(t, err)
			id := odbcBackendID(t, db, task, s)
			tn.kill(t, id)
			odbcWaitFor(t, "the session gone", func() bool { return tn.conns(t) == 0 })
			_, err = db.ExecContext(task, "INSERT INTO "+table+" VALUES (2)")
			require.Error(t, err, "a statement of the killed transaction succeeded")
			assert.False(t, errors.Is(err, sql.ErrConnDone))
			end()
			odbcWaitFor(t, "the connection let go", func() bool { return c.Stats().Active == 0 })
			for range 3 {
				_, err := db.ExecContext(ctx(t), "SELECT 1")
				require.NoError(t, err)
			}
			assert.Zero(t, s.adminInt(t, "SELECT count(*) FROM "+table), "rows of the killed transaction")
		})

		t.Run("statement running", func(t *testing.T) {
			tn := newODBCTenant(t, s)
			db, c := tn.open(t, "pool_max_conns=1")
			table := s.table(t, "killrun", "id int")
			errc := make(chan error, 1)
			start := time.Now()
			go func() {
				// A write, then a sleep: a silent retry would insert twice.
				_, err := db.ExecContext(context.Background(),
					fmt.Sprintf("INSERT INTO %s SELECT 1 FROM (%s) x", table, fmt.Sprintf(s.sleep, 30)))
				errc <- err
			}()
			var id int64
			odbcWaitFor(t, "the statement running on the server", func() bool {
				id = tn.running(t, table)
				return id != 0
			})
			tn.kill(t, id)
			select {
			case err := <-errc:
				assert.Error(t, err, "the killed statement succeeded")
			case <-time.After(20 * time.Second):
				t.Fatal("the killed statement did not return")
			}
			assert.Less(t, time.Since(start), 20*time.Second, "retried after the kill")
			odbcWaitFor(t, "the connection let go", func() bool { return c.Stats().Active == 0 })
			_, err := db.ExecContext(ctx(t), "SELECT 1")
			require.NoError(t, err)
			assert.Zero(t, s.adminInt(t, "SELECT count(*) FROM "+table))
		})
	})
}

// TestODBCClose: DB.Close closes every server connection: idle ones at once,
// one bound to a session task when the task ends.
func TestODBCClose(t *testing.T) {
	t.Parallel()
	forEachODBCServer(t, func(t *testing.T, s odbcServer) {
		t.Parallel()
		tn := newODBCTenant(t, s)
		db, _ := tn.open(t, "pool_max_conns=3")
		var txs []*sql.Tx
		for range 3 {
			tx, err := db.BeginTx(ctx(t), nil)
			require.NoError(t, err)
			txs = append(txs, tx)
		}
		for _, tx := range txs {
			require.NoError(t, tx.Commit())
		}
		require.Equal(t, 3, tn.conns(t))
		sess, end := pooldriver.WithTask(ctx(t), pooldriver.SessionMode)
		defer end()
		id := odbcBackendID(t, db, sess, s)

		require.NoError(t, db.Close())
		tn.waitConns(t, 1)
		assert.Equal(t, []int64{id}, tn.backends(t))
		_, err := db.ExecContext(ctx(t), "SELECT 1")
		assert.Error(t, err, "statement after Close")
		end()
		tn.waitConns(t, 0)
	})
}

// TestODBCGenericDriver: a driver the dialect does not recognize (psqlODBC
// under a neutral file name) gets the generic behaviour: transactions
// through the driver's autocommit switch, options refused, raw BEGIN
// tracked from keywords, sessions reset by replacing the connection.
func TestODBCGenericDriver(t *testing.T) {
	t.Parallel()
	// One server is enough for the generic behaviour.
	forODBCServers(t, "postgres", func(t *testing.T, s odbcServer) {
		t.Parallel()
		dir, err := os.MkdirTemp("", "pdodbc") // t.TempDir would name the server
		require.NoError(t, err)
		t.Cleanup(func() { _ = os.RemoveAll(dir) })
		lib := filepath.Join(dir, "libsomedriver.so")
		require.NoError(t, os.Symlink("/usr/lib/x86_64-linux-gnu/odbc/psqlodbcw.so", lib))
		_, err = os.Stat(lib)
		require.NoError(t, err, "psqlODBC is not where Debian puts it")
		// A plain user name: a generic driver gets it as written, and
		// psqlODBC would keep braces.
		tn := &odbcTenant{s: s, user: unique("pd_odbc_g"), password: "pw"}
		s.adminExec(t, "CREATE ROLE "+tn.user+" LOGIN")
		t.Cleanup(func() { tn.drop(t) })
		// psqlODBC needs this for raw transactions (see the package doc);
		// a generic driver gets the DSN as written.
		// The server's address from its DSN; the driver and the user are
		// the test's.
		attrs, err := connstr.Parse(strings.TrimPrefix(s.dsn, "odbc://"))
		require.NoError(t, err)
		generic := []connstr.Attr{{Key: "Driver", Value: lib}}
		for _, a := range attrs {
			switch strings.ToLower(a.Key) {
			case "server", "port", "database":
				generic = append(generic, a)
			}
		}
		cs, err := connstr.Build(append(generic, connstr.Attr{Key: "UseServerSidePrepare", Value: "0"}))
		require.NoError(t, err)
		dsn := "odbc://" + cs
		c := pooldriver.New(dsn+"pool_max_conns=1", pooldriver.WithCredentials(func(context.Context) (string, string, error) {
			return tn.user, tn.password, nil
		}))
		require.NoError(t, c.Err())
		db := sql.OpenDB(c)
		defer db.Close()
		table := s.table(t, "generic", "id int")

		tx, err := db.BeginTx(ctx(t), nil)
		require.NoError(t, err)
		_, err = tx.ExecContext(ctx(t), "INSERT INTO "+table+" VALUES (1)")
		require.NoError(t, err)
		assert.Zero(t, s.adminInt(t, "SELECT count(*) FROM "+table))
		require.NoError(t, tx.Commit())
		assert.EqualValues(t, 1, s.adminInt(t, "SELECT count(*) FROM "+table))

		_, err = db.BeginTx(ctx(t), &sql.TxOptions{ReadOnly: true})
		require.ErrorContains(t, err, "not known to be")
		_, err = db.BeginTx(ctx(t), &sql.TxOptions{Isolation: sql.LevelSerializable})
		require.ErrorContains(t, err, "not known to be")

		task, end := pooldriver.WithTask(ctx(t))
		_, err = db.ExecContext(task, "BEGIN")
		require.NoError(t, err)
		_, err = db.ExecContext(task, "INSERT INTO "+table+" VALUES (2)")
		require.NoError(t, err)
		assert.Equal(t, 1, c.Stats().Active, "raw BEGIN did not pin")
		end()
		assert.EqualValues(t, 1, s.adminInt(t, "SELECT count(*) FROM "+table), "task end did not roll back")
		assert.EqualValues(t, 1, c.Stats().AutoRollbacks)

		sess, end := pooldriver.WithTask(ctx(t), pooldriver.SessionMode)
		id := odbcBackendID(t, db, sess, s)
		end()
		assert.NotEqual(t, id, odbcBackendID(t, db, ctx(t), s), "a generic session is replaced, not reset")
		assert.Zero(t, c.Stats().SessionResets, "SessionResets counts only resets done")
		require.NoError(t, db.PingContext(ctx(t)))
	})
}
