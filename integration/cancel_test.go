package integration

import (
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pooldriver/pooldriver"
)

// TestClientCancelIsRoutine: a request its client cancels in the middle of
// a transaction of its task (a raw BEGIN, a *sql.Tx) while a statement runs
// writes no WARN line (what its cancel left is cleaned up at DEBUG), and
// the statement's error reads as the plain driver's does, "context
// canceled" first, matching context.Canceled and ErrConnLost: the
// transaction went with the connection the cancel interrupted.
func TestClientCancelIsRoutine(t *testing.T) {
	forEachServer(t, func(t *testing.T, s server) {
		t.Parallel()
		h := newLogCount()
		c := pooldriver.New(s.dsn, pooldriver.WithLogger(slog.New(h)))
		require.NoError(t, c.Err())
		db := sql.OpenDB(c)
		defer db.Close()
		for _, raw := range []bool{true, false} {
			marker := unique("tr56_cancel")
			sleep := "SELECT pg_sleep(30) /* " + marker + " */"
			running := "SELECT count(*) FROM pg_stat_activity WHERE query = '" + sleep + "'"
			if s.name == "mysql" {
				sleep = "SELECT SLEEP(30) /* " + marker + " */"
				running = "SELECT count(*) FROM information_schema.processlist WHERE info = '" + sleep + "'"
			}
			request, cancel := context.WithCancel(context.Background())
			tctx, end := pooldriver.WithTask(request)
			var tx *sql.Tx
			var err error
			if raw {
				_, err = db.ExecContext(tctx, "BEGIN")
			} else {
				tx, err = db.BeginTx(tctx, nil)
			}
			require.NoError(t, err)
			done := make(chan error, 1)
			go func() {
				var err error
				if raw {
					_, err = db.ExecContext(tctx, sleep)
				} else {
					_, err = tx.ExecContext(tctx, sleep)
				}
				done <- err
			}()
			require.Eventually(t, func() bool {
				var n int
				return s.admin(t).QueryRowContext(ctx(t), running).Scan(&n) == nil && n == 1
			}, waitLimit, 10*time.Millisecond, "the statement running on the server")
			cancel() // the client goes away
			err = <-done
			end()
			require.Error(t, err)
			assert.True(t, strings.HasPrefix(err.Error(), "context canceled"), "raw %v: %q does not lead with the cause", raw, err)
			assert.True(t, errors.Is(err, context.Canceled), "raw %v: %v is not context.Canceled", raw, err)
			assert.True(t, errors.Is(err, pooldriver.ErrConnLost), "raw %v: %v is not ErrConnLost", raw, err)
			if tx != nil {
				assert.Error(t, tx.Commit())
			}
		}
		require.NoError(t, db.Close()) // writes what the limiter held back
		lines, _, first := h.count(slog.LevelWarn, "")
		assert.Zero(t, lines, "WARN lines for a client's cancel; the first: %v", first)
	})
}
