package integration

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pooldriver/pooldriver"
)

// TestTransactionModeRawBegin: a raw BEGIN pins the task's server session
// across separate db.ExecContext calls; nobody else sees the row until
// COMMIT, which gives the connection back while the task goes on.
func TestTransactionModeRawBegin(t *testing.T) {
	t.Parallel()
	forEachServer(t, func(t *testing.T, s server) {
		t.Parallel()
		tn := newTenant(t, s)
		db, c := tn.open(t, "pool_max_conns=4")
		table := s.tableBy(t, db, "txmode", "id int")
		// Known to the pool's catalog reading first: a statement naming a
		// relation the reading does not know counts as a change of the
		// session, which the task would keep past COMMIT to its end.
		waitCatalogKnows(t, db, c, table)
		insert := "INSERT INTO " + table + " VALUES (" + s.placeholder(1) + ")"

		task, end := pooldriver.WithTask(ctx(t))
		defer end()
		// Under load it once ran out of its 30 s at the last INSERT (2 of 5
		// make test runs beside stress-ng, never alone): a failure says
		// how long each step took, and a step past 5 s logs the stacks of
		// the statements under way (stepsOnFailure).
		steps := stepsOnFailure(t, c)
		_, err := db.ExecContext(task, "BEGIN")
		require.NoError(t, err)
		steps.done("BEGIN")
		pid := backendID(t, db, task, s)
		_, err = db.ExecContext(task, insert, 1)
		require.NoError(t, err)
		steps.done("INSERT 1")
		assert.Equal(t, pid, backendID(t, db, task, s))
		assert.EqualValues(t, 1, count(t, db, task, table), "the task sees its own row")
		assert.Equal(t, 1, c.Stats().Active, "the task's connection is pinned")
		steps.done("the task's reads")

		// Another task, and a statement without a task, run elsewhere and
		// do not see the row.
		other, endOther := pooldriver.WithTask(ctx(t))
		assert.NotEqual(t, pid, backendID(t, db, other, s))
		assert.Zero(t, count(t, db, other, table))
		endOther()
		assert.Zero(t, count(t, db, ctx(t), table))
		steps.done("the other task's reads")
		assert.EqualValues(t, 1, tn.openTxs(t))
		steps.done("openTxs")

		_, err = db.ExecContext(task, "COMMIT")
		require.NoError(t, err)
		steps.done("COMMIT")
		// Back in the pool at COMMIT; Active reads 0 once the release
		// settles, moments after (README, Stats). (Were a statement judged
		// a change of the session, a table the catalog's reading does not
		// know, the task would keep the connection to its end: tableBy.)
		waitFor(t, "the connection to go back to the pool at COMMIT", func() bool { return c.Stats().Active == 0 })
		steps.done("back in the pool")
		assert.Zero(t, c.Stats().AutoRollbacks)
		assert.EqualValues(t, 1, count(t, db, ctx(t), table))
		assert.Zero(t, tn.openTxs(t))
		steps.done("count, openTxs")

		// The task goes on, with a connection from the pool per statement.
		_, err = db.ExecContext(task, insert, 2)
		require.NoError(t, err)
		steps.done("INSERT 2")
		waitFor(t, "the statement's connection to go back to the pool", func() bool { return c.Stats().Active == 0 })
		assert.EqualValues(t, 2, s.adminInt(t, "SELECT count(*) FROM "+table))
	})
}

// testSteps times the steps of a test, for its failure's message.
type testSteps struct {
	mu    sync.Mutex
	last  time.Time
	lines []string
}

// done records that step what ended now.
func (s *testSteps) done(what string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	s.lines = append(s.lines, fmt.Sprintf("%s: %v", what, now.Sub(s.last).Round(time.Millisecond)))
	s.last = now
}

// stepsOnFailure starts timing t's steps: if t fails, its cleanup logs
// each step's time and c's stats; while a step runs past 5 s, the stacks
// of the goroutines in pooldriver's hold (hold.go) are logged once.
func stepsOnFailure(t *testing.T, c *pooldriver.Connector) *testSteps {
	s := &testSteps{last: time.Now()}
	stop, exited := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(exited)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for logged := false; !logged; {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			s.mu.Lock()
			slow := time.Since(s.last) > 5*time.Second
			s.mu.Unlock()
			if slow {
				logged = true
				buf := make([]byte, 16<<20)
				buf = buf[:runtime.Stack(buf, true)]
				var held []string
				for _, g := range strings.Split(string(buf), "\n\n") {
					if strings.Contains(g, "pooldriver/hold.go") {
						held = append(held, g)
					}
				}
				t.Logf("a step has run over 5 s; stats %+v; the goroutines in a hold:\n%s", c.Stats(), strings.Join(held, "\n\n"))
			}
		}
	}()
	t.Cleanup(func() {
		close(stop)
		<-exited // no log after the test
		if t.Failed() {
			s.mu.Lock()
			defer s.mu.Unlock()
			t.Logf("steps: %s (then %v); stats %+v", strings.Join(s.lines, "; "), time.Since(s.last).Round(time.Millisecond), c.Stats())
		}
	})
	return s
}

// TestSessionMode: session state lives across the calls of a session-mode
// task, and the next task on the same server session finds none of it.
func TestSessionMode(t *testing.T) {
	t.Parallel()
	forEachServer(t, func(t *testing.T, s server) {
		t.Parallel()
		tn := newTenant(t, s)
		db, c := tn.open(t, "pool_max_conns=1")
		temp := unique("tmp")

		task, end := pooldriver.WithTask(ctx(t), pooldriver.SessionMode)
		pid := backendID(t, db, task, s)
		_, err := db.ExecContext(task, s.setVar)
		require.NoError(t, err)
		_, err = db.ExecContext(task, "CREATE TEMPORARY TABLE "+temp+" (id "+s.autoID+", a int)")
		require.NoError(t, err)
		_, err = db.ExecContext(task, "INSERT INTO "+temp+" (a) VALUES (10)")
		require.NoError(t, err)
		_, err = db.ExecContext(task, "INSERT INTO "+temp+" (a) VALUES (20)")
		require.NoError(t, err)

		var v string
		require.NoError(t, db.QueryRowContext(task, s.getVar).Scan(&v))
		assert.Equal(t, "1", v, "session variable")
		var last int64
		require.NoError(t, db.QueryRowContext(task, s.lastID).Scan(&last))
		assert.EqualValues(t, 2, last, "last generated key")
		assert.EqualValues(t, 2, count(t, db, task, temp), "temporary table")
		assert.Equal(t, pid, backendID(t, db, task, s))
		assert.Equal(t, 1, c.Stats().Active, "held between statements")
		end()
		waitFor(t, "the reset, in the background", func() bool { return c.Stats().Active == 0 && c.Stats().SessionResets == 1 })

		next, endNext := pooldriver.WithTask(ctx(t), pooldriver.SessionMode)
		defer endNext()
		assert.Equal(t, pid, backendID(t, db, next, s), "pool of 1: the same server session")
		require.NoError(t, db.QueryRowContext(next, s.getVar).Scan(&v))
		assert.Equal(t, "", v, "session variable survived the task")
		_, err = db.ExecContext(next, "SELECT * FROM "+temp)
		assert.Error(t, err, "temporary table survived the task")
		var lastAfter sql.NullInt64
		if err := db.QueryRowContext(next, s.lastID).Scan(&lastAfter); err == nil {
			assert.Zero(t, lastAfter.Int64, "last generated key survived the task") // MySQL: 0
		} else {
			assert.Contains(t, err.Error(), "lastval is not yet defined") // PostgreSQL
		}
		assert.Equal(t, 1, tn.conns(t))
	})
}

// TestTaskEndRollsBack: whichever way a task ends (end func, cancelled
// parent context, panicking handler under Middleware) and however its
// transaction began (BeginTx, raw BEGIN), the transaction is rolled back, no
// session is left idle in transaction, and the connection is back in the
// pool.
func TestTaskEndRollsBack(t *testing.T) {
	t.Parallel()
	forEachServer(t, func(t *testing.T, s server) {
		t.Parallel()
		tn := newTenant(t, s)
		db, c := tn.open(t, "pool_max_conns=2")
		table := s.table(t, "taskend", "id int")
		insert := "INSERT INTO " + table + " VALUES (" + s.placeholder(1) + ")"

		begins := []struct {
			name string
			run  func(ctx context.Context, id int) error // leaves a transaction open
			raw  bool
		}{
			{"BeginTx", func(ctx context.Context, id int) error {
				tx, err := db.BeginTx(ctx, nil)
				if err != nil {
					return err
				}
				_, err = tx.ExecContext(ctx, insert, id)
				return err
			}, false},
			{"raw BEGIN", func(ctx context.Context, id int) error {
				if _, err := db.ExecContext(ctx, "BEGIN"); err != nil {
					return err
				}
				_, err := db.ExecContext(ctx, insert, id)
				return err
			}, true},
		}
		// Each ending runs work in a task and ends the task its way.
		endings := []struct {
			name string
			run  func(t *testing.T, work func(ctx context.Context) error)
		}{
			{"end func", func(t *testing.T, work func(context.Context) error) {
				task, end := pooldriver.WithTask(ctx(t))
				require.NoError(t, work(task))
				end()
			}},
			{"parent cancelled", func(t *testing.T, work func(context.Context) error) {
				parent, cancel := context.WithCancel(ctx(t))
				task, end := pooldriver.WithTask(parent)
				defer end()
				require.NoError(t, work(task))
				cancel()
			}},
			{"handler panics", func(t *testing.T, work func(context.Context) error) {
				workErr := make(chan error, 1)
				srv := httptest.NewUnstartedServer(pooldriver.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					workErr <- work(r.Context())
					panic("handler failed")
				})))
				srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the panic is expected
				srv.Start()
				defer srv.Close()
				resp, err := srv.Client().Get(srv.URL)
				if err == nil {
					resp.Body.Close()
				}
				assert.Error(t, err, "the handler's panic drops the connection")
				require.NoError(t, <-workErr)
			}},
		}

		id := 0
		for _, b := range begins {
			for _, e := range endings {
				t.Run(b.name+"/"+e.name, func(t *testing.T) {
					id++
					rollbacks := c.Stats().AutoRollbacks
					e.run(t, func(task context.Context) error {
						if err := b.run(task, id); err != nil {
							return err
						}
						// The transaction is open on the server and holds
						// the row.
						// (This may run in the HTTP server's goroutine: no
						// require here.) MariaDB's INNODB_TRX is a cache
						// that another suite reading it on the same server
						// (another engineer's, beside this one) can keep
						// from refreshing for a while: read it again until
						// it shows the transaction, for a few seconds.
						n, err := tn.openTxsErr(task)
						for deadline := time.Now().Add(5 * time.Second); err == nil && n != 1 && time.Now().Before(deadline); {
							time.Sleep(10 * time.Millisecond) // and on MariaDB by spaceInnodbTrxRead
							n, err = tn.openTxsErr(task)
						}
						if err != nil || n != 1 {
							return fmt.Errorf("transactions open on the server: %d, %v; want 1", n, err)
						}
						// A raw transaction is the task's: its next statements
						// run inside it. A *sql.Tx is its own: as with the
						// plain driver, other statements do not see its rows.
						want := int64(0)
						if b.raw {
							want = 1
						}
						if n, err := countErr(db, task, table); err != nil || n != want {
							return fmt.Errorf("rows the task sees: %d, %v; want %d", n, err, want)
						}
						return nil
					})
					waitFor(t, "the connection back in the pool", func() bool { return c.Stats().Active == 0 })
					waitFor(t, "no transaction left on the server", func() bool { return tn.openTxs(t) == 0 })
					assert.Zero(t, s.adminInt(t, "SELECT count(*) FROM "+table), "the row outlived the task")
					if b.raw {
						// Only the task's end could roll back a raw BEGIN
						// (database/sql rolls a BeginTx back itself when
						// the context is cancelled).
						assert.Equal(t, rollbacks+1, c.Stats().AutoRollbacks)
					}
					// The connection is clean for the next user.
					_, err := db.ExecContext(ctx(t), insert, -id)
					require.NoError(t, err)
					assert.EqualValues(t, 1, s.adminInt(t, "SELECT count(*) FROM "+table))
					s.adminExec(t, "DELETE FROM "+table)
				})
			}
		}
		assert.LessOrEqual(t, tn.conns(t), 2)
	})
}

// TestTaskEndKeepsTheTxConnection: the end of a task rolls its open
// *sql.Tx back on a context of its own and keeps the connection. pgx's
// Tx.Rollback would run under the task's context, cancelled by then, and
// fail, which cost the connection every time.
func TestTaskEndKeepsTheTxConnection(t *testing.T) {
	t.Parallel()
	forEachServer(t, func(t *testing.T, s server) {
		t.Parallel()
		tn := newTenant(t, s)
		db, c := tn.open(t, "pool_max_conns=2")
		table := s.table(t, "txkeep", "id int")
		warmUp(t, db, 1)
		before := c.Stats()
		for i := range 5 {
			task, end := pooldriver.WithTask(ctx(t))
			tx, err := db.BeginTx(task, nil)
			require.NoError(t, err)
			_, err = tx.ExecContext(task, "INSERT INTO "+table+" VALUES ("+s.placeholder(1)+")", i)
			require.NoError(t, err)
			end()
			waitFor(t, "the connection back in the pool", func() bool { return c.Stats().Active == 0 })
		}
		after := c.Stats()
		assert.Equal(t, before.Destroyed, after.Destroyed, "connections closed by the task ends")
		assert.Equal(t, before.AutoRollbacks+5, after.AutoRollbacks)
		assert.Zero(t, s.adminInt(t, "SELECT count(*) FROM "+table))
	})
}
