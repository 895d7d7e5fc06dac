package integration

import (
	"context"
	"database/sql"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"
	"github.com/stretchr/testify/require"

	"github.com/pooldriver/pooldriver"
)

// blackHole listens on a free loopback port and accepts connections but
// never answers: a server whose network path swallows everything. It
// closes them at the end of the test.
func blackHole(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return ln.Addr().String()
}

// TestConnectTimeoutBlackHole: a server that accepts the TCP connection and
// then says nothing holds a connection attempt until pool_connect_timeout,
// not forever: the caller's statement fails with a deadline error in
// bounded time, and the pool's slot is free for the next attempt.
func TestConnectTimeoutBlackHole(t *testing.T) {
	t.Parallel()
	addr := blackHole(t)
	host, port, err := net.SplitHostPort(addr)
	require.NoError(t, err)
	for _, dsn := range []string{
		"postgres://postgres@" + host + ":" + port + "/test?sslmode=disable&pool_max_conns=1&pool_connect_timeout=200ms",
		"mysql://root@tcp(" + addr + ")/test?pool_max_conns=1&pool_connect_timeout=200ms",
	} {
		c := pooldriver.New(dsn)
		require.NoError(t, c.Err())
		db := sql.OpenDB(c)
		for i := range 2 { // the second attempt gets the slot the first freed
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			start := time.Now()
			err := db.PingContext(ctx)
			cancel()
			require.Error(t, err, "%s: attempt %d", c, i)
			require.True(t, errors.Is(err, context.DeadlineExceeded), "%s: attempt %d: %v", c, i, err)
			require.Less(t, time.Since(start), 5*time.Second, "%s: attempt %d", c, i)
		}
		require.NoError(t, db.Close())
	}

	// The plain drivers, with the same DSNs and no connect timeout of
	// their own, give up only with the caller's context: the same error
	// class, later.
	for _, open := range []func() (*sql.DB, error){
		func() (*sql.DB, error) {
			return sql.Open("pgx", "postgres://postgres@"+host+":"+port+"/test?sslmode=disable")
		},
		func() (*sql.DB, error) { return sql.Open("mysql", "root@tcp("+addr+")/test") },
	} {
		db, err := open()
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		err = db.PingContext(ctx)
		cancel()
		require.Error(t, err)
		require.True(t, errors.Is(err, context.DeadlineExceeded) || strings.Contains(err.Error(), "timeout"), "plain: %v", err)
		require.NoError(t, db.Close())
	}
}
