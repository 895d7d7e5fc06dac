package integration

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"

	"github.com/pooldriver/pooldriver"
	"github.com/pooldriver/pooldriver/internal/faultproxy"
)

// The errors a caller is told are the driver's own where nothing it relied
// on was lost, and nothing blocks past its context (issue 21, items 7 and
// 8), run through the plain driver and both pooled flavours.

// TestTruthContextErrorIsTheDrivers: a statement outside any transaction,
// task or *sql.Conn whose context is cancelled returns what the plain
// driver returns (go-sql-driver: context.Canceled itself), not ErrConnLost.
func TestTruthContextErrorIsTheDrivers(t *testing.T) {
	forEachServer(t, func(t *testing.T, s server) {
		forEachFlavour(t, s, allFlavours, dbOpts{maxConns: 2}, func(t *testing.T, s server, db *subject) {
			for _, how := range []string{"cancel", "deadline"} {
				c, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
				if how == "cancel" {
					c, cancel = context.WithCancel(context.Background())
					time.AfterFunc(300*time.Millisecond, cancel)
				}
				want := context.Canceled
				if how == "deadline" {
					want = context.DeadlineExceeded
				}
				_, err := db.ExecContext(c, fmt.Sprintf(s.sleep, 10))
				cancel()
				require.ErrorIs(t, err, want, how)
				require.NotErrorIs(t, err, pooldriver.ErrConnLost, how)
				if s.name == "mysql" {
					require.True(t, err == want, "%s: %#v is not the context's error itself", how, err) //nolint:errorlint // identity is the point
				}
				// The pool serves the next statement.
				require.NoError(t, db.QueryRowContext(timeout(t, 10*time.Second), "SELECT 1").Err())
			}
		})
	})
}

// TestTruthDialErrorKeepsItsIdentity: the error of a failed connect reaches
// the caller as the dialer returned it, as with the plain driver (callers
// compare it with ==), and the dialer sees the values of the caller's
// context, without the caller's cancellation (issue 21, item 8).
func TestTruthDialErrorKeepsItsIdentity(t *testing.T) {
	forServer(t, "mysql", func(t *testing.T, s server) {
		dialErr := errors.New("the test's dialer refuses")
		type key struct{}
		var refuse atomic.Bool
		var seen atomic.Value
		network := "pdtruth" + strings.ReplaceAll(unique(""), "_", "")
		mysql.RegisterDialContext(network, func(ctx context.Context, addr string) (net.Conn, error) {
			if v, ok := ctx.Value(key{}).(string); ok {
				seen.Store(v)
			}
			if refuse.Load() {
				return nil, dialErr
			}
			var d net.Dialer
			return d.DialContext(ctx, "tcp", addr)
		})
		addr := serverAddr(t, s)
		driverDSN := strings.Replace(strings.TrimPrefix(s.dsn, "mysql://"), "tcp("+addr+")", network+"("+addr+")", 1)
		cfg, err := mysql.ParseDSN(driverDSN)
		require.NoError(t, err)
		plainConn, err := mysql.NewConnector(cfg)
		require.NoError(t, err)

		dbs := map[string]*sql.DB{"plain": sql.OpenDB(plainConn)}
		wrapped := pooldriver.Wrap(plainConn, pooldriver.WithMaxConns(2))
		require.NoError(t, wrapped.Err())
		dbs["wrap"] = sql.OpenDB(wrapped)
		newed := pooldriver.New("mysql://" + driverDSN + "?pool_max_conns=2")
		require.NoError(t, newed.Err())
		dbs["pooldriver"] = sql.OpenDB(newed)
		for name, db := range dbs {
			t.Run(name, func(t *testing.T) {
				defer func() { _ = db.Close() }()
				refuse.Store(true)
				c := context.WithValue(timeout(t, 10*time.Second), key{}, name)
				err := db.PingContext(c)
				require.True(t, err == dialErr, "got %#v (%v), want the dialer's error itself", err, err) //nolint:errorlint // identity is the point
				require.Equal(t, name, seen.Load(), "the dialer did not see the caller's context values")

				refuse.Store(false)
				// Past any back-off, a caller is served again.
				require.Eventually(t, func() bool { return db.PingContext(c) == nil }, 10*time.Second, 20*time.Millisecond)
			})
		}
	})
}

// TestTruthCommitBoundedByContext: a *sql.Tx begun with a short context
// whose COMMIT meets a black-holed network. go-sql-driver's Commit takes no
// context and waits on: the plain driver is still blocked long after the
// deadline. pooldriver's MySQL dialect interrupts the connection's I/O at
// the deadline: Commit returns within the context (+ margin for a busy
// machine) with an error matching the context's, and the pool serves again
// once the network is back. (Wrap's connections are go-sql-driver's own,
// whose socket pooldriver cannot reach: as plain; the README says so.)
func TestTruthCommitBoundedByContext(t *testing.T) {
	forServer(t, "mysql", func(t *testing.T, s server) {
		tbl := s.table(t, "commitbound", "v INT")
		const budget = 2 * time.Second
		const margin = 3 * time.Second // the bound holds at load 20
		for _, f := range []flavour{plainFlavour, poolFlavour} {
			t.Run(string(f), func(t *testing.T) {
				px, err := faultproxy.New(serverAddr(t, s))
				require.NoError(t, err)
				defer px.Close()
				dsn := throughProxy(t, s.dsn, px.Addr())
				var db *sql.DB
				if f == plainFlavour {
					db, err = sql.Open("mysql", strings.TrimPrefix(dsn, "mysql://"))
				} else {
					db, err = pooldriver.Open(withParams(dsn, "pool_max_conns=2"))
				}
				require.NoError(t, err)
				defer func() { _ = db.Close() }()

				c, cancel := context.WithTimeout(context.Background(), budget)
				defer cancel()
				tx, err := db.BeginTx(c, nil)
				require.NoError(t, err)
				_, err = tx.ExecContext(c, "INSERT INTO "+tbl+" VALUES (1)")
				require.NoError(t, err)
				px.Set(faultproxy.BlackHole, 0)
				done := make(chan error, 1)
				start := time.Now()
				go func() { done <- tx.Commit() }()
				select {
				case err := <-done:
					took := time.Since(start)
					if f == plainFlavour {
						t.Logf("plain Commit returned after %v: %v (the scenario no longer bites)", took, err)
						return
					}
					require.ErrorIs(t, err, context.DeadlineExceeded, "took %v", took)
					t.Logf("Commit returned after %v: %v", took, err)
				case <-time.After(budget + margin):
					if f == plainFlavour {
						t.Logf("plain Commit still blocked %v after its context's deadline", margin)
						px.Close() // cut the connections: the plain Commit returns now
						t.Logf("plain Commit after the cut: %v", <-done)
						return
					}
					px.Close()
					t.Fatalf("Commit still blocked %v past its context's deadline (then: %v)", margin, <-done)
				}
				px.Set(faultproxy.Forward, 0)
				require.NoError(t, db.PingContext(timeout(t, 10*time.Second)), "the pool serves again")
			})
		}
	})
}
