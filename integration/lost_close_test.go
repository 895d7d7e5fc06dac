package integration

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/stretchr/testify/require"

	"github.com/pooldriver/pooldriver"
	"github.com/pooldriver/pooldriver/dialects/postgres"
)

// lostBound is how long a lost connection's session may outlive it on the
// server: the socket is closed at once, and the server notices within its
// client_connection_check_interval (set to 100ms here); the rest is slack
// for a loaded machine.
const lostBound = 3 * time.Second

// plainBound bounds the wait for the plain driver's session, which pgx ends
// within 15s.
const plainBound = 20 * time.Second

// slowCancel makes every cancel request of a connection wait until its
// context ends (pgx gives it 15s) or the test releases it: the cancel
// path of a loaded server, which starts a process for each, made
// deterministic. Dials before the connection is established pass.
type slowCancel struct {
	release chan struct{}
}

func newSlowCancel(t *testing.T) *slowCancel {
	sc := &slowCancel{release: make(chan struct{})}
	t.Cleanup(func() { close(sc.release) })
	return sc
}

// shape installs the slow cancel path on one connection's configuration.
func (sc *slowCancel) shape(cfg *pgconn.Config) {
	var established atomic.Bool
	after := cfg.AfterConnect
	cfg.AfterConnect = func(ctx context.Context, pc *pgconn.PgConn) error {
		if after != nil {
			if err := after(ctx, pc); err != nil {
				return err
			}
		}
		established.Store(true)
		return nil
	}
	dial := cfg.DialFunc
	cfg.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if !established.Load() {
			return dial(ctx, network, addr)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-sc.release:
			return nil, errors.New("slowCancel: released")
		}
	}
}

// TestLostConnectionEndsSession: a statement of a task's raw transaction,
// which holds a row lock, is cut by its context mid-flight, so pgx closes
// the connection; the cancel request pgx sends first is slow, as on a
// loaded server. pooldriver closes the socket when it destroys the lost
// connection: the server ends the session and the lock is gone within
// lostBound, and after db.Close none of the pool's sessions is left. The
// plain pgx stdlib driver in the same scenario keeps the session, lock
// and all, until pgx's cleanup gives up on the cancel request (15s), past
// db.Close; the test logs how long.
func TestLostConnectionEndsSession(t *testing.T) {
	forServer(t, "postgres", func(t *testing.T, s server) {
		table := s.table(t, "lost", "id int PRIMARY KEY, v int NOT NULL")
		s.adminExec(t, "INSERT INTO "+table+" VALUES (1, 0), (2, 0)")
		for i, flavour := range []string{"pgx", "pooldriver"} {
			row := i + 1 // each its own: the two run side by side
			t.Run(flavour, func(t *testing.T) {
				if flavour == "pgx" && testing.Short() {
					t.Skip("the plain driver's 15 s, for comparison: make test-all runs it")
				}
				t.Parallel()
				slow := newSlowCancel(t)
				tn := newTenant(t, s)
				// The server looks at an idle socket only between
				// statements; while pg_sleep runs, only this makes it look.
				dsn := tn.dsn("client_connection_check_interval=100")
				var db *sql.DB
				if flavour == "pgx" {
					cfg, err := pgx.ParseConfig(dsn)
					require.NoError(t, err)
					slow.shape(&cfg.Config)
					db = stdlib.OpenDB(*cfg)
				} else {
					c := pooldriver.New(dsn, pooldriver.WithBeforeConnect(postgres.BeforeConnect(
						func(_ context.Context, cfg *pgx.ConnConfig) error {
							slow.shape(&cfg.Config)
							return nil
						})))
					require.NoError(t, c.Err())
					db = sql.OpenDB(c)
				}
				t.Cleanup(func() {
					_ = db.Close()
					// Whatever the outcome, leave no session holding the
					// table that the cleanup drops.
					for _, id := range tn.backends(t) {
						tn.kill(t, id)
					}
				})

				lost := loseLockedConn(t, db, flavour, table, row)
				bound := lostBound
				var closed time.Time
				if flavour == "pgx" {
					// Closed at once, to show that pgx's cleanup outlives it.
					bound = plainBound
					closed = time.Now()
					require.NoError(t, db.Close())
				}

				held, gone := waitGone(bound, func(c context.Context) (int64, error) {
					var n int64
					err := tn.s.adminDB().QueryRowContext(c, `SELECT count(*) FROM pg_locks l
						JOIN pg_stat_activity a ON a.pid = l.pid
						WHERE a.application_name = $1 AND l.relation = $2::regclass`, tn.name, table).Scan(&n)
					return n, err
				})
				t.Logf("%s: the lost session held its lock on %s for %v after the statement failed", flavour, table, held.Sub(lost).Round(time.Millisecond))
				if flavour == "pooldriver" {
					require.True(t, gone, "the lost connection's session still holds its lock %v after the statement failed", lostBound)
					closed = time.Now()
					require.NoError(t, db.Close())
				}

				left, none := waitGone(bound, func(c context.Context) (int64, error) {
					ids, err := tn.backendsErr(c)
					return int64(len(ids)), err
				})
				t.Logf("%s: its sessions left the server %v after db.Close", flavour, left.Sub(closed).Round(time.Millisecond))
				if flavour == "pooldriver" {
					require.True(t, none, "sessions of the pool still on the server %v after db.Close", lostBound)
				}
			})
		}
	})
}

// loseLockedConn opens a raw transaction that locks row id of table (in a
// task, or on a *sql.Conn for the plain driver), then cuts a statement of
// it mid-flight with a 200ms context, and returns when that statement
// failed. pgx closes the connection; the server keeps running the
// statement until it notices the socket.
func loseLockedConn(t *testing.T, db *sql.DB, flavour, table string, row int) time.Time {
	t.Helper()
	c := ctx(t)
	var exec func(context.Context, string) error
	var done func()
	if flavour == "pgx" {
		conn, err := db.Conn(c)
		require.NoError(t, err)
		exec = func(c context.Context, q string) error { _, err := conn.ExecContext(c, q); return err }
		done = func() { _ = conn.Close() }
	} else {
		var end func()
		c, end = pooldriver.WithTask(c)
		exec = func(c context.Context, q string) error { _, err := db.ExecContext(c, q); return err }
		done = end
	}
	require.NoError(t, exec(c, "BEGIN"))
	require.NoError(t, exec(c, fmt.Sprintf("UPDATE %s SET v = v + 1 WHERE id = %d", table, row)))
	short, cancel := context.WithTimeout(c, 200*time.Millisecond)
	defer cancel()
	err := exec(short, "SELECT pg_sleep(5)")
	require.Error(t, err, "pg_sleep(5) under a 200ms context")
	lost := time.Now()
	done()
	return lost
}

// waitGone polls count until it reads 0 or bound passes, and returns when
// it read 0 (or when it gave up) and whether it did.
func waitGone(bound time.Duration, count func(context.Context) (int64, error)) (time.Time, bool) {
	deadline := time.Now().Add(bound)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		c, cancel := context.WithTimeout(context.Background(), time.Second)
		n, err := count(c)
		cancel()
		now := time.Now()
		if err == nil && n == 0 {
			return now, true
		}
		if now.After(deadline) {
			return now, false
		}
		<-tick.C
	}
}
