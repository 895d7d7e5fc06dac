package integration

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
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

// pingThreshold is a little more than pooldriver's idlePingAfter
// (connector.go): a connection idle longer than that is pinged before it is
// handed out.
const pingThreshold = 1100 * time.Millisecond

// TestServerKillsIdle: every pooled connection killed by the server while
// idle; the next statements succeed on new connections. "idle past the ping
// threshold" waits until the connections have been idle long enough to be
// pinged before reuse; "just released" kills them at once.
func TestServerKillsIdle(t *testing.T) {
	t.Parallel()
	forEachServer(t, func(t *testing.T, s server) {
		t.Parallel()
		for _, pastThreshold := range []bool{false, true} {
			name := "just released"
			if pastThreshold {
				name = "idle past the ping threshold"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				tn := newTenant(t, s)
				const maxConns = 3
				db, c := tn.open(t, fmt.Sprintf("pool_max_conns=%d", maxConns))
				warmUp(t, db, maxConns)
				warmUp(t, db, maxConns) // each connection reused once already
				idleSince := time.Now()
				killed := tn.backends(t)
				require.Len(t, killed, maxConns)
				sockets := tn.sockets(t)
				for _, id := range killed {
					tn.kill(t, id)
				}
				tn.waitConns(t, 0)
				sockets.waitClosed(t) // what the pool's look at an idle connection sees (contractKilledWarmConns)
				if pastThreshold {
					// The scenario is time itself: connections idle that long.
					waitFor(t, "the connections idle past the ping threshold", func() bool {
						return time.Since(idleSince) > pingThreshold
					})
				}

				// As many transactions at once as there are dead
				// connections, then statements one by one.
				var wg sync.WaitGroup
				errs := make([]error, maxConns)
				for i := range maxConns {
					wg.Go(func() {
						tx, err := db.BeginTx(context.Background(), nil)
						if err == nil {
							_, err = tx.Exec("SELECT 1")
							err = errors.Join(err, tx.Commit())
						}
						errs[i] = err
					})
				}
				wg.Wait()
				for _, err := range errs {
					assert.NoError(t, err, "a dead idle connection surfaced")
				}
				for range 2 * maxConns {
					_, err := db.ExecContext(ctx(t), "SELECT 1")
					assert.NoError(t, err, "a dead idle connection surfaced")
				}
				// What runs off the callers' path (the pool's look at how
				// full the server is) ends on its own.
				waitFor(t, "no connection in use", func() bool { return c.Stats().Active == 0 })
				st := c.Stats()
				assert.LessOrEqual(t, st.Total, maxConns)
				now := tn.backends(t)
				assert.NotEmpty(t, now)
				for _, id := range now {
					assert.NotContains(t, killed, id)
				}
			})
		}
	})
}

// warmUp opens n physical connections by holding n transactions at once.
func warmUp(t *testing.T, db *sql.DB, n int) {
	t.Helper()
	var txs []*sql.Tx
	for range n {
		tx, err := db.BeginTx(ctx(t), nil)
		require.NoError(t, err)
		txs = append(txs, tx)
	}
	for _, tx := range txs {
		require.NoError(t, tx.Commit())
	}
}

// TestServerKillsInUse: the server kills the connection of a task's
// transaction, or of a statement running: that caller gets an error, not a
// silent retry on a new connection without its transaction; the pool
// replaces the connection and leaks nothing.
func TestServerKillsInUse(t *testing.T) {
	t.Parallel()
	forEachServer(t, func(t *testing.T, s server) {
		t.Parallel()
		tn := newTenant(t, s)
		const maxConns = 2
		db, c := tn.open(t, fmt.Sprintf("pool_max_conns=%d", maxConns))
		table := s.table(t, "kill", "id int")
		insert := "INSERT INTO " + table + " VALUES (" + s.placeholder(1) + ")"

		recovered := func(t *testing.T) {
			t.Helper()
			waitFor(t, "the connection back in the pool", func() bool { return c.Stats().Active == 0 })
			for i := range 2 * maxConns {
				_, err := db.ExecContext(ctx(t), "SELECT 1")
				require.NoError(t, err, "statement %d after the kill", i)
			}
			st := c.Stats()
			assert.Zero(t, st.Active)
			assert.LessOrEqual(t, st.Total, maxConns)
			assert.LessOrEqual(t, tn.conns(t), maxConns)
			assert.Zero(t, tn.openTxs(t))
		}

		for _, begin := range []string{"raw BEGIN", "BeginTx"} {
			t.Run("task transaction/"+begin, func(t *testing.T) {
				task, end := pooldriver.WithTask(ctx(t))
				defer end()
				exec := db.ExecContext
				if begin == "BeginTx" {
					tx, err := db.BeginTx(task, nil)
					require.NoError(t, err)
					defer tx.Rollback()
					exec = tx.ExecContext
				} else {
					_, err := db.ExecContext(task, "BEGIN")
					require.NoError(t, err)
				}
				_, err := exec(task, insert, 1)
				require.NoError(t, err)
				ids := tn.backends(t)
				require.Len(t, ids, 1)
				pid := ids[0]
				tn.kill(t, pid)
				waitFor(t, "the session gone", func() bool { return !contains(tn.backends(t), pid) })

				_, err = exec(task, insert, 2)
				require.Error(t, err, "a statement of the killed transaction succeeded")
				end()
				recovered(t)
				assert.Zero(t, s.adminInt(t, "SELECT count(*) FROM "+table), "rows of the killed transaction")
			})
		}

		t.Run("statement running", func(t *testing.T) {
			marker := unique("sleep")
			errc := make(chan error, 1)
			start := time.Now()
			go func() {
				_, err := db.ExecContext(context.Background(), fmt.Sprintf(s.sleep, 60)+" /* "+marker+" */")
				errc <- err
			}()
			var pid int64
			waitFor(t, "the statement running", func() bool {
				pid = tn.running(t, marker)
				return pid != 0
			})
			tn.kill(t, pid)
			select {
			case err := <-errc:
				assert.Error(t, err, "the killed statement succeeded")
			case <-time.After(20 * time.Second):
				t.Fatal("the killed statement did not return")
			}
			assert.Less(t, time.Since(start), 30*time.Second, "retried after the kill")
			recovered(t)
		})
	})
}

func contains(ids []int64, id int64) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

// TestCredentialRotation (MariaDB): WithCredentials is asked for every new
// connection; after the password changes on the server and in the
// function, new connections use the new one while the open one keeps
// working; a statement that needs a connection while only a stale
// password is given waits within its context, then fails with the
// authentication error as the cause, which does not show it.
func TestCredentialRotation(t *testing.T) {
	t.Parallel()
	// PostgreSQL here trusts 127.0.0.1 (pg_hba.conf) and checks no
	// password: TestCredentialsPerConnection covers what can be shown there.
	forServer(t, "mysql", func(t *testing.T, s server) {
		user := unique("pd_rot")
		pwA, pwB := "Pw-A-"+unique("x"), "Pw-B-"+unique("x")
		dsn := s.mysqlUser(t, user, pwA)
		dsn = strings.Replace(dsn, ":"+pwA+"@", "@", 1) // the function supplies it
		require.NotContains(t, dsn, pwA)
		tn := &tenant{s: s, name: user, base: dsn}

		var current atomic.Pointer[string]
		current.Store(&pwA)
		var calls atomic.Int64
		creds := pooldriver.WithCredentials(func(context.Context) (string, string, error) {
			calls.Add(1)
			return user, *current.Load(), nil
		})
		db, c := tn.open(t, "pool_max_conns=3", creds)

		first, endFirst := pooldriver.WithTask(ctx(t), pooldriver.SessionMode)
		defer endFirst()
		id1 := backendID(t, db, first, s)
		require.EqualValues(t, 1, calls.Load())

		s.adminExec(t, fmt.Sprintf("ALTER USER '%s'@'%%' IDENTIFIED BY '%s'", user, pwB))
		current.Store(&pwB)

		second, endSecond := pooldriver.WithTask(ctx(t), pooldriver.SessionMode)
		defer endSecond()
		id2 := backendID(t, db, second, s)
		assert.NotEqual(t, id1, id2)
		assert.EqualValues(t, 2, calls.Load())
		assert.Equal(t, id1, backendID(t, db, first, s), "the open connection keeps working")
		var who string
		require.NoError(t, db.QueryRowContext(first, "SELECT SUBSTRING_INDEX(USER(), '@', 1)").Scan(&who))
		assert.Equal(t, user, who)

		// Both connections are held: the next statement opens a third, with
		// the stale password. It waits, within its context, for one of the
		// held connections or a connect that works, and fails at its
		// deadline with the server's refusal as the cause.
		current.Store(&pwA)
		third, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, err := db.ExecContext(third, "SELECT 1")
		require.Error(t, err)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		var me *mysql.MySQLError
		if assert.ErrorAs(t, err, &me) {
			assert.EqualValues(t, 1045, me.Number, "access denied")
		}
		assert.NotContains(t, err.Error(), pwA)
		assert.NotContains(t, err.Error(), pwB)
		assert.NotContains(t, fmt.Sprintf("%+v %#v", err, err), pwA)
		st := c.Stats()
		assert.GreaterOrEqual(t, st.ConnectErrors, int64(1))
		assert.GreaterOrEqual(t, calls.Load(), int64(3))
		assert.NotContains(t, fmt.Sprintf("%+v %s", st, c), pwA)
		assert.NotContains(t, fmt.Sprintf("%v", st.LastConnectError), pwA)

		current.Store(&pwB)
		_, err = db.ExecContext(ctx(t), "SELECT 1")
		require.NoError(t, err)
		assert.EqualValues(t, 3, c.Stats().Created)
	})
}

// TestCredentialsPerConnection: WithCredentials is called for each new
// connection, which logs in as the user it returns. PostgreSQL here trusts
// 127.0.0.1 (pg_hba.conf) so no password is checked and rotation cannot be
// proven without editing the server's configuration; this shows the user
// half of it. MariaDB's rotation is TestCredentialRotation.
func TestCredentialsPerConnection(t *testing.T) {
	t.Parallel()
	forEachServer(t, func(t *testing.T, s server) {
		t.Parallel()
		users := []string{unique("pd_u1"), unique("pd_u2")}
		tn := newTenant(t, s)
		for _, u := range users {
			if s.name == "postgres" {
				s.adminExec(t, "CREATE ROLE "+u+" LOGIN")
				t.Cleanup(func() { s.adminExec(t, "DROP ROLE "+u) })
			} else {
				s.mysqlUser(t, u, "pw")
			}
		}
		var user atomic.Pointer[string]
		user.Store(&users[0])
		var calls atomic.Int64
		creds := pooldriver.WithCredentials(func(context.Context) (string, string, error) {
			calls.Add(1)
			return *user.Load(), "pw", nil
		})
		// On MariaDB the tenant is a user of its own; count by the two users
		// once the pool is closed (cleanups run last registered first).
		if s.name == "mysql" {
			t.Cleanup(func() {
				for _, u := range users {
					(&tenant{s: s, name: u}).waitConns(t, 0)
				}
			})
		}
		db, c := tn.open(t, "pool_max_conns=2", creds)
		currentUser := "SELECT current_user"
		if s.name == "mysql" {
			currentUser = "SELECT SUBSTRING_INDEX(CURRENT_USER(), '@', 1)"
		}

		first, endFirst := pooldriver.WithTask(ctx(t), pooldriver.SessionMode)
		defer endFirst()
		var who string
		require.NoError(t, db.QueryRowContext(first, currentUser).Scan(&who))
		assert.Equal(t, users[0], who)

		user.Store(&users[1])
		second, endSecond := pooldriver.WithTask(ctx(t), pooldriver.SessionMode)
		defer endSecond()
		require.NoError(t, db.QueryRowContext(second, currentUser).Scan(&who))
		assert.Equal(t, users[1], who, "the second connection logs in as the function's new answer")
		require.NoError(t, db.QueryRowContext(first, currentUser).Scan(&who))
		assert.Equal(t, users[0], who, "the first connection keeps its user")
		assert.EqualValues(t, 2, calls.Load())
		assert.EqualValues(t, 2, c.Stats().Created)
	})
}
