package mysql

import (
	"context"
	"testing"
	"time"
)

// BenchmarkResetNextCall (issue 46): what each part of MariaDB's session
// reset costs the call that follows it on the same connection. The call
// is SELECT of a stored function (BEGIN RETURN 1; END: the catalog does
// not read it, and a call of it is followed by a reset), or SELECT 1. The
// parts: none; COM_RESET_CONNECTION alone (which empties the session's
// cache of parsed routines: the next call parses the function again); it
// and the SET that restores what the driver set at login; the whole
// ResetSession (and the reading of the role, the database and the
// transaction state). next-ns/op is the call's time alone, reset-ns/op
// the reset's, which pooldriver runs off the caller's path.
//
//	POOLDRIVER_MYSQL_DSN=... go test -run '^$' -bench '^BenchmarkResetNextCall$' -benchtime 3000x ./dialects/mysql
func BenchmarkResetNextCall(b *testing.B) {
	c := openWired(b, "")
	ctx := context.Background()
	for _, q := range []string{
		"CREATE OR REPLACE FUNCTION pd_bench_reset_block() RETURNS INT DETERMINISTIC BEGIN RETURN 1; END",
	} {
		if _, err := c.execer.ExecContext(ctx, q, nil); err != nil {
			b.Fatal(err)
		}
	}
	b.Cleanup(func() {
		_, _ = c.execer.ExecContext(context.Background(), "DROP FUNCTION IF EXISTS pd_bench_reset_block", nil)
	})
	parts := []struct {
		name  string
		reset func() error
	}{
		{"none", func() error { return nil }},
		{"com_reset", func() error { return c.rawReset(ctx) }},
		{"com_reset+set", func() error {
			if err := c.rawReset(ctx); err != nil {
				return err
			}
			return c.restoreSession(ctx)
		}},
		{"ResetSession", func() error { return c.ResetSession(ctx) }},
	}
	for _, call := range []string{"SELECT pd_bench_reset_block()", "SELECT 1"} {
		name := "function"
		if call == "SELECT 1" {
			name = "select1"
		}
		for _, p := range parts {
			b.Run(name+"/"+p.name, func(b *testing.B) {
				if err := c.ResetSession(ctx); err != nil {
					b.Fatal(err)
				}
				var next, reset time.Duration
				for b.Loop() {
					start := time.Now()
					if err := p.reset(); err != nil {
						b.Fatal(err)
					}
					mid := time.Now()
					if err := drain(ctx, c, call); err != nil {
						b.Fatal(err)
					}
					next += time.Since(mid)
					reset += mid.Sub(start)
				}
				b.ReportMetric(float64(next)/float64(b.N), "next-ns/op")
				b.ReportMetric(float64(reset)/float64(b.N), "reset-ns/op")
			})
		}
	}
}
