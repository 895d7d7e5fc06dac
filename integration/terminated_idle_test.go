package integration

import (
	"context"
	"database/sql"
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
// goodbye is the first answer the statement reads). Through pooldriver
// the statement runs once, on another connection, and the caller sees no
// error. The plain driver runs the same rounds beside it: whatever it
// returns, it commits each row it reports done, and no other. MySQL's KILL
// sends no goodbye, only the end of the stream: a statement written before
// that end arrives cannot be told from one the server read, so on MySQL
// "on its way" holds pooldriver to what it holds the plain driver to
// (against a local server the end is in the socket as KILL returns; behind
// Docker's proxy it may come a moment later, and the driver's "invalid
// connection" is the statement's error, as the plain driver's is).
func TestTerminatedIdleRunsOnce(t *testing.T) {
	t.Parallel()
	forEachServer(t, func(t *testing.T, s server) {
		t.Parallel()
		for _, mode := range []struct {
			name  string
			plain bool
			ctx   func(t *testing.T) context.Context
		}{
			{"no task", false, func(t *testing.T) context.Context { return ctx(t) }},
			{"transaction task", false, func(t *testing.T) context.Context {
				c, end := pooldriver.WithTask(ctx(t), pooldriver.TransactionMode)
				t.Cleanup(end)
				return c
			}},
			{"plain driver", true, func(t *testing.T) context.Context { return ctx(t) }},
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
					var db *sql.DB
					if mode.plain {
						db = sql.OpenDB(plainConnector(t, s, tn.dsn()))
						db.SetMaxOpenConns(2)
						t.Cleanup(func() { _ = db.Close() })
					} else {
						// The task trusts functions: a statement's verdict is
						// its text's, and a transaction-mode task keeps no
						// connection after SELECT 1 whatever the catalog's
						// reading. Without it, other tests' DDL a moment
						// before (make test runs them in parallel) leaves
						// no reading that vouches for SELECT 1, the task
						// keeps its connection as one whose session may
						// have changed, and the kill takes that session
						// with it: an error, rightly, but not this test's
						// case (never_dirty_test.go and catalog_*_test.go
						// hold that).
						params := "pool_max_conns=2"
						if mode.name == "transaction task" {
							params += "&pool_trust_functions=true"
						}
						db, _ = tn.open(t, params)
					}
					c := mode.ctx(t)
					const rounds = 5
					done := 0
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
						if mode.plain || !inSocket && s.name == "mysql" {
							if err != nil {
								t.Logf("%s, round %d: %v", mode.name, round, err)
								continue
							}
						} else {
							require.NoError(t, err, "round %d: the statement after the server ended the idle connection", round)
						}
						done++
					}
					var n int
					require.NoError(t, s.admin(t).QueryRowContext(ctx(t), "SELECT count(*) FROM "+tbl).Scan(&n))
					require.Equal(t, done, n, "rows committed against INSERTs reported done")
					t.Logf("%d of %d INSERTs done", done, rounds)
				})
			}
		}
	})
}
