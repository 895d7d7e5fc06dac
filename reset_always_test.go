package pooldriver_test

import (
	"context"
	"database/sql"
	"testing"

	"github.com/pooldriver/pooldriver"
)

// TestResetAlways: with pool_reset_always every hold's connection is reset
// before the pool has it again, although nothing said the session changed;
// without it, only a changed one is. A task's connection is reset when the
// task lets go of it, not while the task keeps it.
func TestResetAlways(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		params string
		opts   []pooldriver.Option
		run    func(t *testing.T, db *sql.DB)
		resets int64 // with the setting
		off    int64 // without it
	}{
		{name: "exec", resets: 3, run: func(t *testing.T, db *sql.DB) {
			for range 3 {
				mustExec(t, db, "INSERT t 1")
			}
		}},
		{name: "query", resets: 2, run: func(t *testing.T, db *sql.DB) {
			for range 2 {
				var n int64
				if err := db.QueryRow("CONNID").Scan(&n); err != nil {
					t.Fatal(err)
				}
			}
		}},
		{name: "sql.Conn, one hold", resets: 1, run: func(t *testing.T, db *sql.DB) {
			conn, err := db.Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			for range 3 {
				if _, err := conn.ExecContext(ctx, "INSERT t 1"); err != nil {
					t.Fatal(err)
				}
			}
		}},
		{name: "sql.Tx", resets: 1, run: func(t *testing.T, db *sql.DB) {
			tx, err := db.Begin()
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tx.Exec("INSERT t 1"); err != nil {
				t.Fatal(err)
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "transaction-mode task, each hold", resets: 2, run: func(t *testing.T, db *sql.DB) {
			tctx, end := pooldriver.WithTask(ctx)
			defer end()
			for range 2 {
				if _, err := db.ExecContext(tctx, "INSERT t 1"); err != nil {
					t.Fatal(err)
				}
			}
		}},
		{name: "transaction-mode task, raw transaction kept", resets: 1, run: func(t *testing.T, db *sql.DB) {
			tctx, end := pooldriver.WithTask(ctx)
			for _, q := range []string{"BEGIN", "INSERT t 1", "INSERT t 2", "COMMIT"} {
				if _, err := db.ExecContext(tctx, q); err != nil {
					t.Fatal(err)
				}
			}
			end()
		}},
		{name: "session-mode task, at its end", resets: 1, off: 1, run: func(t *testing.T, db *sql.DB) {
			tctx, end := pooldriver.WithTask(ctx, pooldriver.SessionMode)
			for range 3 {
				if _, err := db.ExecContext(tctx, "INSERT t 1"); err != nil {
					t.Fatal(err)
				}
			}
			end()
		}},
	} {
		for _, always := range []bool{false, true} {
			name := tc.name + "/off"
			if always {
				name = tc.name + "/on"
			}
			t.Run(name, func(t *testing.T) {
				srv := newServer(t)
				db, c := newDB(t, srv, "pool_max_conns=1", pooldriver.WithResetAlways(always))
				tc.run(t, db)
				want := tc.off
				if always {
					want = tc.resets
				}
				// A task's end settles its connection in the background.
				waitFor(t, "the connection back in the pool", func() bool { return c.Stats().Idle == 1 })
				if got := srv.Stats().Resets; got != want {
					t.Errorf("%d resets, want %d", got, want)
				}
				if got := c.Stats().SessionResets; got != want {
					t.Errorf("Stats().SessionResets = %d, want %d", got, want)
				}
				if got := srv.Stats().Connects; got != 1 {
					t.Errorf("%d connections opened, want 1 (reset, not replaced)", got)
				}
			})
		}
	}
}

// TestResetAlwaysHidesUnseenChange: a session change that nothing
// reports (here made behind pooldriver's back, as a PostgreSQL function
// setting search_path is) reaches the next user without the setting and
// not with it.
func TestResetAlwaysHidesUnseenChange(t *testing.T) {
	for _, always := range []bool{false, true} {
		srv := newServer(t)
		db, c := newDB(t, srv, "pool_max_conns=1", pooldriver.WithResetAlways(always))
		mustExec(t, db, "INSERT t 1") // opens the connection
		// Idle in the pool: no reset of pooldriver's runs on it beside
		// the test's own statement below.
		waitFor(t, "the connection idle", func() bool { return c.Stats().Idle == 1 })
		conns := srv.Conns()
		if len(conns) != 1 {
			t.Fatalf("%d connections", len(conns))
		}
		// The change, through the fake driver itself: pooldriver sees no
		// statement of its own.
		if _, err := conns[0].ExecContext(context.Background(), "SET path unseen", nil); err != nil {
			t.Fatal(err)
		}
		mustExec(t, db, "INSERT t 2") // a hold that itself changes nothing
		var v sql.NullString
		if err := db.QueryRow("GET path").Scan(&v); err != nil {
			t.Fatal(err)
		}
		switch {
		case always && v.Valid:
			t.Errorf("with the setting, the next user sees path=%q", v.String)
		case !always && v.String != "unseen":
			t.Errorf("without the setting: path=%v; the test no longer shows the leak it documents", v)
		}
	}
}
