package integration

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pooldriver/pooldriver"
	"github.com/pooldriver/pooldriver/dialects"
)

// mariaPair is two MariaDB instances of the test's own, each with the
// table failover(id) and a user app that, unlike root, read_only binds.
type mariaPair struct {
	m     [2]*localMariaDB
	admin [2]*sql.DB
}

func startMariaPair(t *testing.T) *mariaPair {
	t.Helper()
	var p mariaPair
	for i := range p.m {
		p.m[i] = startLocalMariaDB(t, 100)
		db, err := sql.Open("mysql", "root@tcp("+p.m[i].addr()+")/test")
		require.NoError(t, err)
		t.Cleanup(func() { _ = db.Close() })
		for _, q := range []string{
			"CREATE USER 'app'@'%' IDENTIFIED BY 'app'",
			"GRANT ALL PRIVILEGES ON test.* TO 'app'@'%'",
			"CREATE TABLE failover (id int PRIMARY KEY)",
		} {
			_, err := db.ExecContext(ctx(t), q)
			require.NoError(t, err, q)
		}
		p.admin[i] = db
	}
	return &p
}

// setReadOnly turns instance i's read_only on or off.
func (p *mariaPair) setReadOnly(t *testing.T, i int, on bool) {
	t.Helper()
	v := map[bool]string{true: "ON", false: "OFF"}[on]
	_, err := p.admin[i].ExecContext(ctx(t), "SET GLOBAL read_only = "+v)
	require.NoError(t, err)
}

// ids returns the ids instance i holds.
func (p *mariaPair) ids(t *testing.T, i int) map[int]bool {
	t.Helper()
	rows, err := p.admin[i].QueryContext(ctx(t), "SELECT id FROM failover")
	require.NoError(t, err)
	defer rows.Close()
	out := map[int]bool{}
	for rows.Next() {
		var id int
		require.NoError(t, rows.Scan(&id))
		out[id] = true
	}
	require.NoError(t, rows.Err())
	return out
}

// TestMySQLPrimaryTarget: with pool_target=primary (or WithTarget), a DSN
// whose first server is read-only connects to the second, which takes
// writes; the connect's error names every server when none does.
func TestMySQLPrimaryTarget(t *testing.T) {
	skipShort(t)
	p := startMariaPair(t)
	p.setReadOnly(t, 0, true)
	dsn := fmt.Sprintf("mysql://app:app@%s,%s/test?pool_target=primary", p.m[0].addr(), p.m[1].addr())
	db, err := pooldriver.Open(dsn)
	require.NoError(t, err)
	defer db.Close()
	var port int
	require.NoError(t, db.QueryRowContext(ctx(t), "SELECT @@port").Scan(&port))
	assert.Equal(t, p.m[1].port, port, "connected to the read-only server")
	_, err = db.ExecContext(ctx(t), "INSERT INTO failover VALUES (1)")
	require.NoError(t, err)

	// Without pool_target, the first server that answers.
	anyDB, err := pooldriver.Open(strings.TrimSuffix(dsn, "?pool_target=primary"))
	require.NoError(t, err)
	defer anyDB.Close()
	require.NoError(t, anyDB.QueryRowContext(ctx(t), "SELECT @@port").Scan(&port))
	assert.Equal(t, p.m[0].port, port)

	// The same through the option (Config.Target), over the DSN's any.
	opt := sql.OpenDB(pooldriver.New(strings.TrimSuffix(dsn, "?pool_target=primary"), pooldriver.WithTarget(dialects.TargetPrimary)))
	defer opt.Close()
	require.NoError(t, opt.QueryRowContext(ctx(t), "SELECT @@port").Scan(&port))
	assert.Equal(t, p.m[1].port, port, "WithTarget(primary) connected to the read-only server")

	p.setReadOnly(t, 1, true)
	none, err := pooldriver.Open(dsn + "&pool_acquire_timeout=2s")
	require.NoError(t, err)
	defer none.Close()
	_, err = none.ExecContext(ctx(t), "SELECT 1")
	require.Error(t, err)
	for _, m := range p.m {
		assert.Contains(t, err.Error(), m.addr())
	}
	assert.Contains(t, err.Error(), "read-only")
	assert.NotContains(t, err.Error(), ":app@")
}

// TestMySQLFailoverFollowsWrites: 16 writers through a pool whose DSN names
// two MariaDB servers with pool_target=primary; the one taking writes is
// fenced (read_only on) and the other made writable. pooldriver's writes
// follow to the new primary: the first after the switch comes within a
// second of it, beside 16 writers of plain go-sql-driver pointed at the new
// primary by hand (both first writes are logged: docs/faults.md); no
// acknowledged write is lost, none is on both servers, and no connection
// to the fenced server stays in the pool.
func TestMySQLFailoverFollowsWrites(t *testing.T) {
	skipShort(t)
	checkNoGoroutineLeak(t)
	p := startMariaPair(t)
	p.setReadOnly(t, 1, true)
	db, err := pooldriver.Open(fmt.Sprintf("mysql://app:app@%s,%s/test?pool_target=primary&pool_max_conns=16", p.m[0].addr(), p.m[1].addr()))
	require.NoError(t, err)
	defer db.Close()
	plain, err := sql.Open("mysql", "app:app@tcp("+p.m[1].addr()+")/test")
	require.NoError(t, err)
	defer plain.Close()
	plain.SetMaxOpenConns(16)

	var (
		next     atomic.Int64 // ids: pooldriver's from 1, plain's from 1,000,000
		mu       sync.Mutex
		acked    = map[int]bool{}
		switched atomic.Int64 // unix ns of the switch; 0 before
		first    [2]atomic.Int64
		stop     = make(chan struct{})
		wg       sync.WaitGroup
	)
	var plainNext atomic.Int64
	plainNext.Store(1_000_000)
	write := func(which int, d *sql.DB, ids *atomic.Int64) {
		for {
			select {
			case <-stop:
				return
			default:
			}
			id := int(ids.Add(1))
			c, cancel := context.WithTimeout(context.Background(), time.Second)
			_, err := d.ExecContext(c, "INSERT INTO failover VALUES (?)", id)
			cancel()
			if err != nil {
				time.Sleep(time.Millisecond)
				continue
			}
			if which == 0 {
				mu.Lock()
				acked[id] = true
				mu.Unlock()
			}
			if s := switched.Load(); s != 0 {
				first[which].CompareAndSwap(0, time.Now().UnixNano()-s)
			}
		}
	}
	for range 16 {
		wg.Go(func() { write(0, db, &next) })
		wg.Go(func() { write(1, plain, &plainNext) })
	}
	time.Sleep(500 * time.Millisecond)
	p.setReadOnly(t, 0, true) // fence the primary
	p.setReadOnly(t, 1, false)
	switched.Store(time.Now().UnixNano())
	// How long pooldriver keeps connections to the fenced server: the
	// writers' own refused writes retire them.
	left := make(chan time.Duration, 1)
	go func() {
		q := "SELECT count(*) FROM information_schema.PROCESSLIST WHERE USER = 'app'"
		for start := time.Now(); time.Since(start) < 5*time.Second; time.Sleep(5 * time.Millisecond) {
			var n int
			if err := p.admin[0].QueryRowContext(context.Background(), q).Scan(&n); err == nil && n == 0 {
				left <- time.Since(start)
				return
			}
		}
		left <- -1
	}()
	deadline := time.Now().Add(5 * time.Second)
	for (first[0].Load() == 0 || first[1].Load() == 0) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond) // writes on the new primary
	close(stop)
	wg.Wait()

	pooled, byHand := time.Duration(first[0].Load()), time.Duration(first[1].Load())
	t.Logf("first write after the switch: pooldriver %v, plain go-sql-driver at the new primary %v", pooled, byHand)
	require.NotZero(t, pooled, "pooldriver wrote nothing within 5s of the switch")
	require.NotZero(t, byHand, "plain go-sql-driver wrote nothing within 5s of the switch")
	assert.LessOrEqual(t, pooled, byHand+time.Second, "pooldriver's first write after the switch")

	old, now := p.ids(t, 0), p.ids(t, 1)
	for id := range acked {
		assert.True(t, old[id] || now[id], "acknowledged write %d lost", id)
		assert.False(t, old[id] && now[id], "write %d on both servers", id)
	}
	mu.Lock()
	n := len(acked)
	mu.Unlock()
	onNew := 0
	for id := range now {
		if id < 1_000_000 {
			onNew++
		}
	}
	t.Logf("%d acknowledged writes, %d of them on the new primary", n, onNew)
	assert.NotZero(t, onNew, "no pooldriver write reached the new primary")

	// No connection to the fenced server is left: every one the pool
	// holds is to the new primary.
	gone := <-left
	require.GreaterOrEqual(t, gone, time.Duration(0), "pooldriver's connections to the fenced server still open 5s after the switch")
	t.Logf("the last connection to the fenced server closed %v after the switch", gone.Round(time.Millisecond))
	var port int
	require.NoError(t, db.QueryRowContext(ctx(t), "SELECT @@port").Scan(&port))
	assert.Equal(t, p.m[1].port, port)
}
