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

	"github.com/stretchr/testify/require"

	"github.com/pooldriver/pooldriver"
)

// Reads on MariaDB replicas, causally consistent by GTID. Each test starts
// a private primary with two replicas that replicate by GTID, the second
// MASTER_DELAY=1 s behind (MariaDB's delay is in whole seconds), and runs
// the workload of reads_test.go through pooldriver, beside a
// dbresolver-style split and the primary alone, on plain go-sql-driver.

// mariaCluster is a MariaDB primary and its replicas, each with the table
// reads_rows and a user app that, unlike root, read_only binds.
type mariaCluster struct {
	primary  *localMariaDB
	replicas []*localMariaDB
	admin    map[*localMariaDB]*sql.DB
}

// startMariaCluster starts a primary and one replica per delay (whole
// seconds of MASTER_DELAY), and waits until every replica has what the
// primary made.
func startMariaCluster(t *testing.T, delays ...int) *mariaCluster {
	t.Helper()
	cl := &mariaCluster{admin: map[*localMariaDB]*sql.DB{}}
	binlog := []string{"--log-bin=mb", "--binlog-format=ROW", "--gtid-strict-mode=ON", "--log-slave-updates"}
	cl.primary = startLocalMariaDBWith(t, 200, append(binlog, "--server-id=1")...)
	for i := range delays {
		cl.replicas = append(cl.replicas, startLocalMariaDBWith(t, 200, append(binlog, fmt.Sprintf("--server-id=%d", i+2), "--read-only=ON")...))
	}
	for _, m := range append([]*localMariaDB{cl.primary}, cl.replicas...) {
		db, err := sql.Open("mysql", "root@tcp("+m.addr()+")/test")
		require.NoError(t, err)
		t.Cleanup(func() { _ = db.Close() })
		cl.admin[m] = db
	}
	pos := cl.position(t)
	for i, r := range cl.replicas {
		for _, q := range []string{
			"RESET MASTER", // its own CREATE DATABASE test: the primary's stands for it
			"SET GLOBAL gtid_slave_pos = '" + pos + "'",
			fmt.Sprintf("CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT=%d, MASTER_USER='root', MASTER_PASSWORD='', MASTER_USE_GTID=slave_pos, MASTER_DELAY=%d", cl.primary.port, delays[i]),
			"START SLAVE",
		} {
			_, err := cl.admin[r].ExecContext(ctx(t), q)
			require.NoError(t, err, q)
		}
	}
	for _, q := range []string{
		"CREATE USER 'app'@'%' IDENTIFIED BY 'app'",
		"GRANT ALL PRIVILEGES ON test.* TO 'app'@'%'",
		"CREATE TABLE reads_rows (id bigint AUTO_INCREMENT PRIMARY KEY, body varchar(100) NOT NULL)",
	} {
		_, err := cl.admin[cl.primary].ExecContext(ctx(t), q)
		require.NoError(t, err, q)
	}
	cl.waitApplied(t)
	return cl
}

// position returns the primary's GTID position.
func (cl *mariaCluster) position(t *testing.T) string {
	t.Helper()
	var pos string
	require.NoError(t, cl.admin[cl.primary].QueryRowContext(ctx(t), "SELECT @@global.gtid_binlog_pos").Scan(&pos))
	return pos
}

// waitApplied waits until every replica has applied what the primary had
// when it was called.
func (cl *mariaCluster) waitApplied(t *testing.T) {
	t.Helper()
	pos := cl.position(t)
	for _, r := range cl.replicas {
		var got int
		require.NoError(t, cl.admin[r].QueryRowContext(ctx(t), "SELECT MASTER_GTID_WAIT(?, 60)", pos).Scan(&got))
		require.Zero(t, got, "replica on %d: MASTER_GTID_WAIT(%s) timed out", r.port, pos)
	}
}

// dsn is a pooldriver DSN naming the primary and the replicas, as user
// app, with params added.
func (cl *mariaCluster) dsn(params string) string {
	addrs := []string{cl.primary.addr()}
	for _, r := range cl.replicas {
		addrs = append(addrs, r.addr())
	}
	return "mysql://app:app@tcp(" + strings.Join(addrs, ",") + ")/test?" + params
}

// openMariaReads opens pooldriver on the cluster with pool_reads=standby.
func openMariaReads(t *testing.T, cl *mariaCluster) (*pooldriver.Connector, *sql.DB) {
	t.Helper()
	c := pooldriver.New(cl.dsn(fmt.Sprintf("pool_target=primary&pool_reads=standby&pool_max_replica_lag=%s&pool_max_conns=%d", readsMaxLag, readsConns)))
	require.NoError(t, c.Err())
	db := sql.OpenDB(c)
	t.Cleanup(func() { _ = db.Close() })
	return c, db
}

// openMySQLPlain opens plain go-sql-driver on m as app.
func openMySQLPlain(t *testing.T, m *localMariaDB) *sql.DB {
	t.Helper()
	db, err := sql.Open("mysql", "app:app@tcp("+m.addr()+")/test")
	require.NoError(t, err)
	db.SetMaxOpenConns(readsConns)
	db.SetMaxIdleConns(readsConns)
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// seedMaria writes readsSeedRows rows on the primary, waits until every
// replica has them, and returns their ids.
func (cl *mariaCluster) seed(t *testing.T) []int64 {
	t.Helper()
	var ids []int64
	for i := range readsSeedRows {
		res, err := cl.admin[cl.primary].ExecContext(ctx(t), "INSERT INTO reads_rows (body) VALUES (?)", fmt.Sprintf("seed %d", i))
		require.NoError(t, err)
		id, err := res.LastInsertId()
		require.NoError(t, err)
		ids = append(ids, id)
	}
	cl.waitApplied(t)
	return ids
}

// mariaWriteRead writes a row with body in a transaction on w with wctx
// and reads it back by id on r with rctx: missed if the read does not see
// it.
func mariaWriteRead(wctx, rctx context.Context, w, r *sql.DB, body string) (missed bool, err error) {
	tx, err := w.BeginTx(wctx, nil)
	if err != nil {
		return false, fmt.Errorf("%w: %w", errReadsWrite, err)
	}
	res, err := tx.ExecContext(wctx, "INSERT INTO reads_rows (body) VALUES (?)", body)
	if err != nil {
		_ = tx.Rollback()
		return false, fmt.Errorf("%w: %w", errReadsWrite, err)
	}
	id, err := res.LastInsertId()
	if err == nil {
		err = tx.Commit()
	}
	if err != nil {
		return false, fmt.Errorf("%w: %w", errReadsWrite, err)
	}
	var got string
	err = r.QueryRowContext(rctx, "SELECT body FROM reads_rows WHERE id = ?", id).Scan(&got)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return true, nil
	case err != nil:
		return false, fmt.Errorf("reading back: %w", err)
	}
	return got != body, nil
}

// mariaReadSeeded reads the seeded row id on r with ctx, and where it ran:
// a replica's (read-only) server, and its port.
func mariaReadSeeded(ctx context.Context, r *sql.DB, id int64) (readsServer, error) {
	var where readsServer
	var body string
	err := r.QueryRowContext(ctx, "SELECT body, @@global.read_only, @@port FROM reads_rows WHERE id = ?", id).Scan(&body, &where.InRecovery, &where.Port)
	if err != nil {
		return readsServer{}, fmt.Errorf("seeded row %d: %w", id, err)
	}
	return where, nil
}

// mariaPooldriverSubject is pooldriverSubject on db, without GORM.
func mariaPooldriverSubject(db *sql.DB) readsSubject {
	return taskSubject(
		func(wctx, rctx context.Context, body string) (bool, error) {
			return mariaWriteRead(wctx, rctx, db, db, body)
		},
		func(ctx context.Context, id int64) (readsServer, error) { return mariaReadSeeded(ctx, db, id) })
}

// mariaResolverSubject splits as dbresolver does: writes on the primary,
// every read on a replica, the replicas taken in turn, on plain
// go-sql-driver.
func mariaResolverSubject(t *testing.T, cl *mariaCluster) readsSubject {
	w := openMySQLPlain(t, cl.primary)
	var replicas []*sql.DB
	for _, r := range cl.replicas {
		replicas = append(replicas, openMySQLPlain(t, r))
	}
	var turn atomic.Uint64
	replica := func() *sql.DB { return replicas[turn.Add(1)%uint64(len(replicas))] }
	return readsSubject{
		name: "dbresolver-style (go-sql-driver)",
		writeRead: func(body string) (bool, error) {
			return mariaWriteRead(context.Background(), context.Background(), w, replica(), body)
		},
		readOnly: func(id int64) (readsServer, error) { return mariaReadSeeded(context.Background(), replica(), id) },
	}
}

// mariaPrimarySubject runs everything on the primary, on plain
// go-sql-driver.
func mariaPrimarySubject(t *testing.T, cl *mariaCluster) readsSubject {
	db := openMySQLPlain(t, cl.primary)
	return readsSubject{
		name: "primary only (go-sql-driver)",
		writeRead: func(body string) (bool, error) {
			return mariaWriteRead(context.Background(), context.Background(), db, db, body)
		},
		readOnly: func(id int64) (readsServer, error) { return mariaReadSeeded(context.Background(), db, id) },
	}
}

// TestMySQLReadsOnReplicas: tasks that write a row in a transaction and
// read it back, and read-only tasks, on pooldriver with pool_reads=standby
// over a MariaDB primary and two replicas (one 1 s behind), beside a
// dbresolver-style split and the primary alone: pooldriver's reads never
// miss their task's write, most read-only tasks run on replicas, and no
// commit's report of its GTID costs a session reset.
func TestMySQLReadsOnReplicas(t *testing.T) {
	skipShort(t)
	n := readsN(t)
	cl := startMariaCluster(t, 0, 1)
	ids := cl.seed(t)
	c, db := openMariaReads(t, cl)
	pd := mariaPooldriverSubject(db)

	// Without writes, the replicas have all the primary has: they serve.
	waitFor(t, "both replicas up", func() bool {
		up := 0
		for _, s := range c.Standbys() {
			if s.Up {
				up++
			}
		}
		return up == len(cl.replicas)
	})
	requireIdleReadsOnStandbys(t, pd, ids)
	results, before, after := runReadsBeside(t, c, pd, n, ids, mariaResolverSubject(t, cl), mariaPrimarySubject(t, cl))
	require.Positive(t, after.ReadsOnStandby-before.ReadsOnStandby, "pooldriver: reads served by replicas")
	// A commit's GTID comes in its reply's report of session state, which
	// changes nothing a reset must undo.
	require.Zero(t, after.SessionResets-before.SessionResets, "pooldriver: sessions reset, though no task changed its session")
	require.Positive(t, results[1].missed.Load(), "the dbresolver-style split missed none of its writes: the delayed replica did not lag")
}

// insertCommitted inserts a row with body into reads_rows in a *sql.Tx
// with ctx, commits it, and returns its id.
func insertCommitted(t *testing.T, ctx context.Context, db *sql.DB, body string) int64 {
	t.Helper()
	tx, err := db.BeginTx(ctx, nil)
	require.NoError(t, err)
	res, err := tx.ExecContext(ctx, "INSERT INTO reads_rows (body) VALUES (?)", body)
	require.NoError(t, err)
	id, err := res.LastInsertId()
	require.NoError(t, err)
	require.NoError(t, tx.Commit())
	return id
}

// TestMySQLReadsToken: a write in one request, its ReadToken handed to
// the next, which reads on a replica only once it has the write.
func TestMySQLReadsToken(t *testing.T) {
	skipShort(t)
	cl := startMariaCluster(t, 0, 1)
	_, db := openMariaReads(t, cl)
	const requests = 1000
	missed, onReplica := 0, 0
	for i := range requests {
		ctx1, end1 := pooldriver.WithTask(context.Background())
		id := insertCommitted(t, ctx1, db, fmt.Sprint("token ", i))
		token := pooldriver.ReadToken(ctx1)
		end1()
		require.NotEmpty(t, token)

		ctx2, err := pooldriver.WithReadToken(context.Background(), token)
		require.NoError(t, err)
		ctx2, end2 := pooldriver.WithTask(pooldriver.ReadOnly(ctx2))
		var body string
		var readOnly bool
		err = db.QueryRowContext(ctx2, "SELECT body, @@global.read_only FROM reads_rows WHERE id = ?", id).Scan(&body, &readOnly)
		end2()
		switch {
		case errors.Is(err, sql.ErrNoRows):
			missed++
		case err != nil:
			require.NoError(t, err)
		case readOnly:
			onReplica++
		}
		if i%100 == 99 {
			time.Sleep(1100 * time.Millisecond) // the delayed replica catches up now and then
		}
	}
	t.Logf("%d requests with a token: %d missed their write, %d read on a replica", requests, missed, onReplica)
	require.Zero(t, missed)
	require.Positive(t, onReplica, "no request read on a replica")
}

// TestMySQLFailoverReplicas: a switchover as an orchestrator runs it, under
// load. A MariaDB primary and two replicas; 16 callers run tasks through
// pooldriver (pool_target=primary, pool_reads=standby), each a
// *sql.Tx that inserts a key and a ReadOnly read of it, beside 16
// writers of plain go-sql-driver pointed at the first replica by hand. The
// primary is fenced (read_only on), the replicas catch up, the primary is
// stopped, the first replica made writable and the second re-pointed at
// it. pooldriver's writes follow to the new primary (the first after the
// promotion is logged beside plain go-sql-driver's); every acknowledged
// key is on the new primary; no read misses its task's write, and reads
// go to the remaining replica once it has caught up.
func TestMySQLFailoverReplicas(t *testing.T) {
	skipShort(t)
	cl := startMariaCluster(t, 0, 0)
	_, err := cl.admin[cl.primary].ExecContext(ctx(t), "CREATE TABLE failover (id bigint PRIMARY KEY)")
	require.NoError(t, err)
	cl.waitApplied(t)
	c, db := openMariaReads(t, cl)
	promoted, next := cl.replicas[0], cl.replicas[1] // the second follows the first once it is promoted
	plain := openMySQLPlain(t, promoted)
	plain.SetMaxOpenConns(16)

	var (
		ids      atomic.Int64 // pooldriver's from 1, plain's from 1,000,000
		plainIDs atomic.Int64
		mu       sync.Mutex
		acked    []int64
		missed   atomic.Int64
		switched atomic.Int64 // unix ns of the promotion; 0 before
		first    [2]atomic.Int64
		stop     = make(chan struct{})
		wg       sync.WaitGroup
	)
	plainIDs.Store(1_000_000)
	after := func(which int) {
		if s := switched.Load(); s != 0 {
			first[which].CompareAndSwap(0, time.Now().UnixNano()-s)
		}
	}
	task := func() {
		c, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		tctx, end := pooldriver.WithTask(c)
		defer end()
		id := ids.Add(1)
		tx, err := db.BeginTx(tctx, nil)
		if err != nil {
			return
		}
		if _, err := tx.ExecContext(tctx, "INSERT INTO failover VALUES (?)", id); err != nil {
			_ = tx.Rollback()
			return
		}
		if tx.Commit() != nil {
			return
		}
		after(0)
		mu.Lock()
		acked = append(acked, id)
		mu.Unlock()
		var got int64
		err = db.QueryRowContext(pooldriver.ReadOnly(tctx), "SELECT id FROM failover WHERE id = ?", id).Scan(&got)
		if errors.Is(err, sql.ErrNoRows) {
			missed.Add(1)
		}
	}
	for range 16 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				task()
			}
		})
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				c, cancel := context.WithTimeout(context.Background(), time.Second)
				_, err := plain.ExecContext(c, "INSERT INTO failover VALUES (?)", plainIDs.Add(1))
				cancel()
				if err != nil {
					time.Sleep(time.Millisecond)
					continue
				}
				after(1)
			}
		})
	}
	time.Sleep(time.Second)
	fenced := time.Now()
	_, err = cl.admin[cl.primary].ExecContext(ctx(t), "SET GLOBAL read_only = ON")
	require.NoError(t, err)
	cl.waitApplied(t)
	cl.primary.crash(t)
	for _, q := range []string{"STOP SLAVE", "RESET SLAVE ALL", "SET GLOBAL read_only = OFF"} {
		_, err := cl.admin[promoted].ExecContext(ctx(t), q)
		require.NoError(t, err, q)
	}
	switched.Store(time.Now().UnixNano())
	for _, q := range []string{
		"STOP SLAVE",
		fmt.Sprintf("CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT=%d, MASTER_USER='root', MASTER_PASSWORD='', MASTER_USE_GTID=slave_pos", promoted.port),
		"START SLAVE",
	} {
		_, err := cl.admin[next].ExecContext(ctx(t), q)
		require.NoError(t, err, q)
	}
	deadline := time.Now().Add(10 * time.Second)
	for (first[0].Load() == 0 || first[1].Load() == 0) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	before := c.Stats()
	time.Sleep(2 * time.Second) // tasks on the new primary and the remaining replica
	close(stop)
	wg.Wait()
	afterStats := c.Stats()

	pooled, byHand := time.Duration(first[0].Load()), time.Duration(first[1].Load())
	t.Logf("fenced to promoted %v; first write after the promotion: pooldriver %v, plain go-sql-driver at the new primary %v",
		time.Unix(0, switched.Load()).Sub(fenced).Round(time.Millisecond), pooled, byHand)
	require.NotZero(t, pooled, "pooldriver wrote nothing within 10s of the promotion")
	require.NotZero(t, byHand, "plain go-sql-driver wrote nothing within 10s of the promotion")
	require.LessOrEqual(t, pooled, byHand+time.Second, "pooldriver's first write after the promotion")

	onNew := map[int64]bool{}
	rows, err := cl.admin[promoted].QueryContext(ctx(t), "SELECT id FROM failover WHERE id < 1000000")
	require.NoError(t, err)
	for rows.Next() {
		var id int64
		require.NoError(t, rows.Scan(&id))
		onNew[id] = true
	}
	require.NoError(t, rows.Err())
	lost := 0
	for _, id := range acked {
		if !onNew[id] {
			lost++
		}
	}
	t.Logf("%d acknowledged task writes, %d lost; %d reads missed their write; after the promotion: ReadsOnStandby +%d, ReadsOnPrimary +%d",
		len(acked), lost, missed.Load(), afterStats.ReadsOnStandby-before.ReadsOnStandby, afterStats.ReadsOnPrimary-before.ReadsOnPrimary)
	logStandbys(t, c)
	require.Zero(t, lost, "acknowledged writes missing on the new primary")
	require.Zero(t, missed.Load(), "reads that missed their task's write")

	// Under the load the remaining replica lags the new primary (one
	// applier for 32 writers): reads after a commit went to the primary.
	// Once it has caught up, read-only tasks run on it.
	var pos string
	require.NoError(t, cl.admin[promoted].QueryRowContext(ctx(t), "SELECT @@global.gtid_binlog_pos").Scan(&pos))
	var waited int
	require.NoError(t, cl.admin[next].QueryRowContext(ctx(t), "SELECT MASTER_GTID_WAIT(?, 60)", pos).Scan(&waited))
	require.Zero(t, waited, "the remaining replica did not follow the new primary")
	onReplica := 0
	waitFor(t, "read-only tasks on the remaining replica", func() bool {
		tctx, end := pooldriver.WithTask(pooldriver.ReadOnly(ctx(t)))
		defer end()
		var port int
		if err := db.QueryRowContext(tctx, "SELECT @@port").Scan(&port); err == nil && port == next.port {
			onReplica++
		}
		return onReplica == 20
	})
}

// TestMySQLReadsReadOnlyTx: in a task, a *sql.Tx begun ReadOnly after the
// task's commit runs on a replica that has the commit (START TRANSACTION
// READ ONLY there), and a write in it fails as on a read-only server; the
// task's later reads never see less than its earlier ones.
func TestMySQLReadsReadOnlyTx(t *testing.T) {
	skipShort(t)
	cl := startMariaCluster(t, 0, 1)
	_, db := openMariaReads(t, cl)
	const rounds = 300
	onReplica := 0
	for i := range rounds {
		tctx, end := pooldriver.WithTask(ctx(t))
		id := insertCommitted(t, tctx, db, fmt.Sprint("tx ", i))

		var seen int64
		for range 2 { // a second read-only transaction sees at least as much
			ro, err := db.BeginTx(tctx, &sql.TxOptions{ReadOnly: true})
			require.NoError(t, err)
			var readOnly bool
			var mine, all int64
			require.NoError(t, ro.QueryRowContext(tctx, "SELECT (SELECT count(*) FROM reads_rows WHERE id = ?), (SELECT count(*) FROM reads_rows), @@global.read_only", id).Scan(&mine, &all, &readOnly))
			require.EqualValues(t, 1, mine, "round %d: the read-only transaction missed the task's commit", i)
			require.GreaterOrEqual(t, all, seen, "a later read-only transaction of the task saw less")
			seen = all
			if readOnly {
				onReplica++
				_, err := ro.ExecContext(tctx, "INSERT INTO reads_rows (body) VALUES ('no')")
				require.Error(t, err, "a write in a read-only transaction on a replica")
			}
			require.NoError(t, ro.Rollback())
		}
		end()
	}
	t.Logf("%d read-only transactions, %d on a replica", 2*rounds, onReplica)
	require.Positive(t, onReplica, "no read-only transaction ran on a replica")
}
