package integration

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/pooldriver/pooldriver/dialects"
)

// BenchmarkCatalogUnsure is what being unsure of the catalog costs on
// PostgreSQL (docs/performance.md, "What being unsure costs"), side by
// side in one run, in interleaved turns:
//
//   - ddl: a serial loop of CREATE TABLE, INSERT, SELECT and DROP TABLE
//     (a migration's or a test suite's shape) through plain pgx's stdlib,
//     pooldriver at the defaults and with pool_trust_functions=true;
//     x-plain is each pool's time over plain's. No statement of it needs
//     a reset: every one leaves the session alone.
//
//   - session16: 16 callers of a point select, one call in 100 of a
//     user's function that changes a setting (set_config(…, false): the
//     default pool resets after it, the trusting one does not), at the
//     defaults against pool_trust_functions=true, through pools of 10
//     (the default) and 4; resets-% is the default pool's share of calls
//     reset, on/trust its throughput over the trusting pool's.
//
// Run it with:
//
//	POOLDRIVER_POSTGRES_DSN=... go test -run '^$' -bench '^BenchmarkCatalogUnsure$' -benchtime 2000x -count 3 ./integration
func BenchmarkCatalogUnsure(b *testing.B) {
	dsn := dsns["POOLDRIVER_POSTGRES_DSN"]
	if dsn == "" {
		b.Skip("no PostgreSQL")
	}
	b.Run("ddl", func(b *testing.B) { benchUnsureDDL(b, dsn) })
	for _, size := range []int{10, 4} {
		b.Run(fmt.Sprintf("session16/pool%d", size), func(b *testing.B) { benchUnsureSession(b, dsn, size) })
	}
}

// benchUnsureDDL is BenchmarkCatalogUnsure's ddl.
func benchUnsureDDL(b *testing.B, dsn string) {
	plain, err := sql.Open("pgx", dsn)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = plain.Close() })
	dbs, conns := benchPools(b, dsn, "pool_max_conns=10", "pool_trust_functions=true")
	dbs = append([]*sql.DB{plain}, dbs...)
	ctx := context.Background()
	table := unique("pd_unsure_ddl")
	loop := func(db *sql.DB, n int) {
		for i := range n {
			for _, q := range []string{
				"CREATE TABLE " + table + " (id int PRIMARY KEY, v text NOT NULL)",
				"INSERT INTO " + table + " VALUES (1, 'x')",
				"SELECT v FROM " + table + " WHERE id = 1",
				"DROP TABLE " + table,
			} {
				if _, err := db.ExecContext(ctx, q); err != nil {
					b.Fatalf("%d: %s: %v", i, q, err)
				}
			}
		}
	}
	for _, db := range dbs {
		loop(db, 5) // warm: connections, caches, the catalog's first reading
	}
	resets := conns[0].Stats().SessionResets
	took := interleaved(b, len(dbs), 20, func(i, n int) { loop(dbs[i], n) })
	st := conns[0].Stats()
	b.Logf("default pool: %d resets over %d loops (carried %d, separate %d), created %d",
		st.SessionResets-resets, b.N, st.CarriedResets, st.SeparateResets, st.Created)
	b.ReportMetric(float64(took[0])/float64(b.N), "plain-ns/loop")
	b.ReportMetric(float64(took[1])/float64(took[0]), "x-plain")
	b.ReportMetric(float64(took[2])/float64(took[0]), "trust-x-plain")
	b.ReportMetric(float64(st.SessionResets-resets)/float64(b.N), "resets/loop")
}

// benchUnsureSession is BenchmarkCatalogUnsure's session16, through pools
// of size connections.
func benchUnsureSession(b *testing.B, dsn string, size int) {
	const workers, every = 16, 100
	fn, table := unique("pd_unsure_set"), unique("pd_unsure_kv")
	admin, err := sql.Open("pgx", dsn)
	if err != nil {
		b.Fatal(err)
	}
	defer admin.Close()
	for _, q := range []string{
		"CREATE TABLE " + table + " (id int PRIMARY KEY, v text NOT NULL)",
		"INSERT INTO " + table + " SELECT g, 'v' || g FROM generate_series(1, 100) g",
		"CREATE FUNCTION " + fn + "() RETURNS text LANGUAGE sql AS $$ SELECT set_config('work_mem', '8MB', false) $$",
	} {
		if _, err := admin.Exec(q); err != nil {
			b.Fatal(err)
		}
	}
	defer func() {
		for _, q := range []string{"DROP FUNCTION " + fn + "()", "DROP TABLE " + table} {
			if _, err := admin.Exec(q); err != nil {
				b.Error(err)
			}
		}
	}()
	// The steady state: a reading taken since the function was made
	// knows it (static: its call costs its reset, and no new reading).
	time.Sleep(dialects.CatalogMaxAge)
	pools := fmt.Sprintf("pool_max_conns=%d", size)
	dbs, conns := benchPools(b, dsn, pools, pools+"&pool_trust_functions=true")
	ctx := context.Background()
	point := "SELECT v FROM " + table + " WHERE id = $1"
	set := "SELECT " + fn + "()"
	run := func(db *sql.DB, n int) {
		var wg sync.WaitGroup
		for w := range workers {
			wg.Go(func() {
				for i := range n/workers + min(1, max(0, n%workers-w)) {
					var err error
					if (i*workers+w)%every == every-1 {
						_, err = db.ExecContext(ctx, set)
					} else {
						var v string
						err = db.QueryRowContext(ctx, point, 1+(i*workers+w)%100).Scan(&v)
					}
					if err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
	}
	for _, db := range dbs {
		run(db, 400) // warm: connections, caches, the catalog's reading
	}
	before := conns[0].Stats()
	took := interleaved(b, len(dbs), 400, func(i, n int) { run(dbs[i], n) })
	st := conns[0].Stats()
	b.Logf("default pool: %d resets over %d calls (carried %d, separate %d), created %d",
		st.SessionResets-before.SessionResets, b.N, st.CarriedResets-before.CarriedResets,
		st.SeparateResets-before.SeparateResets, st.Created)
	b.ReportMetric(100*float64(st.SessionResets-before.SessionResets)/float64(b.N), "resets-%")
	b.ReportMetric(float64(took[1])/float64(took[0]), "on/trust")
	b.ReportMetric(float64(took[0])/float64(b.N), "on-ns/op")
}
