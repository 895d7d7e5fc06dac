package pooldriver_test

import (
	"context"
	"testing"
)

// TestReset: idle connections are closed at once, one in use (a *sql.Tx
// mid-transaction) keeps working and is closed when it comes back, and
// every later statement runs on a connection opened after Reset.
func TestReset(t *testing.T) {
	checkNoGoroutineLeak(t)
	srv := newServer(t)
	db, c := newDB(t, srv, "pool_max_conns=4&pool_min_conns=3")
	waitFor(t, "pre-warm", func() bool { return c.Stats().Idle == 3 })
	ctx := context.Background()
	old := map[int64]bool{}
	for _, cn := range srv.Conns() {
		old[cn.ID()] = true
	}

	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec("INSERT t 1"); err != nil {
		t.Fatal(err)
	}
	c.Reset()
	// The two idle ones are closed now, and pool_min_conns refilled.
	waitFor(t, "idle connections replaced", func() bool {
		return srv.Stats().Closes == 2 && c.Stats().Idle == 2
	})
	// The transaction goes on, undisturbed, and commits.
	if _, err := tx.Exec("INSERT t 2"); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if got := len(srv.Table("t")); got != 2 {
		t.Fatalf("%d rows committed, want 2", got)
	}
	waitFor(t, "the busy connection closed when it came back", func() bool { return srv.Stats().Closes == 3 })
	for range 10 {
		var id int64
		if err := db.QueryRow("CONNID").Scan(&id); err != nil {
			t.Fatal(err)
		}
		if old[id] {
			t.Fatalf("connection %d, opened before Reset, still used", id)
		}
	}
	if st := srv.Stats(); st.DisconnectRollbacks != 0 {
		t.Fatalf("a transaction was cut: %+v", st)
	}
}
