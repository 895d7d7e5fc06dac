package integration

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/pooldriver/pooldriver"
)

// The failover proof of issue 67: a primary killed while 16 writers per
// subject are in transactions, its synchronous streaming standby promoted.
// Every pooldriver Commit answers nil or ErrNotCommitted, and every answer
// matches the rows on the new primary; plain pgx stdlib and pgxpool run
// the same loop beside it, for the log, where a lost COMMIT is just an
// error.

// commitFailoverTxTimeout bounds one transaction of a writer, its Commit
// included: BeginTx's context bounds the questions pooldriver asks after
// a lost COMMIT, which wait for the promotion. Generous enough for a
// promotion on a machine at load 20; a Commit whose context ended first
// says ErrCommitUnknown, as documented.
const commitFailoverTxTimeout = 20 * time.Second

// commitFailoverAfter is how many commits each pooldriver writer makes on
// the new primary (begun after the promotion) before the writers stop.
const commitFailoverAfter = 3

// commitAnswer is one transaction that reached its Commit: its marker row
// and what Commit returned.
type commitAnswer struct {
	marker, xid   string
	err           error
	began, ended  time.Time // BeginTx, and Commit's return
	writer, index int
}

// commitLog is what one subject's writers saw.
type commitLog struct {
	name    string
	mu      sync.Mutex
	answers []commitAnswer
	early   []error // BeginTx or INSERT failed: no Commit
	// after counts, per writer, the commits that returned nil and began
	// after the promotion.
	after [failoverWriters]int
}

func (l *commitLog) answer(a commitAnswer, promoted *time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.answers = append(l.answers, a)
	if a.err == nil && !promoted.IsZero() && a.began.After(*promoted) {
		l.after[a.writer]++
	}
}

func (l *commitLog) failEarly(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.early = append(l.early, err)
}

// leastAfter returns the fewest commits on the new primary of any writer.
func (l *commitLog) leastAfter() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	least := l.after[0]
	for _, n := range l.after {
		least = min(least, n)
	}
	return least
}

// txRunner runs one transaction that inserts marker: it returns the
// transaction's id and Commit's error (commitErr), or the error of a
// statement before (early).
type txRunner func(ctx context.Context, marker string) (xid string, early, commitErr error)

// xidSQL reads the transaction's id after its INSERT, in a round trip of
// its own (the INSERT's already taught pooldriver the id): only to say,
// where an answer does not match, which transaction of the new primary
// had the same id.
const xidSQL = "SELECT pg_current_xact_id_if_assigned()::text"

func sqlTxRunner(db *sql.DB) txRunner {
	return func(ctx context.Context, marker string) (string, error, error) {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return "", err, nil
		}
		if _, err := tx.ExecContext(ctx, "INSERT INTO marks (m) VALUES ($1)", marker); err != nil {
			_ = tx.Rollback()
			return "", err, nil
		}
		var x string
		if err := tx.QueryRowContext(ctx, xidSQL).Scan(&x); err != nil {
			_ = tx.Rollback()
			return "", err, nil
		}
		return x, nil, tx.Commit()
	}
}

func pgxpoolTxRunner(pp *pgxpool.Pool) txRunner {
	return func(ctx context.Context, marker string) (string, error, error) {
		tx, err := pp.BeginTx(ctx, pgx.TxOptions{})
		if err != nil {
			return "", err, nil
		}
		if _, err := tx.Exec(ctx, "INSERT INTO marks (m) VALUES ($1)", marker); err != nil {
			_ = tx.Rollback(ctx)
			return "", err, nil
		}
		var x string
		if err := tx.QueryRow(ctx, xidSQL).Scan(&x); err != nil {
			_ = tx.Rollback(ctx)
			return "", err, nil
		}
		return x, nil, tx.Commit(ctx)
	}
}

// TestLostCommitFailover: 16 writers through pooldriver (8 connections)
// loop BeginTx, INSERT of a marker row of their own (with an argument:
// its transaction's id is learnt), Commit, on a multi-host DSN with
// target_session_attrs=read-write, while the primary is stopped at once
// (pg_ctl stop -m immediate: every session cut, as in a crash) and its
// synchronous standby promoted; they go on until each has made
// commitFailoverAfter commits on the new primary. Then, on the new
// primary: every Commit that returned nil has its row, every one that
// returned ErrNotCommitted has none (0 mismatches), none returned
// ErrCommitUnknown but in the documented cases (its context ended first;
// the promoted server reports the id committed, which may be a transaction
// of its own that took the id again),
// and no Commit returned any other error. Plain pgx stdlib and pgxpool
// run the same loop beside it, for the log: their Commit errors, and how
// many of those had committed. Each transaction also reads its id (xidSQL)
// before its COMMIT, so that a mismatch is logged with the row of the new
// primary that holds the same id.
//
// A COMMIT the old primary never streamed leaves an id the promoted
// standby never saw, and assigns again to its own transactions: asked
// after that, pg_xact_status reports the other transaction's outcome.
// pooldriver compares the server's timeline with the transaction's: on
// another one, committed is ErrCommitUnknown (aborted and in progress
// still say that the transaction did not commit there).
func TestLostCommitFailover(t *testing.T) {
	skipShort(t)
	primary := startLocalPG(t)
	standby := primary.startStandby(t)
	// x, the id of the transaction that inserted the row, only says, where
	// an answer does not match, whether the id was used again.
	primary.sql(t, "CREATE TABLE marks (m text PRIMARY KEY, x xid8 DEFAULT pg_current_xact_id())")
	dsn := fmt.Sprintf("postgres://postgres@127.0.0.1:%d,127.0.0.1:%d/postgres?sslmode=disable&target_session_attrs=read-write&connect_timeout=2",
		primary.port, standby.port)

	lines, logger := newLogLines()
	c := pooldriver.New(dsn+fmt.Sprintf("&pool_max_conns=%d", failoverConns), pooldriver.WithLogger(logger))
	require.NoError(t, c.Err())
	t.Cleanup(func() { t.Logf("pooldriver: %d log lines at WARN", len(lines.with("WARN"))) })
	pd := sql.OpenDB(c)
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

	names := []string{"pooldriver", "plain pgx stdlib", "pgxpool"}
	runners := []txRunner{sqlTxRunner(pd), sqlTxRunner(plain), pgxpoolTxRunner(pp)}
	logs := make([]*commitLog, len(names))
	var (
		promotedMu sync.Mutex
		promoted   time.Time // set once the standby is promoted
	)
	promotedAt := func() *time.Time {
		promotedMu.Lock()
		defer promotedMu.Unlock()
		p := promoted
		return &p
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for s, name := range names {
		l := &commitLog{name: name}
		logs[s] = l
		for w := range failoverWriters {
			wg.Go(func() {
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					a := commitAnswer{marker: fmt.Sprintf("s%d-w%d-%d", s, w, i), writer: w, index: i, began: time.Now()}
					tctx, cancel := context.WithTimeout(context.Background(), commitFailoverTxTimeout)
					xid, early, cerr := runners[s](tctx, a.marker)
					cancel()
					if early != nil {
						l.failEarly(early)
						time.Sleep(5 * time.Millisecond) // a failing server is not spun on
						continue
					}
					a.xid, a.err, a.ended = xid, cerr, time.Now()
					l.answer(a, promotedAt())
				}
			})
		}
	}
	stopped := false
	stopWriters := func() {
		if !stopped {
			stopped = true
			close(stop)
			wg.Wait()
		}
	}
	t.Cleanup(stopWriters)

	waitFor(t, "every subject to commit before the failover", func() bool {
		for _, l := range logs {
			l.mu.Lock()
			n := len(l.answers)
			l.mu.Unlock()
			if n < 2*failoverWriters {
				return false
			}
		}
		return true
	})
	time.Sleep(time.Second) // a second of load: commits in flight at every stage
	killed := time.Now()
	primary.stop(t)
	standby.ctl(t, "promote")
	promotedMu.Lock()
	promoted = time.Now()
	promotedMu.Unlock()
	waitForSaying(t, "every pooldriver writer to commit on the new primary", func() bool {
		return logs[0].leastAfter() >= commitFailoverAfter && time.Since(promoted) >= time.Second
	}, func() string {
		return fmt.Sprintf("the fewest commits of a writer on the new primary: %d", logs[0].leastAfter())
	})
	stopWriters()
	t.Logf("primary stopped at once and standby promoted in %v", promoted.Sub(killed).Round(time.Millisecond))

	present := markRows(t, standby) // marker → its transaction's id

	for s, l := range logs {
		var nilN, notCommitted, unknown, unknownCtx, other, mismatched, errCommitted, errAbsent int
		var unknowns, others, mismatches []string
		answered := map[string]bool{}
		for _, a := range l.answers {
			answered[a.marker] = true
			_, has := present[a.marker]
			took := a.ended.Sub(a.began).Round(time.Millisecond)
			say := fmt.Sprintf("%s (transaction %s, began %v after the kill, took %v): %v; row present: %v", a.marker, a.xid, a.began.Sub(killed).Round(time.Millisecond), took, a.err, has)
			switch {
			case a.err == nil:
				nilN++
				if !has {
					mismatched++
					mismatches = append(mismatches, say)
				}
			case s > 0:
				// Plain pgx: a lost COMMIT is just an error.
				if has {
					errCommitted++
				} else {
					errAbsent++
				}
				others = append(others, say)
			case errors.Is(a.err, pooldriver.ErrNotCommitted):
				notCommitted++
				if has {
					mismatched++
					mismatches = append(mismatches, say)
				}
			case errors.Is(a.err, pooldriver.ErrCommitUnknown):
				unknown++
				// Documented: the context ended first, or the promoted
				// server reports the id committed, which may be its own
				// transaction's.
				if errors.Is(a.err, context.DeadlineExceeded) || strings.Contains(a.err.Error(), "was promoted since") {
					unknownCtx++
				}
				unknowns = append(unknowns, say)
			default:
				other++
				others = append(others, say)
			}
		}
		if s == 0 {
			t.Logf("%-16s %5d commits: nil %d, ErrNotCommitted %d, ErrCommitUnknown %d (its context ended: %d), other %d; mismatches %d; BeginTx/INSERT failed %d (%s)",
				l.name, len(l.answers), nilN, notCommitted, unknown, unknownCtx, other, mismatched, len(l.early), errKinds(l.early))
		} else {
			t.Logf("%-16s %5d commits: nil %d, errors %d (committed %d, not %d); nil without its row %d; BeginTx/INSERT failed %d (%s)",
				l.name, len(l.answers), nilN, errCommitted+errAbsent, errCommitted, errAbsent, mismatched, len(l.early), errKinds(l.early))
		}
		for _, list := range [][]string{mismatches, unknowns, others} {
			for i, say := range list {
				if i == 8 {
					t.Logf("  … %d more", len(list)-i)
					break
				}
				t.Logf("  %s: %s", l.name, say)
			}
		}
		// A row of this subject no answer names: a transaction whose
		// INSERT failed (or that never reached Commit) committed.
		strays := 0
		prefix := fmt.Sprintf("s%d-", s)
		for m := range present {
			if strings.HasPrefix(m, prefix) && !answered[m] {
				strays++
			}
		}
		if s == 0 && mismatched > 0 {
			explainMismatches(t, primary, present, l.answers, mismatches)
		}
		if s == 0 {
			require.Zero(t, mismatched, "pooldriver: Commit answers that do not match the rows on the new primary")
			require.Equal(t, unknownCtx, unknown, "pooldriver: ErrCommitUnknown outside the documented cases")
			require.Zero(t, other, "pooldriver: Commit errors that are neither ErrNotCommitted nor ErrCommitUnknown")
			require.Zero(t, strays, "pooldriver: rows of transactions that never reached Commit")
			require.Positive(t, nilN)
		} else if mismatched > 0 || strays > 0 {
			t.Logf("%s: %d nil Commits without their row, %d rows of transactions that never reached Commit", l.name, mismatched, strays)
		}
	}
}

// errKinds says how many of errs there are of each message (its first 60
// characters).
func errKinds(errs []error) string {
	if len(errs) == 0 {
		return "none"
	}
	kinds := map[string]int{}
	for _, e := range errs {
		msg := e.Error()
		kinds[msg[:min(len(msg), 60)]]++
	}
	var ks []string
	for k, n := range kinds {
		ks = append(ks, fmt.Sprintf("%d× %q", n, k))
	}
	sort.Strings(ks)
	return strings.Join(ks, "; ")
}

// markRows returns the rows of marks on pg: each marker with the id of the
// transaction that inserted it.
func markRows(t *testing.T, pg *localPG) map[string]string {
	t.Helper()
	db, err := sql.Open("pgx", pg.dsn())
	require.NoError(t, err)
	defer db.Close()
	rows, err := db.QueryContext(ctx(t), "SELECT m, x::text FROM marks")
	require.NoError(t, err)
	defer rows.Close()
	present := map[string]string{}
	for rows.Next() {
		var m, x string
		require.NoError(t, rows.Scan(&m, &x))
		present[m] = x
	}
	require.NoError(t, rows.Err())
	return present
}

// explainMismatches logs, for each mismatched answer, which row of the
// new primary (now) has its transaction's id, and, with the killed
// primary started again (crash recovery, on its own), whether the row is
// there; and how many ids the two servers gave to different rows.
func explainMismatches(t *testing.T, old *localPG, now map[string]string, answers []commitAnswer, mismatches []string) {
	t.Helper()
	byID := map[string]string{}
	for m, x := range now {
		byID[x] = m
	}
	xids := map[string]string{}
	for _, a := range answers {
		xids[a.marker] = a.xid
	}
	var was map[string]string
	if err := old.runErr(pgCtlLimit, "pg_ctl", "-D", old.data(), "-w", "start", "-l", old.dir+"/log"); err != nil {
		t.Logf("starting the old primary again to explain: %v", err)
	} else {
		was = markRows(t, old)
		reused := 0
		for m, x := range was {
			if other, ok := byID[x]; ok && other != m {
				reused++
			}
		}
		t.Logf("transaction ids of the old primary's rows that the new primary gave to other rows: %d", reused)
	}
	for _, say := range mismatches {
		m, _, _ := strings.Cut(say, " ")
		x := xids[m]
		_, onOld := was[m]
		holder := byID[x]
		if holder == "" {
			holder = "no row's"
		}
		t.Logf("  %s: transaction %s; on the new primary that id is %s; its row on the old primary after its recovery: %v", m, x, holder, onOld)
	}
}
