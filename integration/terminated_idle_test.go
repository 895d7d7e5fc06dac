package integration

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pooldriver/pooldriver"
)

// TestTerminatedIdleRunsOnce: the server ends an idle connection just
// before the caller's next statement, outside a task and in a task between
// its statements, with its goodbye already in the socket ("in the socket")
// or still on its way ("on its way": the statement is sent as soon as
// pg_terminate_backend or KILL returns, so the look at the idle
// connection before it is handed out may find nothing yet, and the
// goodbye is the first answer the statement reads). Either way the
// statement runs once, on another connection, and the caller sees no
// error.
func TestTerminatedIdleRunsOnce(t *testing.T) {
	t.Parallel()
	forEachServer(t, func(t *testing.T, s server) {
		t.Parallel()
		for _, mode := range []struct {
			name string
			ctx  func(t *testing.T) context.Context
		}{
			{"no task", func(t *testing.T) context.Context { return ctx(t) }},
			{"transaction task", func(t *testing.T) context.Context {
				c, end := pooldriver.WithTask(ctx(t), pooldriver.TransactionMode)
				t.Cleanup(end)
				return c
			}},
		} {
			for _, inSocket := range []bool{true, false} {
				name := mode.name + "/on its way"
				if inSocket {
					name = mode.name + "/in the socket"
				}
				t.Run(name, func(t *testing.T) {
					t.Parallel()
					tn := newTenant(t, s)
					d := newDDL(t, s)
					tbl := d.table("pd_once", "a int")
					d.apply()
					db, _ := tn.open(t, "pool_max_conns=2")
					c := mode.ctx(t)
					const rounds = 5
					for round := range rounds {
						_, err := db.ExecContext(c, "SELECT 1")
						require.NoError(t, err)
						killed := tn.backends(t)
						require.NotEmpty(t, killed)
						sockets := tn.sockets(t)
						for _, id := range killed {
							tn.kill(t, id)
						}
						if inSocket {
							sockets.waitClosed(t)
						}
						_, err = db.ExecContext(c, "INSERT INTO "+tbl+" (a) VALUES ("+s.placeholder(1)+")", round)
						require.NoError(t, err, "round %d: the statement after the server ended the idle connection", round)
					}
					var n int
					require.NoError(t, s.admin(t).QueryRowContext(ctx(t), "SELECT count(*) FROM "+tbl).Scan(&n))
					require.Equal(t, rounds, n, "each INSERT ran once")
				})
			}
		}
	})
}
