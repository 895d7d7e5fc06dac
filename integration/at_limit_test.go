package integration

import (
	"context"
	"database/sql"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/pooldriver/pooldriver"
)

// TestAtLimitWaitsForTurn (issue 49): every connection the server lets the
// identity have is held by another client. A statement with a 3 s context
// succeeds when one of them frees at 1 s; with none freed, it fails at its
// deadline with an error that names the limit. Plain database/sql (and
// pgxpool on PostgreSQL) fail at once, with the server's refusal: logged
// beside it.
func TestAtLimitWaitsForTurn(t *testing.T) {
	const (
		limit = 3
		call  = 3 * time.Second
		frees = time.Second
	)
	forEachServer(t, func(t *testing.T, s server) {
		t.Parallel()
		tn := limitedTenant(t, s, limit)
		plainDSN := strings.TrimPrefix(tn.base, "mysql://")
		driverName := map[string]string{"postgres": "pgx", "mysql": "mysql"}[s.name]
		limitWords := map[string]string{"postgres": "too many connections", "mysql": "max_user_connections"}[s.name]
		holder, err := sql.Open(driverName, plainDSN)
		require.NoError(t, err)
		holder.SetMaxIdleConns(0) // a conn closed ends its server connection
		t.Cleanup(func() { closeAndDrain(t, holder, tn.backends, tn.kill) })

		// subjects open a client each, for one call: run it and close it.
		type subject struct {
			name string
			open func(t *testing.T) (run func(ctx context.Context) error, close func())
		}
		subjects := []subject{
			{"pooldriver", func(t *testing.T) (func(ctx context.Context) error, func()) {
				c := pooldriver.New(tn.dsn("pool_max_conns=2"))
				require.NoError(t, c.Err())
				db := sql.OpenDB(c)
				return func(ctx context.Context) error { _, err := db.ExecContext(ctx, "SELECT 1"); return err }, func() { _ = db.Close() }
			}},
			{"database/sql", func(t *testing.T) (func(ctx context.Context) error, func()) {
				db, err := sql.Open(driverName, plainDSN)
				require.NoError(t, err)
				return func(ctx context.Context) error { _, err := db.ExecContext(ctx, "SELECT 1"); return err }, func() { _ = db.Close() }
			}},
		}
		if s.name == "postgres" {
			subjects = append(subjects, subject{"pgxpool", func(t *testing.T) (func(ctx context.Context) error, func()) {
				cfg, err := pgxpool.ParseConfig(tn.base)
				require.NoError(t, err)
				pp, err := pgxpool.NewWithConfig(context.Background(), cfg)
				require.NoError(t, err)
				return func(ctx context.Context) error { _, err := pp.Exec(ctx, "SELECT 1"); return err }, pp.Close
			}})
		}
		for _, freed := range []bool{true, false} {
			for _, sub := range subjects {
				held := make([]*sql.Conn, limit)
				for i := range held {
					held[i], err = holder.Conn(ctx(t))
					require.NoError(t, err)
					require.NoError(t, held[i].PingContext(ctx(t)))
				}
				if freed {
					time.AfterFunc(frees, func() { _ = held[0].Close() })
				}
				run, closeSub := sub.open(t)
				cctx, cancel := context.WithTimeout(context.Background(), call)
				start := time.Now()
				err := run(cctx)
				took := time.Since(start)
				cancel()
				closeSub()
				for _, c := range held {
					_ = c.Close()
				}
				tn.waitConns(t, 0)
				t.Logf("%-12s one freed at %v: %v: after %v: %v", sub.name, map[bool]any{true: frees, false: "never"}[freed],
					map[bool]string{true: "served", false: "failed"}[err == nil], took.Round(time.Millisecond), err)
				if sub.name != "pooldriver" {
					continue
				}
				if freed {
					require.NoError(t, err, "pooldriver: a statement with time left, a connection freed meanwhile")
					continue
				}
				require.Error(t, err)
				require.ErrorIs(t, err, context.DeadlineExceeded)
				require.Contains(t, err.Error(), limitWords, "the error names the limit")
				require.GreaterOrEqual(t, took, call-call/10, "pooldriver failed before its deadline: %v", err)
			}
		}
	})
}
