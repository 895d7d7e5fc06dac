package integration

import (
	"bytes"
	"database/sql"
	"database/sql/driver"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
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
// driver and pgxpool run beside, for the log only.
func TestLostCommitResolved(t *testing.T) {
	forServer(t, "postgres", func(t *testing.T, s server) {
		runs := commitRuns(t)
		for _, reached := range []bool{true, false} {
			name := "commit lost before the server"
			if reached {
				name = "reply lost after the commit"
			}
			t.Run(name+"/tx/pgxpool", func(t *testing.T) { lostCommitPgxpool(t, s, reached, runs) })
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
	cut := loseCommit(px, reached)
	err = commit()
	px.SetFilter(nil)
	require.True(t, cut(), "the COMMIT was not cut")
	return err
}

// loseCommit makes px lose the next COMMIT: its reply (reached), or
// itself, cutting the connection in its place. cut reports whether it did.
func loseCommit(px *faultproxy.Proxy, reached bool) (cut func() bool) {
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
	return func() bool { return stage.Load() == 2 }
}

// lostCommitPgxpool is TestLostCommitResolved's "tx" shape through
// pgxpool, for the log: what a caller of pgxpool learns of a lost COMMIT.
func lostCommitPgxpool(t *testing.T, s server, reached bool, n int) {
	tn := newTenant(t, s)
	tbl := s.table(t, "lostcommit", "v varchar(64)")
	px, err := faultproxy.New(serverAddr(t, s))
	require.NoError(t, err)
	t.Cleanup(px.Close)
	pcfg, err := pgxpool.ParseConfig(throughProxy(t, tn.base, px.Addr()))
	require.NoError(t, err)
	pcfg.MaxConns = 1
	pp, err := pgxpool.NewWithConfig(ctx(t), pcfg)
	require.NoError(t, err)
	defer pp.Close()
	var nilErrs, other, mismatched int
	var last error
	for range n {
		marker := unique("pdcommit")
		tx, err := pp.Begin(ctx(t))
		require.NoError(t, err)
		_, err = tx.Exec(ctx(t), fmt.Sprintf("INSERT INTO %s VALUES ($1)", tbl), marker+"a")
		require.NoError(t, err)
		_, err = tx.Exec(ctx(t), fmt.Sprintf("INSERT INTO %s VALUES ('%sb')", tbl, marker))
		require.NoError(t, err)
		cut := loseCommit(px, reached)
		err = tx.Commit(ctx(t))
		px.SetFilter(nil)
		require.True(t, cut(), "the COMMIT was not cut")
		rows := s.adminInt(t, fmt.Sprintf("SELECT count(*) FROM %s WHERE v LIKE '%s%%'", tbl, marker))
		if err == nil {
			nilErrs++
			if rows != 2 {
				mismatched++
			}
		} else {
			other++
			last = err
		}
	}
	t.Logf("pgxpool, %d runs: nil %d, other %d, nil without the rows %d; last other: %v", n, nilErrs, other, mismatched, last)
}

// TestTxIDNoExtraRoundTrip: learning a transaction's id costs no round
// trip. Transactions of an UPDATE with arguments, a SELECT and an UPDATE,
// committed, through a proxy that counts the server's ReadyForQuery
// messages (one per round trip: each Sync, each simple Query) from the
// BeginTx to the Commit's return: pooldriver (New and Wrap) asks the id
// in every one, and the fewest round trips a transaction takes are no
// more than the plain driver's beside it. (The most may be more: a check
// of an idle connection, the plain driver's or pooldriver's, falls in a
// transaction's BeginTx now and then.)
func TestTxIDNoExtraRoundTrip(t *testing.T) {
	forServer(t, "postgres", func(t *testing.T, s server) {
		const txs = 20
		fewest := map[flavour]int64{}
		for _, f := range allFlavours {
			tn := newTenant(t, s)
			tbl := s.table(t, "txid_rt", "id int PRIMARY KEY, v bigint")
			s.adminExec(t, fmt.Sprintf("INSERT INTO %s VALUES (1, 0), (2, 0)", tbl))
			px, err := faultproxy.New(serverAddr(t, s))
			require.NoError(t, err)
			t.Cleanup(px.Close)
			db := openOneConnOn(t, s, f, throughProxy(t, tn.base, px.Addr()))
			t.Cleanup(func() { closeAndDrain(t, db, tn.backends, tn.kill) })
			var ready, probes atomic.Int64
			var counting atomic.Bool
			var rd messageReader
			px.SetFilter(func(dir faultproxy.Direction, b []byte) faultproxy.Verdict {
				switch {
				case dir == faultproxy.ToClient:
					if n := rd.count(b, 'Z'); counting.Load() {
						ready.Add(int64(n))
					}
				case counting.Load():
					// The probe's text, or once prepared its name alone.
					n := bytes.Count(b, []byte("pg_current_xact_id_if_assigned"))
					if n == 0 {
						n = bytes.Count(b, []byte("pooldriver_probe"))
					}
					probes.Add(int64(n))
				}
				return faultproxy.Pass
			})
			t.Cleanup(func() { px.SetFilter(nil) })
			run := func(i int) int64 {
				ready.Store(0)
				counting.Store(true)
				defer counting.Store(false)
				tx, err := db.BeginTx(ctx(t), nil)
				require.NoError(t, err)
				_, err = tx.ExecContext(ctx(t), "UPDATE "+tbl+" SET v = $1 WHERE id = $2", i, 1)
				require.NoError(t, err)
				var v int64
				require.NoError(t, tx.QueryRowContext(ctx(t), "SELECT v FROM "+tbl+" WHERE id = $1", 1).Scan(&v))
				_, err = tx.ExecContext(ctx(t), "UPDATE "+tbl+" SET v = $1 WHERE id = $2", v, 2)
				require.NoError(t, err)
				require.NoError(t, tx.Commit())
				return ready.Load()
			}
			run(0) // the connection opened, the statements prepared
			probes.Store(0)
			least, most := int64(1<<62), int64(0)
			for i := range txs {
				n := run(i + 1)
				least, most = min(least, n), max(most, n)
			}
			fewest[f] = least
			t.Logf("%s: %d transactions, %d to %d round trips each, %d asked their id", f, txs, least, most, probes.Load())
			if f != plainFlavour {
				require.EqualValues(t, txs, probes.Load(), "%s: transactions whose id was asked", f)
			}
		}
		for _, f := range allFlavours {
			require.LessOrEqual(t, fewest[f], fewest[plainFlavour], "%s: a transaction's round trips, against the plain driver's", f)
		}
	})
}

// messageReader counts the messages of one type in a stream of
// PostgreSQL backend messages (a type byte, then a length that counts
// itself), given in chunks cut anywhere.
type messageReader struct {
	head [5]byte
	have int   // bytes of head read
	skip int64 // bytes of the current message's body left
}

func (r *messageReader) count(b []byte, typ byte) int {
	n := 0
	for len(b) > 0 {
		if r.skip > 0 {
			k := min(int64(len(b)), r.skip)
			b, r.skip = b[k:], r.skip-k
			continue
		}
		k := copy(r.head[r.have:], b)
		b, r.have = b[k:], r.have+k
		if r.have < len(r.head) {
			return n
		}
		if r.head[0] == typ {
			n++
		}
		r.skip = int64(binary.BigEndian.Uint32(r.head[1:])) - 4
		r.have = 0
	}
	return n
}
