package integration

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"
	gormpostgres "gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/pooldriver/pooldriver"
	"github.com/pooldriver/pooldriver/dialects"
)

// Reads on standbys. Each test starts a private primary with two
// asynchronous streaming standbys, one of which replays 500 ms behind
// (recovery_min_apply_delay), and runs tasks through an unchanged GORM
// model: tasks that write a row and read it back, and read-only tasks. The
// same workload runs through a dbresolver-style split (writes to the
// primary, every read to a standby) and on the primary alone, and the
// three are logged side by side.

const (
	readsWorkers  = 16   // concurrent callers, for every subject
	readsConns    = 8    // connections per host, for every subject
	readsSeedRows = 1000 // rows on every server before the workload
	readsMaxLag   = "2s" // pool_max_replica_lag
)

// readsN returns how many write-then-read tasks, and as many read-only
// tasks, each subject runs: POOLDRIVER_READS_N, or the 10,000,
// with which the three subjects of TestReadsOnStandbys take about 30 s
// under -race on a 2-core machine.
func readsN(t *testing.T) int {
	t.Helper()
	s := os.Getenv("POOLDRIVER_READS_N")
	if s == "" {
		return 10000
	}
	n, err := strconv.Atoi(s)
	require.NoError(t, err, "POOLDRIVER_READS_N")
	require.Positive(t, n, "POOLDRIVER_READS_N")
	return n
}

// readsCluster is a primary and its two asynchronous standbys: prompt
// replays as soon as it receives, delayed 500 ms after the commit. Each
// standby's cluster_name, the application_name the primary knows it by,
// is its field's name.
type readsCluster struct {
	primary, prompt, delayed *localPG
	admin                    *sql.DB // the primary's
}

func startReadsCluster(t *testing.T) *readsCluster {
	t.Helper()
	pg := startLocalPG(t)
	cl := &readsCluster{
		primary: pg,
		prompt:  pg.startAsyncStandby(t, "cluster_name = 'prompt'\n"),
		delayed: pg.startAsyncStandby(t, "cluster_name = 'delayed'\nrecovery_min_apply_delay = '500ms'\n"),
		admin:   pg.admin(t),
	}
	waitFor(t, "both standbys to stream", func() bool {
		var n int
		err := cl.admin.QueryRowContext(ctx(t), "SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'").Scan(&n)
		return err == nil && n == 2
	})
	return cl
}

// startAsyncStandby makes a streaming standby of pg (pg_basebackup -R) on
// a port of its own, with conf appended to its postgresql.conf, started,
// and stopped and removed when the test ends. Unlike startStandby, the
// primary waits for no standby: a commit is acknowledged before any
// standby has it, as in most deployments that read from standbys.
func (pg *localPG) startAsyncStandby(t *testing.T, conf string) *localPG {
	t.Helper()
	dir, err := os.MkdirTemp("", "pooldriver-pg-standby-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	sb := &localPG{bin: pg.bin, dir: dir, cred: pg.cred, port: freePort(t)}
	if sb.cred != nil {
		require.NoError(t, os.Chown(dir, int(sb.cred.Uid), int(sb.cred.Gid)))
	}
	sb.run(t, pgCtlLimit, "pg_basebackup", "-D", sb.data(), "-h", "127.0.0.1", "-p", fmt.Sprint(pg.port), "-U", "postgres", "-R", "-X", "stream", "--no-sync")
	f, err := os.OpenFile(filepath.Join(sb.data(), "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = fmt.Fprintf(f, "port = %d\nunix_socket_directories = '%s'\n%s", sb.port, dir, conf)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	sb.start(t)
	t.Cleanup(func() { _ = sb.runErr(pgCtlLimit, "pg_ctl", "-D", sb.data(), "-w", "stop", "-m", "immediate") })
	return sb
}

// dsn returns a multi-host DSN naming hosts, for the postgres database,
// that connects to the one taking writes.
func (cl *readsCluster) dsn(hosts ...*localPG) string {
	addrs := make([]string, len(hosts))
	for i, h := range hosts {
		addrs[i] = fmt.Sprintf("127.0.0.1:%d", h.port)
	}
	return "postgres://postgres@" + strings.Join(addrs, ",") + "/postgres?sslmode=disable&target_session_attrs=read-write"
}

// openReadsPooldriver opens pooldriver on dsn (a multi-host DSN of cl)
// with pool_reads=standby, readsConns connections per host, and GORM over
// it. Its warnings are logged where the test fails.
func openReadsPooldriver(t *testing.T, dsn string) (*pooldriver.Connector, *gorm.DB) {
	t.Helper()
	lines, logger := newLogLines()
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		warns := lines.with("WARN")
		for _, l := range warns[:min(len(warns), 10)] {
			t.Log("pooldriver: " + l)
		}
		t.Logf("pooldriver: %d log lines at WARN", len(warns))
	})
	c := pooldriver.New(dsn+fmt.Sprintf("&pool_reads=standby&pool_max_replica_lag=%s&pool_max_conns=%d", readsMaxLag, readsConns),
		pooldriver.WithLogger(logger))
	require.NoError(t, c.Err())
	db := sql.OpenDB(c)
	t.Cleanup(func() { _ = db.Close() })
	return c, openReadsGORM(t, db)
}

// waitReplayed waits until every standby named has replayed what the
// primary had written when it was called.
func (cl *readsCluster) waitReplayed(t *testing.T, standbys ...*localPG) {
	t.Helper()
	var lsn string
	require.NoError(t, cl.admin.QueryRowContext(ctx(t), "SELECT pg_current_wal_lsn()::text").Scan(&lsn))
	for _, sb := range standbys {
		db := sb.admin(t)
		waitFor(t, fmt.Sprintf("the standby on %d to replay %s", sb.port, lsn), func() bool {
			var ok bool
			err := db.QueryRowContext(ctx(t), "SELECT pg_last_wal_replay_lsn() >= $1::pg_lsn", lsn).Scan(&ok)
			return err == nil && ok
		})
		_ = db.Close()
	}
}

// readsRow is the model every subject writes and reads, as a service
// declares it.
type readsRow struct {
	ID   int64
	Body string
}

// openReadsGORM hands db to GORM, as a service does.
func openReadsGORM(t *testing.T, db *sql.DB) *gorm.DB {
	t.Helper()
	g, err := gorm.Open(gormpostgres.New(gormpostgres.Config{Conn: db}), &gorm.Config{
		Logger: logger.New(gormLogWriter{t}, logger.Config{
			LogLevel:                  logger.Warn,
			IgnoreRecordNotFoundError: true,
			SlowThreshold:             5 * time.Second,
		}),
	})
	require.NoError(t, err)
	return g
}

// openPgx opens plain pgx stdlib on dsn with readsConns connections.
func openPgx(t *testing.T, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open("pgx", dsn)
	require.NoError(t, err)
	db.SetMaxOpenConns(readsConns)
	db.SetMaxIdleConns(readsConns)
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// seed creates readsRow's table on the primary with readsSeedRows rows,
// waits until both standbys have them, and returns their ids.
func (cl *readsCluster) seed(t *testing.T) []int64 {
	t.Helper()
	g := openReadsGORM(t, openPgx(t, cl.primary.dsn()))
	require.NoError(t, g.WithContext(ctx(t)).AutoMigrate(&readsRow{}))
	rows := make([]readsRow, readsSeedRows)
	for i := range rows {
		rows[i].Body = fmt.Sprintf("seed %d", i)
	}
	require.NoError(t, g.WithContext(ctx(t)).CreateInBatches(rows, 500).Error)
	ids := make([]int64, len(rows))
	for i, r := range rows {
		ids[i] = r.ID
	}
	cl.waitReplayed(t, cl.prompt, cl.delayed)
	return ids
}

// errReadsWrite marks a write's failure, counted apart from the reads'.
var errReadsWrite = errors.New("write")

// writeThenRead creates a row through w with wctx and reads it back by id
// through r with rctx: missed if the read does not see it.
func writeThenRead(wctx, rctx context.Context, w, r *gorm.DB, body string) (missed bool, err error) {
	row := readsRow{Body: body}
	if err := w.WithContext(wctx).Create(&row).Error; err != nil {
		return false, fmt.Errorf("%w: %w", errReadsWrite, err)
	}
	var got readsRow
	err = r.WithContext(rctx).First(&got, row.ID).Error
	switch {
	case errors.Is(err, gorm.ErrRecordNotFound):
		return true, nil
	case err != nil:
		return false, fmt.Errorf("reading back: %w", err)
	}
	return got.Body != body, nil
}

// readsServer is where a read-only task's statements ran.
type readsServer struct {
	InRecovery bool // a standby's
	Port       int
}

// errRowArrived marks a read whose row had arrived when its connection
// broke (GORM counted it, then the rest of the result failed): no driver
// can run it again for the caller, who has the row.
var errRowArrived = errors.New("the row had arrived")

// readSeeded reads the seeded row id through r with ctx, and then asks
// the server where it runs.
func readSeeded(ctx context.Context, r *gorm.DB, id int64) (readsServer, error) {
	var got readsRow
	if res := r.WithContext(ctx).First(&got, id); res.Error != nil {
		if res.RowsAffected > 0 {
			return readsServer{}, fmt.Errorf("seeded row %d: %w: %w", id, errRowArrived, res.Error)
		}
		return readsServer{}, fmt.Errorf("seeded row %d: %w", id, res.Error)
	}
	var where readsServer
	err := r.WithContext(ctx).Raw("SELECT pg_is_in_recovery() AS in_recovery, current_setting('port')::int AS port").Scan(&where).Error
	return where, err
}

// readsSubject is one way to run the workload.
type readsSubject struct {
	name string
	// writeRead runs one task that writes a row with body and reads it
	// back: missed if the read did not see it.
	writeRead func(body string) (missed bool, err error)
	// readOnly runs one read-only task that reads the seeded row id.
	readOnly func(id int64) (readsServer, error)
}

// readsResult is what a subject's workload counted.
type readsResult struct {
	subject             string
	tasks               int // of each kind
	missed              atomic.Int64
	writeErrs, readErrs atomic.Int64
	readOnlyOnStandby   atomic.Int64
	elapsed             time.Duration
	mu                  sync.Mutex // protects errs
	errs                []string   // the first few errors
}

func (r *readsResult) fail(err error) {
	if errors.Is(err, errReadsWrite) {
		r.writeErrs.Add(1)
	} else {
		r.readErrs.Add(1)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.errs) < 5 {
		r.errs = append(r.errs, err.Error())
	}
}

// runReads runs n write-then-read tasks and n read-only tasks of seeded
// rows (ids), interleaved, on readsWorkers goroutines.
func runReads(s readsSubject, n int, ids []int64) *readsResult {
	r := &readsResult{subject: s.name, tasks: n}
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range readsWorkers {
		wg.Go(func() {
			for {
				j := next.Add(1) - 1
				if j >= int64(2*n) {
					return
				}
				if j%2 == 0 {
					missed, err := s.writeRead(fmt.Sprintf("%s %d", s.name, j))
					if err != nil {
						r.fail(err)
					} else if missed {
						r.missed.Add(1)
					}
					continue
				}
				where, err := s.readOnly(ids[rand.IntN(len(ids))])
				if err != nil {
					r.fail(err)
				} else if where.InRecovery {
					r.readOnlyOnStandby.Add(1)
				}
			}
		})
	}
	wg.Wait()
	r.elapsed = time.Since(start)
	return r
}

// logReads logs one line per result, under a header.
func logReads(t *testing.T, results ...*readsResult) {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "%-22s %7s %12s %12s %18s %9s\n", "subject", "tasks", "missed own", "errors w/r", "read-only on sb", "tasks/s")
	for _, r := range results {
		fmt.Fprintf(&b, "%-22s %7d %12d %12s %11d (%3.0f%%) %9.0f\n", r.subject, 2*r.tasks, r.missed.Load(),
			fmt.Sprintf("%d/%d", r.writeErrs.Load(), r.readErrs.Load()),
			r.readOnlyOnStandby.Load(), 100*float64(r.readOnlyOnStandby.Load())/float64(r.tasks),
			float64(2*r.tasks)/r.elapsed.Seconds())
	}
	t.Logf("%d write-then-read and %d read-only tasks each, %d callers, %d connections per host:\n%s",
		results[0].tasks, results[0].tasks, readsWorkers, readsConns, b.String())
	for _, r := range results {
		if len(r.errs) > 0 {
			t.Logf("%s: first errors: %s", r.subject, strings.Join(r.errs, "; "))
		}
	}
}

// primaryOnlySubject runs everything on the primary through plain pgx.
func primaryOnlySubject(t *testing.T, cl *readsCluster) readsSubject {
	g := openReadsGORM(t, openPgx(t, cl.primary.dsn()))
	return readsSubject{
		name: "primary only (pgx)",
		writeRead: func(body string) (bool, error) {
			return writeThenRead(context.Background(), context.Background(), g, g, body)
		},
		readOnly: func(id int64) (readsServer, error) { return readSeeded(context.Background(), g, id) },
	}
}

// resolverSubject splits as dbresolver does, by statement kind: writes
// through plain pgx on the primary, every read through plain pgx on a
// standby, the two taken in turn.
func resolverSubject(t *testing.T, cl *readsCluster) readsSubject {
	w := openReadsGORM(t, openPgx(t, cl.primary.dsn()))
	replicas := []*gorm.DB{
		openReadsGORM(t, openPgx(t, cl.prompt.dsn())),
		openReadsGORM(t, openPgx(t, cl.delayed.dsn())),
	}
	var turn atomic.Uint64
	replica := func() *gorm.DB { return replicas[turn.Add(1)%2] }
	return readsSubject{
		name: "dbresolver-style (pgx)",
		writeRead: func(body string) (bool, error) {
			return writeThenRead(context.Background(), context.Background(), w, replica(), body)
		},
		readOnly: func(id int64) (readsServer, error) { return readSeeded(context.Background(), replica(), id) },
	}
}

// readsTaskLimit bounds a pooldriver task of the workload: one that
// hangs fails, and does not hang the test.
const readsTaskLimit = 10 * time.Second

// pooldriverSubject runs each task in a pooldriver task: a write-then-read
// task marks its read ReadOnly, as a service marks the reads it lets go
// to standbys (unmarked, the read runs on the primary and cannot miss);
// a read-only task is started from a ReadOnly context.
func pooldriverSubject(g *gorm.DB) readsSubject {
	return taskSubject(
		func(wctx, rctx context.Context, body string) (bool, error) {
			return writeThenRead(wctx, rctx, g, g, body)
		},
		func(ctx context.Context, id int64) (readsServer, error) { return readSeeded(ctx, g, id) })
}

// taskSubject is pooldriverSubject's shape for any way to write then read
// back (writeRead, its write's context and its read's) and to read a
// seeded row (read).
func taskSubject(writeRead func(wctx, rctx context.Context, body string) (bool, error), read func(ctx context.Context, id int64) (readsServer, error)) readsSubject {
	return readsSubject{
		name: "pooldriver",
		writeRead: func(body string) (bool, error) {
			c, cancel := context.WithTimeout(context.Background(), readsTaskLimit)
			defer cancel()
			ctx, end := pooldriver.WithTask(c)
			defer end()
			return writeRead(ctx, pooldriver.ReadOnly(ctx), body)
		},
		readOnly: func(id int64) (readsServer, error) {
			c, cancel := context.WithTimeout(context.Background(), readsTaskLimit)
			defer cancel()
			ctx, end := pooldriver.WithTask(pooldriver.ReadOnly(c))
			defer end()
			return read(ctx, id)
		},
	}
}

// logStandbys logs what c knows of its standbys.
func logStandbys(t *testing.T, c *pooldriver.Connector) {
	t.Helper()
	for _, s := range c.Standbys() {
		t.Logf("standby %s: up %v, replayed %s, lag %v, acquires %d", s.Host, s.Up, s.Replayed, s.Lag, s.Pool.Acquires)
	}
}

// requireIdleReadsOnStandbys runs 20 read-only tasks of pd, while the
// primary is idle: at least 16 must run on standbys.
func requireIdleReadsOnStandbys(t *testing.T, pd readsSubject, ids []int64) {
	t.Helper()
	idle := 0
	for range 20 {
		where, err := pd.readOnly(ids[rand.IntN(len(ids))])
		require.NoError(t, err, "a read-only task while the primary is idle")
		if where.InRecovery {
			idle++
		}
	}
	t.Logf("while the primary is idle: %d of 20 read-only tasks on standbys", idle)
	require.GreaterOrEqual(t, idle, 16, "read-only tasks on standbys while the primary is idle")
}

// runReadsBeside runs n tasks of each kind through pd, pooldriver's
// subject on c, then through each of others, which must have no error,
// and logs them side by side. pd must have no error and no read that
// missed its task's write, and run at least 80% of its read-only tasks on
// standbys. It returns the results, pd's first, and c's Stats around
// pd's run.
func runReadsBeside(t *testing.T, c *pooldriver.Connector, pd readsSubject, n int, ids []int64, others ...readsSubject) (results []*readsResult, before, after pooldriver.Stats) {
	t.Helper()
	before = c.Stats()
	res := runReads(pd, n, ids)
	after = c.Stats()
	t.Logf("pooldriver Stats: ReadsOnStandby +%d, ReadsOnPrimary +%d", after.ReadsOnStandby-before.ReadsOnStandby, after.ReadsOnPrimary-before.ReadsOnPrimary)
	logStandbys(t, c)
	results = []*readsResult{res}
	for _, s := range others {
		r := runReads(s, n, ids)
		require.Zero(t, r.writeErrs.Load()+r.readErrs.Load(), "%s: errors: %v", r.subject, r.errs)
		results = append(results, r)
	}
	logReads(t, results...)
	require.Zero(t, res.writeErrs.Load(), "pooldriver: writes that failed (on a standby?): %v", res.errs)
	require.Zero(t, res.readErrs.Load(), "pooldriver: reads that failed: %v", res.errs)
	require.Zero(t, res.missed.Load(), "pooldriver: reads that missed their task's own write")
	require.GreaterOrEqual(t, res.readOnlyOnStandby.Load()*10, int64(n)*8, "pooldriver: read-only tasks on standbys (want 80%%)")
	return results, before, after
}

// TestReadsOnStandbys: tasks that write a row and read it back, and
// read-only tasks, through GORM, on pooldriver with pool_reads=standby,
// beside a dbresolver-style split and the primary alone.
func TestReadsOnStandbys(t *testing.T) {
	skipShort(t)
	n := readsN(t)
	cl := startReadsCluster(t)
	ids := cl.seed(t)
	c, g := openReadsPooldriver(t, cl.dsn(cl.primary, cl.prompt, cl.delayed))
	pd := pooldriverSubject(g)

	// A primary without writes for longer than pool_max_replica_lag
	// leaves its standbys nothing to lag behind: they serve reads.
	time.Sleep(3 * time.Second)
	requireIdleReadsOnStandbys(t, pd, ids)
	runReadsBeside(t, c, pd, n, ids, resolverSubject(t, cl), primaryOnlySubject(t, cl))

	// A read-only task that changes its session: its standby's connection
	// is reset as it goes back to the pool, and kept.
	destroyed := func() (n int64) {
		for _, s := range c.Standbys() {
			n += s.Pool.Destroyed
		}
		return n
	}
	was := destroyed()
	for i := range 50 {
		ctx, end := pooldriver.WithTask(pooldriver.ReadOnly(context.Background()))
		var timeout string
		require.NoError(t, g.WithContext(ctx).Exec("SET statement_timeout = '42s'").Error)
		where, err := readSeeded(ctx, g, ids[i])
		require.NoError(t, err)
		require.NoError(t, g.WithContext(ctx).Raw("SHOW statement_timeout").Scan(&timeout).Error)
		require.Equal(t, "42s", timeout, "in the task that set it (on port %d)", where.Port)
		end()
		ctx, end = pooldriver.WithTask(pooldriver.ReadOnly(context.Background()))
		require.NoError(t, g.WithContext(ctx).Raw("SHOW statement_timeout").Scan(&timeout).Error)
		end()
		require.Equal(t, "0", timeout, "a later read-only task's session")
	}
	require.Zero(t, destroyed()-was, "standby connections closed after a read-only task changed its session (the warnings logged say why)")
}

// TestReadsToken: a write in request 1, its ReadToken handed to request
// 2, whose read-only task reads the row from a context WithReadToken: it
// sees it, with the standby that replays 500 ms late the only one. Beside
// it, a read-only task without the token right after the write, which
// that standby serves without the row (counted, logged). Then, with the
// standby waited for until it replayed the token, the read runs there.
func TestReadsToken(t *testing.T) {
	skipShort(t)
	const rounds, workers, caughtUp = 1000, 8, 20
	cl := startReadsCluster(t)
	cl.seed(t)
	c, g := openReadsPooldriver(t, cl.dsn(cl.primary, cl.delayed))
	bg := context.Background()
	// request1 writes a row in a task and returns the row and the token.
	request1 := func(body string) (readsRow, string, error) {
		ctx, end := pooldriver.WithTask(bg)
		defer end()
		row := readsRow{Body: body}
		if err := g.WithContext(ctx).Create(&row).Error; err != nil {
			return row, "", err
		}
		return row, pooldriver.ReadToken(ctx), nil
	}
	// request2 reads row in a read-only task, after token if not "".
	request2 := func(row readsRow, token string) (found bool, where readsServer, err error) {
		rctx, err := pooldriver.WithReadToken(pooldriver.ReadOnly(bg), token)
		if err != nil {
			return false, where, err
		}
		ctx, end := pooldriver.WithTask(rctx)
		defer end()
		var got readsRow
		err = g.WithContext(ctx).First(&got, row.ID).Error
		if errors.Is(err, gorm.ErrRecordNotFound) {
			return false, where, nil
		} else if err != nil {
			return false, where, err
		}
		err = g.WithContext(ctx).Raw("SELECT pg_is_in_recovery() AS in_recovery, current_setting('port')::int AS port").Scan(&where).Error
		return got.Body == row.Body, where, err
	}

	var missed, stale, noToken, tokenOnStandby atomic.Int64
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	start := time.Now()
	for range workers {
		wg.Go(func() {
			for i := next.Add(1); i <= rounds; i = next.Add(1) {
				row, token, err := request1(fmt.Sprintf("token %d", i))
				if err != nil {
					errs <- fmt.Errorf("request 1: %w", err)
					return
				}
				if token == "" {
					noToken.Add(1)
				}
				if found, _, err := request2(row, ""); err != nil {
					errs <- fmt.Errorf("request 2 without the token: %w", err)
					return
				} else if !found {
					stale.Add(1)
				}
				found, where, err := request2(row, token)
				if err != nil {
					errs <- fmt.Errorf("request 2 with the token %q: %w", token, err)
					return
				}
				if !found {
					missed.Add(1)
				}
				if where.InRecovery {
					tokenOnStandby.Add(1)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	t.Logf("%d rounds in %v: with the token %d missed the write (%d read on the standby); without it %d missed; %d empty tokens",
		rounds, time.Since(start).Round(time.Millisecond), missed.Load(), tokenOnStandby.Load(), stale.Load(), noToken.Load())
	require.Zero(t, noToken.Load(), "ReadToken after a committed write returned \"\"")
	require.Zero(t, missed.Load(), "request 2 with the token missed request 1's write")

	// Once the standby has replayed the token, the read is its.
	onStandby := 0
	for i := range caughtUp {
		row, token, err := request1(fmt.Sprintf("caught up %d", i))
		require.NoError(t, err)
		p, err := dialects.ParsePosition(token)
		require.NoError(t, err, "the token")
		waitFor(t, "the delayed standby to replay "+token, func() bool {
			for _, s := range c.Standbys() {
				if r, err := dialects.ParsePosition(s.Replayed); err == nil && s.Up && r >= p {
					return true
				}
			}
			return false
		})
		found, where, err := request2(row, token)
		require.NoError(t, err)
		require.True(t, found, "request 2 with the token %s, the standby past it", token)
		if where.InRecovery {
			onStandby++
		}
	}
	t.Logf("the standby past the token: %d of %d reads with it on the standby", onStandby, caughtUp)
	logStandbys(t, c)
	require.GreaterOrEqual(t, onStandby*10, caughtUp*8, "reads with a token the standby has replayed, on the standby")
}

// readsEvent is one task of a workload run while a server fails.
type readsEvent struct {
	began, ended time.Time
	write        bool
	body         string // a write's row
	missed       bool
	port         int // a read-only task's server
	err          error
}

// writeFailed reports whether e is a task whose write failed; a task
// whose write was acknowledged and whose read failed is not.
func (e readsEvent) writeFailed() bool { return e.write && errors.Is(e.err, errReadsWrite) }

// startReadsLoad runs readsWorkers callers of s on the seeded rows ids
// until the function it returns is called (at the latest as the test
// ends, before the DB closes): read-only tasks and, every fourth, a task
// that writes a row with a body of its own and reads it back. That
// function returns every task's event.
func startReadsLoad(t *testing.T, s readsSubject, ids []int64) (stop func() []readsEvent) {
	t.Helper()
	var mu sync.Mutex
	var events []readsEvent // guarded by mu
	done := make(chan struct{})
	var wg sync.WaitGroup
	var next atomic.Int64
	for range readsWorkers {
		wg.Go(func() {
			var mine []readsEvent
			defer func() {
				mu.Lock()
				events = append(events, mine...)
				mu.Unlock()
			}()
			for {
				select {
				case <-done:
					return
				default:
				}
				k := next.Add(1)
				e := readsEvent{began: time.Now(), write: k%4 == 0}
				if e.write {
					e.body = fmt.Sprintf("churn %d", k)
					e.missed, e.err = s.writeRead(e.body)
				} else {
					var where readsServer
					where, e.err = s.readOnly(ids[rand.IntN(len(ids))])
					e.port = where.Port
				}
				e.ended = time.Now()
				mine = append(mine, e)
				if e.err != nil {
					time.Sleep(5 * time.Millisecond) // a failing server is not spun on
				}
			}
		})
	}
	stop = sync.OnceValue(func() []readsEvent {
		close(done)
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		return events
	})
	t.Cleanup(func() { stop() })
	return stop
}

// TestReadsStandbyStopped: 16 callers run read-only tasks, and tasks that
// write and read back, every fourth, while the standby that serves reads
// at once is stopped (pg_ctl stop -m immediate) and, 2 s later, started
// again. No write fails and no read misses its write; no read-only task
// begun once the standby is down fails (the other standby or the primary
// serves it); those under way as it stopped may fail where their
// statement was cut (counted), not where they failed to connect to it,
// which sent nothing.
// Once it is back it serves reads again.
func TestReadsStandbyStopped(t *testing.T) {
	skipShort(t)
	cl := startReadsCluster(t)
	ids := cl.seed(t)
	c, g := openReadsPooldriver(t, cl.dsn(cl.primary, cl.prompt, cl.delayed))
	pd := pooldriverSubject(g)
	stopCallers := startReadsLoad(t, pd, ids)

	time.Sleep(time.Second)
	stopping := time.Now()
	cl.prompt.stop(t)
	stopped := time.Now()
	time.Sleep(2 * time.Second)
	restarting := time.Now()
	cl.prompt.start(t)
	promptHost := fmt.Sprintf("127.0.0.1:%d", cl.prompt.port)
	waitFor(t, "the restarted standby to be up again", func() bool {
		for _, s := range c.Standbys() {
			if s.Host == promptHost && s.Up {
				return true
			}
		}
		return false
	})
	back := time.Now()
	waitFor(t, "a read-only task on the restarted standby", func() bool {
		where, err := pd.readOnly(ids[rand.IntN(len(ids))])
		return err == nil && where.Port == cl.prompt.port
	})
	served := time.Now()
	time.Sleep(time.Second)
	events := stopCallers()

	// Tally by phase: before the stop, under way as it stopped, begun
	// after it (down, and back).
	type tally struct{ tasks, writes, writeErrs, missed, readErrs, rowArrived, notSent, onPrompt int }
	var before, during, after tally
	var errMsgs []string
	for _, e := range events {
		p := &after
		switch {
		case e.ended.Before(stopping):
			p = &before
		case e.began.Before(stopped):
			p = &during
		}
		p.tasks++
		if e.write {
			p.writes++
		}
		switch {
		case e.err != nil && e.write:
			p.writeErrs++
		case errors.Is(e.err, errRowArrived) && errors.Is(e.err, pooldriver.ErrConnLost):
			p.rowArrived++ // cut after its row came: not run again, and says so
		case e.err != nil:
			p.readErrs++
			var oe *net.OpError
			if errors.As(e.err, &oe) && oe.Op == "dial" {
				p.notSent++
			}
		}
		if e.missed {
			p.missed++
		}
		if e.port == cl.prompt.port {
			p.onPrompt++
		}
		if e.err != nil && len(errMsgs) < 8 {
			errMsgs = append(errMsgs, fmt.Sprintf("%s after the stop began, begun %s after: %v",
				e.ended.Sub(stopping).Round(time.Millisecond), e.began.Sub(stopping).Round(time.Millisecond), e.err))
		}
	}
	var downOnPrompt int
	for _, e := range events {
		if e.port == cl.prompt.port && !e.began.Before(stopped) && e.ended.Before(restarting) {
			downOnPrompt++
		}
	}
	t.Logf("stop took %v; up again %v after the restart began, serving reads %v after",
		stopped.Sub(stopping).Round(time.Millisecond), back.Sub(restarting).Round(time.Millisecond), served.Sub(back).Round(time.Millisecond))
	for _, r := range []struct {
		name string
		tally
	}{{"before the stop", before}, {"under way at it", during}, {"begun after it", after}} {
		t.Logf("%-16s tasks %6d, writes %5d (failed %d, missed own %d), read-only failed %d (connecting, nothing sent: %d; cut after the row came: %d), on the stopped standby %d",
			r.name, r.tasks, r.writes, r.writeErrs, r.missed, r.readErrs, r.notSent, r.rowArrived, r.onPrompt)
	}
	for _, m := range errMsgs {
		t.Log(m)
	}
	logStandbys(t, c)
	require.Zero(t, before.writeErrs+during.writeErrs+after.writeErrs, "writes that failed")
	require.Zero(t, before.missed+during.missed+after.missed, "reads that missed their task's write")
	require.Zero(t, before.readErrs, "read-only tasks that failed before the stop")
	require.Zero(t, after.readErrs, "read-only tasks begun after the standby stopped that failed")
	require.Zero(t, during.notSent, "read-only tasks that failed connecting to the stopped standby (nothing sent: the primary or the other standby could serve them)")
	require.Zero(t, during.readErrs, "read-only tasks under way as the standby stopped that failed (a read cut by the standby's end runs again on the primary, unless its row had arrived)")
	require.Zero(t, before.rowArrived+after.rowArrived, "reads cut after their row came, away from the stop")
	require.Zero(t, downOnPrompt, "read-only tasks served by the stopped standby while it was down")
}

// TestReadsStandbyFull: the only standby is at its connection limit
// while it still answers pooldriver's look at its position (on a
// connection made before). Read-only tasks that find no connection to it
// sent nothing there: they run on the primary, and none fails.
func TestReadsStandbyFull(t *testing.T) {
	skipShort(t)
	cl := startReadsCluster(t)
	ids := cl.seed(t)
	c, g := openReadsPooldriver(t, cl.dsn(cl.primary, cl.prompt))
	promptHost := fmt.Sprintf("127.0.0.1:%d", cl.prompt.port)
	waitFor(t, "the standby to be up", func() bool {
		for _, s := range c.Standbys() {
			if s.Host == promptHost && s.Up {
				return true
			}
		}
		return false
	})
	// Fill the standby: connections until it refuses (SQLSTATE 53300).
	var held []*pgconn.PgConn
	t.Cleanup(func() {
		for _, pc := range held {
			_ = pc.Close(context.Background())
		}
	})
	for {
		pc, err := pgconn.Connect(ctx(t), cl.prompt.dsn())
		if err != nil {
			var pe *pgconn.PgError
			require.True(t, errors.As(err, &pe) && pe.Code == "53300", "filling the standby: %v", err)
			break
		}
		held = append(held, pc)
		require.Less(t, len(held), 100, "the standby takes more connections than its max_connections")
	}
	t.Logf("the standby is full with %d connections of ours", len(held))
	// Each task has 5 s, where the primary serves it in milliseconds; the
	// loop stops at the second failure, to bound the test where they fail.
	const tasks = 20
	failed, onStandby, ran := 0, 0, 0
	var firstErr error
	for i := 0; i < tasks && failed < 2; i++ {
		ran++
		c5, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		task, end := pooldriver.WithTask(pooldriver.ReadOnly(c5))
		where, err := readSeeded(task, g, ids[i])
		end()
		cancel()
		switch {
		case err != nil:
			failed++
			if firstErr == nil {
				firstErr = err
			}
		case where.InRecovery:
			onStandby++
		}
	}
	s := c.Stats()
	t.Logf("%d read-only tasks, the standby full: %d failed (first: %v), %d on the standby; ReadsOnStandby %d, ReadsOnPrimary %d",
		ran, failed, firstErr, onStandby, s.ReadsOnStandby, s.ReadsOnPrimary)
	require.Zero(t, failed, "read-only tasks that failed while the standby was full (the primary could serve them)")
}

// host returns pg's address as Standbys names it.
func (pg *localPG) host() string { return fmt.Sprintf("127.0.0.1:%d", pg.port) }

// standbyOf returns what c's Standbys say of sb.
func standbyOf(c *pooldriver.Connector, sb *localPG) (pooldriver.StandbyStats, bool) {
	for _, s := range c.Standbys() {
		if s.Host == sb.host() {
			return s, true
		}
	}
	return pooldriver.StandbyStats{}, false
}

// waitStandbysUp waits until c has seen each of sbs answer as a standby.
func waitStandbysUp(t *testing.T, c *pooldriver.Connector, sbs ...*localPG) {
	t.Helper()
	for _, sb := range sbs {
		waitFor(t, "the standby on "+sb.host()+" to be up", func() bool {
			s, ok := standbyOf(c, sb)
			return ok && s.Up
		})
	}
}

// requireWritesKept: every write of events that was acknowledged has its
// row on pg once, and no write's row is there twice (a write sent again
// after its reply was lost, which had run the first time). It returns how
// many were acknowledged.
func requireWritesKept(t *testing.T, pg *localPG, events []readsEvent) int {
	t.Helper()
	db := pg.admin(t)
	rows, err := db.QueryContext(ctx(t), "SELECT body, count(*) FROM reads_rows WHERE body LIKE 'churn %' GROUP BY body")
	require.NoError(t, err)
	present := map[string]int{}
	for rows.Next() {
		var body string
		var n int
		require.NoError(t, rows.Scan(&body, &n))
		present[body] = n
	}
	require.NoError(t, rows.Err())
	require.NoError(t, rows.Close())
	acked, lost, doubled := 0, 0, 0
	for _, e := range events {
		if !e.write {
			continue
		}
		if !e.writeFailed() {
			acked++
			if present[e.body] == 0 {
				lost++
			}
		}
		if present[e.body] > 1 {
			doubled++
		}
	}
	require.Zero(t, lost, "acknowledged writes whose row is missing on the primary on %d", pg.port)
	require.Zero(t, doubled, "writes whose row is on the primary on %d more than once", pg.port)
	return acked
}

// msAfter writes how long after from at came, to the millisecond.
func msAfter(at, from time.Time) string { return at.Sub(from).Round(time.Millisecond).String() }

// TestReadsStandbyPromoted: under the workload of TestReadsStandbyStopped,
// the standby that replays at once is promoted (pg_ctl promote) while the
// primary runs on: a split, two primaries that diverge. From a second
// after the promotion no read-only task runs on the promoted server, and
// Standbys leaves it out (a primary); no task fails, none misses its own write,
// every acknowledged write is on the primary once, and read-only tasks
// still run on the other standby.
func TestReadsStandbyPromoted(t *testing.T) {
	skipShort(t)
	const outWithin = time.Second // for the looks to see the promotion, on a busy machine
	cl := startReadsCluster(t)
	ids := cl.seed(t)
	c, g := openReadsPooldriver(t, cl.dsn(cl.primary, cl.prompt, cl.delayed))
	waitStandbysUp(t, c, cl.prompt, cl.delayed)
	stopCallers := startReadsLoad(t, pooldriverSubject(g), ids)

	time.Sleep(time.Second)
	promoting := time.Now()
	cl.prompt.ctl(t, "promote")
	promoted := time.Now()
	waitFor(t, "Standbys to show the promoted standby not up", func() bool {
		s, ok := standbyOf(c, cl.prompt)
		return !ok || !s.Up
	})
	out := time.Now()
	time.Sleep(time.Until(promoted.Add(outWithin)))
	from := c.Stats()
	time.Sleep(2 * time.Second)
	events := stopCallers()
	to := c.Stats()
	_, promptListed := standbyOf(c, cl.prompt)

	bound := promoted.Add(outWithin)
	var tasks, writes, writeErrs, readErrs, missed, onPromotedLate, onPromotedSoon, onDelayedLate int
	var errMsgs []string
	for _, e := range events {
		tasks++
		switch {
		case e.writeFailed():
			writeErrs++
		case e.err != nil:
			readErrs++
		}
		if e.write {
			writes++
		}
		if e.missed {
			missed++
		}
		switch {
		case e.port == cl.prompt.port && !e.began.Before(bound):
			onPromotedLate++
		case e.port == cl.prompt.port && e.ended.After(promoting):
			onPromotedSoon++
		case e.port == cl.delayed.port && !e.began.Before(bound):
			onDelayedLate++
		}
		if e.err != nil && len(errMsgs) < 8 {
			errMsgs = append(errMsgs, fmt.Sprintf("ended %s after the promotion began, begun %s after: %v",
				msAfter(e.ended, promoting), msAfter(e.began, promoting), e.err))
		}
	}
	t.Logf("pg_ctl promote took %v; Standbys showed it not up %v after", msAfter(promoted, promoting), msAfter(out, promoted))
	t.Logf("tasks %d, writes %d (failed %d, missed own %d), read-only failed %d; on the promoted server: %d ending after the promotion began and begun before %v after it, %d begun later; on the other standby from then: %d",
		tasks, writes, writeErrs, missed, readErrs, onPromotedSoon, outWithin, onPromotedLate, onDelayedLate)
	t.Logf("pooldriver Stats from %v after the promotion: ReadsOnStandby +%d, ReadsOnPrimary +%d",
		outWithin, to.ReadsOnStandby-from.ReadsOnStandby, to.ReadsOnPrimary-from.ReadsOnPrimary)
	for _, m := range errMsgs {
		t.Log(m)
	}
	logStandbys(t, c)
	require.Zero(t, writeErrs, "writes that failed")
	require.Zero(t, readErrs, "reads that failed (read-only tasks, or a task's read of its write)")
	require.Zero(t, missed, "reads that missed their task's own write")
	require.Zero(t, onPromotedLate, "read-only tasks on the promoted server, begun %v after the promotion or later", outWithin)
	require.False(t, promptListed, "Standbys: the promoted server listed, as a standby")
	require.Positive(t, onDelayedLate, "read-only tasks on the remaining standby after the promotion")
	require.Positive(t, to.ReadsOnStandby-from.ReadsOnStandby, "Stats: ReadsOnStandby after the promotion")
	t.Logf("%d acknowledged writes, each on the primary once", requireWritesKept(t, cl.primary, events))
}

// TestReadsPrimaryKilled: the DSN names the primary and both standbys,
// with target_session_attrs=read-write; under the workload of
// TestReadsStandbyStopped the primary is stopped at once (a crash) and the
// standby that replays at once, which confirms every commit (so that an
// acknowledged write survives: what is lost is the pool's doing), is
// promoted. The delayed standby follows nothing from then on and falls
// behind the new primary. Writes may fail until the promotion (counted,
// logged); the first comes within a second of it and none fails 2 s
// after, as in the failover suite; every acknowledged write is on the
// new primary once; no task misses its own write; no read-only task begun
// after the crash fails (the standbys serve it, then the new primary),
// nor any read of a task begun after the promotion; the delayed standby
// serves no read-only task once it lags past pool_max_replica_lag. Each
// read that fails is logged with its error and when.
func TestReadsPrimaryKilled(t *testing.T) {
	skipShort(t)
	const (
		resumeWithin = time.Second     // the failover suite's bound for the first write
		cleanAfter   = 2 * time.Second // and for no write failing
	)
	maxLag, err := time.ParseDuration(readsMaxLag)
	require.NoError(t, err)
	lagOutWithin := maxLag + time.Second // for the looks to see it lag past it
	cl := startReadsCluster(t)
	cl.primary.sql(t, "ALTER SYSTEM SET synchronous_standby_names = 'prompt'")
	cl.primary.sql(t, "SELECT pg_reload_conf()")
	waitFor(t, "the prompt standby to confirm commits", func() bool {
		return cl.primary.query(t, "SELECT count(*) FROM pg_stat_replication WHERE application_name = 'prompt' AND sync_state = 'sync'") == "1"
	})
	ids := cl.seed(t)
	c, g := openReadsPooldriver(t, cl.dsn(cl.primary, cl.prompt, cl.delayed)+"&connect_timeout=2")
	waitStandbysUp(t, c, cl.prompt, cl.delayed)
	stopCallers := startReadsLoad(t, pooldriverSubject(g), ids)

	time.Sleep(time.Second)
	killing := time.Now()
	cl.primary.stop(t)
	killed := time.Now()
	cl.prompt.ctl(t, "promote")
	promoted := time.Now()
	time.Sleep(5 * time.Second)
	events := stopCallers()
	delayed, _ := standbyOf(c, cl.delayed)

	// Phases: before the crash, under way at it, begun before the
	// promotion, begun after it.
	type tally struct{ tasks, writes, writeErrs, readOnlyErrs, readBackErrs, missed int }
	var phases [4]tally
	phaseNames := [4]string{"before the crash", "under way at it", "begun before the promotion", "begun after it"}
	var firstWrite time.Time
	var lateWriteErrs, delayedLate int
	afterOn := map[int]int{} // read-only tasks begun after the promotion, by port
	var failures []string
	for _, e := range events {
		i := 3
		switch {
		case e.ended.Before(killing):
			i = 0
		case e.began.Before(killing):
			i = 1
		case e.began.Before(promoted):
			i = 2
		}
		p := &phases[i]
		p.tasks++
		if e.write {
			p.writes++
		}
		if e.missed {
			p.missed++
		}
		switch {
		case e.writeFailed():
			p.writeErrs++
			if !e.began.Before(promoted.Add(cleanAfter)) {
				lateWriteErrs++
			}
		case e.err != nil && e.write:
			p.readBackErrs++
		case e.err != nil:
			p.readOnlyErrs++
		}
		if e.write && !e.writeFailed() && !e.ended.Before(promoted) && (firstWrite.IsZero() || e.ended.Before(firstWrite)) {
			firstWrite = e.ended
		}
		if e.port == cl.delayed.port && !e.began.Before(promoted.Add(lagOutWithin)) {
			delayedLate++
		}
		if i == 3 && !e.write && e.err == nil {
			afterOn[e.port]++
		}
		if e.err != nil && !e.writeFailed() && len(failures) < 40 {
			kind := "read-only task"
			if e.write {
				kind = "read of the task's own acknowledged write"
			}
			failures = append(failures, fmt.Sprintf("%s (%s): begun %s, ended %s after the crash: %v",
				kind, phaseNames[i], msAfter(e.began, killing), msAfter(e.ended, killing), e.err))
		}
	}
	t.Logf("the crash took %v, the promotion %v; the first write acknowledged after it %s after",
		msAfter(killed, killing), msAfter(promoted, killed), sinceOrNever(firstWrite, promoted))
	for i, p := range phases {
		t.Logf("%-27s tasks %6d, writes %5d (failed %d, read back failed %d, missed own %d), read-only failed %d",
			phaseNames[i], p.tasks, p.writes, p.writeErrs, p.readBackErrs, p.missed, p.readOnlyErrs)
	}
	t.Logf("read-only tasks begun after the promotion: %d on the delayed standby, %d on the new primary",
		afterOn[cl.delayed.port], afterOn[cl.prompt.port])
	for _, f := range failures {
		t.Log(f)
	}
	logStandbys(t, c)
	acked := requireWritesKept(t, cl.prompt, events)
	t.Logf("%d acknowledged writes, each on the new primary once", acked)
	for i, p := range phases {
		require.Zero(t, p.missed, "%s: reads that missed their task's own write", phaseNames[i])
	}
	require.Zero(t, phases[0].writeErrs+phases[0].readBackErrs+phases[0].readOnlyErrs, "tasks that failed before the crash")
	require.Zero(t, phases[2].readOnlyErrs+phases[3].readOnlyErrs, "read-only tasks begun after the crash that failed (a standby or the new primary could serve them)")
	require.Zero(t, phases[3].readBackErrs, "tasks begun after the promotion whose read of their acknowledged write failed")
	require.False(t, firstWrite.IsZero(), "no write after the promotion")
	require.LessOrEqual(t, firstWrite.Sub(promoted), resumeWithin, "the first write after the promotion")
	require.Zero(t, lateWriteErrs, "writes begun %v after the promotion or later that failed", cleanAfter)
	// Left on the old primary's timeline, the delayed standby serves no
	// reads: it is not up (its timeline is not the new primary's) or, for
	// a role that cannot see its timeline, it lags past the bound.
	require.True(t, !delayed.Up || delayed.Lag > maxLag, "Standbys: the delayed standby, left behind, still serves reads: %+v", delayed)
	require.Zero(t, delayedLate, "read-only tasks on the delayed standby begun %v after the promotion or later, when it lags past pool_max_replica_lag", lagOutWithin)
}
