package integration

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pooldriver/pooldriver"
)

// TestReadsRoute: with pool_reads=standby on a private primary and its
// streaming standby, a read-only task, a ReadOnly context and a
// read-only *sql.Tx run on the standby, every other statement on the
// primary; a task's read-only transaction after its commit sees the
// commit.
func TestReadsRoute(t *testing.T) {
	skipShort(t)
	_, c, db := openReads(t, "pool_reads=standby&pool_max_replica_lag=5s")
	bg := ctx(t)
	_, err := db.ExecContext(bg, "CREATE TABLE reads_route (k int PRIMARY KEY)")
	require.NoError(t, err)
	inRecovery := func(ctx context.Context) bool {
		t.Helper()
		var b bool
		require.NoError(t, db.QueryRowContext(ctx, "SELECT pg_is_in_recovery()").Scan(&b))
		return b
	}
	require.False(t, inRecovery(bg), "a plain statement")
	require.True(t, inRecovery(pooldriver.ReadOnly(bg)), "a ReadOnly context")
	tctx, end := pooldriver.WithTask(pooldriver.ReadOnly(bg))
	require.True(t, inRecovery(tctx), "a read-only task")
	end()
	tx, err := db.BeginTx(bg, &sql.TxOptions{ReadOnly: true})
	require.NoError(t, err)
	var b bool
	require.NoError(t, tx.QueryRowContext(bg, "SELECT pg_is_in_recovery()").Scan(&b))
	require.NoError(t, tx.Commit())
	require.True(t, b, "a read-only *sql.Tx")

	// A write the standby refuses runs again on the primary, once: outside
	// a transaction; in a read-only one it is the caller's error.
	_, err = db.ExecContext(pooldriver.ReadOnly(bg), "INSERT INTO reads_route VALUES (-1)")
	require.NoError(t, err, "a write with a ReadOnly context, outside a transaction")
	wctx, wend := pooldriver.WithTask(pooldriver.ReadOnly(bg))
	_, err = db.ExecContext(wctx, "INSERT INTO reads_route VALUES (-2)")
	require.NoError(t, err, "a write of a read-only task, outside a transaction")
	wend()
	tx, err = db.BeginTx(bg, &sql.TxOptions{ReadOnly: true})
	require.NoError(t, err)
	_, err = tx.ExecContext(bg, "INSERT INTO reads_route VALUES (-3)")
	require.ErrorContains(t, err, "25006")
	require.NoError(t, tx.Rollback())
	var n int
	require.NoError(t, db.QueryRowContext(bg, "SELECT count(*) FROM reads_route WHERE k < 0").Scan(&n))
	require.Equal(t, 2, n, "each refused write ran once on the primary")

	// A transaction-mode task whose session changed keeps its connection
	// bound; its write there sends its read-only *sql.Tx, which takes a
	// connection of its own, to the primary.
	{
		tctx, end := pooldriver.WithTask(bg)
		_, err := db.ExecContext(tctx, "SET application_name = 'reads_route'")
		require.NoError(t, err)
		_, err = db.ExecContext(tctx, "INSERT INTO reads_route VALUES (-10)")
		require.NoError(t, err)
		rtx, err := db.BeginTx(tctx, &sql.TxOptions{ReadOnly: true})
		require.NoError(t, err)
		var n int
		require.NoError(t, rtx.QueryRowContext(tctx, "SELECT count(*) FROM reads_route WHERE k = -10").Scan(&n))
		require.NoError(t, rtx.Commit())
		require.Equal(t, 1, n, "a read-only *sql.Tx after the task's write on its bound connection")
		end()
	}
	// A session-mode task that is not read-only binds a primary's
	// connection, also for a first statement with a ReadOnly context: its
	// later writes run there.
	{
		tctx, end := pooldriver.WithTask(bg, pooldriver.SessionMode)
		require.False(t, inRecovery(pooldriver.ReadOnly(tctx)), "a session-mode task's first read")
		_, err := db.ExecContext(tctx, "INSERT INTO reads_route VALUES (-11)")
		require.NoError(t, err, "the session-mode task's write")
		end()
	}

	for k := range 200 {
		tctx, end := pooldriver.WithTask(bg)
		tx, err := db.BeginTx(tctx, nil)
		require.NoError(t, err)
		_, err = tx.ExecContext(tctx, "INSERT INTO reads_route VALUES ($1)", k)
		require.NoError(t, err)
		require.NoError(t, tx.Commit())
		require.NotEmpty(t, pooldriver.ReadToken(tctx))
		rtx, err := db.BeginTx(tctx, &sql.TxOptions{ReadOnly: true})
		require.NoError(t, err)
		require.NoError(t, rtx.QueryRowContext(tctx, "SELECT count(*) FROM reads_route WHERE k = $1", k).Scan(&n))
		require.NoError(t, rtx.Commit())
		require.Equal(t, 1, n, "task %d read its own write", k)
		end()
		if k%50 == 0 {
			time.Sleep(30 * time.Millisecond) // let a look see the standby replay it
		}
	}
	st := c.Stats()
	t.Logf("reads on standby %d, on primary %d", st.ReadsOnStandby, st.ReadsOnPrimary)
	require.NotZero(t, st.ReadsOnStandby)
}

// TestReadsRouteSelects: with pool_reads=selects a statement outside a
// transaction that the dialect proves only reads runs on a standby with
// any context; one it cannot prove (a call of a user's function, a
// locking SELECT) runs on the primary; in a task, a read after a commit
// sees the commit.
func TestReadsRouteSelects(t *testing.T) {
	skipShort(t)
	_, c, db := openReads(t, "pool_reads=selects&pool_max_replica_lag=5s")
	bg := ctx(t)
	_, err := db.ExecContext(bg, "CREATE TABLE reads_selects (k int PRIMARY KEY); INSERT INTO reads_selects VALUES (-1); CREATE FUNCTION reads_selects_f() RETURNS bool LANGUAGE sql AS 'SELECT pg_is_in_recovery()'")
	require.NoError(t, err)
	onStandby := func(ctx context.Context, q string) bool {
		t.Helper()
		var b bool
		require.NoError(t, db.QueryRowContext(ctx, q).Scan(&b), q)
		return b
	}
	waitReadable(t, bg, db)
	require.True(t, onStandby(bg, "SELECT pg_is_in_recovery()"), "a plain SELECT of built-ins")
	require.False(t, onStandby(bg, "SELECT reads_selects_f()"), "a call of a user's function")
	require.False(t, onStandby(bg, "SELECT pg_is_in_recovery() FROM reads_selects WHERE k = -1 FOR UPDATE"), "a locking SELECT")
	for k := range 100 {
		tctx, end := pooldriver.WithTask(bg)
		tx, err := db.BeginTx(tctx, nil)
		require.NoError(t, err)
		_, err = tx.ExecContext(tctx, "INSERT INTO reads_selects VALUES ($1)", k)
		require.NoError(t, err)
		require.NoError(t, tx.Commit())
		var n int
		require.NoError(t, db.QueryRowContext(tctx, "SELECT count(*) FROM reads_selects WHERE k = $1", k).Scan(&n))
		require.Equal(t, 1, n, "task %d read its own write", k)
		end()
	}
	// A *sql.Conn whose first statement, proven a read, took a standby's
	// connection moves to the primary for its first write, and keeps it.
	conn, err := db.Conn(bg)
	require.NoError(t, err)
	var b bool
	require.NoError(t, conn.QueryRowContext(bg, "SELECT pg_is_in_recovery()").Scan(&b))
	require.True(t, b, "a *sql.Conn's first statement, proven a read")
	_, err = conn.ExecContext(bg, "INSERT INTO reads_selects VALUES (-2)")
	require.NoError(t, err, "the *sql.Conn's write after a read on a standby")
	require.NoError(t, conn.QueryRowContext(bg, "SELECT pg_is_in_recovery()").Scan(&b))
	require.False(t, b, "the *sql.Conn stays on the primary after its write")
	require.NoError(t, conn.Close())
	st := c.Stats()
	t.Logf("reads on standby %d, on primary %d", st.ReadsOnStandby, st.ReadsOnPrimary)
}

// TestReadsRouteSelectsCatalog: with pool_reads=selects a SELECT that
// calls a user's function runs on a standby once the catalog the
// primary's connections read proves the function a read (harmless,
// STABLE, calling no built-in that writes or answers for the session);
// a VOLATILE one, and a STABLE one that calls nextval, run on the
// primary.
func TestReadsRouteSelectsCatalog(t *testing.T) {
	skipShort(t)
	_, c, db := openReads(t, "pool_reads=selects&pool_max_replica_lag=5s")
	bg := ctx(t)
	_, err := db.ExecContext(bg, `CREATE SEQUENCE reads_cat_seq;
		CREATE FUNCTION reads_cat_stable() RETURNS bool STABLE LANGUAGE sql AS 'SELECT pg_is_in_recovery()';
		CREATE FUNCTION reads_cat_volatile() RETURNS bool VOLATILE LANGUAGE sql AS 'SELECT pg_is_in_recovery()';
		CREATE FUNCTION reads_cat_seq() RETURNS bool STABLE LANGUAGE plpgsql AS $$ BEGIN PERFORM nextval('reads_cat_seq'); RETURN pg_is_in_recovery(); END $$`)
	require.NoError(t, err)
	standbyAcquires := func() int64 { return c.Standbys()[0].Pool.Acquires }
	// The standby serves it once it replayed the functions and the
	// primary's catalog reading since the DDL is in.
	waitFor(t, "a STABLE function's call on the standby", func() bool {
		var b bool
		return db.QueryRowContext(bg, "SELECT reads_cat_stable()").Scan(&b) == nil && b
	})
	onPrimary := func(q string) {
		t.Helper()
		// The standby serves reads now: a STABLE call goes there.
		var b bool
		require.NoError(t, db.QueryRowContext(bg, "SELECT reads_cat_stable()").Scan(&b))
		require.True(t, b, "the standby serves reads before %s", q)
		before := standbyAcquires()
		require.NoError(t, db.QueryRowContext(bg, q).Scan(&b), q)
		require.False(t, b, q)
		require.Equal(t, before, standbyAcquires(), "%s: not tried on the standby", q)
	}
	onPrimary("SELECT reads_cat_volatile()")
	onPrimary("SELECT reads_cat_seq()")
	before := standbyAcquires()
	var b bool
	require.NoError(t, db.QueryRowContext(bg, "SELECT reads_cat_stable()").Scan(&b))
	require.True(t, b, "a STABLE function's call, again")
	require.Equal(t, before+1, standbyAcquires())
}

// TestReadsSayWhichHost: a read served by a standby is traced as its
// host's pool's acquire (pool_name, then "standby host:port"), and counted
// in that host's Stats; a write is the primary pool's.
func TestReadsSayWhichHost(t *testing.T) {
	skipShort(t)
	tr := &poolNames{}
	standby, c, db := openReads(t, "pool_reads=standby&pool_max_replica_lag=5s&pool_name=shop", pooldriver.WithTracer(tr))
	bg := ctx(t)
	var inRecovery bool
	// Until the standby serves reads (its looks may lag on a loaded
	// machine), through a database/sql pool of its own that keeps no idle
	// conn (its Close would close the Connector), so that db's first read
	// takes a connection from the Connector's pool.
	warm := sql.OpenDB(c)
	warm.SetMaxIdleConns(0)
	waitFor(t, "a read the standby serves", func() bool {
		return warm.QueryRowContext(pooldriver.ReadOnly(bg), "SELECT pg_is_in_recovery()").Scan(&inRecovery) == nil && inRecovery
	})
	require.Len(t, c.Standbys(), 1, "the primary's host is not listed")
	before := c.Standbys()[0].Pool.Acquires
	tr.take()
	require.NoError(t, db.QueryRowContext(pooldriver.ReadOnly(bg), "SELECT pg_is_in_recovery()").Scan(&inRecovery))
	require.True(t, inRecovery)
	standbyPool := fmt.Sprintf("shop standby 127.0.0.1:%d", standby.port)
	require.Equal(t, []string{standbyPool}, tr.take(), "the read's acquire")
	require.Equal(t, before+1, c.Standbys()[0].Pool.Acquires, "the standby's pool served the read")

	_, err := db.ExecContext(bg, "CREATE TABLE reads_which_host (k int)")
	require.NoError(t, err)
	require.Equal(t, []string{"shop"}, tr.take(), "the write's acquire")
}

// poolNames is a Tracer that records the pool of each acquire.
type poolNames struct {
	mu    sync.Mutex
	names []string
}

func (p *poolNames) take() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := p.names
	p.names = nil
	return n
}

func (p *poolNames) TraceAcquireStart(ctx context.Context, d pooldriver.TraceAcquireStartData) context.Context {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.names = append(p.names, d.PoolName)
	return ctx
}

func (p *poolNames) TraceAcquireEnd(context.Context, pooldriver.TraceAcquireEndData) {}

func (p *poolNames) TraceConnectStart(ctx context.Context, _ pooldriver.TraceConnectStartData) context.Context {
	return ctx
}

func (p *poolNames) TraceConnectEnd(context.Context, pooldriver.TraceConnectEndData) {}

// TestReadsNotYetReplayed: a read of a table the primary made a moment
// ago, which the standby has not replayed yet (its replay paused here, a
// deploy's migration a moment before in life), runs again on the primary
// and succeeds, outside a task and in a read-only task. (In a task, a call
// of a user's function the standby lacks is the caller's error: the call
// counts as a session change, which binds the standby's connection to the
// task before the error is seen; docs/reads.md.)
func TestReadsNotYetReplayed(t *testing.T) {
	skipShort(t)
	standby, c, db := openReads(t, "pool_reads=standby&pool_max_replica_lag=30s")
	bg := ctx(t)
	sb, err := sql.Open("pgx", fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", standby.port))
	require.NoError(t, err)
	defer sb.Close()
	_, err = sb.ExecContext(bg, "SELECT pg_wal_replay_pause()")
	require.NoError(t, err)
	defer func() { _, _ = sb.ExecContext(context.Background(), "SELECT pg_wal_replay_resume()") }()
	_, err = db.ExecContext(bg, "CREATE TABLE reads_not_replayed (k int); INSERT INTO reads_not_replayed VALUES (7); CREATE FUNCTION reads_not_replayed_f() RETURNS int STABLE LANGUAGE sql AS 'SELECT 8'")
	require.NoError(t, err)
	waitReadable(t, pooldriver.ReadOnly(bg), db)
	before := c.Standbys()[0].Pool.Acquires
	var k int
	require.NoError(t, db.QueryRowContext(pooldriver.ReadOnly(bg), "SELECT k FROM reads_not_replayed").Scan(&k), "a table the standby has not replayed")
	require.Equal(t, 7, k)
	require.NoError(t, db.QueryRowContext(pooldriver.ReadOnly(bg), "SELECT reads_not_replayed_f()").Scan(&k), "a function the standby has not replayed")
	require.Equal(t, 8, k)
	tctx, end := pooldriver.WithTask(pooldriver.ReadOnly(bg))
	require.NoError(t, db.QueryRowContext(tctx, "SELECT k + 1 FROM reads_not_replayed").Scan(&k), "a read-only task's read of the table")
	end()
	require.Equal(t, 8, k)
	require.Greater(t, c.Standbys()[0].Pool.Acquires, before, "the reads were tried on the standby first")
	require.True(t, c.Standbys()[0].Up, "the standby stayed up for reads")
}

// waitReadable waits for a read of built-ins with ctx to run on a
// standby: after DDL the process ran, the catalog reading the router goes
// by is taken again off the callers' paths, and until then nothing is
// proved a standby's read (the primary serves them).
func waitReadable(t *testing.T, ctx context.Context, db *sql.DB) {
	t.Helper()
	waitFor(t, "a catalog reading since the test's DDL", func() bool {
		var b bool
		return db.QueryRowContext(ctx, "SELECT pg_is_in_recovery()").Scan(&b) == nil && b
	})
}

// openReads starts a private primary and its streaming standby, opens
// pooldriver over both hosts with params (pool_reads and the like) and
// opts, and waits for the looks that found the standby up and the
// primary's host a primary (Standbys lists the standby alone); db closes
// with the test.
func openReads(t *testing.T, params string, opts ...pooldriver.Option) (standby *localPG, c *pooldriver.Connector, db *sql.DB) {
	t.Helper()
	primary := startLocalPG(t)
	standby = primary.startStandby(t)
	c = pooldriver.New(fmt.Sprintf("postgres://postgres@127.0.0.1:%d,127.0.0.1:%d/postgres?sslmode=disable&target_session_attrs=read-write&%s",
		primary.port, standby.port, params), opts...)
	require.NoError(t, c.Err())
	db = sql.OpenDB(c)
	t.Cleanup(func() { _ = db.Close() })
	waitFor(t, "the standby's first look", func() bool {
		s := c.Standbys()
		return len(s) == 1 && s[0].Host == standby.host() && s[0].Up
	})
	return standby, c, db
}

// TestReadsOnlyWalk: ReadOnly point selects in a row, each served by the
// standby's connection the last one parked (a Stats count per read). Run
// N and 2N times under coverage, it shows the code one such read runs:
//
//	for n in 200 400; do POOLDRIVER_WALK_READS=$n go test -count=1 -run '^TestReadsOnlyWalk$' \
//	  -covermode=count -coverpkg=github.com/pooldriver/pooldriver -coverprofile=/tmp/walk$n.out ./integration/; done
//	go run ./internal/cmd/archstat -covdiff -v /tmp/walk200.out /tmp/walk400.out
func TestReadsOnlyWalk(t *testing.T) {
	skipShort(t)
	n := 20
	if s := os.Getenv("POOLDRIVER_WALK_READS"); s != "" {
		var err error
		n, err = strconv.Atoi(s)
		require.NoError(t, err, "POOLDRIVER_WALK_READS")
	}
	_, c, db := openReads(t, "pool_reads=standby&pool_max_replica_lag=30s&pool_max_conns=1")
	db.SetMaxOpenConns(1)
	ro := pooldriver.ReadOnly(ctx(t))
	var inRecovery bool
	waitFor(t, "a read served by the standby", func() bool {
		return db.QueryRowContext(ro, "SELECT pg_is_in_recovery()").Scan(&inRecovery) == nil && inRecovery
	})
	before := c.Stats().ReadsOnStandby
	for range n {
		require.NoError(t, db.QueryRowContext(ro, "SELECT pg_is_in_recovery()").Scan(&inRecovery))
		require.True(t, inRecovery)
	}
	require.Equal(t, before+int64(n), c.Stats().ReadsOnStandby)
}
