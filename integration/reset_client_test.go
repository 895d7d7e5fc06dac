package integration

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pooldriver/pooldriver"
)

// What a session leaves in the client (docs/design.md, "What the reset
// clears in the client"): the tests here let a first user fill what pgx
// keeps for the session, then ask, as the next user of the one connection
// (pool_max_conns=1), through RawConn, what pgx hands it: in every mode
// (dirtyModes), beside the plain driver (logged).

// rawNext runs f on the *pgx.Conn under a new *sql.Conn of db, as the next
// user's RawConn would.
func rawNext(t *testing.T, db *sql.DB, f func(p *pgx.Conn) error) {
	t.Helper()
	conn, err := db.Conn(ctx(t))
	require.NoError(t, err)
	defer conn.Close()
	require.NoError(t, conn.Raw(func(dc any) error {
		if sc, ok := dc.(*stdlib.Conn); ok { // the plain driver's
			return f(sc.Conn())
		}
		return pooldriver.RawConn(ctx(t), dc, func(raw any) error { return f(raw.(*pgx.Conn)) })
	}))
}

// waitNotification returns the channel and payload of a notification the
// next user's WaitForNotification gets within a second, or "".
func waitNotification(t *testing.T, db *sql.DB) string {
	t.Helper()
	var got string
	rawNext(t, db, func(p *pgx.Conn) error {
		c, cancel := context.WithTimeout(ctx(t), time.Second)
		defer cancel()
		n, err := p.WaitForNotification(c)
		if n != nil {
			got = n.Channel + ": " + n.Payload
			return nil
		}
		if errors.Is(err, context.DeadlineExceeded) || pgconnTimeout(err) {
			return nil
		}
		return err
	})
	return got
}

// pgconnTimeout reports pgconn's error for a wait its context ended.
func pgconnTimeout(err error) bool {
	var to interface{ Timeout() bool }
	return errors.As(err, &to) && to.Timeout()
}

// TestResetClearsNotifications: the first user LISTENs and a notification
// reaches its session (its own NOTIFY, delivered at its commit, and
// another client's, delivered while the session waits); the reset's
// UNLISTEN * ends the listening, but what pgx read off the wire waits in
// its buffer: the next user's WaitForNotification must not get it.
func TestResetClearsNotifications(t *testing.T) {
	forServer(t, "postgres", func(t *testing.T, s server) {
		dirty := func(ch string) func(c context.Context, r runner) error {
			return func(c context.Context, r runner) error {
				if _, err := r.ExecContext(c, "LISTEN "+ch+"; NOTIFY "+ch+", 'first user'"); err != nil {
					return err
				}
				_, err := s.admin(t).ExecContext(c, "NOTIFY "+ch+", 'another client'")
				return err
			}
		}
		for _, m := range dirtyModes {
			t.Run(m.name, func(t *testing.T) {
				db := m.open(t, s, s.dsn)
				defer db.Close()
				require.NoError(t, m.run(ctx(t), db, dirty(unique("rst54_ch"))))
				assert.Empty(t, waitNotification(t, db), "a notification the next user got")
			})
		}
		t.Run("plain", func(t *testing.T) {
			db := sql.OpenDB(plainConnector(t, s, s.dsn))
			defer db.Close()
			db.SetMaxOpenConns(1)
			require.NoError(t, dirty(unique("rst54_ch"))(ctx(t), db))
			t.Logf("plain driver, one connection: the next user gets %q", waitNotification(t, db))
		})
	})
}

// TestResetDeallocatesRawPrepared: the first user prepares a statement
// over the protocol under a name of its own (pgx.Conn.Prepare through
// RawConn): neither the server nor pgx may keep it for the next user's
// EXECUTE (or pgx.Conn.Exec by that name).
func TestResetDeallocatesRawPrepared(t *testing.T) {
	forServer(t, "postgres", func(t *testing.T, s server) {
		name := unique("rst54_q")
		dirty := func(c context.Context, db *sql.DB) error {
			conn, err := db.Conn(c)
			if err != nil {
				return err
			}
			defer conn.Close()
			return conn.Raw(func(dc any) error {
				prepare := func(raw any) error {
					_, err := raw.(*pgx.Conn).Prepare(c, name, "SELECT 'first user'::text")
					return err
				}
				if sc, ok := dc.(*stdlib.Conn); ok {
					return prepare(sc.Conn())
				}
				return pooldriver.RawConn(c, dc, prepare)
			})
		}
		observe := "SELECT count(*)::text FROM pg_prepared_statements WHERE name = '" + name + "'"
		for _, m := range dirtyModes {
			t.Run(m.name, func(t *testing.T) {
				if m.via == viaTx {
					t.Skip("RawConn runs on a *sql.Conn")
				}
				db := m.open(t, s, s.dsn)
				defer db.Close()
				require.NoError(t, m.run(ctx(t), db, func(c context.Context, _ runner) error { return dirty(c, db) }))
				assert.Equal(t, "0", nextUser(t, db, observe), "the first user's statement, still prepared")
			})
		}
		t.Run("plain", func(t *testing.T) {
			db := sql.OpenDB(plainConnector(t, s, s.dsn))
			defer db.Close()
			db.SetMaxOpenConns(1)
			require.NoError(t, dirty(ctx(t), db))
			t.Logf("plain driver, one connection: the first user's statement prepared for the next: %s", nextUser(t, db, observe))
		})
	})
}

// TestResetParameterStatusIsServers: the first user SETs parameters the
// server reports (GUC_REPORT); after the reset, what pgconn's
// ParameterStatus says of each must be what the server has.
func TestResetParameterStatusIsServers(t *testing.T) {
	forServer(t, "postgres", func(t *testing.T, s server) {
		// (search_path is reported from PostgreSQL 18 on only.)
		params := []string{"application_name", "TimeZone", "DateStyle", "IntervalStyle",
			"standard_conforming_strings", "default_transaction_read_only", "is_superuser", "session_authorization"}
		dirty := execAll("SET application_name = 'rst54_app'", "SET TimeZone = 'Pacific/Chatham'",
			"SET DateStyle = 'SQL, DMY'", "SET IntervalStyle = 'iso_8601'", "SET search_path = rst54_nowhere",
			"SET default_transaction_read_only = on")
		check := func(t *testing.T, db *sql.DB) []string {
			var differ []string
			rawNext(t, db, func(p *pgx.Conn) error {
				for _, k := range params {
					var server string
					if err := p.QueryRow(ctx(t), "SELECT current_setting($1)", k).Scan(&server); err != nil {
						return err
					}
					if got := p.PgConn().ParameterStatus(k); got != server {
						differ = append(differ, k+": "+got+", the server's "+server)
					}
				}
				return nil
			})
			return differ
		}
		for _, m := range dirtyModes {
			t.Run(m.name, func(t *testing.T) {
				db := m.open(t, s, s.dsn)
				defer db.Close()
				require.NoError(t, m.run(ctx(t), db, dirty))
				assert.Empty(t, check(t, db), "parameters pgconn reports otherwise than the server has them")
			})
		}
	})
}

// TestResetClearsNotificationsCarried is TestResetClearsNotifications
// where the reset is carried (a pool of one, past the connection's first
// reset, which runs on its own): it goes with the next user's statement
// (a query of the direct path's extended protocol, or a statement without
// arguments over the simple protocol), or runs on its own before RawConn;
// past 100 ms idle it runs on its own off the path, which the counts
// logged show. Whichever ran it, the next user's WaitForNotification must
// get nothing of the first user's.
func TestResetClearsNotificationsCarried(t *testing.T) {
	forServer(t, "postgres", func(t *testing.T, s server) {
		for _, next := range []struct {
			name string
			run  func(t *testing.T, db *sql.DB)
		}{
			{"query", func(t *testing.T, db *sql.DB) { nextUser(t, db, "SELECT 'next'") }},
			{"exec", func(t *testing.T, db *sql.DB) {
				_, err := db.ExecContext(ctx(t), "SELECT 'next'")
				require.NoError(t, err)
			}},
			{"RawConn", func(*testing.T, *sql.DB) {}},
		} {
			t.Run(next.name, func(t *testing.T) {
				c := pooldriver.New(withParams(s.dsn, "pool_max_conns=1"))
				require.NoError(t, c.Err())
				db := sql.OpenDB(c)
				defer db.Close()
				// The connection's first reset, on its own; the text the
				// next user runs, prepared.
				_, err := db.ExecContext(ctx(t), "SELECT set_config('rst54.warm', 'x', false)")
				require.NoError(t, err)
				nextUser(t, db, "SELECT 'next'")
				ch := unique("rst54_ch")
				_, err = db.ExecContext(ctx(t), "LISTEN "+ch+"; NOTIFY "+ch+", 'first user'")
				require.NoError(t, err)
				s.adminExec(t, "NOTIFY "+ch+", 'another client'")
				before := c.Stats()
				next.run(t, db)
				assert.Empty(t, waitNotification(t, db), "a notification the next user got")
				st := c.Stats()
				t.Logf("the first user's reset: carried with a statement %d, on its own %d (RawConn's own reset may still wait)",
					st.CarriedResets-before.CarriedResets, st.SeparateResets-before.SeparateResets)
			})
		}
	})
}

// TestResetKeepsHookPrepared: a statement an AfterConnect hook prepares
// under a name of its own is part of every new session: the reset
// deallocates it with the rest of what was prepared under such names, and
// the hook, which runs again after every reset, prepares it again, so the
// next user's EXECUTE still finds it.
func TestResetKeepsHookPrepared(t *testing.T) {
	forServer(t, "postgres", func(t *testing.T, s server) {
		name := unique("rst54_hook")
		hook := pooldriver.WithAfterConnect(func(c context.Context, raw any) error {
			_, err := raw.(*pgx.Conn).Prepare(c, name, "SELECT 'hook'::text")
			return err
		})
		c := pooldriver.New(withParams(s.dsn, "pool_max_conns=1"), hook)
		require.NoError(t, c.Err())
		db := sql.OpenDB(c)
		defer db.Close()
		for i := range 3 {
			_, err := db.ExecContext(ctx(t), "SET application_name = 'rst54_dirty'")
			require.NoError(t, err)
			assert.Equal(t, "hook", nextUser(t, db, "EXECUTE "+name), "round %d", i)
		}
		require.GreaterOrEqual(t, c.Stats().SessionResets, int64(3))
	})
}
