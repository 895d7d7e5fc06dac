package integration

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pooldriver/pooldriver"
)

// BenchmarkDefaultDenyReset is the cost of default-deny tracking (issues
// 35 and 46): `SELECT f()` of a user's function, outside any task, against
// the same with pool_trust_functions=true, which resets nothing. On
// PostgreSQL pd_bench_f in LANGUAGE sql, which returns 1, and
// pd_bench_plpgsql, a PL/pgSQL function of the business-logic shape
// (DECLARE, SELECT … INTO, IF, assignments, UPDATE, INSERT, RAISE NOTICE,
// RETURN; each caller on an account of its own), whose bodies the catalog
// proves harmless (no reset: sql, plpgsql); on MySQL/MariaDB pd_bench_f, RETURN 1,
// which the catalog proves harmless (return), pd_bench_block, BEGIN
// RETURN 1; END, which it reads statement by statement and proves harmless
// too (block), and my54_bench_business, a block with locals, IF, SELECT
// ... INTO a local, an INSERT and an UPDATE (business; proved harmless).
// The reset runs off the caller's path where another connection is
// to be had, and with the next statement (PostgreSQL) where none is. One
// serial caller (serial) and 16 goroutines (concurrent16), in interleaved
// chunks of one run; on-ns/off-ns is the cost, off/on the throughput
// ratio (the target: at least 0.9, on 16 cores).
//
//	POOLDRIVER_POSTGRES_DSN=... POOLDRIVER_MYSQL_DSN=... \
//	  go test -run '^$' -bench '^BenchmarkDefaultDenyReset$' -benchtime 20000x -count 5 ./integration
func BenchmarkDefaultDenyReset(b *testing.B) {
	for _, s := range serverDefs {
		dsn := dsns[s.env]
		if dsn == "" {
			continue
		}
		langs := []string{"sql", "plpgsql"}
		if s.name == "mysql" {
			langs = []string{"return", "block", "business"}
		}
		for _, lang := range langs {
			for _, workers := range []int{1, 16} {
				name := s.name + "/" + lang + "/serial"
				if workers > 1 {
					name = fmt.Sprintf("%s/%s/concurrent%d", s.name, lang, workers)
				}
				b.Run(name, func(b *testing.B) { benchDefaultDeny(b, s, dsn, lang, workers) })
			}
		}
	}
}

// benchDefaultDeny is BenchmarkDefaultDenyReset on server s, with a
// function in lang, workers goroutines calling.
func benchDefaultDeny(b *testing.B, s server, dsn, lang string, workers int) {
	fn := "pd_bench_f"
	create := []string{"CREATE OR REPLACE FUNCTION " + fn + "() RETURNS int LANGUAGE sql AS 'SELECT 1'"}
	var drop []string
	args := "()"
	switch lang {
	case "plpgsql":
		fn = "pd_bench_plpgsql"
		args = "($1, 1)" // the caller's account
		create = []string{
			"DROP TABLE IF EXISTS pd_bench_accounts, pd_bench_ledger",
			"CREATE TABLE pd_bench_accounts (id int PRIMARY KEY, balance int NOT NULL)",
			"CREATE TABLE pd_bench_ledger (account int, amount int, note text)",
			fmt.Sprintf("INSERT INTO pd_bench_accounts SELECT g, 0 FROM generate_series(1, %d) g", workers),
			"CREATE OR REPLACE FUNCTION " + fn + plBusiness("pd_bench_accounts", "pd_bench_ledger", ""),
		}
		drop = []string{"DROP TABLE pd_bench_accounts, pd_bench_ledger"}
	case "return":
		create = []string{"CREATE OR REPLACE FUNCTION " + fn + "() RETURNS INT DETERMINISTIC RETURN 1"}
	case "block":
		fn = "pd_bench_block"
		create = []string{"CREATE OR REPLACE FUNCTION " + fn + "() RETURNS INT DETERMINISTIC BEGIN RETURN 1; END"}
	case "business":
		fn, args = "my54_bench_business", "(7, 3)"
		create = []string{
			"CREATE OR REPLACE TABLE my54_bench_orders (id INT AUTO_INCREMENT PRIMARY KEY, customer INT, amount DECIMAL(10,2)) ENGINE=InnoDB",
			"CREATE OR REPLACE TABLE my54_bench_customers (id INT PRIMARY KEY, last_total DECIMAL(10,2)) ENGINE=InnoDB",
			"INSERT INTO my54_bench_customers VALUES (7, 0)",
			strings.Replace(businessFunction(fn, "my54_bench_orders", "my54_bench_customers", ""), "CREATE FUNCTION", "CREATE OR REPLACE FUNCTION", 1),
		}
		drop = []string{"DROP FUNCTION " + fn, "DROP TABLE my54_bench_orders", "DROP TABLE my54_bench_customers"}
	}
	dbs, conns := benchPools(b, dsn, "pool_trust_functions=true", "")
	ctx := context.Background()
	// Through the default pool. The DDL leaves every reading of the
	// catalog out of date, so the first calls of the function are judged
	// by none and reset; the warming below waits them out.
	for _, q := range create {
		if _, err := dbs[1].ExecContext(ctx, q); err != nil {
			b.Fatal(err)
		}
	}
	defer func() { // before the deferred Close of the *sql.DBs
		for _, q := range drop {
			if _, err := dbs[0].ExecContext(context.Background(), q); err != nil {
				b.Error(err)
			}
		}
	}()
	query := "SELECT " + fn + args
	// run makes n calls on db, shared among the workers.
	run := func(db *sql.DB, n int) {
		var wg sync.WaitGroup
		for w := range workers {
			wg.Go(func() {
				for range n/workers + min(1, max(0, n%workers-w)) {
					var args []any
					if lang == "plpgsql" {
						args = []any{w + 1}
					}
					if _, err := db.ExecContext(ctx, query, args...); err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
	}
	chunk := 500
	if lang == "plpgsql" {
		// Each call commits a write: turns of a tenth as many calls
		// meet the same load on the machine as the other pool's.
		chunk = 50
	}
	for _, db := range dbs {
		run(db, chunk) // warm: connections, caches
	}
	// The DDL made the catalog's reading out of date: a connection's first
	// call judged before a reading since is stored is reset, and its
	// reset reads the catalog (TestCatalogUnsureConcurrent). Warm the
	// default pool until a whole chunk, its resets done, resets nothing.
	for start := time.Now(); ; {
		before := conns[1].Stats().SessionResets
		run(dbs[1], chunk)
		settled(b, conns[1])
		if conns[1].Stats().SessionResets == before {
			break
		}
		if time.Since(start) > 30*time.Second {
			b.Fatalf("the default pool still resets calls of %s after 30s of warming", fn)
		}
	}
	resets := conns[1].Stats().SessionResets
	took := interleaved(b, len(dbs), chunk, func(i, n int) { run(dbs[i], n) })
	settled(b, conns[1])
	if n := conns[1].Stats().SessionResets - resets; n != 0 {
		b.Errorf("%d resets over %d calls of a function the catalog proves harmless", n, b.N)
	}
	st := conns[1].Stats()
	b.Logf("default-deny pool: total %d, created %d, waits %d, resets %d (carried %d, separate %d)", st.Total, st.Created, st.Waits, st.SessionResets, st.CarriedResets, st.SeparateResets)
	b.ReportMetric(float64(took[0])/float64(b.N), "off-ns/op")
	b.ReportMetric(float64(took[1])/float64(b.N), "on-ns/op")
	b.ReportMetric(float64(took[0])/float64(took[1]), "off/on")
}

// settled waits until none of c's connections is in use: a reset off
// the callers' paths is counted once it ran, after the call that caused
// it returned.
func settled(b *testing.B, c *pooldriver.Connector) {
	for deadline := time.Now().Add(10 * time.Second); c.Stats().Active != 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			b.Fatalf("connections still in use 10s after the calls returned: %+v", c.Stats())
		}
	}
}

// benchPools opens a pool on dsn with each of extras' DSN keys, closed
// when b ends.
func benchPools(b *testing.B, dsn string, extras ...string) ([]*sql.DB, []*pooldriver.Connector) {
	var dbs []*sql.DB
	var conns []*pooldriver.Connector
	for _, extra := range extras {
		c := pooldriver.New(withParams(dsn, extra))
		if err := c.Err(); err != nil {
			b.Fatal(err)
		}
		conns = append(conns, c)
		db := sql.OpenDB(c)
		b.Cleanup(func() { _ = db.Close() })
		dbs = append(dbs, db)
	}
	return dbs, conns
}

// interleaved runs b.N operations of each of k contenders, in turns of
// chunk (which contender goes first rotates), run(i, n) making n of
// contender i's, and returns the time each took: side by side in one run,
// so that all meet the same load on the machine. The timer runs only
// during the turns.
func interleaved(b *testing.B, k, chunk int, run func(i, n int)) []time.Duration {
	took := make([]time.Duration, k)
	b.ReportAllocs()
	b.ResetTimer()
	for done, turn := 0, 0; done < b.N; done, turn = done+chunk, turn+1 {
		n := min(chunk, b.N-done)
		for j := range k {
			i := (turn + j) % k
			start := time.Now()
			run(i, n)
			took[i] += time.Since(start)
		}
	}
	b.StopTimer()
	return took
}
