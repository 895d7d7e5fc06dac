package pooldriver_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pooldriver/pooldriver/pool"
)

// TestParkedConnection: a hold that ends with nothing to settle parks its
// physical connection for the next hold of the same logical conn, which
// takes it back without the pool; any other logical conn that needs one
// takes it when none is idle, and the one that parked it then gets another
// way. Nothing is lost, and the counts say what happened.
func TestParkedConnection(t *testing.T) {
	srv := newServer(t)
	db, c := newDB(t, srv, "pool_max_conns=1")
	ctx := context.Background()
	a, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	idOf := func(q func() (int64, error)) int64 {
		t.Helper()
		id, err := q()
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	onA := func() (int64, error) {
		var id int64
		return id, a.QueryRowContext(ctx, "CONNID").Scan(&id)
	}
	onB := func() (int64, error) {
		var id int64
		return id, b.QueryRowContext(ctx, "CONNID").Scan(&id)
	}
	// A *sql.Conn is one hold until Close: use the DB's own logical
	// conns, one statement per hold, for the parking.
	onDB := func() (int64, error) {
		var id int64
		return id, db.QueryRowContext(ctx, "CONNID").Scan(&id)
	}
	first := idOf(onDB)
	for range 5 {
		if id := idOf(onDB); id != first {
			t.Fatalf("a later hold ran on connection %d, want the parked %d", id, first)
		}
	}
	s := c.Stats()
	if s.Created != 1 || s.Acquires != 6 || s.Idle != 1 || s.Active != 0 {
		t.Fatalf("after 6 holds on one logical conn: %+v", s)
	}
	// With one connection the ids above hold with or without parking;
	// this tells: a hold that ends parked is not timed, but counted.
	if s.UseTime.Count != 0 || s.UntimedUses != 6 {
		t.Fatalf("%d of 6 holds were released, not parked: %+v", s.UseTime.Count, s)
	}
	// Two *sql.Conns, one physical connection: each hold of one takes it
	// from the other's parking.
	if got := idOf(onA); got != first {
		t.Fatalf("a ran on %d, want %d", got, first)
	}
	if err := a.Close(); err != nil { // ends a's hold: parked, for nobody
		t.Fatal(err)
	}
	if got := idOf(onB); got != first {
		t.Fatalf("b ran on %d, want %d (taken from parking)", got, first)
	}
	if s := c.Stats(); s.Created != 1 || s.Active != 1 || s.Idle != 0 {
		t.Fatalf("b holds the only connection: %+v", s)
	}
}

// TestUsesAddUpWhateverIsConfigured: the same serial work (statements, a
// transaction now and then) counts the same holds whether or not an
// observer (an exporter such as otelpool) is registered, and with leak
// detection, which turns parking off: every hold that ended is in UseTime
// or in UntimedUses, an observer parks as much as no observer, and is told
// exactly what UseTime counts.
func TestUsesAddUpWhateverIsConfigured(t *testing.T) {
	type result struct{ acquires, timed, untimed int64 }
	run := func(t *testing.T, observe bool, params string) result {
		srv := newServer(t)
		db, c := newDB(t, srv, params)
		var told atomic.Int64
		if observe {
			stop := c.Observe(func(tm pool.Timing, _ time.Duration) {
				if tm == pool.TimingUse {
					told.Add(1)
				}
			})
			defer stop()
		}
		ctx := context.Background()
		for i := range 60 {
			if _, err := db.ExecContext(ctx, "ECHO ?", int64(i)); err != nil {
				t.Fatal(err)
			}
			if i%10 == 9 { // a hold that settles: released, not parked
				tx, err := db.BeginTx(ctx, nil)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := tx.ExecContext(ctx, "ECHO 1"); err != nil {
					t.Fatal(err)
				}
				if err := tx.Commit(); err != nil {
					t.Fatal(err)
				}
			}
		}
		s := c.Stats()
		if s.Active != 0 {
			t.Fatalf("at rest: %+v", s)
		}
		if s.UseTime.Count+s.UntimedUses != s.Acquires {
			t.Errorf("UseTime.Count %d + UntimedUses %d != Acquires %d", s.UseTime.Count, s.UntimedUses, s.Acquires)
		}
		if observe && told.Load() != s.UseTime.Count {
			t.Errorf("the observer was told of %d uses, UseTime counted %d", told.Load(), s.UseTime.Count)
		}
		return result{s.Acquires, s.UseTime.Count, s.UntimedUses}
	}
	var plain, observed, leaks result
	t.Run("plain", func(t *testing.T) { plain = run(t, false, "") })
	t.Run("observed", func(t *testing.T) { observed = run(t, true, "") })
	t.Run("leak-detection", func(t *testing.T) { leaks = run(t, true, "pool_leak_detection_threshold=1m") })
	t.Logf("holds (acquires, timed, untimed): plain %+v, observed %+v, leak detection %+v", plain, observed, leaks)
	if plain.untimed == 0 {
		t.Errorf("nothing parked: %+v", plain)
	}
	if observed != plain {
		t.Errorf("an observer changed the counts: %+v, without %+v", observed, plain)
	}
	// Leak detection keeps parking off: every hold is timed.
	if leaks.untimed != 0 || leaks.timed != leaks.acquires || leaks.acquires != plain.acquires {
		t.Errorf("with leak detection: %+v, want every one of %d holds timed", leaks, plain.acquires)
	}
}
