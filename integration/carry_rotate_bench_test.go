package integration

import (
	"context"
	"testing"
)

// BenchmarkCarryOrRotate is the choice pooldriver makes for a serial
// caller of a function whose connection must be reset, on PostgreSQL,
// side by side in one run (interleaved turns): a pool of one, where the
// reset is carried with the next call on the same connection, against a
// pool of four, where each call takes another connection while the last
// one resets off the caller's path (rotating). carried-ns/op and
// rotating-ns/op are each one's time per call, carried/rotating their
// ratio (below 1: carrying is faster here).
//
//	POOLDRIVER_POSTGRES_DSN=... \
//	  go test -run '^$' -bench '^BenchmarkCarryOrRotate$' -benchtime 3000x -count 5 ./integration
func BenchmarkCarryOrRotate(b *testing.B) {
	dsn := dsns["POOLDRIVER_POSTGRES_DSN"]
	if dsn == "" {
		b.Skip("POOLDRIVER_POSTGRES_DSN unset")
	}
	const fn = "rst54_bench_f"
	dbs, conns := benchPools(b, dsn, "pool_max_conns=1", "pool_max_conns=4")
	ctx := context.Background()
	// It changes the session: whatever reads its body, it needs a reset.
	if _, err := dbs[0].ExecContext(ctx, "CREATE OR REPLACE FUNCTION "+fn+"() RETURNS int LANGUAGE plpgsql AS $$ BEGIN "+
		"PERFORM set_config('rst54.mark', 'x', false); RETURN pg_backend_pid(); END $$"); err != nil {
		b.Fatal(err)
	}
	defer func() { _, _ = dbs[0].ExecContext(ctx, "DROP FUNCTION "+fn+"()") }()
	query := "SELECT " + fn + "()"
	// moved counts the calls that ran on another backend than the last.
	moved := make([]int, len(dbs))
	last := make([]int, len(dbs))
	run := func(i, n int) {
		for range n {
			var pid int
			if err := dbs[i].QueryRowContext(ctx, query).Scan(&pid); err != nil {
				b.Fatal(err)
			}
			if pid != last[i] {
				moved[i]++
				last[i] = pid
			}
		}
	}
	const chunk = 300
	for i := range dbs {
		run(i, chunk) // warm: connections, caches
		moved[i] = 0
	}
	took := interleaved(b, len(dbs), chunk, run)
	for i, c := range conns {
		st := c.Stats()
		b.Logf("%s: moved %d of %d calls; resets %d, carried %d, separate %d, waits %d",
			[]string{"carried (max 1)", "rotating (max 4)"}[i], moved[i], b.N, st.SessionResets, st.CarriedResets, st.SeparateResets, st.Waits)
	}
	b.ReportMetric(float64(took[0])/float64(b.N), "carried-ns/op")
	b.ReportMetric(float64(took[1])/float64(b.N), "rotating-ns/op")
	b.ReportMetric(float64(took[0])/float64(took[1]), "carried/rotating")
}
