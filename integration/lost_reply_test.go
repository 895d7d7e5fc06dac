package integration

import (
	"bytes"
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pooldriver/pooldriver"
	"github.com/pooldriver/pooldriver/internal/faultproxy"
)

// TestLostReplyIsErrConnLost (issue 67): an autocommit INSERT, outside any
// transaction, task or *sql.Conn, whose reply a fault proxy drops (the
// server applied it, then the connection is cut) fails with an error that
// matches ErrConnLost, not driver.ErrBadConn (database/sql must not run it
// again), and still reaches the driver's own error; the row is there once,
// and the pool serves the next statement. On both servers, through New and
// through Wrap, without arguments and with one (PostgreSQL's extended
// protocol, MariaDB's prepared statement). The plain driver runs beside,
// for the log only.
func TestLostReplyIsErrConnLost(t *testing.T) {
	forEachServer(t, func(t *testing.T, s server) {
		for _, withArg := range []bool{false, true} {
			for _, f := range allFlavours {
				name := "no argument/" + string(f)
				if withArg {
					name = "one argument/" + string(f)
				}
				t.Run(name, func(t *testing.T) {
					tn := newTenant(t, s)
					tbl := s.table(t, "lostreply", "v varchar(64)")
					px, err := faultproxy.New(serverAddr(t, s))
					require.NoError(t, err)
					t.Cleanup(px.Close)
					db := openOneConnOn(t, s, f, throughProxy(t, tn.base, px.Addr()))
					t.Cleanup(func() { closeAndDrain(t, db, tn.backends, tn.kill) })
					require.NoError(t, db.PingContext(ctx(t)))

					// The marker goes to the server in the bytes that run
					// the INSERT (the query's text, or the argument bound
					// to it), never in a prepare's: once they went by, the
					// server's next answer that completes the INSERT is
					// lost and the connection cut.
					marker := unique("pdlost")
					query := fmt.Sprintf("INSERT INTO %s VALUES ('%s')", tbl, marker)
					var args []any
					if withArg {
						query = fmt.Sprintf("INSERT INTO %s VALUES (%s)", tbl, s.placeholder(1))
						args = []any{marker}
					}
					var stage atomic.Int32 // 0: waiting for the INSERT, 1: sent, 2: reply dropped
					px.SetFilter(func(dir faultproxy.Direction, b []byte) faultproxy.Verdict {
						switch {
						case dir == faultproxy.ToServer && bytes.Contains(b, []byte(marker)):
							stage.CompareAndSwap(0, 1)
						case dir == faultproxy.ToClient && stage.Load() == 1 &&
							(s.name == "mysql" || bytes.Contains(b, []byte("INSERT 0 1"))) &&
							stage.CompareAndSwap(1, 2):
							return faultproxy.DropAndCut
						}
						return faultproxy.Pass
					})
					_, err = db.ExecContext(ctx(t), query, args...)
					require.EqualValues(t, 2, stage.Load(), "the INSERT's reply never went by")
					px.SetFilter(nil)
					rows := s.adminInt(t, "SELECT count(*) FROM "+tbl)
					t.Logf("%s: %v, %d rows", f, err, rows)
					if f == plainFlavour {
						return
					}
					require.Error(t, err, "a statement whose reply was lost returned nil")
					assert.ErrorIs(t, err, pooldriver.ErrConnLost)
					assert.NotErrorIs(t, err, driver.ErrBadConn, "database/sql may run it again")
					assert.EqualValues(t, 1, rows, "the INSERT ran more than once, or not at all")
					// The driver's own error is still there; pgx's stdlib,
					// which runs a statement without arguments, says only
					// driver.ErrBadConn.
					var ne net.Error
					switch {
					case s.name == "mysql":
						assert.ErrorIs(t, err, mysql.ErrInvalidConn)
					case withArg:
						assert.True(t, errors.As(err, &ne), "%v does not reach the network error", err)
					default:
						assert.ErrorContains(t, err, driver.ErrBadConn.Error())
					}
					_, err = db.ExecContext(ctx(t), "SELECT 1")
					require.NoError(t, err, "the pool does not serve after the cut")
				})
			}
		}
	})
}

// TestKilledMidStatementIsErrConnLost (issue 67): the server ends the
// session (pg_terminate_backend, KILL CONNECTION) while an autocommit
// statement, outside any transaction, task or *sql.Conn, runs on it: the
// statement was sent and its reply is lost, so its error matches
// ErrConnLost and not driver.ErrBadConn, and on PostgreSQL still reaches
// the server's *pgconn.PgError (57P01); the pool serves the next
// statement.
func TestKilledMidStatementIsErrConnLost(t *testing.T) {
	forEachServer(t, func(t *testing.T, s server) {
		forEachFlavour(t, s, pooledFlavours, dbOpts{maxConns: 1}, func(t *testing.T, s server, db *subject) {
			require.NoError(t, db.PingContext(ctx(t)))
			marker := unique("pdkill")
			done := make(chan error, 1)
			go func() {
				_, err := db.ExecContext(context.Background(), fmt.Sprintf(s.sleep, 30)+" /* "+marker+" */")
				done <- err
			}()
			var id int64
			waitFor(t, "the statement running", func() bool { id = db.tn.running(t, marker); return id != 0 })
			db.tn.kill(t, id)
			err := <-done
			t.Logf("%v", err)
			require.Error(t, err)
			assert.ErrorIs(t, err, pooldriver.ErrConnLost)
			assert.NotErrorIs(t, err, driver.ErrBadConn)
			if s.name == "postgres" {
				var pe *pgconn.PgError
				if assert.True(t, errors.As(err, &pe), "%v does not reach the server's error", err) {
					assert.Equal(t, "57P01", pe.Code)
				}
			}
			_, err = db.ExecContext(ctx(t), "SELECT 1")
			require.NoError(t, err, "the pool does not serve after the kill")
		})
	})
}

// openOneConnOn opens flavour f's *sql.DB on a pool of one server
// connection of either server, for dsn, a pooldriver DSN without pool
// parameters.
func openOneConnOn(t *testing.T, s server, f flavour, dsn string) *sql.DB {
	t.Helper()
	if f != plainFlavour {
		return openOneConn(t, s, f, dsn)
	}
	db := sql.OpenDB(plainConnector(t, s, dsn))
	db.SetMaxOpenConns(1)
	return db
}
