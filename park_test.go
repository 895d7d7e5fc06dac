package pooldriver_test

import (
	"context"
	"testing"
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
	// this tells: a hold that ends parked is not timed.
	if s.UseTime.Count != 0 {
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
