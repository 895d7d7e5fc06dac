package pooldriver_test

import (
	"context"
	"database/sql"
	"errors"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/pooldriver/pooldriver"
	"github.com/pooldriver/pooldriver/pool"
)

// TestConnectorOfEveryWayOfOpening: ConnectorOf reaches the Connector, and
// so its Stats, however the *sql.DB was opened, and only pooldriver's.
func TestConnectorOfEveryWayOfOpening(t *testing.T) {
	srv := newServer(t)
	dsn := "fake://" + srv.Name() + "?pool_max_conns=3"
	for _, way := range []struct {
		name string
		open func() (*sql.DB, *pooldriver.Connector) // the Connector when the caller has it
	}{
		{"OpenDB(New)", func() (*sql.DB, *pooldriver.Connector) {
			c := pooldriver.New(dsn)
			return sql.OpenDB(c), c
		}},
		{"OpenDB(New) with Err checked", func() (*sql.DB, *pooldriver.Connector) {
			c := pooldriver.New(dsn)
			if err := c.Err(); err != nil {
				t.Fatal(err)
			}
			return sql.OpenDB(c), c
		}},
		{"OpenDB(Wrap)", func() (*sql.DB, *pooldriver.Connector) {
			c := pooldriver.Wrap(srv.Connector(), pooldriver.WithMaxConns(3))
			return sql.OpenDB(c), c
		}},
		{"Open", func() (*sql.DB, *pooldriver.Connector) {
			db, err := pooldriver.Open(dsn)
			if err != nil {
				t.Fatal(err)
			}
			return db, nil
		}},
		{"sql.Open", func() (*sql.DB, *pooldriver.Connector) {
			db, err := sql.Open(pooldriver.DriverName, dsn)
			if err != nil {
				t.Fatal(err)
			}
			return db, nil
		}},
	} {
		t.Run(way.name, func(t *testing.T) {
			connects := srv.Stats().Connects
			db, want := way.open()
			defer db.Close()
			if _, err := db.Exec("INSERT t 1"); err != nil {
				t.Fatal(err)
			}
			c, ok := pooldriver.ConnectorOf(db)
			if !ok || c == nil || want != nil && c != want {
				t.Fatalf("ConnectorOf = %p, %v; the DB's connector is %p", c, ok, want)
			}
			s := c.Stats()
			// The one statement took the one connection it made, and
			// parked it when its hold ended: a parked hold is not timed.
			if s.MaxConns != 3 || s.Acquires != 1 || s.Created != 1 || s.Total != 1 || s.Idle != 1 ||
				s.CreateTime.Count != 1 || s.UseTime.Count != 0 || s.WaitTime.Count != 1 {
				t.Fatalf("ConnectorOf(db).Stats() = %+v", s)
			}
			if got := srv.Stats().Connects - connects; got != s.Created {
				t.Fatalf("the server saw %d connections, Stats %d", got, s.Created)
			}
			db.Close()
			c, ok = pooldriver.ConnectorOf(db)
			if !ok {
				t.Fatal("after Close: ConnectorOf is not ok")
			}
			if s := c.Stats(); s.Total != 0 || s.Destroyed != 1 {
				t.Fatalf("after Close: %+v", s)
			}
		})
	}

	plain := sql.OpenDB(srv.Connector())
	defer plain.Close()
	if c, ok := pooldriver.ConnectorOf(plain); ok || c != nil {
		t.Fatalf("ConnectorOf(a plain DB) = %v, %v", c, ok)
	}
	if _, ok := pooldriver.ConnectorOf(nil); ok {
		t.Fatal("ConnectorOf(nil) is ok")
	}
	// A Connector whose configuration failed is still pooldriver's.
	bad := sql.OpenDB(pooldriver.New("fake://" + srv.Name() + "?pool_max_conns=0"))
	defer bad.Close()
	if c, ok := pooldriver.ConnectorOf(bad); !ok || c.Stats() != (pooldriver.Stats{}) {
		t.Fatalf("ConnectorOf(a DB over a failed Connector) = %v, %v", c, ok)
	}
}

// TestConnectorOfKeepsNothing: nothing global keeps a Connector reachable
// once its DB is closed and dropped, however it was opened.
func TestConnectorOfKeepsNothing(t *testing.T) {
	srv := newServer(t)
	collected := make(chan string, 2)
	open := func(name string, db *sql.DB, err error) {
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec("INSERT t 1"); err != nil {
			t.Fatal(err)
		}
		c, ok := pooldriver.ConnectorOf(db)
		if !ok {
			t.Fatal("not pooldriver's")
		}
		runtime.AddCleanup(c, func(name string) { collected <- name }, name)
		db.Close()
	}
	db, err := sql.Open(pooldriver.DriverName, "fake://"+srv.Name())
	open("sql.Open", db, err)
	db, err = pooldriver.Open("fake://" + srv.Name())
	open("Open", db, err)
	db = nil //nolint:ineffassign // the last reference dropped for the GC, whatever the liveness analysis
	deadline := time.After(10 * time.Second)
	for n := 0; n < 2; {
		runtime.GC()
		select {
		case <-collected:
			n++
		case <-time.After(10 * time.Millisecond):
		case <-deadline:
			t.Fatalf("%d of 2 closed Connectors still reachable", 2-n)
		}
	}
}

// TestStatsCountWhatDBStatsCannot: statements that wait for a physical
// connection, time out or give up show in Stats (WaitDuration, the
// histograms, the counters), while db.Stats — database/sql's logical
// connections — shows no wait at all. The acquire timeout (2s) and the
// cancelled statement's deadline (1s) leave each statement a second to
// reach its wait, and the waiter two to be served, however busy the
// machine.
func TestStatsCountWhatDBStatsCannot(t *testing.T) {
	checkNoGoroutineLeak(t)
	srv := newServer(t)
	db, c := newDB(t, srv, "pool_max_conns=1&pool_acquire_timeout=2s")
	var mu sync.Mutex
	var told [3]int64
	stop := c.Observe(func(tm pool.Timing, d time.Duration) {
		mu.Lock()
		told[tm]++
		mu.Unlock()
	})
	defer stop()

	ctx := context.Background()
	held, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := held.ExecContext(ctx, "INSERT t 1"); err != nil { // takes the one physical connection
		t.Fatal(err)
	}
	if _, err := db.Exec("INSERT t 2"); !errors.Is(err, pooldriver.ErrAcquireTimeout) {
		t.Fatalf("want ErrAcquireTimeout, got %v", err)
	}
	// A statement whose deadline ends its wait, which lasts at least from
	// when it is seen waiting to that deadline.
	cctx, cancel := context.WithTimeout(ctx, time.Second)
	deadline, _ := cctx.Deadline()
	ended := make(chan error, 1)
	go func() {
		_, err := db.ExecContext(cctx, "INSERT t 3")
		ended <- err
	}()
	waitFor(t, "the statement with a deadline waiting", func() bool { return c.Stats().Waiting == 1 })
	deadlineWait := time.Until(deadline)
	err = <-ended
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, pooldriver.ErrAcquireTimeout) {
		t.Fatalf("want the statement's deadline, got %v", err)
	}
	// A statement that waits and is served when the *sql.Conn lets go.
	done := make(chan error)
	go func() {
		_, err := db.Exec("INSERT t 4")
		done <- err
	}()
	waitFor(t, "a waiting statement", func() bool { return c.Stats().Waiting == 1 })
	held.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	// Four waits: for the first connection to be made, the timeout, the
	// cancelled statement, and the one served by the release.
	s := c.Stats()
	if s.Waits != 4 || s.AcquireTimeouts != 1 || s.CanceledAcquires != 1 || s.Acquires != 2 || s.WaitTime.Count != 4 {
		t.Fatalf("stats: %+v", s)
	}
	if s.WaitDuration < 2*time.Second+deadlineWait || s.WaitDuration != s.WaitTime.Sum {
		t.Fatalf("WaitDuration %v (the timed-out and cancelled waits are 2s and at least %v), histogram sum %v", s.WaitDuration, deadlineWait, s.WaitTime.Sum)
	}
	// Two holds: the *sql.Conn's, released to the waiter (Park refuses
	// while anyone waits), timed; the waiter's, which parked its
	// connection, untimed (an observer does not stop parking).
	if s.UseTime.Count != 1 || s.UntimedUses != 1 || s.CreateTime.Count != 1 || s.Created != 1 {
		t.Fatalf("use %d untimed %d create %d created %d", s.UseTime.Count, s.UntimedUses, s.CreateTime.Count, s.Created)
	}
	mu.Lock()
	if told != [3]int64{s.WaitTime.Count, s.UseTime.Count, s.CreateTime.Count} {
		t.Errorf("Observe told %v; histograms %d %d %d", told, s.WaitTime.Count, s.UseTime.Count, s.CreateTime.Count)
	}
	mu.Unlock()
	if ds := db.Stats(); ds.WaitCount != 0 || ds.WaitDuration != 0 {
		t.Fatalf("database/sql saw a wait after all: %+v (is its pool limited?)", ds)
	}

	// An open circuit refuses a statement that needs a new connection.
	db2, c2 := newDB(t, newServer(t), "")
	c2.Breaker().Deactivate()
	if _, err := db2.Exec("INSERT t 5"); !errors.Is(err, pooldriver.ErrCircuitOpen) {
		t.Fatalf("want ErrCircuitOpen, got %v", err)
	}
	c2.Breaker().Activate()
	if s := c2.Stats(); s.CircuitRejects != 1 || s.BreakerState != pool.Active || s.BreakerChanges != 2 {
		t.Fatalf("after a rejected statement: %+v", s)
	}
}

// TestStatsExpiredAndMin: the settings and the expiry counter reach Stats.
func TestStatsExpiredAndMin(t *testing.T) {
	srv := newServer(t)
	db, c := newDB(t, srv, "pool_max_conns=2&pool_min_conns=1&pool_max_conn_lifetime=30ms")
	waitFor(t, "the pre-warmed connection", func() bool { return c.Stats().Idle == 1 })
	time.Sleep(40 * time.Millisecond)
	if _, err := db.Exec("INSERT t 1"); err != nil {
		t.Fatal(err)
	}
	s := c.Stats()
	if s.MinConns != 1 || s.MaxConns != 2 || s.Expired < 1 {
		t.Fatalf("stats: %+v", s)
	}
}
