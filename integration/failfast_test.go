package integration

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pooldriver/pooldriver"
)

// The fail-fast suite (issue 37): when the server refuses new connections
// for a cause that trying again does not cure (a wrong password, nothing
// listening on the port), a caller that only a new connection could serve
// learns it at once, with the cause; when the server says nothing at all
// (a silent host), a caller learns it once the attempt it waited for timed
// out. Each scenario runs plain database/sql (and pgxpool on PostgreSQL)
// beside pooldriver in the same test, and logs them side by side.

const (
	failFastRequests = 200
	failFastWorkers  = 10
	failFastCallTO   = 2 * time.Second
)

// failFastRun is what one contender saw of a failing load.
type failFastRun struct {
	name     string
	n        int // requests
	wall     time.Duration
	slowest  time.Duration
	ok, errs atomic.Int64
	attempts func() int64
	mu       sync.Mutex
	first    []error // every error, for the checks
}

func (r *failFastRun) String() string {
	return fmt.Sprintf("%s: %d requests in %v (slowest %v), %d ok, %d errors, %d connect attempts",
		r.name, r.n, r.wall.Round(time.Millisecond), r.slowest.Round(time.Millisecond), r.ok.Load(), r.errs.Load(), r.attempts())
}

// runFailFast makes n requests with op from workers goroutines, each with
// its own callTO context, and records them in r.
func runFailFast(r *failFastRun, n, workers int, callTO time.Duration, op func(context.Context) error) {
	var next atomic.Int64
	var slowest atomic.Int64
	var wg sync.WaitGroup
	r.n = n
	start := time.Now()
	for range workers {
		wg.Go(func() {
			for next.Add(1) <= int64(n) {
				c, cancel := context.WithTimeout(context.Background(), callTO)
				t0 := time.Now()
				err := op(c)
				d := time.Since(t0)
				cancel()
				for s := slowest.Load(); int64(d) > s && !slowest.CompareAndSwap(s, int64(d)); s = slowest.Load() {
				}
				if err == nil {
					r.ok.Add(1)
					continue
				}
				r.errs.Add(1)
				r.mu.Lock()
				r.first = append(r.first, err)
				r.mu.Unlock()
			}
		})
	}
	wg.Wait()
	r.wall, r.slowest = time.Since(start), time.Duration(slowest.Load())
}

// pgxpoolContender is pgxpool over dsn, counting its connect attempts.
func pgxpoolContender(t *testing.T, dsn string) (op func(context.Context) error, attempts func() int64) {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(dsn)
	require.NoError(t, err)
	cfg.MaxConns = faultPool
	var n atomic.Int64
	cfg.BeforeConnect = func(context.Context, *pgx.ConnConfig) error {
		n.Add(1)
		return nil
	}
	p, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(p.Close)
	return func(c context.Context) error {
		_, err := p.Exec(c, "SELECT 1")
		return err
	}, n.Load
}

// failFastCase is one permanent refusal to run the contenders against.
type failFastCase struct {
	name     string
	server   server
	dsn      string               // the plain driver's (and pgxpool's) DSN; pooldriver's adds its settings
	password string               // must appear in no error
	cause    func(err error) bool // the server's (or the network's) word, reached through the error
	pgxpool  bool                 // run pgxpool too
}

// TestFailFastPermanent: a wrong PostgreSQL password (a cluster of the
// test's own with scram), a wrong MariaDB password, and a port nothing
// listens on, on fresh pools: 200 requests from 10 goroutines with 2 s
// contexts. pooldriver's wall time is at most max(3× plain database/sql's,
// 3 s), every error matches pooldriver.ErrServerRefused and reaches the
// server's error (or ECONNREFUSED) without the password, and it makes at
// most 3 connect attempts per request.
func TestFailFastPermanent(t *testing.T) {
	skipShort(t)
	checkNoGoroutineLeak(t)
	forEachServer(t, func(t *testing.T, s server) {
		var cases []failFastCase
		switch s.name {
		case "postgres":
			own := startOwnPG(t, "", "local all all trust\nhost all postgres 127.0.0.1/32 trust\nhost all all 127.0.0.1/32 scram-sha-256\n")
			user := unique("pdff")
			_, err := own.admin(t).ExecContext(ctx(t), fmt.Sprintf("CREATE ROLE %s LOGIN PASSWORD 'right-%s'", user, user))
			require.NoError(t, err)
			pw := "wrong-" + user
			cases = append(cases, failFastCase{
				name: "postgres wrong password", server: s, password: pw, pgxpool: true,
				dsn: fmt.Sprintf("postgres://%s:%s@127.0.0.1:%d/postgres?sslmode=disable", user, pw, own.port),
				cause: func(err error) bool {
					var pe *pgconn.PgError
					return errors.As(err, &pe) && pe.Code == "28P01"
				},
			})
			cases = append(cases, failFastCase{
				name: "postgres refused port", server: s, pgxpool: true,
				dsn:   fmt.Sprintf("postgres://postgres@127.0.0.1:%d/test?sslmode=disable", freePort(t)),
				cause: func(err error) bool { return errors.Is(err, syscall.ECONNREFUSED) },
			})
		case "mysql":
			user := unique("pdff")
			good := s.mysqlUser(t, user, "right-"+user)
			pw := "wrong-" + user
			cfg, err := mysql.ParseDSN(strings.TrimPrefix(good, "mysql://"))
			require.NoError(t, err)
			cfg.Passwd = pw
			cases = append(cases, failFastCase{
				name: "mysql wrong password", server: s, password: pw, dsn: "mysql://" + cfg.FormatDSN(),
				cause: func(err error) bool {
					var me *mysql.MySQLError
					return errors.As(err, &me) && me.Number == 1045
				},
			})
			cfg.Passwd = ""
			cfg.Addr = fmt.Sprintf("127.0.0.1:%d", freePort(t))
			cases = append(cases, failFastCase{
				name: "mysql refused port", server: s, dsn: "mysql://" + cfg.FormatDSN(),
				cause: func(err error) bool { return errors.Is(err, syscall.ECONNREFUSED) },
			})
		}
		for _, tc := range cases {
			t.Run(strings.ReplaceAll(tc.name, " ", "_"), func(t *testing.T) {
				cc := &countingConnector{Connector: plainConnector(t, tc.server, tc.dsn)}
				pdb := sql.OpenDB(cc)
				pdb.SetMaxOpenConns(faultPool)
				pdb.SetMaxIdleConns(faultPool)
				t.Cleanup(func() { _ = pdb.Close() })
				c := pooldriver.New(withParams(tc.dsn, fmt.Sprintf("pool_max_conns=%d", faultPool)))
				require.NoError(t, c.Err())
				db := sql.OpenDB(c)
				db.SetMaxIdleConns(faultPool)
				t.Cleanup(func() { _ = db.Close() })

				plain := &failFastRun{name: "database/sql", attempts: cc.dials.Load}
				pooled := &failFastRun{name: "pooldriver", attempts: func() int64 { st := c.Stats(); return st.Created + st.ConnectErrors }}
				runs := []*failFastRun{plain}
				runFailFast(plain, failFastRequests, failFastWorkers, failFastCallTO, sleepOp(tc.server, pdb, 0))
				if tc.pgxpool {
					op, attempts := pgxpoolContender(t, tc.dsn)
					px := &failFastRun{name: "pgxpool", attempts: attempts}
					runFailFast(px, failFastRequests, failFastWorkers, failFastCallTO, op)
					runs = append(runs, px)
				}
				runFailFast(pooled, failFastRequests, failFastWorkers, failFastCallTO, sleepOp(tc.server, db, 0))
				runs = append(runs, pooled)
				for _, r := range runs {
					t.Logf("%s, %s", tc.name, r)
				}
				require.NotEmpty(t, pooled.first)
				t.Logf("pooldriver's error: %v", pooled.first[0])

				bound := max(3*plain.wall, 3*time.Second)
				assert.LessOrEqual(t, pooled.wall, bound, "pooldriver's wall time against database/sql's %v", plain.wall)
				assert.Equal(t, int64(failFastRequests), pooled.errs.Load(), "every request fails")
				assert.LessOrEqual(t, pooled.attempts(), int64(3*failFastRequests), "connect attempts")
				assert.Positive(t, c.Stats().FailFastRejects, "Stats.FailFastRejects counts the callers failed at once")
				bad := 0
				for _, err := range pooled.first {
					named := errors.Is(err, pooldriver.ErrServerRefused) && tc.cause(err)
					leaks := tc.password != "" && strings.Contains(err.Error(), tc.password)
					if (!named || leaks) && bad < 3 {
						t.Errorf("error that does not name its cause (ErrServerRefused and the server's error) or shows the password: %v", err)
					}
					if !named || leaks {
						bad++
					}
				}
				assert.Zero(t, bad, "errors without their cause")
			})
		}
	})
}

// TestFailFastSilentHost: a host that accepts TCP and never answers, the
// drivers' own connect timeout at 1 s (PostgreSQL's connect_timeout; for
// MariaDB pool_connect_timeout, and the plain driver's timeout and
// readTimeout), 100 calls from 10 goroutines with 4 s contexts. Every call
// of pooldriver's returns within 2.5 s: once the attempt it waited for
// timed out and nothing is in use, it fails with that timeout. The plain
// driver's take one connect timeout each.
func TestFailFastSilentHost(t *testing.T) {
	skipShort(t)
	checkNoGoroutineLeak(t)
	addr := blackHole(t)
	host, port, err := net.SplitHostPort(addr)
	require.NoError(t, err)
	forEachServer(t, func(t *testing.T, s server) {
		var plainDSN, pooledDSN string
		if s.name == "postgres" {
			plainDSN = "postgres://postgres@" + host + ":" + port + "/test?sslmode=disable&connect_timeout=1"
			pooledDSN = withParams(plainDSN, fmt.Sprintf("pool_max_conns=%d", faultPool))
		} else {
			plainDSN = "mysql://root@tcp(" + addr + ")/test?timeout=1s&readTimeout=1s"
			pooledDSN = "mysql://root@tcp(" + addr + ")/test?" + fmt.Sprintf("pool_max_conns=%d&pool_connect_timeout=1s", faultPool)
		}
		cc := &countingConnector{Connector: plainConnector(t, s, plainDSN)}
		pdb := sql.OpenDB(cc)
		pdb.SetMaxOpenConns(faultPool)
		t.Cleanup(func() { _ = pdb.Close() })
		c := pooldriver.New(pooledDSN)
		require.NoError(t, c.Err())
		db := sql.OpenDB(c)
		t.Cleanup(func() { _ = db.Close() })
		plain := &failFastRun{name: "database/sql", attempts: cc.dials.Load}
		pooled := &failFastRun{name: "pooldriver", attempts: func() int64 { st := c.Stats(); return st.Created + st.ConnectErrors }}
		const calls, callTO = 100, 4 * time.Second
		// Both at once: the wall time of the pair is one run's.
		var wg sync.WaitGroup
		wg.Go(func() { runFailFast(plain, calls, failFastWorkers, callTO, sleepOp(s, pdb, 0)) })
		wg.Go(func() { runFailFast(pooled, calls, failFastWorkers, callTO, sleepOp(s, db, 0)) })
		wg.Wait()
		t.Logf("silent host, %s", plain)
		t.Logf("silent host, %s", pooled)
		require.NotEmpty(t, pooled.first)
		t.Logf("pooldriver's error: %v", pooled.first[0])
		assert.Equal(t, int64(calls), pooled.errs.Load())
		// One connect timeout (1 s), the back-off's spacing of the
		// attempts, and a loaded machine's scheduling; a second
		// timeout waited (2 s and more) is what this catches.
		assert.LessOrEqual(t, pooled.slowest, 2500*time.Millisecond, "pooldriver's slowest call")
	})
}

// TestFailFastNotDuringFailover: a connect that tried two servers, one
// refusing the connection (nothing listens on its port) and one answering
// but not taking writes (a PostgreSQL cluster of the test's own with
// default_transaction_read_only on, for target_session_attrs=read-write; a
// MariaDB of its own with read_only on, for pool_target=primary), is what
// a failover under way looks like, not a permanent refusal: the caller
// gets the connect's error, which names both servers' answers and does
// not match ErrServerRefused, and the next caller writes once the
// answering server takes writes. Where both refuse the connection, the
// caller fails at once with ErrServerRefused.
func TestFailFastNotDuringFailover(t *testing.T) {
	skipShort(t)
	checkNoGoroutineLeak(t)
	forEachServer(t, func(t *testing.T, s server) {
		refused := fmt.Sprintf("127.0.0.1:%d", freePort(t))
		var failover, allRefused, answering string
		var takeWrites func()
		switch s.name {
		case "postgres":
			own := startLocalPG(t)
			setReadOnly := func(on string) {
				admin, err := sql.Open("pgx", own.dsn())
				require.NoError(t, err)
				defer admin.Close()
				conn, err := admin.Conn(ctx(t))
				require.NoError(t, err)
				defer conn.Close()
				for _, q := range []string{
					"SET default_transaction_read_only = off",
					"ALTER SYSTEM SET default_transaction_read_only = " + on,
					"SELECT pg_reload_conf()",
				} {
					_, err := conn.ExecContext(ctx(t), q)
					require.NoError(t, err, q)
				}
			}
			setReadOnly("on")
			takeWrites = func() { setReadOnly("off") }
			const pgDSN = "postgres://postgres@%s,%s/postgres?sslmode=disable&target_session_attrs=read-write"
			answering = fmt.Sprintf("127.0.0.1:%d", own.port)
			failover = fmt.Sprintf(pgDSN, refused, answering)
			allRefused = fmt.Sprintf(pgDSN, refused, fmt.Sprintf("127.0.0.1:%d", freePort(t)))
		case "mysql":
			own := startLocalMariaDB(t, 50)
			admin, err := sql.Open("mysql", "root@tcp("+own.addr()+")/test")
			require.NoError(t, err)
			t.Cleanup(func() { _ = admin.Close() })
			_, err = admin.ExecContext(ctx(t), "SET GLOBAL read_only = ON")
			require.NoError(t, err)
			takeWrites = func() {
				_, err := admin.ExecContext(ctx(t), "SET GLOBAL read_only = OFF")
				require.NoError(t, err)
			}
			const myDSN = "mysql://root@tcp(%s,%s)/test?pool_target=primary"
			answering = own.addr()
			failover = fmt.Sprintf(myDSN, refused, answering)
			allRefused = fmt.Sprintf(myDSN, refused, fmt.Sprintf("127.0.0.1:%d", freePort(t)))
		}
		open := func(dsn string) *sql.DB {
			c := pooldriver.New(dsn)
			require.NoError(t, c.Err())
			db := sql.OpenDB(c)
			t.Cleanup(func() { _ = db.Close() })
			return db
		}

		// Both refuse the connection: permanent, and said at once.
		c1, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, err := open(allRefused).ExecContext(c1, "SELECT 1")
		require.Error(t, err)
		assert.ErrorIs(t, err, pooldriver.ErrServerRefused, "every server refused the connection")
		assert.NoError(t, c1.Err(), "the caller failed at once, not at its deadline")

		// One refuses, the other answers that it takes no writes. A
		// refusal that took a while (a loaded machine) is followed by the
		// next attempt at once, until the acquire timeout: the error then
		// carries the last attempt's.
		db := open(withParams(failover, "pool_acquire_timeout=5s"))
		_, err = db.ExecContext(ctx(t), "SELECT 1")
		require.Error(t, err)
		t.Logf("during the failover: %v", err)
		assert.NotErrorIs(t, err, pooldriver.ErrServerRefused, "a failover under way is not a permanent refusal")
		assert.ErrorIs(t, err, syscall.ECONNREFUSED, "the refusing server's answer")
		assert.Contains(t, err.Error(), answering, "the answering server's")
		takeWrites()
		_, err = db.ExecContext(ctx(t), "SELECT 1")
		require.NoError(t, err, "once the answering server takes writes")
	})
}
