package integration

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/jmoiron/sqlx"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"github.com/pooldriver/pooldriver"
	"github.com/pooldriver/pooldriver/dialects/postgres"
)

// The tests in this file run pooldriver behind a real PgBouncer (1.18 on
// Debian: no protocol-level prepared statements in transaction pooling),
// started by each test on a free loopback port (pgbouncer_test.go).

// behindTx is the DSN parameter that says the server is behind a
// transaction pooler.
const behindTx = "pool_server_pooling=transaction"

// openPooled opens a *sql.DB over pooldriver.New(dsn), its Err checked.
func openPooled(t *testing.T, dsn string) (*sql.DB, *pooldriver.Connector) {
	t.Helper()
	c := pooldriver.New(dsn)
	require.NoError(t, c.Err())
	db := sql.OpenDB(c)
	t.Cleanup(func() { db.Close() })
	return db, c
}

// openPlainPgx opens pgx's stdlib on dsn, with at most maxOpen connections.
func openPlainPgx(t *testing.T, dsn string, maxOpen int) *sql.DB {
	t.Helper()
	cfg, err := pgx.ParseConfig(dsn)
	require.NoError(t, err)
	db := sql.OpenDB(stdlib.GetConnector(*cfg))
	db.SetMaxOpenConns(maxOpen)
	t.Cleanup(func() { db.Close() })
	return db
}

// hammer runs g goroutines of n calls of one; it returns the errors.
func hammer(g, n int, one func(i int) error) (int, error) {
	var tally errorTally
	var wg sync.WaitGroup
	for w := range g {
		wg.Go(func() {
			for i := range n {
				tally.add(one(w*n + i))
			}
		})
	}
	wg.Wait()
	return tally.count()
}

// queryRowLoad is the workload: 16 goroutines × 200 queries with an
// argument, through db.QueryRow or a *sql.Stmt from db.Prepare.
func queryRowLoad(ctx context.Context, db *sql.DB, prepared bool) (int, error) {
	const q = "SELECT $1::int + 1"
	var stmt *sql.Stmt
	if prepared {
		var err error
		if stmt, err = db.PrepareContext(ctx, q); err != nil {
			return 1, err
		}
		defer stmt.Close()
	}
	return hammer(16, 200, func(i int) error {
		var got int
		var err error
		if prepared {
			err = stmt.QueryRowContext(ctx, i).Scan(&got)
		} else {
			err = db.QueryRowContext(ctx, q, i).Scan(&got)
		}
		if err == nil && got != i+1 {
			err = fmt.Errorf("%w: %d, want %d", errWrongAnswer, got, i+1)
		}
		return err
	})
}

// TestPgBouncerPlainPgxVersusPooldriver is the reference comparison, through
// a transaction-pooling PgBouncer with 4 server connections and clients of
// 8: plain pgx fails with its statement cache and with db.Prepare in any
// exec mode; pooldriver with pool_server_pooling=transaction fails in
// neither.
func TestPgBouncerPlainPgxVersusPooldriver(t *testing.T) {
	longTest(t)
	forServer(t, "postgres", func(t *testing.T, s server) {
		b := startPgBouncer(t, s, 4)
		c := timeout(t, hangTimeout) // seven loads of 3,200 queries

		// Plain pgx, the DSN as is: its statement cache names statements
		// on server sessions the next transaction may not get.
		plain := openPlainPgx(t, b.dsn(bouncerTx), 8)
		n, first := queryRowLoad(c, plain, false)
		t.Logf("plain pgx, DSN as is, db.QueryRow: %d of 3200 failed (first: %v)", n, first)
		assert.Positive(t, n, "plain pgx's statement cache did not fail behind transaction pooling: the scenario does not bite")

		// Plain pgx with a pooler-safe exec mode: db.QueryRow works,
		// db.Prepare still names a statement on one server session.
		plainSafe := openPlainPgx(t, b.dsn(bouncerTx, "default_query_exec_mode=cache_describe"), 8)
		n, first = queryRowLoad(c, plainSafe, false)
		assert.Zero(t, n, "plain pgx, cache_describe, db.QueryRow: first error %v", first)
		n, first = queryRowLoad(c, plainSafe, true)
		t.Logf("plain pgx, cache_describe, db.Prepare: %d of 3200 failed (first: %v)", n, first)
		assert.Positive(t, n, "plain pgx's db.Prepare did not fail behind transaction pooling")

		// pooldriver, one DSN parameter: both work.
		db, _ := openPooled(t, b.dsn(bouncerTx, behindTx, "pool_max_conns=8"))
		n, first = queryRowLoad(c, db, false)
		assert.Zero(t, n, "pooldriver, db.QueryRow: first error %v", first)
		n, first = queryRowLoad(c, db, true)
		assert.Zero(t, n, "pooldriver, db.Prepare: first error %v", first)

		// The exec modes that cannot work are refused, naming both
		// parameters; those that can are kept.
		for _, m := range []string{"cache_statement", "describe_exec"} {
			err := pooldriver.New(b.dsn(bouncerTx, behindTx, "default_query_exec_mode="+m)).Err()
			require.Error(t, err, m)
			assert.Contains(t, err.Error(), "default_query_exec_mode="+m)
			assert.Contains(t, err.Error(), "pool_server_pooling=transaction")
		}
		for _, m := range []string{"exec", "simple_protocol", "cache_describe"} {
			db, _ := openPooled(t, b.dsn(bouncerTx, behindTx, "pool_max_conns=8", "default_query_exec_mode="+m))
			n, first = queryRowLoad(c, db, true)
			assert.Zero(t, n, "pooldriver, %s, db.Prepare: first error %v", m, first)
		}
	})
}

// TestPgBouncerFoundWithoutTheParameter: behind PgBouncer, a DSN that does
// not say so fails at the first connection with an error that names the
// parameter, not later with "prepared statement does not exist"; straight
// to the server the same DSN works, and pool_server_pooling=none skips the
// check.
func TestPgBouncerFoundWithoutTheParameter(t *testing.T) {
	longTest(t)
	forServer(t, "postgres", func(t *testing.T, s server) {
		b := startPgBouncer(t, s, 4)
		c := ctx(t)
		for _, database := range []string{bouncerTx, bouncerSession} {
			db, _ := openPooled(t, b.dsn(database))
			var one int
			err := db.QueryRowContext(c, "SELECT 1").Scan(&one)
			require.ErrorIs(t, err, postgres.ErrPoolerFound, database)
			assert.Contains(t, err.Error(), "pool_server_pooling=transaction")
		}

		direct, _ := openPooled(t, s.dsn)
		var one int
		require.NoError(t, direct.QueryRowContext(c, "SELECT 1").Scan(&one))

		unchecked, _ := openPooled(t, b.dsn(bouncerTx, "pool_server_pooling=none"))
		require.NoError(t, unchecked.QueryRowContext(c, "SELECT 1").Scan(&one))
	})
}

// TestPgBouncerTransactionPooling: behind transaction pooling with
// pool_server_pooling=transaction, everything but a session works.
func TestPgBouncerTransactionPooling(t *testing.T) {
	longTest(t)
	forServer(t, "postgres", func(t *testing.T, s server) {
		b := startPgBouncer(t, s, 4)
		db, conn := openPooled(t, b.dsn(bouncerTx, behindTx, "pool_max_conns=8"))
		direct := openPlainPgx(t, s.dsn, 2)
		table := unique("pgb_tx")
		_, err := db.ExecContext(ctx(t), "CREATE TABLE "+table+" (id int PRIMARY KEY, v text NOT NULL)")
		require.NoError(t, err)
		t.Cleanup(func() { _, _ = direct.Exec("DROP TABLE IF EXISTS " + table) })
		has := func(t *testing.T, id int) bool {
			var n int
			require.NoError(t, direct.QueryRowContext(ctx(t), "SELECT count(*) FROM "+table+" WHERE id = $1", id).Scan(&n))
			return n == 1
		}
		openTxs := func(t *testing.T) int {
			var n int
			require.NoError(t, direct.QueryRowContext(ctx(t),
				"SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND state LIKE 'idle in transaction%'").Scan(&n))
			return n
		}

		t.Run("plain statements", func(t *testing.T) {
			c := ctx(t)
			for i := 1; i <= 20; i++ {
				_, err := db.ExecContext(c, "INSERT INTO "+table+" VALUES ($1, $2)", i, fmt.Sprint("v", i))
				require.NoError(t, err)
			}
			var v string
			require.NoError(t, db.QueryRowContext(c, "SELECT v FROM "+table+" WHERE id = $1", 7).Scan(&v))
			assert.Equal(t, "v7", v)
			rows, err := db.QueryContext(c, "SELECT id FROM "+table+" WHERE id <= $1 ORDER BY id", 20)
			require.NoError(t, err)
			n := 0
			for rows.Next() {
				n++
			}
			require.NoError(t, rows.Err())
			rows.Close()
			assert.Equal(t, 20, n)
		})

		t.Run("sql.Tx", func(t *testing.T) {
			c := ctx(t)
			tx, err := db.BeginTx(c, nil)
			require.NoError(t, err)
			_, err = tx.ExecContext(c, "INSERT INTO "+table+" VALUES ($1, 'tx')", 101)
			require.NoError(t, err)
			var pid1, pid2 int
			require.NoError(t, tx.QueryRowContext(c, "SELECT pg_backend_pid()").Scan(&pid1))
			require.NoError(t, tx.QueryRowContext(c, "SELECT pg_backend_pid()").Scan(&pid2))
			assert.Equal(t, pid1, pid2, "a transaction moved between server sessions")
			assert.False(t, has(t, 101), "uncommitted row visible")
			require.NoError(t, tx.Commit())
			assert.True(t, has(t, 101))

			tx, err = db.BeginTx(c, nil)
			require.NoError(t, err)
			_, err = tx.ExecContext(c, "INSERT INTO "+table+" VALUES ($1, 'rolled back')", 102)
			require.NoError(t, err)
			require.NoError(t, tx.Rollback())
			assert.False(t, has(t, 102))
		})

		t.Run("raw BEGIN and COMMIT in a task", func(t *testing.T) {
			tc, end := pooldriver.WithTask(ctx(t))
			defer end()
			_, err := db.ExecContext(tc, "BEGIN")
			require.NoError(t, err)
			var x1, x2 int64
			require.NoError(t, db.QueryRowContext(tc, "SELECT txid_current()").Scan(&x1))
			_, err = db.ExecContext(tc, "INSERT INTO "+table+" VALUES ($1, 'raw')", 201)
			require.NoError(t, err)
			require.NoError(t, db.QueryRowContext(tc, "SELECT txid_current()").Scan(&x2))
			assert.Equal(t, x1, x2, "the task's calls ran in different transactions")
			assert.False(t, has(t, 201), "uncommitted row visible")
			_, err = db.ExecContext(tc, "COMMIT")
			require.NoError(t, err)
			assert.True(t, has(t, 201))
		})

		t.Run("task end rolls back", func(t *testing.T) {
			tc, end := pooldriver.WithTask(ctx(t))
			_, err := db.ExecContext(tc, "BEGIN")
			require.NoError(t, err)
			_, err = db.ExecContext(tc, "INSERT INTO "+table+" VALUES ($1, 'abandoned')", 301)
			require.NoError(t, err)
			tx, err := db.BeginTx(tc, nil)
			require.NoError(t, err)
			_, err = tx.ExecContext(tc, "INSERT INTO "+table+" VALUES ($1, 'abandoned tx')", 302)
			require.NoError(t, err)
			before := conn.Stats().AutoRollbacks
			end()
			assert.False(t, has(t, 301))
			assert.False(t, has(t, 302))
			// The *sql.Tx nested in the raw transaction: one rollback
			// undoes both.
			assert.Equal(t, before+1, conn.Stats().AutoRollbacks)
			assert.Zero(t, openTxs(t), "a transaction stayed open on the server")
		})

		t.Run("prepared statements", func(t *testing.T) {
			c := timeout(t, hangTimeout)
			ins, err := db.PrepareContext(c, "INSERT INTO "+table+" VALUES ($1, $2)")
			require.NoError(t, err)
			defer ins.Close()
			get, err := db.PrepareContext(c, "SELECT v FROM "+table+" WHERE id = $1")
			require.NoError(t, err)
			defer get.Close()
			n, first := hammer(16, 50, func(i int) error {
				id := 1000 + i
				if _, err := ins.ExecContext(c, id, fmt.Sprint("p", id)); err != nil {
					return err
				}
				var v string
				if err := get.QueryRowContext(c, id).Scan(&v); err != nil {
					return err
				}
				if v != fmt.Sprint("p", id) {
					return errWrongAnswer
				}
				return nil
			})
			require.Zero(t, n, "first error: %v", first)
			var count int
			require.NoError(t, direct.QueryRowContext(c, "SELECT count(*) FROM "+table+" WHERE id >= 1000 AND id < 2000").Scan(&count))
			assert.Equal(t, 16*50, count)

			// A statement the server refuses is refused at Prepare, as
			// with the plain driver.
			_, err = db.PrepareContext(c, "SELECT nosuchcolumn FROM "+table)
			require.ErrorContains(t, err, "nosuchcolumn")

			// In a *sql.Tx and in a task's raw transaction.
			tx, err := db.BeginTx(c, nil)
			require.NoError(t, err)
			_, err = tx.StmtContext(c, ins).ExecContext(c, 2001, "in tx")
			require.NoError(t, err)
			require.NoError(t, tx.Commit())
			assert.True(t, has(t, 2001))
		})

		t.Run("session-mode task refused", func(t *testing.T) {
			tc, end := pooldriver.WithTask(ctx(t), pooldriver.SessionMode)
			defer end()
			_, err := db.ExecContext(tc, "SET statement_timeout = '5s'")
			require.ErrorIs(t, err, pooldriver.ErrNoServerSession)
			err = pooldriver.New(b.dsn(bouncerTx, behindTx, "pool_mode=session")).Err()
			require.ErrorIs(t, err, pooldriver.ErrNoServerSession)
		})

		t.Run("GORM and sqlx", func(t *testing.T) { ormsThrough(t, s, db, conn, pooldriver.TransactionMode) })

		assert.Zero(t, openTxs(t))
		sc, err := b.serverConns(ctx(t), bouncerTx)
		require.NoError(t, err)
		assert.LessOrEqual(t, sc, b.poolSize, "PgBouncer opened more server connections than default_pool_size")
	})
}

// TestPgBouncerFourInstances: four separate pooldriver Connectors (four
// service instances) of 10 connections each share one PgBouncer pool of 4
// server connections; 64 goroutines write through all of them with
// *sql.Tx, raw transactions in tasks and prepared statements. No error,
// every committed write is there, and the server never sees more than 4
// connections from PgBouncer.
func TestPgBouncerFourInstances(t *testing.T) {
	longTest(t)
	forServer(t, "postgres", func(t *testing.T, s server) {
		b := startPgBouncer(t, s, 4)
		direct := openPlainPgx(t, s.dsn, 2)
		table := unique("pgb_four")
		_, err := direct.ExecContext(ctx(t), "CREATE TABLE "+table+" (id int PRIMARY KEY, instance int NOT NULL, kind text NOT NULL)")
		require.NoError(t, err)
		t.Cleanup(func() { _, _ = direct.Exec("DROP TABLE IF EXISTS " + table) })

		const instances, perInstance, rounds = 4, 16, 30
		dbs := make([]*sql.DB, instances)
		stmts := make([]*sql.Stmt, instances)
		for i := range dbs {
			dbs[i], _ = openPooled(t, b.dsn(bouncerTx, behindTx, "pool_max_conns=10"))
			stmts[i], err = dbs[i].PrepareContext(ctx(t), "INSERT INTO "+table+" VALUES ($1, $2, 'stmt')")
			require.NoError(t, err)
		}
		c := timeout(t, hangTimeout)

		var tally errorTally
		var committed atomic.Int64
		var peak atomic.Int64
		stopWatch := make(chan struct{})
		watched := make(chan struct{})
		go func() { // PgBouncer's server connections, while the load runs
			defer close(watched)
			for {
				if n, err := b.serverConns(c, bouncerTx); err == nil && int64(n) > peak.Load() {
					peak.Store(int64(n))
				}
				select {
				case <-stopWatch:
					return
				case <-time.After(50 * time.Millisecond):
				}
			}
		}()
		var wg sync.WaitGroup
		for g := range instances * perInstance {
			inst := g % instances
			db, stmt := dbs[inst], stmts[inst]
			wg.Go(func() {
				for r := range rounds {
					id := g*rounds + r
					var err error
					switch r % 3 {
					case 0:
						err = txInsert(c, db, table, id, inst)
					case 1:
						err = rawTaskInsert(c, db, table, id, inst)
					case 2:
						_, err = stmt.ExecContext(c, id, inst)
					}
					tally.add(err)
					if err == nil {
						committed.Add(1)
					}
				}
			})
		}
		wg.Wait()
		close(stopWatch)
		<-watched
		n, first := tally.count()
		require.Zero(t, n, "first error: %v", first)
		if first != nil {
			assert.NotContains(t, first.Error(), "does not exist")
		}
		var count int64
		require.NoError(t, direct.QueryRowContext(c, "SELECT count(*) FROM "+table).Scan(&count))
		assert.Equal(t, int64(instances*perInstance*rounds), committed.Load())
		assert.Equal(t, committed.Load(), count, "committed writes missing")
		var perInst [instances]int64
		rows, err := direct.QueryContext(c, "SELECT instance, count(*) FROM "+table+" GROUP BY instance")
		require.NoError(t, err)
		for rows.Next() {
			var i int
			var k int64
			require.NoError(t, rows.Scan(&i, &k))
			perInst[i] = k
		}
		require.NoError(t, rows.Err())
		rows.Close()
		for i, k := range perInst {
			assert.Equal(t, int64(perInstance*rounds), k, "instance %d", i)
		}
		t.Logf("peak server connections from PgBouncer: %d (default_pool_size %d; pooldriver: 4 × 10)", peak.Load(), b.poolSize)
		assert.LessOrEqual(t, peak.Load(), int64(b.poolSize))
		assert.Positive(t, peak.Load())
	})
}

// ormsThrough runs GORM's (with and without PrepareStmt) and sqlx's CRUD
// and transactions on db, outside a task and in a task of mode.
func ormsThrough(t *testing.T, s server, db *sql.DB, c *pooldriver.Connector, mode pooldriver.Mode) {
	direct := openPlainPgx(t, s.dsn, 1)
	g := openGORM(t, &ormEnv{s: s, c: c, db: db}, unique("pgb")+"_")
	tbl := tableOf(t, g)
	t.Cleanup(func() { _, _ = direct.Exec("DROP TABLE IF EXISTS " + tbl) })
	require.NoError(t, g.AutoMigrate(&ormWidget{}))
	gormCRUD(t, g.WithContext(ctx(t)), "plain")
	p := g.Session(&gorm.Session{PrepareStmt: true})
	gormCRUD(t, p.WithContext(ctx(t)), "prep")
	tc, end := pooldriver.WithTask(ctx(t), mode)
	gormCRUD(t, p.WithContext(tc), "prep-task")
	end()

	x := sqlx.NewDb(db, "pgx")
	xt := unique("pgb_sqlx")
	x.MustExec("CREATE TABLE " + xt + " (id INT PRIMARY KEY, name VARCHAR(64) NOT NULL, qty INT NOT NULL)")
	t.Cleanup(func() { _, _ = direct.Exec("DROP TABLE IF EXISTS " + xt) })
	sqlxCRUD(t, x, ctx(t), false, xt, 0)
	tc, end = pooldriver.WithTask(ctx(t), mode)
	sqlxCRUD(t, x, tc, true, xt, 10)
	end()
}

func txInsert(c context.Context, db *sql.DB, table string, id, inst int) error {
	tx, err := db.BeginTx(c, nil)
	if err != nil {
		return err
	}
	if _, err := tx.ExecContext(c, "INSERT INTO "+table+" VALUES ($1, $2, 'tx')", id, inst); err != nil {
		tx.Rollback()
		return err
	}
	return tx.Commit()
}

// rawTaskInsert inserts in a raw transaction that spans three calls of a
// task, and checks that they ran in one transaction.
func rawTaskInsert(c context.Context, db *sql.DB, table string, id, inst int) error {
	tc, end := pooldriver.WithTask(c)
	defer end()
	var x1, x2 int64
	if _, err := db.ExecContext(tc, "BEGIN"); err != nil {
		return err
	}
	if err := db.QueryRowContext(tc, "SELECT txid_current()").Scan(&x1); err != nil {
		return err
	}
	if _, err := db.ExecContext(tc, "INSERT INTO "+table+" VALUES ($1, $2, 'raw')", id, inst); err != nil {
		return err
	}
	if err := db.QueryRowContext(tc, "SELECT txid_current()").Scan(&x2); err != nil {
		return err
	}
	if x1 != x2 {
		return fmt.Errorf("raw transaction split: txid %d then %d", x1, x2)
	}
	_, err := db.ExecContext(tc, "COMMIT")
	return err
}

// TestPgBouncerSessionPooling: behind session pooling, session-mode tasks
// keep their session (SET, temporary table) across calls and leave nothing
// behind for the next task, as plain pgx keeps it on a *sql.Conn; GORM,
// sqlx and named prepared statements work.
func TestPgBouncerSessionPooling(t *testing.T) {
	longTest(t)
	forServer(t, "postgres", func(t *testing.T, s server) {
		// A session pool gives each client connection a server connection
		// of its own: room for both clients' 4.
		b := startPgBouncer(t, s, 8)
		db, conn := openPooled(t, b.dsn(bouncerSession, "pool_server_pooling=session", "pool_max_conns=4"))
		plain := openPlainPgx(t, b.dsn(bouncerSession), 4)

		session := func(t *testing.T, r runner, c context.Context) {
			t.Helper()
			_, err := r.ExecContext(c, "SET statement_timeout = '42s'")
			require.NoError(t, err)
			_, err = r.ExecContext(c, "CREATE TEMP TABLE pgb_session_tmp (a int)")
			require.NoError(t, err)
			_, err = r.ExecContext(c, "INSERT INTO pgb_session_tmp VALUES ($1)", 7)
			require.NoError(t, err)
			var v string
			require.NoError(t, r.QueryRowContext(c, "SHOW statement_timeout").Scan(&v))
			assert.Equal(t, "42s", v)
			var a int
			require.NoError(t, r.QueryRowContext(c, "SELECT a FROM pgb_session_tmp").Scan(&a))
			assert.Equal(t, 7, a)
		}
		clean := func(t *testing.T, r runner, c context.Context) {
			t.Helper()
			var v string
			require.NoError(t, r.QueryRowContext(c, "SHOW statement_timeout").Scan(&v))
			assert.Equal(t, "0", v, "a session setting leaked to the next user")
			var leaked bool
			require.NoError(t, r.QueryRowContext(c, "SELECT to_regclass('pgb_session_tmp') IS NOT NULL").Scan(&leaked))
			assert.False(t, leaked, "a temporary table leaked to the next user")
		}

		t.Run("plain pgx on a sql.Conn", func(t *testing.T) {
			c := ctx(t)
			conn, err := plain.Conn(c)
			require.NoError(t, err)
			session(t, conn, c)
			conn.Close()
		})
		t.Run("pooldriver session-mode tasks", func(t *testing.T) {
			for range 3 {
				tc, end := pooldriver.WithTask(ctx(t), pooldriver.SessionMode)
				session(t, db, tc)
				end()
				// Every connection: the pool has 4.
				for range 4 {
					clean(t, db, ctx(t))
				}
			}
		})
		t.Run("GORM and sqlx", func(t *testing.T) { ormsThrough(t, s, db, conn, pooldriver.SessionMode) })
		t.Run("prepared statements", func(t *testing.T) {
			c := timeout(t, hangTimeout)
			n, first := queryRowLoad(c, db, true)
			assert.Zero(t, n, "pooldriver: first error %v", first)
			n, first = queryRowLoad(c, plain, true)
			assert.Zero(t, n, "plain pgx: first error %v", first)
		})
	})
}
