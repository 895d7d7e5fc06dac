package integration

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/pooldriver/pooldriver"
)

// The failover suite (issue 48) starts its own primary and streaming
// standby, points a multi-host DSN with target_session_attrs=read-write at
// both, and has 16 writers insert unique keys through pooldriver, beside
// plain pgx stdlib and pgxpool on the same DSN, while the primary fails.

const (
	failoverWriters = 16
	failoverConns   = 8
)

// startStandby makes a streaming standby of pg (startAsyncStandby) whose
// confirmation of every commit the primary waits for
// (synchronous_standby_names), so that a write the primary acknowledged is on the standby when it is
// promoted: what the suite counts as lost is the pool's doing, not
// asynchronous replication's.
func (pg *localPG) startStandby(t *testing.T) *localPG {
	t.Helper()
	sb := pg.startAsyncStandby(t, "")
	pg.sql(t, "ALTER SYSTEM SET synchronous_standby_names = '*'")
	pg.sql(t, "SELECT pg_reload_conf()")
	waitFor(t, "the standby to stream synchronously", func() bool {
		return pg.query(t, "SELECT count(*) FROM pg_stat_replication WHERE sync_state = 'sync'") == "1"
	})
	return sb
}

// sql runs a statement on pg's postgres database.
func (pg *localPG) sql(t *testing.T, q string) {
	t.Helper()
	db, err := sql.Open("pgx", pg.dsn())
	require.NoError(t, err)
	defer db.Close()
	_, err = db.ExecContext(ctx(t), q)
	require.NoError(t, err, q)
}

// query returns the first column of q's first row on pg, as text.
func (pg *localPG) query(t *testing.T, q string) string {
	t.Helper()
	db, err := sql.Open("pgx", pg.dsn())
	require.NoError(t, err)
	defer db.Close()
	var s string
	require.NoError(t, db.QueryRowContext(ctx(t), q).Scan(&s), q)
	return s
}

// writeLog is what one subject's writers saw: the keys acknowledged, and
// each error with when it came.
type writeLog struct {
	name  string
	mu    sync.Mutex
	acked []int64
	oks   []time.Time
	errs  []timedErr
}

type timedErr struct {
	at, began time.Time // when it came, and when its write began
	err       error
}

func (l *writeLog) ok(k int64, at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.acked = append(l.acked, k)
	l.oks = append(l.oks, at)
}

func (l *writeLog) fail(err error, began, at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.errs = append(l.errs, timedErr{at: at, began: began, err: err})
}

// begunAfter returns the errors of the writes begun at t or later.
func (l *writeLog) begunAfter(t time.Time) []error {
	l.mu.Lock()
	defer l.mu.Unlock()
	var errs []error
	for _, e := range l.errs {
		if !e.began.Before(t) {
			errs = append(errs, e.err)
		}
	}
	return errs
}

// after returns the first success at or after t, and the errors after t,
// read-only ones (SQLSTATE 25006) counted apart.
func (l *writeLog) after(t time.Time) (first time.Time, errs, readOnly int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, at := range l.oks {
		if !at.Before(t) && (first.IsZero() || at.Before(first)) {
			first = at
		}
	}
	for _, e := range l.errs {
		if e.at.After(t) {
			errs++
			var pe *pgconn.PgError
			if errors.As(e.err, &pe) && pe.Code == "25006" {
				readOnly++
			}
		}
	}
	return first, errs, readOnly
}

// duplicates counts the errors that say a key was there already: a write
// sent again after its reply was lost, which had run the first time.
func (l *writeLog) duplicates() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, e := range l.errs {
		var pe *pgconn.PgError
		if errors.As(e.err, &pe) && pe.Code == "23505" {
			n++
		}
	}
	return n
}

// writer inserts keys base, base+1, … with insert until stop is closed.
type insertFunc func(ctx context.Context, k int64) error

func runWriters(l *writeLog, base int64, insert insertFunc, stop <-chan struct{}, wg *sync.WaitGroup) {
	var next atomic.Int64
	next.Store(base)
	for range failoverWriters {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				k := next.Add(1)
				began := time.Now()
				c, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				err := insert(c, k)
				cancel()
				if err != nil {
					l.fail(err, began, time.Now())
					time.Sleep(5 * time.Millisecond) // a failing server is not spun on
					continue
				}
				l.ok(k, time.Now())
			}
		})
	}
}

// failoverSubjects opens pooldriver, plain pgx stdlib and pgxpool on dsn,
// each with at most failoverConns connections.
func failoverSubjects(t *testing.T, dsn string) (names []string, inserts []insertFunc, pd *sql.DB) {
	t.Helper()
	insertSQL := "INSERT INTO keys (k) VALUES ($1)"
	lines, logger := newLogLines()
	c := pooldriver.New(dsn+fmt.Sprintf("&pool_max_conns=%d", failoverConns), pooldriver.WithLogger(logger))
	require.NoError(t, c.Err())
	t.Cleanup(func() {
		for _, l := range lines.with("role") {
			t.Log("pooldriver: " + l)
		}
		t.Logf("pooldriver: %d log lines at WARN", len(lines.with("WARN")))
	})
	pd = sql.OpenDB(c)
	t.Cleanup(func() { _ = pd.Close() })
	plain, err := sql.Open("pgx", dsn)
	require.NoError(t, err)
	plain.SetMaxOpenConns(failoverConns)
	plain.SetMaxIdleConns(failoverConns)
	t.Cleanup(func() { _ = plain.Close() })
	pcfg, err := pgxpool.ParseConfig(dsn)
	require.NoError(t, err)
	pcfg.MaxConns = failoverConns
	pp, err := pgxpool.NewWithConfig(context.Background(), pcfg)
	require.NoError(t, err)
	t.Cleanup(pp.Close)
	viaSQL := func(db *sql.DB) insertFunc {
		return func(ctx context.Context, k int64) error { _, err := db.ExecContext(ctx, insertSQL, k); return err }
	}
	return []string{"pooldriver", "plain pgx stdlib", "pgxpool"}, []insertFunc{
		viaSQL(pd), viaSQL(plain),
		func(ctx context.Context, k int64) error { _, err := pp.Exec(ctx, insertSQL, k); return err },
	}, pd
}

// failover runs the three subjects' writers through fail (given
// pooldriver's *sql.DB), which fails the
// primary and returns when a primary takes writes again (the standby
// promoted, or the primary back), then for 3s more; it checks every
// acknowledged key on after, the primary then, and returns the logs, the
// moment fail returned, and pooldriver's *sql.DB.
func failover(t *testing.T, primary, standby, after *localPG, fail func(pd *sql.DB)) ([]*writeLog, time.Time, *sql.DB) {
	t.Helper()
	primary.sql(t, "CREATE TABLE keys (k bigint PRIMARY KEY)")
	dsn := fmt.Sprintf("postgres://postgres@127.0.0.1:%d,127.0.0.1:%d/postgres?sslmode=disable&target_session_attrs=read-write&connect_timeout=2",
		primary.port, standby.port)
	names, inserts, pd := failoverSubjects(t, dsn)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	logs := make([]*writeLog, len(names))
	for i, name := range names {
		logs[i] = &writeLog{name: name}
		runWriters(logs[i], int64(i)<<40, inserts[i], stop, &wg)
	}
	time.Sleep(time.Second)
	fail(pd)
	promoted := time.Now()
	time.Sleep(3 * time.Second)
	close(stop)
	wg.Wait()

	db, err := sql.Open("pgx", after.dsn())
	require.NoError(t, err)
	defer db.Close()
	present := map[int64]int{}
	rows, err := db.QueryContext(ctx(t), "SELECT k FROM keys")
	require.NoError(t, err)
	for rows.Next() {
		var k int64
		require.NoError(t, rows.Scan(&k))
		present[k]++
	}
	require.NoError(t, rows.Err())
	rows.Close()
	for _, l := range logs {
		lost := 0
		for _, k := range l.acked {
			if present[k] != 1 {
				lost++
			}
		}
		first, errs, readOnly := l.after(promoted)
		t.Logf("%-16s %6d acknowledged, %d lost; first write %v after the switch; errors after it: %d (read-only %d), 1s after: %s, 2s after: %s",
			l.name, len(l.acked), lost, sinceOrNever(first, promoted), errs, readOnly,
			countAfter(l, promoted.Add(time.Second)), countAfter(l, promoted.Add(2*time.Second)))
		require.Zero(t, lost, "%s: acknowledged keys missing on the new primary", l.name)
		require.Zero(t, l.duplicates(), "%s: a key sent twice (a write retried after its reply was lost)", l.name)
	}
	return logs, promoted, pd
}

func sinceOrNever(at, from time.Time) string {
	if at.IsZero() {
		return "never"
	}
	return at.Sub(from).Round(100 * time.Microsecond).String()
}

// countAfter says how many errors, and of which kinds, l saw after t.
func countAfter(l *writeLog, t time.Time) string {
	_, errs, readOnly := l.after(t)
	if errs == 0 {
		return "none"
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	kinds := map[string]int{}
	for _, e := range l.errs {
		if e.at.After(t) {
			msg := e.err.Error()
			kinds[msg[:min(len(msg), 60)]]++
		}
	}
	var ks []string
	for k, n := range kinds {
		ks = append(ks, fmt.Sprintf("%d× %q", n, k))
	}
	sort.Strings(ks)
	return fmt.Sprintf("%d (read-only %d: %s)", errs, readOnly, strings.Join(ks, "; "))
}

// fence makes pg read-only for every transaction that begins from now on,
// and returns once no transaction begun before holds a transaction id (a
// write in flight). A backend reads a reloaded configuration only before
// the next message it processes, so a write it was running when the reload
// came commits after it; synchronous_standby_names stays, so such a commit
// waits for the standby: it is on the standby if it commits before the
// promotion, and waits out its writer's deadline (a failure, not an
// acknowledgement) if after.
func (pg *localPG) fence(t *testing.T) {
	t.Helper()
	pg.sql(t, "ALTER SYSTEM SET default_transaction_read_only = on")
	pg.sql(t, "SELECT pg_reload_conf()")
	waitFor(t, "a new session on the fenced primary to be read-only", func() bool {
		return pg.query(t, "SHOW default_transaction_read_only") == "on"
	})
	waitFor(t, "the writes in flight on the fenced primary to end", func() bool {
		return pg.query(t, `SELECT count(*) FROM pg_stat_activity
			WHERE backend_type = 'client backend' AND backend_xid IS NOT NULL AND pid <> pg_backend_pid()`) == "0"
	})
}

// TestFailoverReadOnlyPrimary: the old primary is fenced (kept up, read-only
// by a reload) and the standby promoted. pooldriver's writes reach the new
// primary within a second of the promotion and no read-only error reaches
// a writer a second after it; plain pgx and pgxpool keep their connections
// to the old primary (logged).
func TestFailoverReadOnlyPrimary(t *testing.T) {
	skipShort(t)
	primary := startLocalPG(t)
	standby := primary.startStandby(t)
	logs, promoted, _ := failover(t, primary, standby, standby, func(*sql.DB) {
		primary.fence(t)
		standby.ctl(t, "promote")
	})
	first, _, _ := logs[0].after(promoted)
	require.False(t, first.IsZero(), "pooldriver: no write after the promotion")
	require.LessOrEqual(t, first.Sub(promoted), time.Second, "pooldriver: the first write after the promotion")
	_, _, readOnly := logs[0].after(promoted.Add(time.Second))
	require.Zero(t, readOnly, "pooldriver: read-only errors a second after the promotion")
}

// TestFailoverKilledPrimary: the primary is stopped at once (a crash) and
// the standby promoted: every acknowledged write is there once, the first
// write after the promotion comes within a second, and none fails two
// seconds after it. A task whose raw transaction was open on the old
// primary fails with ErrConnLost until it ends, rather than go on, on
// the new primary, with half a transaction; the next task writes there.
func TestFailoverKilledPrimary(t *testing.T) {
	skipShort(t)
	primary := startLocalPG(t)
	standby := primary.startStandby(t)
	var task context.Context
	var endTask func()
	logs, promoted, pd := failover(t, primary, standby, standby, func(pd *sql.DB) {
		task, endTask = pooldriver.WithTask(context.Background())
		for _, q := range []string{"BEGIN", "INSERT INTO keys (k) VALUES (-1)"} {
			_, err := pd.ExecContext(task, q)
			require.NoError(t, err, q)
		}
		primary.stop(t)
		standby.ctl(t, "promote")
	})
	defer endTask()
	for _, q := range []string{"INSERT INTO keys (k) VALUES (-2)", "COMMIT"} {
		_, err := pd.ExecContext(task, q)
		require.ErrorIs(t, err, pooldriver.ErrConnLost, "%s in the task begun on the old primary", q)
	}
	endTask()
	next, endNext := pooldriver.WithTask(context.Background())
	defer endNext()
	for _, q := range []string{"BEGIN", "INSERT INTO keys (k) VALUES (-3)", "COMMIT"} {
		_, err := pd.ExecContext(next, q)
		require.NoError(t, err, "%s in a task begun after the failover", q)
	}
	require.Equal(t, "1", standby.query(t, "SELECT count(*) FROM keys WHERE k < 0"), "rows of the two tasks on the new primary: the second's")
	requireWritesResume(t, logs[0], promoted, "the promotion")
}

// TestFailoverRestartedPrimary: the primary is stopped at once and started
// again, its standby left a standby: writes resume within a second of the
// primary accepting connections, and none fails two seconds after. The
// commits wait for no standby here (the standby reconnects only every 5s):
// what was acknowledged is on the primary.
func TestFailoverRestartedPrimary(t *testing.T) {
	skipShort(t)
	primary := startLocalPG(t)
	standby := primary.startStandby(t)
	primary.sql(t, "ALTER SYSTEM SET synchronous_standby_names = ''")
	primary.sql(t, "SELECT pg_reload_conf()")
	logs, back, _ := failover(t, primary, standby, primary, func(*sql.DB) {
		primary.stop(t)
		time.Sleep(time.Second)
		primary.start(t)
	})
	requireWritesResume(t, logs[0], back, "the restart")
}

// requireWritesResume: l's first write after at (what happened then) came
// within a second, and none failed from two seconds after it.
func requireWritesResume(t *testing.T, l *writeLog, at time.Time, what string) {
	t.Helper()
	first, _, _ := l.after(at)
	require.False(t, first.IsZero(), "%s: no write after %s", l.name, what)
	require.LessOrEqual(t, first.Sub(at), time.Second, "%s: the first write after %s", l.name, what)
	_, errs, _ := l.after(at.Add(2 * time.Second))
	require.Zero(t, errs, "%s: errors two seconds after %s", l.name, what)
}

// TestFailoverDeadFirstHost: the DSN's first host accepts TCP and never
// answers (a host gone without a word), its second is the server, with a
// connect timeout of 1s. Eight transactions opened one after another, each
// needing a new connection: pooldriver pays the timeout for the first
// only, then tries the silent host last; plain pgx pays it for each
// (logged).
func TestFailoverDeadFirstHost(t *testing.T) {
	skipShort(t)
	pg := startLocalPG(t)
	dead := blackHole(t)
	dsn := fmt.Sprintf("postgres://postgres@%s,127.0.0.1:%d/postgres?sslmode=disable&connect_timeout=1", dead, pg.port)
	c := pooldriver.New(dsn + "&pool_max_conns=8")
	require.NoError(t, c.Err())
	pd := sql.OpenDB(c)
	t.Cleanup(func() { _ = pd.Close() })
	plain, err := sql.Open("pgx", dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = plain.Close() })
	opens := func(db *sql.DB) (first, all time.Duration) {
		start := time.Now()
		for i := range 8 {
			tx, err := db.BeginTx(ctx(t), nil)
			require.NoError(t, err)
			_, err = tx.ExecContext(ctx(t), "SELECT 1")
			require.NoError(t, err)
			t.Cleanup(func() { _ = tx.Rollback() })
			if i == 0 {
				first = time.Since(start)
			}
		}
		return first, time.Since(start)
	}
	first, all := opens(pd)
	plainFirst, plainAll := opens(plain)
	t.Logf("8 connections, one after another: pooldriver first %v, all %v; plain pgx first %v, all %v",
		first.Round(time.Millisecond), all.Round(time.Millisecond), plainFirst.Round(time.Millisecond), plainAll.Round(time.Millisecond))
	// The first statement pays one host's timeout (1 s), and a second of
	// slack for a busy machine; the eight, measured beside plain pgx,
	// which pays it for each (8 s), less than half of plain's.
	require.Less(t, first, 2*time.Second, "pooldriver's first statement paid more than one connect timeout")
	require.Less(t, all, plainAll/2, "pooldriver paid the silent host's timeout for more than one connection")
}

// TestFailoverReadersFollow: readers follow the primary too. The old
// primary is fenced (kept up, read-only for every session after a reload)
// and the standby promoted: no read fails there, so no write is refused
// to say so; the server reports default_transaction_read_only with the
// next statement, which outlives the session's reset, and the pool moves
// to the new primary. Plain pgx's connections stay on the old one
// (logged). pooldriver's DSN says pool_target=primary, plain pgx's
// target_session_attrs=read-write: the same ask.
func TestFailoverReadersFollow(t *testing.T) {
	skipShort(t)
	primary := startLocalPG(t)
	standby := primary.startStandby(t)
	hosts := fmt.Sprintf("postgres://postgres@127.0.0.1:%d,127.0.0.1:%d/postgres?sslmode=disable", primary.port, standby.port)
	dsn := hosts + "&target_session_attrs=read-write"
	// pooldriver's own pool_target=primary asks what read-write does.
	pd := sql.OpenDB(pooldriver.New(hosts + "&pool_target=primary&pool_max_conns=4"))
	t.Cleanup(func() { _ = pd.Close() })
	plain, err := sql.Open("pgx", dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = plain.Close() })
	port := func(db *sql.DB) int {
		var p int
		if err := db.QueryRowContext(ctx(t), "SELECT inet_server_port()").Scan(&p); err != nil {
			return 0
		}
		return p
	}
	require.Equal(t, primary.port, port(pd))
	require.Equal(t, primary.port, port(plain))
	primary.fence(t)
	standby.ctl(t, "promote")
	promoted := time.Now()
	waitFor(t, "pooldriver's reads on the new primary", func() bool { return port(pd) == standby.port })
	took := time.Since(promoted)
	t.Logf("pooldriver read on the new primary %v after the promotion; plain pgx still reads on port %d (the old primary is %d)",
		took.Round(time.Millisecond), port(plain), primary.port)
	require.Less(t, took, 2*time.Second, "pooldriver's reads reached the new primary (a second, and one of slack)")
	for range 20 {
		require.Equal(t, standby.port, port(pd), "a read after the move")
	}
}

// failoverRuns is how many times TestFailoverFirstWrite fails each
// scenario over, with clusters of its own each time.
const failoverRuns = 9

// TestFailoverFirstWrite: the primary killed (the standby promoted),
// switched over (stopped cleanly, the standby promoted) and restarted,
// failoverRuns times each, pooldriver beside plain pgx stdlib and pgxpool
// in each run. No pooldriver write begun once a primary accepts again
// fails (an attempt stuck on the dead host must not leave a writer
// waiting out its context; a write begun before, waiting while no server
// took writes, may reach its deadline on a loaded machine before any
// subject writes again, as plain's and pgxpool's do), each first write
// after that comes within a second of the faster of the other two's, and
// the median of pooldriver's first writes is within 100 ms of the faster
// of their medians or at most half again plain pgx's (on a loaded machine
// every median grows, and the subjects' spread with it). The medians are
// logged: docs/faults.md.
func TestFailoverFirstWrite(t *testing.T) {
	skipShort(t)
	scenarios := []struct {
		name string
		// fail fails primary and returns when a primary takes writes
		// again; after is the server that holds the keys then.
		fail     func(t *testing.T, primary, standby *localPG)
		restarts bool
	}{
		{name: "killed", fail: func(t *testing.T, primary, standby *localPG) {
			primary.stop(t)
			standby.ctl(t, "promote")
		}},
		{name: "switchover", fail: func(t *testing.T, primary, standby *localPG) {
			primary.ctl(t, "stop", "-m", "fast")
			standby.ctl(t, "promote")
		}},
		{name: "restarted", restarts: true, fail: func(t *testing.T, primary, _ *localPG) {
			primary.stop(t)
			time.Sleep(time.Second)
			primary.start(t)
		}},
	}
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			firsts := make([][]time.Duration, 3) // by subject, by run
			for run := range failoverRuns {
				t.Run(fmt.Sprint(run+1), func(t *testing.T) {
					primary := startLocalPG(t)
					standby := primary.startStandby(t)
					after := standby
					if sc.restarts {
						after = primary
						primary.sql(t, "ALTER SYSTEM SET synchronous_standby_names = ''")
						primary.sql(t, "SELECT pg_reload_conf()")
					}
					logs, back, _ := failover(t, primary, standby, after, func(*sql.DB) { sc.fail(t, primary, standby) })
					for i, l := range logs {
						first, _, _ := l.after(back)
						require.False(t, first.IsZero(), "%s: no write after the failover", l.name)
						firsts[i] = append(firsts[i], first.Sub(back))
					}
					require.Empty(t, logs[0].begunAfter(back), "pooldriver: writes begun after a primary accepted again failed (all errors after it: %s)", countAfter(logs[0], back))
					faster := min(firsts[1][run], firsts[2][run])
					require.LessOrEqual(t, firsts[0][run], faster+time.Second, "pooldriver's first write after the failover, against the faster of plain pgx and pgxpool")
				})
			}
			if t.Failed() {
				return
			}
			med := make([]time.Duration, 3)
			for i, ds := range firsts {
				s := append([]time.Duration(nil), ds...)
				sort.Slice(s, func(a, b int) bool { return s[a] < s[b] })
				med[i] = s[len(s)/2]
			}
			t.Logf("%s, %d runs: first write after the failover, median: pooldriver %v, plain pgx stdlib %v, pgxpool %v; slowest: %v, %v, %v",
				sc.name, failoverRuns, med[0].Round(100*time.Microsecond), med[1].Round(100*time.Microsecond), med[2].Round(100*time.Microsecond),
				slices.Max(firsts[0]).Round(100*time.Microsecond), slices.Max(firsts[1]).Round(100*time.Microsecond), slices.Max(firsts[2]).Round(100*time.Microsecond))
			require.LessOrEqual(t, med[0], max(min(med[1], med[2])+100*time.Millisecond, med[1]*3/2),
				"pooldriver's median first write, against the faster median of plain pgx and pgxpool (+100 ms) and plain pgx's (×1.5)")
		})
	}
}
