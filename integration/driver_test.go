package integration

import (
	"context"
	"database/sql"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pooldriver/pooldriver"
)

// The driver end to end through database/sql against real servers: pool
// bounds, acquire timeout, opening and closing. Tasks are in
// driver_task_test.go, failures in driver_failure_test.go, argument types
// and RawConn in driver_types_test.go.

// TestLazyAndBounded: nothing is opened before the first statement; 200
// goroutines × 20 queries with pool_max_conns=4 and database/sql at its
// defaults (2 idle logical conns, which it churns) never have more than 4
// server connections, and after warm-up none is opened or closed.
func TestLazyAndBounded(t *testing.T) {
	t.Parallel()
	forEachServer(t, func(t *testing.T, s server) {
		t.Parallel()
		tn := newTenant(t, s)
		const maxConns = 4
		db, c := tn.open(t, fmt.Sprintf("pool_max_conns=%d", maxConns))

		// Lazy: a logical conn is no server connection either.
		assert.Equal(t, 0, tn.conns(t))
		sc, err := db.Conn(ctx(t))
		require.NoError(t, err)
		assert.Equal(t, 0, tn.conns(t), "db.Conn opened a server connection")
		assert.Zero(t, c.Stats().Total)
		require.NoError(t, sc.Close())

		require.NoError(t, db.PingContext(ctx(t)))
		assert.Equal(t, 1, tn.conns(t))

		// Warm up to exactly maxConns: as many transactions at once.
		var txs []*sql.Tx
		for range maxConns {
			tx, err := db.BeginTx(ctx(t), nil)
			require.NoError(t, err)
			txs = append(txs, tx)
		}
		for _, tx := range txs {
			require.NoError(t, tx.Rollback())
		}
		require.EqualValues(t, maxConns, c.Stats().Created)
		warm := tn.backends(t)
		require.Len(t, warm, maxConns)

		// Sample the server and the pool while the load runs.
		stop := make(chan struct{})
		var sampler sync.WaitGroup
		var maxServer, maxTotal, samples atomic.Int64
		var sampleErr atomic.Value
		sampler.Go(func() {
			for {
				ids, err := tn.backendsErr(context.Background())
				if err != nil {
					sampleErr.Store(err)
					return
				}
				samples.Add(1)
				setMax(&maxServer, int64(len(ids)))
				setMax(&maxTotal, int64(c.Stats().Total))
				select {
				case <-stop:
					return
				default:
				}
			}
		})

		q := "SELECT " + s.placeholder(1) + " + 1"
		load := func() {
			var wg sync.WaitGroup
			var failed atomic.Int64
			var first atomic.Value
			for g := range 200 {
				wg.Go(func() {
					for i := range 20 {
						var n int64
						if err := db.QueryRowContext(context.Background(), q, int64(g*100+i)).Scan(&n); err != nil {
							failed.Add(1)
							first.CompareAndSwap(nil, err)
							continue
						}
						if n != int64(g*100+i)+1 {
							failed.Add(1)
							first.CompareAndSwap(nil, fmt.Errorf("got %d for %d", n, g*100+i))
						}
					}
				})
			}
			wg.Wait()
			require.Zero(t, failed.Load(), "first failure: %v", first.Load())
		}
		load()
		load()
		close(stop)
		sampler.Wait()

		require.Nil(t, sampleErr.Load())
		assert.Positive(t, samples.Load())
		assert.LessOrEqual(t, maxServer.Load(), int64(maxConns), "server connections")
		assert.LessOrEqual(t, maxTotal.Load(), int64(maxConns), "Stats().Total")
		// What runs off the callers' path (a reset, the pool's look at how
		// full the server is) ends on its own.
		waitFor(t, "no connection in use", func() bool { return c.Stats().Active == 0 })
		st := c.Stats()
		assert.EqualValues(t, maxConns, st.Created, "connections opened after warm-up")
		assert.Zero(t, st.Destroyed, "connections closed")
		assert.Equal(t, warm, tn.backends(t), "server connections replaced")
	})
}

func setMax(m *atomic.Int64, v int64) {
	for {
		old := m.Load()
		if v <= old || m.CompareAndSwap(old, v) {
			return
		}
	}
}

// TestAcquireTimeout: with the only connection held by a task's
// transaction, a statement waits pool_acquire_timeout and fails with
// ErrAcquireTimeout; a caller's shorter deadline wins. The timeout is
// seconds, so that on a loaded machine the shorter deadline's return is
// not mistaken for it: which one ended the wait is told by the error.
func TestAcquireTimeout(t *testing.T) {
	t.Parallel()
	forEachServer(t, func(t *testing.T, s server) {
		t.Parallel()
		tn := newTenant(t, s)
		const timeout = 2 * time.Second
		db, c := tn.open(t, "pool_max_conns=1&pool_acquire_timeout="+timeout.String())

		tctx, end := pooldriver.WithTask(ctx(t))
		defer end()
		tx, err := db.BeginTx(tctx, nil)
		require.NoError(t, err)
		_, err = tx.ExecContext(tctx, "SELECT 1")
		require.NoError(t, err)

		start := time.Now()
		_, err = db.ExecContext(ctx(t), "SELECT 1")
		elapsed := time.Since(start)
		require.Error(t, err)
		assert.ErrorIs(t, err, pooldriver.ErrAcquireTimeout)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		var te *pooldriver.AcquireTimeoutError
		require.ErrorAs(t, err, &te)
		assert.Equal(t, pooldriver.AcquireTimeoutError{Timeout: timeout, Total: 1, InUse: 1, Idle: 0, Waiting: 0, Max: 1, LeakDetectionOff: true}, *te)
		assert.Contains(t, err.Error(), "total=1, in use=1, idle=0, waiting=0, max=1")
		assert.GreaterOrEqual(t, elapsed, timeout)
		assert.Less(t, elapsed, timeout+5*time.Second)
		st := c.Stats()
		assert.EqualValues(t, 1, st.AcquireTimeouts)
		assert.Zero(t, st.Waiting)
		assert.Equal(t, 1, st.Total)

		// The caller's own deadline, when shorter, wins.
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

// TestOpenAndClose: sql.Open("pooldriver", dsn) and
// sql.OpenDB(pooldriver.New(dsn)) both work, open nothing until used, and
// DB.Close closes every server connection: idle ones at once, one bound to a
// task when the task ends.
func TestOpenAndClose(t *testing.T) {
	t.Parallel()
	forEachServer(t, func(t *testing.T, s server) {
		t.Parallel()
		opens := map[string]func(dsn string) (*sql.DB, error){
			"sql.Open": func(dsn string) (*sql.DB, error) { return sql.Open("pooldriver", dsn) },
			"sql.OpenDB": func(dsn string) (*sql.DB, error) {
				c := pooldriver.New(dsn)
				return sql.OpenDB(c), c.Err()
			},
		}
		for _, name := range slices.Sorted(maps.Keys(opens)) {
			t.Run(name, func(t *testing.T) {
				tn := newTenant(t, s)
				db, err := opens[name](tn.dsn("pool_max_conns=3"))
				require.NoError(t, err)
				defer db.Close()
				assert.Equal(t, 0, tn.conns(t))

				// Three connections, then one of them kept by a session.
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
				id := backendID(t, db, sess, s)

				require.NoError(t, db.Close())
				tn.waitConns(t, 1)
				assert.Equal(t, []int64{id}, tn.backends(t))
				_, err = db.ExecContext(ctx(t), "SELECT 1")
				assert.Error(t, err, "statement after Close")

				end()
				tn.waitConns(t, 0)
			})
		}
	})
}

// TestNoTaskRawBeginIsRolledBack: a raw BEGIN without a task pins nothing;
// the connection is rolled back before anyone reuses it.
func TestNoTaskRawBeginIsRolledBack(t *testing.T) {
	t.Parallel()
	forEachServer(t, func(t *testing.T, s server) {
		t.Parallel()
		tn := newTenant(t, s)
		db, c := tn.open(t, "pool_max_conns=1")
		table := s.table(t, "notask", "id int")
		_, err := db.ExecContext(ctx(t), "BEGIN")
		require.NoError(t, err)
		_, err = db.ExecContext(ctx(t), "INSERT INTO "+table+" VALUES (1)")
		require.NoError(t, err)
		assert.Zero(t, tn.openTxs(t))
		waitFor(t, "no connection in use", func() bool { return c.Stats().Active == 0 })
		st := c.Stats()
		assert.EqualValues(t, 1, st.AutoRollbacks)
		// The INSERT was not caught in the abandoned transaction.
		assert.EqualValues(t, 1, s.adminInt(t, "SELECT count(*) FROM "+table))
		assert.Equal(t, 1, tn.conns(t))
	})
}
