package integration

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pooldriver/pooldriver"
)

// Reads a service can trust: what a standby answers differently from the
// primary never goes there; a task started inside a task reads after its
// parent's writes; a task never reads older than it read before; a token
// taken while the primary's position cannot be read still covers the
// write. Each against a private primary and its streaming standbys.

// TestReadsStandbyDiffers: with pool_reads=selects, a ReadOnly context
// and in a read-only task, an unlogged table, a sequence, a view whose
// function writes (and swallows the standby's refusal), a view that takes
// an advisory lock, and a view hiding nextval answer, write and fail
// exactly as plain pgx on the primary; a read of a table with a trigger
// in a task leaves the task's next INSERT, and later tasks, working.
func TestReadsStandbyDiffers(t *testing.T) {
	skipShort(t)
	primary := startLocalPG(t)
	standby := primary.startStandby(t)
	plain := openPgx(t, primary.dsn())
	bg := longCtx(t)
	_, err := plain.ExecContext(bg, `
		CREATE UNLOGGED TABLE differs_unlogged (k int); INSERT INTO differs_unlogged VALUES (1), (2);
		CREATE SEQUENCE differs_seq; SELECT nextval('differs_seq'), nextval('differs_seq'), nextval('differs_seq');
		CREATE TABLE differs_written (k int);
		CREATE FUNCTION differs_write() RETURNS int VOLATILE LANGUAGE plpgsql AS $$
			BEGIN INSERT INTO differs_written VALUES (1); RETURN 1;
			EXCEPTION WHEN read_only_sql_transaction THEN RETURN 0; END $$;
		CREATE VIEW differs_writes AS SELECT differs_write() AS r;
		CREATE VIEW differs_claims AS SELECT pg_try_advisory_lock(4242) AS got;
		CREATE SEQUENCE differs_hidden_seq;
		CREATE VIEW differs_hidden AS SELECT nextval('differs_hidden_seq') AS n;
		CREATE TABLE differs_audited (k int);
		CREATE TABLE differs_audit (k int);
		CREATE FUNCTION differs_audit_f() RETURNS trigger LANGUAGE plpgsql AS $$
			BEGIN INSERT INTO differs_audit VALUES (NEW.k); RETURN NEW; END $$;
		CREATE TRIGGER differs_audit_t AFTER INSERT ON differs_audited FOR EACH ROW EXECUTE FUNCTION differs_audit_f();
		CREATE TABLE differs_plain (k int); INSERT INTO differs_plain VALUES (7)`)
	require.NoError(t, err)
	// The advisory lock the views would claim is held by another session
	// of the primary, as a worker holding its job would.
	holder, err := plain.Conn(bg)
	require.NoError(t, err)
	defer holder.Close()
	_, err = holder.ExecContext(bg, "SELECT pg_advisory_lock(4242)")
	require.NoError(t, err)

	c := pooldriver.New(fmt.Sprintf("postgres://postgres@127.0.0.1:%d,127.0.0.1:%d/postgres?sslmode=disable&target_session_attrs=read-write&pool_reads=selects&pool_max_replica_lag=30s&pool_max_conns=2",
		primary.port, standby.port))
	require.NoError(t, c.Err())
	db := sql.OpenDB(c)
	defer db.Close()
	standbyAcquires := func() int64 {
		var n int64
		for _, s := range c.Standbys() {
			n += s.Pool.Acquires
		}
		return n
	}
	waitFor(t, "a plain table's read on the standby", func() bool {
		var k int
		var rec bool
		return db.QueryRowContext(bg, "SELECT k, pg_is_in_recovery() FROM differs_plain").Scan(&k, &rec) == nil && rec
	})

	modes := []struct {
		name string
		ctx  func() (context.Context, func())
	}{
		{"selects", func() (context.Context, func()) { return bg, func() {} }},
		{"ReadOnly", func() (context.Context, func()) { return pooldriver.ReadOnly(bg), func() {} }},
		{"read-only task", func() (context.Context, func()) { return pooldriver.WithTask(pooldriver.ReadOnly(bg)) }},
	}
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			count := func(db *sql.DB, q string) int {
				t.Helper()
				var n int
				require.NoError(t, db.QueryRowContext(bg, q).Scan(&n), q)
				return n
			}
			before := standbyAcquires()
			for range 20 {
				rctx, end := m.ctx()
				var n, want int
				require.NoError(t, db.QueryRowContext(rctx, "SELECT count(*) FROM differs_unlogged").Scan(&n), "an unlogged table")
				require.NoError(t, plain.QueryRowContext(bg, "SELECT count(*) FROM differs_unlogged").Scan(&want))
				require.Equal(t, want, n, "an unlogged table")

				require.NoError(t, db.QueryRowContext(rctx, "SELECT last_value FROM differs_seq").Scan(&n), "a sequence")
				require.NoError(t, plain.QueryRowContext(bg, "SELECT last_value FROM differs_seq").Scan(&want))
				require.Equal(t, want, n, "a sequence's last_value")

				written := count(plain, "SELECT count(*) FROM differs_written")
				require.NoError(t, db.QueryRowContext(rctx, "SELECT r FROM differs_writes").Scan(&n), "a view whose function writes")
				require.Equal(t, 1, n, "the view's function wrote, as on the primary")
				require.Equal(t, written+1, count(plain, "SELECT count(*) FROM differs_written"), "the view's write is there")

				var got bool
				require.NoError(t, db.QueryRowContext(rctx, "SELECT got FROM differs_claims").Scan(&got), "a view taking an advisory lock")
				require.False(t, got, "a claim the primary's lock holder has was granted")

				next := count(plain, "SELECT last_value FROM differs_hidden_seq")
				require.NoError(t, db.QueryRowContext(rctx, "SELECT n FROM differs_hidden").Scan(&n), "a view hiding nextval")
				require.Greater(t, n, next-1, "nextval through a view")
				end()
			}
			// Nothing of the above touched a standby's connection that a
			// standby could not serve as the primary: at most the reads
			// of the unlogged table a moment after a reading could see it
			// (tried there, refused, run again on the primary).
			t.Logf("standby acquires during the cases: %d", standbyAcquires()-before)
		})
	}

	// A read of a table with a trigger, then an INSERT, in one task: the
	// INSERT runs on the primary, in this task and in the tasks after it.
	for k := range 20 {
		tctx, end := pooldriver.WithTask(bg)
		var n int
		require.NoError(t, db.QueryRowContext(tctx, "SELECT count(*) FROM differs_audited").Scan(&n))
		_, err := db.ExecContext(tctx, "INSERT INTO differs_audited VALUES ($1)", k)
		require.NoError(t, err, "task %d: the INSERT after a read of a table with a trigger", k)
		end()
	}
	var audited int
	require.NoError(t, plain.QueryRowContext(bg, "SELECT count(*) FROM differs_audit").Scan(&audited))
	require.Equal(t, 20, audited)
	// A plain table's proven read still goes to a standby.
	var rec bool
	require.NoError(t, db.QueryRowContext(bg, "SELECT pg_is_in_recovery() FROM differs_plain").Scan(&rec))
	if !rec {
		t.Logf("standbys %+v stats %+v", c.Standbys(), c.Stats())
		time.Sleep(time.Second)
		require.NoError(t, db.QueryRowContext(bg, "SELECT pg_is_in_recovery() FROM differs_plain").Scan(&rec))
		t.Logf("after 1s: %v", rec)
	}
	require.True(t, rec, "a plain table's read after the cases")
}

// TestReadsNestedTask: a read-only task started inside a request's task
// (WithTask(ReadOnly(r.Context())) under Middleware) reads after what the
// request's task wrote, in a *sql.Tx or outside one: 0 stale reads of
// 1,000 with a standby replaying 500 ms late; a read in a task of its own
// beside it shows what the parent's floor prevents.
func TestReadsNestedTask(t *testing.T) {
	skipShort(t)
	cl := startCounterCluster(t, "nested_counter")
	_, db := cl.open(t, "pool_max_replica_lag=2s&pool_max_conns=4", cl.prompt, cl.delayed)
	bg := longCtx(t)

	var stale, staleAlone, onStandby int
	for i := 1; i <= 1000; i++ {
		req, endReq := pooldriver.WithTask(bg)
		if i%2 == 0 {
			tx, err := db.BeginTx(req, nil)
			require.NoError(t, err)
			_, err = tx.ExecContext(req, "UPDATE nested_counter SET v = $1 WHERE id = 1", i)
			require.NoError(t, err)
			require.NoError(t, tx.Commit())
		} else {
			_, err := db.ExecContext(req, "UPDATE nested_counter SET v = $1 WHERE id = 1", i)
			require.NoError(t, err)
		}
		inner, endInner := pooldriver.WithTask(pooldriver.ReadOnly(req))
		var v int
		var rec bool
		require.NoError(t, db.QueryRowContext(inner, "SELECT v, pg_is_in_recovery() FROM nested_counter WHERE id = 1").Scan(&v, &rec))
		endInner()
		if v != i {
			stale++
		}
		if rec {
			onStandby++
		}
		// Beside it, a read-only task of its own (no parent): what a
		// floor that forgets the parent reads.
		alone, endAlone := pooldriver.WithTask(pooldriver.ReadOnly(bg))
		require.NoError(t, db.QueryRowContext(alone, "SELECT v FROM nested_counter WHERE id = 1").Scan(&v))
		endAlone()
		if v != i {
			staleAlone++
		}
		endReq()
	}
	t.Logf("nested task: %d stale of 1000 (%d served by a standby); a task of its own beside it: %d stale", stale, onStandby, staleAlone)
	require.Zero(t, stale, "a task started inside a task read older than its parent wrote")
}

// TestReadsMonotonic: with pool_max_replica_lag=30ms, a counter the
// primary updates every 2 ms, and a standby replaying 500 ms late (out of
// the lag bound: reads go to the prompt standby or the primary), no task
// reads a value older than one it read before: 0 of 10,000 read-only
// tasks, and 0 of those whose first read the primary served (the task
// wrote first).
func TestReadsMonotonic(t *testing.T) {
	skipShort(t)
	cl := startCounterCluster(t, "mono_counter")
	_, err := cl.admin.ExecContext(ctx(t), "CREATE TABLE mono_w (k int)")
	require.NoError(t, err)
	c, db := cl.open(t, "pool_max_replica_lag=30ms&pool_max_conns=4", cl.prompt, cl.delayed)
	bg := longCtx(t)

	stop := make(chan struct{})
	var writer sync.WaitGroup
	writer.Add(1)
	go func() {
		defer writer.Done()
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				_, _ = cl.admin.ExecContext(context.Background(), "UPDATE mono_counter SET v = v + 1 WHERE id = 1")
			}
		}
	}()
	defer func() { close(stop); writer.Wait() }()

	const tasks, workers = 10000, 8
	var next, older, firstOnPrimary, olderAfterPrimary, secondOnStandby atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1)
				if i > tasks {
					return
				}
				wrote := i%10 == 0 // the tenth task writes first: its first read goes to the primary
				tctx, end := pooldriver.WithTask(bg)
				rctx := pooldriver.ReadOnly(tctx)
				if wrote {
					tx, err := db.BeginTx(tctx, nil)
					if err == nil {
						_, err = tx.ExecContext(tctx, "INSERT INTO mono_w VALUES (1)")
						if err == nil {
							err = tx.Commit()
						} else {
							_ = tx.Rollback()
						}
					}
					if err != nil {
						end()
						errs <- err
						return
					}
				}
				var v1, v2 int64
				var r1, r2 bool
				var d1, d2 monoSeen
				t0 := time.Now()
				err := db.QueryRowContext(rctx, monoReadSQL).Scan(&v1, &r1, &d1.server, &d1.xmin)
				t1 := time.Now()
				if err == nil {
					err = db.QueryRowContext(rctx, monoReadSQL).Scan(&v2, &r2, &d2.server, &d2.xmin)
				}
				t2 := time.Now()
				end()
				if err != nil {
					errs <- err
					return
				}
				if v2 < v1 {
					older.Add(1)
					t.Logf("task %d (wrote %v) read older: 1st on %s v=%d xmin=%s (took %v); 2nd on %s v=%d xmin=%s (took %v)",
						i, wrote, d1.server, v1, d1.xmin, t1.Sub(t0), d2.server, v2, d2.xmin, t2.Sub(t1))
				}
				if !r1 && wrote {
					firstOnPrimary.Add(1)
					if r2 {
						secondOnStandby.Add(1)
					}
					if v2 < v1 {
						olderAfterPrimary.Add(1)
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	st := c.Stats()
	t.Logf("%d tasks: %d read older on their second read; %d first reads on the primary after a write, %d of whose second reads a standby served, %d older; reads on standbys %d, on the primary %d",
		tasks, older.Load(), firstOnPrimary.Load(), secondOnStandby.Load(), olderAfterPrimary.Load(), st.ReadsOnStandby, st.ReadsOnPrimary)
	require.Zero(t, older.Load(), "a task read older than it read before")
	require.Zero(t, olderAfterPrimary.Load())
	require.NotZero(t, st.ReadsOnStandby, "no read went to a standby")

	// Timed rounds against the late standby alone (within a lag bound of
	// 2s): a task commits, reads 400 ms later (the standby has not
	// replayed the commit: the primary serves it), and again 150 ms
	// after that, when the standby has the commit but not what the
	// primary's read saw.
	_, ldb := cl.open(t, "pool_max_replica_lag=2s&pool_max_conns=8", cl.delayed)
	const rounds, roundWorkers = 1000, 25
	var round, primaryFirst, lateOlder atomic.Int64
	errs = make(chan error, roundWorkers)
	for range roundWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for round.Add(1) <= rounds {
				tctx, end := pooldriver.WithTask(bg)
				err := func() error {
					tx, err := ldb.BeginTx(tctx, nil)
					if err != nil {
						return err
					}
					if _, err := tx.ExecContext(tctx, "INSERT INTO mono_w VALUES (2)"); err != nil {
						_ = tx.Rollback()
						return err
					}
					if err := tx.Commit(); err != nil {
						return err
					}
					rctx := pooldriver.ReadOnly(tctx)
					var v1, v2 int64
					var r1 bool
					time.Sleep(400 * time.Millisecond)
					if err := ldb.QueryRowContext(rctx, "SELECT v, pg_is_in_recovery() FROM mono_counter WHERE id = 1").Scan(&v1, &r1); err != nil {
						return err
					}
					time.Sleep(150 * time.Millisecond)
					if err := ldb.QueryRowContext(rctx, "SELECT v FROM mono_counter WHERE id = 1").Scan(&v2); err != nil {
						return err
					}
					if !r1 {
						primaryFirst.Add(1)
					}
					if v2 < v1 {
						lateOlder.Add(1)
					}
					return nil
				}()
				end()
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	t.Logf("%d timed rounds beside a standby 500 ms late: %d first reads on the primary, %d second reads older than the first", rounds, primaryFirst.Load(), lateOlder.Load())
	require.Zero(t, lateOlder.Load(), "a read after a read on the primary went behind it")
	require.Positive(t, primaryFirst.Load(), "no round's first read went to the primary: the rounds test nothing")
}

// monoReadSQL is TestReadsMonotonic's read, with what tells where it ran
// and what it saw (diagnostics): the server (cluster_name: prompt,
// delayed; "primary") and the row's xmin; only built-ins that leave the
// session alone (sqllex), so that the read is routed as the plain one.
const monoReadSQL = "SELECT v, pg_is_in_recovery(), coalesce(nullif(current_setting('cluster_name'), ''), 'primary'), " +
	"xmin::text FROM mono_counter WHERE id = 1"

type monoSeen struct{ server, xmin string }

// TestReadsTokenUnreadable: a token taken while the primary's position
// cannot be read (every session of the Connector's on the primary
// terminated 40 ms before the task's autocommit write) still covers the
// write: 0 of 100 next requests miss it.
func TestReadsTokenUnreadable(t *testing.T) {
	skipShort(t)
	cl := startCounterCluster(t, "token_counter")
	_, db := cl.open(t, "pool_max_replica_lag=2s&pool_max_conns=4&application_name=token_subject", cl.prompt, cl.delayed)
	bg := longCtx(t)

	missed, unreached := 0, 0
	for i := 1; i <= 100; i++ {
		_, err := cl.admin.ExecContext(bg, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'token_subject'")
		require.NoError(t, err)
		time.Sleep(40 * time.Millisecond)
		req, end := pooldriver.WithTask(bg)
		_, err = db.ExecContext(req, "UPDATE token_counter SET v = $1 WHERE id = 1", i)
		require.NoError(t, err, "round %d: the write", i)
		tok := pooldriver.ReadToken(req)
		end()
		require.NotEmpty(t, tok, "round %d: a task that wrote gave no token", i)
		if tok == "FFFFFFFF/FFFFFFFF" {
			unreached++
		}
		next, err := pooldriver.WithReadToken(bg, tok)
		require.NoError(t, err)
		var v int
		require.NoError(t, db.QueryRowContext(pooldriver.ReadOnly(next), "SELECT v FROM token_counter WHERE id = 1").Scan(&v))
		if v != i {
			missed++
		}
	}
	t.Logf("100 rounds: %d missed; %d tokens sent the next request to the primary (position unreadable)", missed, unreached)
	require.Zero(t, missed)
}

// startCounterCluster starts a readsCluster whose primary has table, a
// counter (id 1, v 0), and waits until both standbys have it.
func startCounterCluster(t *testing.T, table string) *readsCluster {
	t.Helper()
	cl := startReadsCluster(t)
	_, err := cl.admin.ExecContext(ctx(t), fmt.Sprintf("CREATE TABLE %s (id int PRIMARY KEY, v bigint); INSERT INTO %[1]s VALUES (1, 0)", table))
	require.NoError(t, err)
	cl.waitReplayed(t, cl.prompt, cl.delayed)
	return cl
}

// open opens pooldriver with pool_reads=standby and params (more
// settings) over cl's primary and the standbys given, and waits until a look found each standby up; db closes
// with the test.
func (cl *readsCluster) open(t *testing.T, params string, standbys ...*localPG) (*pooldriver.Connector, *sql.DB) {
	t.Helper()
	c := pooldriver.New(cl.dsn(append([]*localPG{cl.primary}, standbys...)...) + "&pool_reads=standby&" + params)
	require.NoError(t, c.Err())
	db := sql.OpenDB(c)
	t.Cleanup(func() { _ = db.Close() })
	waitStandbysUp(t, c, standbys...)
	return c, db
}

// TestReadsPromotedPoolLetsGo: once a look finds a standby promoted, the
// pool that served reads from it lets its connections go: no session of
// the Connector's stays on the promoted server (the looks' own attempts,
// refused at once, aside).
func TestReadsPromotedPoolLetsGo(t *testing.T) {
	skipShort(t)
	cl := startCounterCluster(t, "promoted_counter")
	c, db := cl.open(t, "pool_max_replica_lag=2s&pool_max_conns=3&application_name=promoted_subject", cl.prompt)
	bg := longCtx(t)
	// Reads until the prompt standby's pool has opened a connection (the
	// first reads of a Connector with no catalog reading yet go to the
	// primary).
	waitFor(t, "the prompt standby's pool to open a connection", func() bool {
		var v int
		_ = db.QueryRowContext(pooldriver.ReadOnly(bg), "SELECT v FROM promoted_counter").Scan(&v)
		s, ok := standbyOf(c, cl.prompt)
		return ok && s.Pool.Total > 0
	})
	prompt := cl.prompt.admin(t)
	defer prompt.Close()
	ours := func() int {
		var n int
		require.NoError(t, prompt.QueryRowContext(bg, `SELECT count(*) FROM pg_stat_activity
			WHERE application_name = 'promoted_subject' AND now() - backend_start > interval '1 second'`).Scan(&n))
		return n
	}
	waitFor(t, "the prompt standby's pool's sessions to be a second old", func() bool { return ours() > 0 })
	cl.prompt.ctl(t, "promote")
	waitFor(t, "the promoted server's pool to let its connections go", func() bool { return ours() == 0 })
}

// TestReadsWaitAfterWrite: a task's read after its own commit waits for
// a standby close behind to replay the commit, instead of going to the
// primary: of 1,000 tasks that write and then read, at least half read
// from a standby, none stale (with pool_read_wait=1s, which a loaded
// machine's looks fit in). Beside it the default (5ms), whose count is
// logged, and pool_read_wait=0 (every such read on the primary); each
// read's latency is logged, median and p99, for docs/reads.md.
func TestReadsWaitAfterWrite(t *testing.T) {
	skipShort(t)
	cl := startCounterCluster(t, "wait_counter")
	_, waiting := cl.open(t, "pool_max_replica_lag=2s&pool_max_conns=4", cl.prompt, cl.delayed)
	_, long := cl.open(t, "pool_max_replica_lag=2s&pool_max_conns=4&pool_read_wait=1s", cl.prompt, cl.delayed)
	_, primary := cl.open(t, "pool_max_replica_lag=2s&pool_max_conns=4&pool_read_wait=0", cl.prompt, cl.delayed)
	bg := longCtx(t)
	run := func(name string, db *sql.DB) (onStandby, stale int, lat []time.Duration) {
		for i := 1; i <= 1000; i++ {
			tctx, end := pooldriver.WithTask(bg)
			tx, err := db.BeginTx(tctx, nil)
			require.NoError(t, err)
			_, err = tx.ExecContext(tctx, "UPDATE wait_counter SET v = $1 WHERE id = 1", i)
			require.NoError(t, err)
			require.NoError(t, tx.Commit())
			var v int
			var rec bool
			start := time.Now()
			require.NoError(t, db.QueryRowContext(pooldriver.ReadOnly(tctx), "SELECT v, pg_is_in_recovery() FROM wait_counter WHERE id = 1").Scan(&v, &rec))
			lat = append(lat, time.Since(start))
			end()
			if rec {
				onStandby++
			}
			if v != i {
				stale++
			}
		}
		slices.Sort(lat)
		t.Logf("%s: 1000 reads after the task's commit, %d on a standby, %d stale; latency median %v, p99 %v",
			name, onStandby, stale, lat[len(lat)/2].Round(10*time.Microsecond), lat[len(lat)*99/100].Round(10*time.Microsecond))
		return onStandby, stale, lat
	}
	_, stale, _ := run("pool_read_wait=5ms (default)", waiting)
	onStandby, lstale, _ := run("pool_read_wait=1s", long)
	_, pstale, _ := run("pool_read_wait=0", primary)
	require.Zero(t, stale+lstale+pstale, "a read after the task's commit missed it")
	require.GreaterOrEqual(t, onStandby, 500, "fewer than half the reads after a write were served by a standby")
}

// longCtx is ctx for a test of many rounds, which on a loaded machine
// takes longer than ctx's 30 s: 10 minutes, within go test's timeout.
func longCtx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	t.Cleanup(cancel)
	return c
}
