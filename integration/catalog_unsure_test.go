package integration

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pooldriver/pooldriver"
	"github.com/pooldriver/pooldriver/dialects"
)

// TestCatalogFailsClosed: a reading of the catalog that cannot be taken
// again (another session holds a lock on a catalog table the reading
// reads, so that every new reading waits, and times out) does not vouch
// for ever: a function another client replaced right after the last
// good reading, with one that moves the search_path, is judged by its
// old body at most until that reading is dialects.CatalogMaxAge old;
// from then on its call counts as a change, and the next user of the
// connection finds the session clean. The window measured is in
// docs/design.md ("Not covered at the defaults").
func TestCatalogFailsClosed(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for the catalog's reading to be older than dialects.CatalogMaxAge")
	}
	forServer(t, "postgres", func(t *testing.T, s server) {
		g := unique("cat65_g")
		s.adminExec(t, "CREATE FUNCTION public."+g+"() RETURNS int LANGUAGE sql AS 'SELECT 1'")
		t.Cleanup(func() {
			if _, err := s.admin(t).ExecContext(context.Background(), "DROP FUNCTION public."+g+"()"); err != nil {
				t.Errorf("dropping %s: %v", g, err)
			}
		})
		// Two connections: while one waits on the lock, reading, the
		// other serves the call and its next user.
		c := pooldriver.New(withParams(s.dsn, "pool_max_conns=2"))
		db := sql.OpenDB(c)
		defer db.Close()
		observe := func() (pid int, path string) {
			require.NoError(t, db.QueryRowContext(ctx(t), "SELECT pg_backend_pid(), current_setting('search_path')").Scan(&pid, &path))
			return pid, path
		}
		_, clean := observe() // the catalog's first reading, at connect
		read := time.Now()    // after it: the reading is older than time.Since(read)
		var pid int
		require.NoError(t, db.QueryRowContext(ctx(t), "SELECT public."+g+"()").Scan(&pid))

		// Replaced by another client, then a lock that every reading
		// waits on (it follows pg_depend), held in a transaction.
		s.adminExec(t, "CREATE OR REPLACE FUNCTION public."+g+"() RETURNS int LANGUAGE sql AS "+
			"$$ SELECT pg_backend_pid() + 0 * length(set_config('search_path', 'pg_catalog', false)) $$")
		lock, err := s.admin(t).Conn(ctx(t))
		require.NoError(t, err)
		defer lock.Close()
		tx, err := lock.BeginTx(ctx(t), nil)
		require.NoError(t, err)
		defer tx.Rollback() //nolint:errcheck // the lock's end
		_, err = tx.ExecContext(ctx(t), "LOCK TABLE pg_catalog.pg_depend IN ACCESS EXCLUSIVE MODE")
		require.NoError(t, err)

		// A reading seen waiting on the lock, looked for while the calls
		// run (one waits up to its timeout, 5 s).
		var waited atomic.Bool
		done := make(chan struct{})
		var looked sync.WaitGroup
		looked.Go(func() {
			for !waited.Load() {
				var n int
				err := s.admin(t).QueryRowContext(context.Background(), "SELECT count(*) FROM pg_catalog.pg_stat_activity "+
					"WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE 'SET LOCAL jit%'").Scan(&n)
				waited.Store(err == nil && n > 0)
				select {
				case <-done:
					return
				case <-time.After(100 * time.Millisecond):
				}
			}
		})
		window := dialects.CatalogMaxAge + time.Second // and the call's own time
		var lastLeak, firstClosed time.Duration
		for time.Since(read) < window+6*time.Second {
			var on int
			require.NoError(t, db.QueryRowContext(ctx(t), "SELECT public."+g+"()").Scan(&on))
			at := time.Since(read)
			next, path := observe()
			if next == on { // the same session: what its last user left
				if path != clean {
					lastLeak = at
					require.Less(t, at, window, "a call judged by a reading older than the window: the next user got its search_path")
				} else if firstClosed == 0 {
					firstClosed = at
				}
			}
			time.Sleep(50 * time.Millisecond) // a call now and then, as a service would make
		}
		close(done)
		looked.Wait()
		require.NoError(t, tx.Rollback())
		// Until a reading is taken again, every call that names
		// anything counts: the next tests of the process would count
		// resets that are this one's.
		s.adminExec(t, "CREATE OR REPLACE FUNCTION public."+g+"() RETURNS int LANGUAGE sql AS 'SELECT 1'")
		for deadline := time.Now().Add(3 * dialects.CatalogTTL); ; {
			before := c.Stats().SessionResets
			nextUser(t, db, "SELECT public."+g+"()")
			if c.Stats().SessionResets == before {
				break
			}
			require.True(t, time.Now().Before(deadline), "no reading vouches for a harmless call after the lock's end")
			time.Sleep(50 * time.Millisecond)
		}
		require.True(t, waited.Load(), "no reading waited on the lock: the case is not set up")
		require.NotZero(t, firstClosed, "the call never counted as a change")
		t.Logf("under a held lock on pg_depend: last call judged by the old body %v after the last reading began (at most), first counted %v after (CatalogMaxAge %v)",
			lastLeak.Round(10*time.Millisecond), firstClosed.Round(10*time.Millisecond), dialects.CatalogMaxAge)
	})
}

// TestCatalogUnsureOnce: a connection that ran a user's function the
// catalog does not prove harmless (here one that changes a setting) is
// reset, and vouches for nothing until a reading taken since: its reset
// takes that reading at once, so the point selects after it are no
// change, even where another such call came less than a second before
// (readings are otherwise spaced by a second).
func TestCatalogUnsureOnce(t *testing.T) {
	forServer(t, "postgres", func(t *testing.T, s server) {
		f, table := unique("cat65_set"), unique("cat65_kv")
		s.adminExec(t, "CREATE TABLE "+table+" (id int PRIMARY KEY, v text)")
		s.adminExec(t, "INSERT INTO "+table+" VALUES (1, 'x')")
		s.adminExec(t, "CREATE FUNCTION "+f+"() RETURNS text LANGUAGE sql AS $$ SELECT set_config('work_mem', '8MB', false) $$")
		t.Cleanup(func() {
			for _, q := range []string{"DROP FUNCTION " + f + "()", "DROP TABLE " + table} {
				if _, err := s.admin(t).ExecContext(context.Background(), q); err != nil {
					t.Errorf("%s: %v", q, err)
				}
			}
		})
		for _, size := range []string{"pool_max_conns=1", "pool_max_conns=10"} {
			t.Run(size, func(t *testing.T) {
				c := pooldriver.New(withParams(s.dsn, size))
				db := sql.OpenDB(c)
				defer db.Close()
				point := "SELECT v FROM " + table + " WHERE id = $1"
				var v string
				waitVouched(t, c, db, point)
				before := c.Stats().SessionResets
				for range 2 {
					_, err := db.ExecContext(ctx(t), "SELECT "+f+"()")
					require.NoError(t, err)
				}
				for range 5 {
					require.NoError(t, db.QueryRowContext(ctx(t), point, 1).Scan(&v))
				}
				require.NoError(t, db.Close()) // the resets done
				got := c.Stats().SessionResets - before
				t.Logf("%d resets over 2 calls of the function and 5 point selects", got)
				if size == "pool_max_conns=1" {
					// With more connections a point select may run on one
					// whose reset gave up waiting for a reading taken since
					// the call (250 ms at most), and count.
					require.Equal(t, int64(2), got, "resets over 2 calls of the function and 5 point selects, on one connection")
				}
			})
		}
	})
}

// TestCatalogTrustingNeighbour: a connector that trusts its functions
// shares the catalog's reading with the process's other connectors to
// the server; its plain CREATE TABLE and DROP TABLE leave what the
// reading vouches for true, for the others as for itself, and the point
// selects of a connector that does not trust its functions, right after
// each, cost no reset (before, each such DDL of the trusting connector's
// made the reading vouch for nothing until a new one was stored).
func TestCatalogTrustingNeighbour(t *testing.T) {
	forServer(t, "postgres", func(t *testing.T, s server) {
		table := unique("cat65_nb")
		s.adminExec(t, "CREATE TABLE "+table+" (id int PRIMARY KEY, v text)")
		s.adminExec(t, "INSERT INTO "+table+" VALUES (1, 'x')")
		t.Cleanup(func() { s.adminExec(t, "DROP TABLE "+table) })
		c := pooldriver.New(withParams(s.dsn, "pool_max_conns=1"))
		db := sql.OpenDB(c)
		defer db.Close()
		trusting := sql.OpenDB(pooldriver.New(withParams(s.dsn, "pool_trust_functions=true")))
		defer trusting.Close()
		point := "SELECT v FROM " + table + " WHERE id = $1"
		var v string
		waitVouched(t, c, db, point)
		scratch := unique("cat65_nb_t")
		before := c.Stats().SessionResets
		for range 20 {
			for _, q := range []string{"CREATE TABLE " + scratch + " (id int PRIMARY KEY, v text NOT NULL)", "DROP TABLE " + scratch} {
				_, err := trusting.ExecContext(ctx(t), q)
				require.NoError(t, err)
				require.NoError(t, db.QueryRowContext(ctx(t), point, 1).Scan(&v))
			}
		}
		require.Equal(t, before, c.Stats().SessionResets, "point selects reset after the trusting connector's DDL")
	})
}

// TestCatalogUnsureConcurrent: 16 callers of a harmless PL/pgSQL
// function on a fresh pool of 4 connections, right after the DDL that
// made it. A call judged before a reading taken since the DDL is stored
// counts as a change, and its connection is reset; the reset reads the
// catalog, or waits for the reading another connection is taking, so
// that the connection's next call is vouched for. The resets so stop
// within a few per connection. (A reset carried with the next call read
// nothing, and one that found another connection reading gave up: each
// call then ran unvouched again, and made the reading in progress too old
// for its connection in turn, for hundreds of calls.)
func TestCatalogUnsureConcurrent(t *testing.T) {
	forServer(t, "postgres", func(t *testing.T, s server) {
		const maxConns, callers, turn = 4, 16, 64
		d := newDDL(t, s)
		accounts, ledger := plTables(d)
		d.add(fmt.Sprintf("INSERT INTO %s SELECT g, 0 FROM pg_catalog.generate_series(2, %d) g", accounts, callers))
		d.apply()

		c := pooldriver.New(withParams(s.dsn, fmt.Sprintf("pool_max_conns=%d", maxConns)))
		db := sql.OpenDB(c)
		defer db.Close()
		// Made through the pool itself, the calls right behind: the
		// readings taken since are not stored yet when they are judged.
		fn := unique("cat66_business")
		_, err := db.ExecContext(ctx(t), "CREATE FUNCTION "+fn+plBusiness(accounts, ledger, ""))
		require.NoError(t, err)
		t.Cleanup(func() { s.adminExec(t, "DROP FUNCTION "+fn) })
		call := "SELECT " + fn + "($1, 1)"
		// A turn of calls, each caller on an account of its own; then
		// the resets it caused, which run off the callers' paths and are
		// counted once they ran.
		run := func() {
			var wg sync.WaitGroup
			for w := range callers {
				wg.Go(func() {
					for range turn / callers {
						if _, err := db.ExecContext(ctx(t), call, w+1); err != nil {
							t.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			waitFor(t, "the resets of the turn", func() bool { return c.Stats().Active == 0 })
		}
		turns := 0
		for deadline := time.Now().Add(30 * time.Second); ; {
			before := c.Stats().SessionResets
			run()
			turns++
			if t.Failed() || c.Stats().SessionResets == before {
				break
			}
			require.True(t, time.Now().Before(deadline), "calls of a harmless function still reset after 30s: %d resets", c.Stats().SessionResets)
		}
		got := c.Stats().SessionResets
		t.Logf("%d resets over %d turns of %d calls, by %d callers on %d connections", got, turns, turn, callers, maxConns)
		require.LessOrEqual(t, got, int64(3*maxConns), "resets before the calls of a harmless function were vouched for")
	})
}

// waitVouched runs point (a point select of id 1) on db, c's, until a run
// costs no reset: until a reading sees the DDL the process's other tests
// ran, every statement that names anything counts as a change.
func waitVouched(t *testing.T, c *pooldriver.Connector, db *sql.DB, point string) {
	t.Helper()
	var v string
	for deadline := time.Now().Add(3 * dialects.CatalogTTL); ; {
		before := c.Stats().SessionResets
		require.NoError(t, db.QueryRowContext(ctx(t), point, 1).Scan(&v))
		if c.Stats().SessionResets == before {
			return
		}
		require.True(t, time.Now().Before(deadline), "no reading vouches for a point select")
		time.Sleep(50 * time.Millisecond)
	}
}
