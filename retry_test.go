package pooldriver_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/pooldriver/pooldriver"
)

// TestNoRetryOnceSent: a statement whose reply is lost after the server
// applied it, with the driver calling that driver.ErrBadConn (pgx's stdlib
// does), is run twice by database/sql over the plain driver; through
// pooldriver, whose dialect counts what it sent, it fails once, with an
// error that is not driver.ErrBadConn but ErrConnLost, and the row is there
// once.
func TestNoRetryOnceSent(t *testing.T) {
	t.Run("plain", func(t *testing.T) {
		srv := newServer(t)
		db := sql.OpenDB(srv.Connector())
		defer func() { _ = db.Close() }()
		srv.LoseReplies(1)
		if _, err := db.Exec("INSERT plain 1"); err != nil {
			t.Fatalf("plain: %v (the scenario changed: database/sql used to retry)", err)
		}
		if n := len(srv.Table("plain")); n != 2 {
			t.Fatalf("plain: %d rows, want 2 (the scenario no longer bites)", n)
		}
	})
	t.Run("pooldriver", func(t *testing.T) {
		srv := newServer(t)
		db, _ := newDB(t, srv, "pool_max_conns=2")
		srv.LoseReplies(1)
		_, err := db.Exec("INSERT pooled 1")
		if err == nil || errors.Is(err, driver.ErrBadConn) || !errors.Is(err, pooldriver.ErrConnLost) {
			t.Fatalf("lost reply: %v, want ErrConnLost, not ErrBadConn", err)
		}
		if n := len(srv.Table("pooled")); n != 1 {
			t.Fatalf("%d rows, want exactly 1", n)
		}
		// The pool goes on with a new connection.
		if _, err := db.Exec("INSERT pooled 2"); err != nil {
			t.Fatalf("next statement: %v", err)
		}
	})
	t.Run("before sending", func(t *testing.T) {
		// A connection that broke while idle fails the statement before
		// anything is sent: database/sql may retry it elsewhere, and the
		// row is there once.
		srv := newServer(t)
		db, _ := newDB(t, srv, "pool_max_conns=2")
		db.SetMaxIdleConns(0)
		if _, err := db.Exec("INSERT warm 1"); err != nil {
			t.Fatal(err)
		}
		srv.BreakAll()
		if _, err := db.Exec("INSERT once 1"); err != nil {
			t.Fatalf("after a break while idle: %v", err)
		}
		if n := len(srv.Table("once")); n != 1 {
			t.Fatalf("%d rows, want 1", n)
		}
	})
}

// TestWaitNamesItsCause: a statement whose context ends while it waits for
// a connection, with one in use and every connect attempt failing, says so
// in pooldriver's words: the context's error, the pool's state and the last
// connect error, all reachable with errors.Is. The deadline leaves a
// second for the connect attempt to fail within the wait, however busy the
// machine.
func TestWaitNamesItsCause(t *testing.T) {
	srv := newServer(t)
	db, c := newDB(t, srv, "pool_max_conns=2")
	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	if err := conn.PingContext(context.Background()); err != nil { // holds the one connection
		t.Fatal(err)
	}
	refused := errors.New("the test refuses connections")
	srv.FailConnects(1<<30, refused)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, err = db.ExecContext(ctx, "PING")
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, refused) {
		t.Fatalf("wait ended by the deadline: %v, want the deadline and the connect error", err)
	}
	for _, want := range []string{"pooldriver: ", "while waiting for a connection", "1 in use", "the last connect attempt"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q lacks %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "pool: ") || strings.Contains(err.Error(), "resource") {
		t.Errorf("%q speaks the pool's jargon", err)
	}
	if s := c.Stats(); s.ConnectFailuresInRow == 0 || !errors.Is(s.LastConnectError, refused) {
		t.Errorf("stats: %d failures in a row, last %v", s.ConnectFailuresInRow, s.LastConnectError)
	}
}

// TestWaitForBusyPoolNamesItsCause: a wait for a connection that the
// caller's deadline ends, with every connection in use and connecting
// fine, still says what it waited for (the pool's counts and breaker) and
// matches the context's error; with leak detection off it points at it.
// The deadline leaves a second for the statement to reach the pool's wait,
// however busy the machine.
func TestWaitForBusyPoolNamesItsCause(t *testing.T) {
	for _, leaks := range []bool{false, true} {
		srv := newServer(t)
		var opts []pooldriver.Option
		if leaks {
			opts = append(opts, pooldriver.WithLeakDetection(time.Hour))
		}
		db, _ := newDB(t, srv, "pool_max_conns=1", opts...)
		conn, err := db.Conn(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if err := conn.PingContext(context.Background()); err != nil { // holds the one connection
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err = db.ExecContext(ctx, "PING")
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("leaks=%t: %v, want the deadline", leaks, err)
		}
		for _, want := range []string{"pooldriver: ", "while waiting for a connection", "(1 of 1 connections open, 1 in use)"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("leaks=%t: %q lacks %q", leaks, err, want)
			}
		}
		if hint := strings.Contains(err.Error(), "pool_leak_detection_threshold"); hint == leaks {
			t.Errorf("leaks=%t: %q: suggests leak detection %t", leaks, err, hint)
		}
		_ = conn.Close()
	}
}
