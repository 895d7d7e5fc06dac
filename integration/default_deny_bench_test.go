package integration

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/pooldriver/pooldriver"
)

// BenchmarkDefaultDenyReset is the cost of default-deny tracking (issue
// 35): `SELECT f()` of a user's function, outside any task, resets the
// connection before anyone else uses it (the function may have changed the
// session where nothing shows it), against the same with
// pool_trust_functions=true, which resets nothing. The reset runs off the
// caller's path, so a serial caller takes another idle connection while
// the last one resets. Interleaved chunks, one run; on-ns/off-ns is the
// cost, off/on the throughput ratio (target ≥ 0.8).
//
//	POOLDRIVER_POSTGRES_DSN=... POOLDRIVER_MYSQL_DSN=... \
//	  go test -run '^$' -bench '^BenchmarkDefaultDenyReset$' -benchtime 20000x -count 5 ./integration
func BenchmarkDefaultDenyReset(b *testing.B) {
	for _, s := range serverDefs {
		dsn := dsns[s.env]
		if dsn == "" {
			continue
		}
		b.Run(s.name, func(b *testing.B) {
			fn := "pd_bench_f"
			create := "CREATE OR REPLACE FUNCTION " + fn + "() RETURNS int LANGUAGE sql AS 'SELECT 1'"
			if s.name == "mysql" {
				create = "CREATE OR REPLACE FUNCTION " + fn + "() RETURNS INT DETERMINISTIC RETURN 1"
			}
			var dbs []*sql.DB
			var conns []*pooldriver.Connector
			for _, extra := range []string{"pool_trust_functions=true", ""} {
				c := pooldriver.New(withParams(dsn, extra))
				if err := c.Err(); err != nil {
					b.Fatal(err)
				}
				conns = append(conns, c)
				dbs = append(dbs, sql.OpenDB(c))
			}
			ctx := context.Background()
			if _, err := dbs[0].ExecContext(ctx, create); err != nil {
				b.Fatal(err)
			}
			query := "SELECT " + fn + "()"
			const chunk = 500
			for _, db := range dbs {
				defer db.Close()
				for range chunk { // warm: connections, caches
					if _, err := db.ExecContext(ctx, query); err != nil {
						b.Fatal(err)
					}
				}
			}
			resets := conns[1].Stats().SessionResets
			var took [2]time.Duration
			b.ReportAllocs()
			b.ResetTimer()
			for done, turn := 0, 0; done < b.N; done, turn = done+chunk, turn+1 {
				n := min(chunk, b.N-done)
				for k := range dbs {
					i := (turn + k) % len(dbs) // rotate which goes first
					start := time.Now()
					for range n {
						if _, err := dbs[i].ExecContext(ctx, query); err != nil {
							b.Fatal(err)
						}
					}
					took[i] += time.Since(start)
				}
			}
			b.StopTimer()
			if !strings.Contains(dsn, "pool_trust_functions") {
				// The resets run off the callers' path: the last may
				// still be under way.
				waitFor(b, fmt.Sprintf("default-deny to reset a connection over %d calls of a user's function", b.N),
					func() bool { return conns[1].Stats().SessionResets > resets })
			}
			st := conns[1].Stats()
			b.Logf("default-deny pool: total %d, created %d, waits %d, resets %d", st.Total, st.Created, st.Waits, st.SessionResets)
			b.ReportMetric(float64(took[0])/float64(b.N), "off-ns/op")
			b.ReportMetric(float64(took[1])/float64(b.N), "on-ns/op")
			b.ReportMetric(float64(took[0])/float64(took[1]), "off/on")
		})
	}
}
