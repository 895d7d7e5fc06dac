package integration

import (
	"database/sql"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pooldriver/pooldriver"
)

// TestCarriedResetSerialCaller (issue 46): on PostgreSQL, where no other
// connection is to be had (here a pool of one), a session reset goes with
// the next statement on the same connection, so a serial caller of a
// function that changes the session stays on its server connection and
// never waits for a reset, and every call starts from a clean session:
// the function reports what it found (its backend, search_path, a custom
// setting, an advisory lock it took the last time) before it changes all
// of them. Through a query (the direct path's extended protocol) and a
// statement without arguments (the simple protocol), alternating. With
// room for more connections (max 4) the resets run off the caller's path
// and every call still starts clean.
func TestCarriedResetSerialCaller(t *testing.T) {
	for _, max := range []int{1, 4} {
		t.Run(fmt.Sprintf("max%d", max), func(t *testing.T) { testCarriedSerial(t, max) })
	}
}

func testCarriedSerial(t *testing.T, maxConns int) {
	forServer(t, "postgres", func(t *testing.T, s server) {
		d := newDDL(t, s)
		fn := unique("pd_carry_f")
		tbl := d.table("pd_carry_seen", "seen text")
		d.add(`CREATE FUNCTION `+fn+`() RETURNS text LANGUAGE plpgsql AS $f$
DECLARE r text := pg_backend_pid()::text || '|' || current_setting('search_path') || '|' ||
	coalesce(current_setting('pd_carry.mark', true), '') || '|' ||
	(SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid() AND objid = 4646);
BEGIN
	INSERT INTO public.`+tbl+` VALUES (r);
	PERFORM set_config('pd_carry.mark', 'dirty', false);
	PERFORM set_config('search_path', 'pg_catalog', false);
	PERFORM pg_advisory_lock(4646);
	RETURN r;
END $f$`, `DROP FUNCTION `+fn+`()`)
		d.apply()

		c := pooldriver.New(withParams(s.dsn, fmt.Sprintf("pool_max_conns=%d", maxConns)))
		require.NoError(t, c.Err())
		db := sql.OpenDB(c)
		defer db.Close()
		var baseline string
		require.NoError(t, db.QueryRowContext(ctx(t), "SELECT current_setting('search_path')").Scan(&baseline))

		const calls = 60
		for i := range calls {
			if i%2 == 0 {
				var got string
				require.NoError(t, db.QueryRowContext(ctx(t), "SELECT "+fn+"()").Scan(&got))
			} else {
				_, err := db.ExecContext(ctx(t), "SELECT "+fn+"()")
				require.NoError(t, err)
			}
		}
		rows, err := s.admin(t).QueryContext(ctx(t), "SELECT seen FROM "+tbl)
		require.NoError(t, err)
		defer rows.Close()
		backends := map[string]int{}
		n := 0
		for rows.Next() {
			var seen string
			require.NoError(t, rows.Scan(&seen))
			parts := strings.Split(seen, "|")
			require.Len(t, parts, 4, seen)
			require.Equal(t, baseline, parts[1], "search_path a call found: %s", seen)
			require.Empty(t, parts[2], "the custom setting a call found: %s", seen)
			require.Equal(t, "0", parts[3], "advisory locks a call found held: %s", seen)
			backends[parts[0]]++
			n++
		}
		require.NoError(t, rows.Err())
		require.Equal(t, calls, n)
		st := c.Stats()
		if maxConns == 1 {
			require.Len(t, backends, 1, "calls per server connection")
			// No call waited for a reset but the first: the first
			// acquire waits for the connection to open, and the first
			// reset of a connection (which asks what its role may do)
			// runs on its own. Resetting off the caller's path, every
			// call would wait.
			require.LessOrEqual(t, st.Waits, int64(2), "waits: %+v", st)
		}
		waitFor(t, "every call's reset counted", func() bool { return c.Stats().SessionResets >= calls })

		// The same calls through plain pgx stdlib, one connection: every
		// call after the first finds the last one's session.
		s.adminExec(t, "TRUNCATE "+tbl)
		plain, err := sql.Open("pgx", s.dsn)
		require.NoError(t, err)
		defer plain.Close()
		plain.SetMaxOpenConns(1)
		for range 4 {
			var got string
			require.NoError(t, plain.QueryRowContext(ctx(t), "SELECT public."+fn+"()").Scan(&got)) // its search_path is gone after the first
		}
		require.EqualValues(t, 3, s.adminInt(t, "SELECT count(*) FROM "+tbl+" WHERE seen LIKE '%|dirty|1'"),
			"plain pgx: calls that found the last call's setting and lock")
	})
}

// TestCarriedResetIdleBound (issue 46): a reset waiting for the next
// statement does not wait long: a connection that sits idle runs it on
// its own, off the callers' paths (within carryIdleBound, 100 ms), so an
// advisory lock a function took is released though nobody uses the
// connection again.
func TestCarriedResetIdleBound(t *testing.T) {
	forServer(t, "postgres", func(t *testing.T, s server) {
		d := newDDL(t, s)
		fn := unique("pd_carry_lock")
		d.add(`CREATE FUNCTION `+fn+`() RETURNS int LANGUAGE sql AS 'SELECT pg_advisory_lock(4747); SELECT 1'`, `DROP FUNCTION `+fn+`()`)
		d.apply()
		c := pooldriver.New(withParams(s.dsn, "pool_max_conns=1"))
		require.NoError(t, c.Err())
		db := sql.OpenDB(c)
		defer db.Close()
		held := func() bool {
			return s.adminInt(t, "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objid = 4747") > 0
		}
		// The first reset runs on its own (see above); the second waits.
		for i := range 2 {
			var one int
			require.NoError(t, db.QueryRowContext(ctx(t), "SELECT "+fn+"()").Scan(&one))
			waitFor(t, fmt.Sprintf("the lock of call %d released with no statement after it", i+1), func() bool { return !held() })
		}
		require.Equal(t, int64(2), c.Stats().SessionResets)
	})
}

// TestCarriedResetKeepsStatementsResetAlways: with pool_reset_always and
// a pool of one, every hold's reset is carried; a statement not yet
// prepared on the connection (a new text) cannot carry it, and it runs on
// its own, where it must not take the carried resets' own DEALLOCATE ALL
// for the session tampering with the statements (which would drop every
// statement, and the next two cached texts would find none to carry the
// reset with). Each round runs two cached texts and one new one: two of
// its three resets go with a statement.
func TestCarriedResetKeepsStatementsResetAlways(t *testing.T) {
	forServer(t, "postgres", func(t *testing.T, s server) {
		c := pooldriver.New(withParams(s.dsn, "pool_max_conns=1", "pool_reset_always=true"))
		require.NoError(t, c.Err())
		db := sql.OpenDB(c)
		defer db.Close()
		var n int
		const rounds = 300
		for i := range rounds {
			require.NoError(t, db.QueryRowContext(ctx(t), "SELECT $1::int + 1", i).Scan(&n))
			require.NoError(t, db.QueryRowContext(ctx(t), "SELECT $1::int + 2", i).Scan(&n))
			require.NoError(t, db.QueryRowContext(ctx(t), fmt.Sprintf("SELECT %d + 3 AS rst54_new", i)).Scan(&n))
		}
		waitFor(t, "every reset run", func() bool {
			st := c.Stats()
			return st.CarriedResets+st.SeparateResets == st.SessionResets && st.SessionResets >= 3*rounds
		})
		st := c.Stats()
		t.Logf("resets: %d, carried %d, separate %d", st.SessionResets, st.CarriedResets, st.SeparateResets)
		// 2 of 3 (600 of 900); a connection idle past the carried
		// reset's bound on a busy machine resets on its own: a tenth is
		// left to that. Dropping the statements at each new text carries
		// 1 of 3 (300).
		require.GreaterOrEqual(t, st.CarriedResets, int64(2*rounds-rounds/10), "carried resets")
	})
}
