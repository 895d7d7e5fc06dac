package integration

import (
	"bytes"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pooldriver/pooldriver"
	"github.com/pooldriver/pooldriver/internal/faultproxy"
)

// commitRuns is how many transactions each case of TestLostCommitResolved
// runs: POOLDRIVER_COMMIT_RUNS, else 100 (25 of the other shapes than
// "tx": lostCommitRun).
func commitRuns(t *testing.T) int {
	if v := os.Getenv("POOLDRIVER_COMMIT_RUNS"); v != "" {
		n, err := strconv.Atoi(v)
		require.NoError(t, err)
		return n
	}
	return 100
}

// TestLostCommitResolved: a *sql.Tx on PostgreSQL (its inserts Execs,
// INSERT … RETURNING read with QueryRow, or a prepared *sql.Stmt's Execs),
// and a task's raw BEGIN … COMMIT,
// that inserted (with an argument, then without) commits behind a fault proxy that (a) lets the
// COMMIT reach the server and cuts the connection in place of its reply:
// Commit returns nil and the rows are there, every run; (b) drops the
// COMMIT and cuts the connection before the server sees it: Commit's
// error matches ErrNotCommitted and ErrConnLost (not driver.ErrBadConn)
// and no row is there, every run. Through New and through Wrap; the plain
// driver runs beside, for the log only.
func TestLostCommitResolved(t *testing.T) {
	forServer(t, "postgres", func(t *testing.T, s server) {
		runs := commitRuns(t)
		for _, reached := range []bool{true, false} {
			name := "commit lost before the server"
			if reached {
				name = "reply lost after the commit"
			}
			for _, shape := range []string{"tx", "raw", "query", "stmt"} {
				for _, f := range allFlavours {
					n := runs
					if shape != "tx" && os.Getenv("POOLDRIVER_COMMIT_RUNS") == "" {
						n = runs / 4 // the same path as tx's from the COMMIT on
					}
					t.Run(name+"/"+shape+"/"+string(f), func(t *testing.T) {
						tn := newTenant(t, s)
						tbl := s.table(t, "lostcommit", "v varchar(64)")
						px, err := faultproxy.New(serverAddr(t, s))
						require.NoError(t, err)
						t.Cleanup(px.Close)
						db := openOneConnOn(t, s, f, throughProxy(t, tn.base, px.Addr()))
						t.Cleanup(func() { closeAndDrain(t, db, tn.backends, tn.kill) })
						require.NoError(t, db.PingContext(ctx(t)))
						var nilErrs, notCommitted, other, mismatched int
						var last error
						for i := range n {
							marker := unique("pdcommit")
							err := lostCommitRun(t, db, px, tbl, marker, reached, shape)
							rows := s.adminInt(t, fmt.Sprintf("SELECT count(*) FROM %s WHERE v LIKE '%s%%'", tbl, marker))
							switch {
							case err == nil:
								nilErrs++
								if rows != 2 {
									mismatched++
								}
							case errors.Is(err, pooldriver.ErrNotCommitted):
								notCommitted++
								if rows != 0 {
									mismatched++
								}
							default:
								other++
								last = err
							}
							if f != plainFlavour && i < 3 {
								t.Logf("run %d: %v, %d rows", i, err, rows)
							}
							if f == plainFlavour {
								continue
							}
							if reached {
								require.NoError(t, err, "run %d: the server committed", i)
								require.EqualValues(t, 2, rows, "run %d", i)
							} else {
								require.ErrorIs(t, err, pooldriver.ErrNotCommitted, "run %d", i)
								require.ErrorIs(t, err, pooldriver.ErrConnLost, "run %d", i)
								require.NotErrorIs(t, err, driver.ErrBadConn, "run %d", i)
								require.EqualValues(t, 0, rows, "run %d", i)
							}
						}
						t.Logf("%s, %d runs: nil %d, ErrNotCommitted %d, other %d, answers that do not match the rows %d; last other: %v",
							f, n, nilErrs, notCommitted, other, mismatched, last)
					})
				}
			}
		}
	})
}

// lostCommitRun runs one transaction on db whose COMMIT the proxy loses:
// its reply (reached) or itself. It returns Commit's error. The shape
// says what the transaction is: "tx", a *sql.Tx whose inserts are Execs;
// "query", one whose inserts are INSERT … RETURNING read with QueryRow
// (as GORM's Create runs them); "stmt", one whose inserts run a *sql.Stmt
// prepared before it (tx.StmtContext, GORM's PrepareStmt); "raw", a task's
// raw BEGIN … COMMIT, whose COMMIT's Exec's error is returned.
func lostCommitRun(t *testing.T, db *sql.DB, px *faultproxy.Proxy, tbl, marker string, reached bool, shape string) error {
	t.Helper()
	var exec func(query string, args ...any) (sql.Result, error)
	var commit func() error
	if shape == "raw" {
		tctx, end := pooldriver.WithTask(ctx(t))
		defer end()
		_, err := db.ExecContext(tctx, "BEGIN")
		require.NoError(t, err)
		exec = func(query string, args ...any) (sql.Result, error) { return db.ExecContext(tctx, query, args...) }
		commit = func() error {
			_, err := db.ExecContext(tctx, "COMMIT")
			return err
		}
	} else {
		var st *sql.Stmt
		if shape == "stmt" {
			// Prepared before the transaction, on the pool's one connection.
			var err error
			st, err = db.PrepareContext(ctx(t), fmt.Sprintf("INSERT INTO %s VALUES ($1)", tbl))
			require.NoError(t, err)
			defer st.Close()
		}
		tx, err := db.BeginTx(ctx(t), nil)
		require.NoError(t, err)
		exec = func(query string, args ...any) (sql.Result, error) { return tx.ExecContext(ctx(t), query, args...) }
		switch shape {
		case "query":
			exec = func(query string, args ...any) (sql.Result, error) {
				var v string
				return nil, tx.QueryRowContext(ctx(t), query+" RETURNING v", args...).Scan(&v)
			}
		case "stmt":
			exec = func(_ string, args ...any) (sql.Result, error) {
				return tx.StmtContext(ctx(t), st).ExecContext(ctx(t), args...)
			}
		}
		commit = tx.Commit
	}
	_, err := exec(fmt.Sprintf("INSERT INTO %s VALUES ($1)", tbl), marker+"a")
	require.NoError(t, err)
	if shape == "stmt" {
		_, err = exec("", marker+"b") // both through the prepared statement
	} else {
		_, err = exec(fmt.Sprintf("INSERT INTO %s VALUES ('%sb')", tbl, marker))
	}
	require.NoError(t, err)
	var stage atomic.Int32 // 0: waiting for the COMMIT, 1: it went by, 2: cut
	px.SetFilter(func(dir faultproxy.Direction, b []byte) faultproxy.Verdict {
		switch {
		case dir == faultproxy.ToServer && stage.Load() == 0 && bytes.Contains(bytes.ToLower(b), []byte("commit")):
			if !reached {
				stage.Store(2)
				return faultproxy.DropAndCut
			}
			stage.Store(1)
		case dir == faultproxy.ToClient && stage.Load() == 1 && bytes.Contains(b, []byte("COMMIT")):
			stage.Store(2)
			return faultproxy.DropAndCut
		}
		return faultproxy.Pass
	})
	err = commit()
	px.SetFilter(nil)
	require.EqualValues(t, 2, stage.Load(), "the COMMIT was not cut")
	return err
}
