package integration

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pooldriver/pooldriver"
)

// Operating pool_reads=standby against a private primary and its
// streaming standby: what Standbys lists, Reset reaching every host, a
// malformed read token counted and logged.

// readsOpsHold is how long a test watches the looks (one every 20 ms) for
// something that must not happen.
const readsOpsHold = 1500 * time.Millisecond

func TestReadsOps(t *testing.T) {
	skipShort(t)
	primary := startLocalPG(t)
	standby := primary.startAsyncStandby(t, "cluster_name = 'ops'\n")
	admin := primary.admin(t)
	waitFor(t, "the standby to stream", func() bool {
		var n int
		err := admin.QueryRowContext(ctx(t), "SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'").Scan(&n)
		return err == nil && n == 1
	})
	open := func(t *testing.T, hosts []string, params string) (*pooldriver.Connector, *sql.DB, *logLines) {
		t.Helper()
		lines, logger := newLogLines()
		c := pooldriver.New("postgres://postgres@"+strings.Join(hosts, ",")+
			"/postgres?sslmode=disable&target_session_attrs=read-write&pool_reads=standby&pool_max_replica_lag=30s&"+params,
			pooldriver.WithLogger(logger))
		require.NoError(t, c.Err())
		db := sql.OpenDB(c)
		t.Cleanup(func() { _ = db.Close() })
		waitStandbysUp(t, c, standby)
		return c, db, lines
	}

	t.Run("StandbysOnly", func(t *testing.T) { readsOpsStandbys(t, primary, standby, open) })
	t.Run("Reset", func(t *testing.T) { readsOpsReset(t, primary, standby, open) })
	t.Run("MalformedToken", func(t *testing.T) { readsOpsToken(t, primary, standby, open) })
}

type readsOpsOpen func(t *testing.T, hosts []string, params string) (*pooldriver.Connector, *sql.DB, *logLines)

// standbyHosts returns what Standbys lists: each host, "+" after those up.
func standbyHosts(c *pooldriver.Connector) string {
	var out []string
	for _, s := range c.Standbys() {
		if s.Up {
			out = append(out, s.Host+"+")
		} else {
			out = append(out, s.Host)
		}
	}
	return strings.Join(out, ",")
}

// holdStandbys watches c's Standbys for readsOpsHold: each time, they must
// be want (standbyHosts).
func holdStandbys(t *testing.T, c *pooldriver.Connector, want string) {
	t.Helper()
	end := time.Now().Add(readsOpsHold)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for time.Now().Before(end) {
		require.Equal(t, want, standbyHosts(c), "Standbys")
		<-tick.C
	}
}

// readsOpsStandbys: Standbys lists the standby, up, and never the
// primary's host; nothing says a standby is down or turned primary. A host
// where nothing listens is listed, not up, and logged once; the primary's
// host is not logged.
func readsOpsStandbys(t *testing.T, primary, standby *localPG, open readsOpsOpen) {
	c, _, lines := open(t, []string{primary.host(), standby.host()}, "")
	waitFor(t, "Standbys without the primary's host", func() bool { return standbyHosts(c) == standby.host()+"+" })
	holdStandbys(t, c, standby.host()+"+")
	require.Empty(t, lines.with("a standby does not answer"), "all healthy")
	require.Empty(t, lines.with("a standby is a primary now"), "all healthy")

	dead := fmt.Sprintf("127.0.0.1:%d", freePort(t)) // nothing listens there
	c, _, lines = open(t, []string{primary.host(), standby.host(), dead}, "")
	waitFor(t, "Standbys without the primary's host", func() bool { return standbyHosts(c) == standby.host()+"+,"+dead })
	holdStandbys(t, c, standby.host()+"+,"+dead)
	quiet := lines.with("a standby does not answer")
	require.Len(t, quiet, 1, "the host where nothing listens, logged once")
	require.Contains(t, quiet[0], "host="+dead)
	require.Empty(t, lines.with("a standby is a primary now"))
	for _, l := range lines.with("a standby") {
		require.NotContains(t, strings.Fields(l), "host="+primary.host(), "the primary's host, logged as a standby: %s", l)
	}
}

// readsOpsReset: with one connection per host, Reset gives both the
// primary's pool and the standby's new backends; the old ones close.
func readsOpsReset(t *testing.T, primary, standby *localPG, open readsOpsOpen) {
	c, db, _ := open(t, []string{primary.host(), standby.host()}, "pool_max_conns=1")
	backend := func(ctx context.Context, wantRecovery bool) int {
		t.Helper()
		var pid int
		var inRecovery bool
		require.NoError(t, db.QueryRowContext(ctx, "SELECT pg_backend_pid(), pg_is_in_recovery()").Scan(&pid, &inRecovery))
		require.Equal(t, wantRecovery, inRecovery, "served by the standby")
		return pid
	}
	bg := ctx(t)
	onPrimary, onStandby := backend(bg, false), backend(pooldriver.ReadOnly(bg), true)
	require.Equal(t, onPrimary, backend(bg, false), "one connection on the primary")
	require.Equal(t, onStandby, backend(pooldriver.ReadOnly(bg), true), "one connection on the standby")

	c.Reset()
	require.NotEqual(t, onPrimary, backend(bg, false), "the primary's backend after Reset")
	require.NotEqual(t, onStandby, backend(pooldriver.ReadOnly(bg), true), "the standby's backend after Reset")
	for _, h := range []struct {
		pg  *localPG
		pid int
	}{{primary, onPrimary}, {standby, onStandby}} {
		sdb := h.pg.admin(t)
		waitFor(t, fmt.Sprintf("backend %d on %s to end", h.pid, h.pg.host()), func() bool {
			var n int
			err := sdb.QueryRowContext(ctx(t), "SELECT count(*) FROM pg_stat_activity WHERE pid = $1", h.pid).Scan(&n)
			return err == nil && n == 0
		})
		_ = sdb.Close()
	}
}

// readsOpsToken: a request of MiddlewareWithReadToken with a malformed
// token reads, on the standby, as one without a token; the Connector
// counts it and logs it at WARN once, without the token. A request with
// a good token counts nothing.
func readsOpsToken(t *testing.T, primary, standby *localPG, open readsOpsOpen) {
	c, db, lines := open(t, []string{primary.host(), standby.host()}, "")
	const name = "X-Read-Token"
	var served []bool
	h := pooldriver.MiddlewareWithReadToken(name)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var inRecovery bool
		if err := db.QueryRowContext(pooldriver.ReadOnly(r.Context()), "SELECT pg_is_in_recovery()").Scan(&inRecovery); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		served = append(served, inRecovery)
	}))
	serve := func(token string) {
		t.Helper()
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		req.Header.Set(name, token)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	}

	serve("0/0")
	require.Zero(t, c.Stats().ReadTokensMalformed, "a good token")
	serve("not a token")
	serve("0/xyz")
	require.Len(t, served, 3, "the requests' reads")
	require.Equal(t, int64(2), c.Stats().ReadTokensMalformed)
	logged := lines.with("read token is malformed")
	require.Len(t, logged, 1, "logged once (the second held back within the log interval)")
	require.True(t, strings.HasPrefix(logged[0], "WARN "), logged[0])
	require.Contains(t, logged[0], "name="+name)
	require.NotContains(t, logged[0], "not a token")
}
