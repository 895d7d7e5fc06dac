package integration

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pooldriver/pooldriver"
)

// Issue 35, "safe by default": a statement that calls a function the
// dialect does not know leaves the session unknown, and an unknown session
// is reset before anyone else uses it, whatever the server reported. Each
// test here lets a first user call a function or procedure of its own that
// changes the session where neither the statement's text nor the server's
// reports show it, then asks, as the next user of the same connection
// (pool_max_conns=1), what the session looks like: in every mode, with the
// plain driver beside it (logged, not asserted), and with
// pool_trust_functions=true, the opt-out, where the leak comes back.

// denyCase is one such change: dirty runs as the first user (failing, if
// fails: a change made before an error counts as well), observe as the
// next one, who must see want.
type denyCase struct {
	dirty   func(ctx context.Context, r runner) error
	fails   bool
	observe func(t *testing.T, db *sql.DB) string
	want    string

	// unvouched: SQL that no one's word vouches for (run from a string, a
	// write to pg_settings) counts even with pool_trust_functions=true.
	unvouched bool
	// reported: the server reports the change itself (MariaDB's session
	// tracker, on the plain wire): seen even with pool_trust_functions.
	reported bool
	// shown: the statement's own text shows the change (a SQL command such
	// as DEALLOCATE or SET, LAST_INSERT_ID(expr)): it counts even with
	// pool_trust_functions, which vouches for functions only.
	shown bool
	// builtin: the change is a built-in function's that no list names
	// (setseed, pg_replication_origin_session_setup): whether
	// pool_trust_functions vouches for it is the dialect's call (it may
	// count it by name, as setval), so with it the outcome is only logged.
	builtin bool
	// noTx, if set, says why the case cannot run in a *sql.Tx (a statement
	// the server refuses inside a transaction block): that mode is skipped.
	noTx string
}

// asks returns an observe that runs query as the next user.
func asks(query string) func(t *testing.T, db *sql.DB) string {
	return func(t *testing.T, db *sql.DB) string { return nextUser(t, db, query) }
}

// checkDenied runs dc on dsn in every mode, with the plain driver, and
// trusted.
func checkDenied(t *testing.T, s server, dsn string, dc denyCase) {
	t.Helper()
	checkFirst := func(t *testing.T, err error) {
		t.Helper()
		if dc.fails {
			require.Error(t, err, "the first user's statement fails, after its change")
		} else {
			require.NoError(t, err, "the first user's statements")
		}
	}
	for _, m := range dirtyModes {
		t.Run(m.name, func(t *testing.T) {
			if why := m.skips(dc.noTx); why != "" {
				t.Skip(why)
			}
			db := m.open(t, s, dsn)
			defer db.Close()
			checkFirst(t, m.run(ctx(t), db, dc.dirty))
			assert.Equal(t, dc.want, dc.observe(t, db), "what the next user sees")
		})
	}
	t.Run("plain", func(t *testing.T) {
		db := sql.OpenDB(plainConnector(t, s, dsn))
		defer db.Close()
		db.SetMaxOpenConns(1)
		checkFirst(t, dc.dirty(ctx(t), db))
		got := dc.observe(t, db)
		closeEnded(t, s, db)
		t.Logf("plain %s driver, one connection: the next user sees %q (clean: %q)", s.name, got, dc.want)
	})
	t.Run("pool_trust_functions", func(t *testing.T) {
		trusted := withParams(dsn, "pool_max_conns=1", "pool_trust_functions=true")
		if err := pooldriver.New(trusted).Err(); err != nil {
			t.Skipf("pool_trust_functions is not accepted by this build of pooldriver yet: %v", err)
		}
		db := sql.OpenDB(pooldriver.New(trusted))
		defer db.Close()
		checkFirst(t, dc.dirty(ctx(t), db))
		got := dc.observe(t, db)
		closeEnded(t, s, db)
		switch {
		case dc.builtin:
			t.Logf("pool_trust_functions=true: the next user sees %q (clean: %q)", got, dc.want)
		case dc.unvouched || dc.reported || dc.shown:
			assert.Equal(t, dc.want, got, "SQL run unseen, a change its text shows or the server reports, counts though the user trusts their functions")
		default:
			assert.NotEqual(t, dc.want, got,
				"the user vouched for a function that changes the session: the next user should see the change")
		}
	})
}

// closeEnded closes db, the plain driver's or a trusting pool's, whose one
// session still holds the first user's change, and waits until the server
// has ended that session. A session ends on the server a moment after its
// client closes it, longer on a loaded machine, and holds its locks until
// then: the next subtest's first user, whose routine takes the same named
// lock without waiting (GET_LOCK(name, 0) returns 0, no error), would not
// get it, and pool_trust_functions would find no change to hand on (or a
// mode find the lock free without having been dirtied at all).
func closeEnded(t *testing.T, s server, db *sql.DB) {
	t.Helper()
	id := backendID(t, db, ctx(t), s)
	_ = db.Close()
	q := "SELECT count(*) FROM pg_stat_activity WHERE pid = $1"
	if s.name == "mysql" {
		q = "SELECT count(*) FROM information_schema.PROCESSLIST WHERE ID = ?"
	}
	waitFor(t, fmt.Sprintf("session %d ended on the server", id), func() bool { return s.adminInt(t, q, id) == 0 })
}

// inTx runs queries in a *sql.Tx of r, and commits it: r is a *sql.DB or
// a *sql.Conn; in a mode whose statements already run in a *sql.Tx (r is
// one), they run in that one.
func inTx(queries ...string) func(ctx context.Context, r runner) error {
	return func(ctx context.Context, r runner) error {
		b, ok := r.(interface {
			BeginTx(context.Context, *sql.TxOptions) (*sql.Tx, error)
		})
		if !ok {
			return execAll(queries...)(ctx, r)
		}
		tx, err := b.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		if err := execAll(queries...)(ctx, tx); err != nil {
			_ = tx.Rollback()
			return err
		}
		return tx.Commit()
	}
}

// routine creates a function or procedure (kind) from its definition
// (what follows CREATE kind name), dropped when the test ends, and returns
// its name.
func routine(t *testing.T, s server, kind, prefix, definition string) string {
	t.Helper()
	name := unique(prefix)
	s.adminExec(t, "CREATE "+kind+" "+name+definition)
	t.Cleanup(func() {
		if _, err := s.admin(t).ExecContext(context.Background(), "DROP "+kind+" "+name); err != nil {
			t.Errorf("dropping %s: %v", name, err)
		}
	})
	return name
}

// TestDefaultDenyPostgresRole: a function that switches the role with
// set_config('role', r, false) between two roles that are not superusers.
// PostgreSQL reports neither the role nor a change of is_superuser or
// session_authorization, so only the call itself can tell.
func TestDefaultDenyPostgresRole(t *testing.T) {
	forServer(t, "postgres", func(t *testing.T, s server) {
		app, target := unique("pd_app"), unique("pd_target")
		s.adminExec(t, "CREATE ROLE "+app+" LOGIN")
		s.adminExec(t, "CREATE ROLE "+target)
		s.adminExec(t, "GRANT "+target+" TO "+app)
		t.Cleanup(func() {
			for _, r := range []string{app, target} {
				if _, err := s.admin(t).ExecContext(context.Background(), "DROP ROLE "+r); err != nil {
					t.Errorf("dropping role %s: %v", r, err)
				}
			}
		})
		become := routine(t, s, "FUNCTION", "pd_become", "(r text) RETURNS text LANGUAGE sql AS $$ SELECT set_config('role', r, false) $$")
		cfg, err := pgx.ParseConfig(s.dsn)
		require.NoError(t, err)
		dsn := strings.Replace(s.dsn, "://"+cfg.User+"@", "://"+app+"@", 1)
		require.NotEqual(t, s.dsn, dsn, "the test DSN names its user before '@'")
		checkDenied(t, s, dsn, denyCase{
			dirty:   execAll(fmt.Sprintf("SELECT %s('%s')", become, target)),
			observe: asks("SELECT current_user::text"),
			want:    app,
		})
	})
}

// TestDefaultDenyPostgresSearchPath: search_path changed by a user's
// function, by a write to pg_settings (whose rule calls set_config) and by
// set_config run from a string (query_to_xml): PostgreSQL 15 does not
// report search_path, and the next user's INSERT landed in another schema.
func TestDefaultDenyPostgresSearchPath(t *testing.T) {
	forServer(t, "postgres", func(t *testing.T, s server) {
		tbl := s.table(t, "pd_land", "a int")
		evil := unique("pd_evil")
		s.adminExec(t, "CREATE SCHEMA "+evil)
		t.Cleanup(func() {
			if _, err := s.admin(t).ExecContext(context.Background(), "DROP SCHEMA "+evil+" CASCADE"); err != nil {
				t.Errorf("dropping schema %s: %v", evil, err)
			}
		})
		s.adminExec(t, "CREATE TABLE "+evil+"."+tbl+" (a int)")
		path := evil + ", public"
		setPath := routine(t, s, "FUNCTION", "pd_path", "() RETURNS text LANGUAGE sql AS $$ SELECT set_config('search_path', '"+path+"', false) $$")
		// Where the next user's INSERT lands.
		landed := asks("WITH i AS (INSERT INTO " + tbl + " (a) VALUES (1) RETURNING tableoid) " +
			"SELECT n.nspname::text FROM i JOIN pg_class c ON c.oid = i.tableoid JOIN pg_namespace n ON n.oid = c.relnamespace")
		for _, tc := range []struct {
			name, query string
			unvouched   bool
		}{
			{"function", "SELECT " + setPath + "()", false},
			{"pg_settings", "UPDATE pg_settings SET setting = '" + path + "' WHERE name = 'search_path'", true},
			{"query_to_xml", "SELECT query_to_xml('select set_config(''search_path'', ''" + path + "'', false)', true, true, '')", true},
		} {
			t.Run(tc.name, func(t *testing.T) {
				checkDenied(t, s, s.dsn, denyCase{dirty: execAll(tc.query), observe: landed, want: "public", unvouched: tc.unvouched})
			})
		}
		// The same call inside a *sql.Tx, committed: its statements are
		// judged too, not only its COMMIT.
		t.Run("function in a *sql.Tx", func(t *testing.T) {
			checkDenied(t, s, s.dsn, denyCase{dirty: inTx("SELECT " + setPath + "()"), observe: landed, want: "public"})
		})
	})
}

// TestDefaultDenyPostgresAdvisoryLock: a function that takes a session
// advisory lock; the next user, from another connection, must be able to
// take it.
func TestDefaultDenyPostgresAdvisoryLock(t *testing.T) {
	forServer(t, "postgres", func(t *testing.T, s server) {
		lock := routine(t, s, "FUNCTION", "pd_lock", "(k bigint) RETURNS void LANGUAGE sql AS $$ SELECT pg_advisory_lock(k) $$")
		const key = 35036
		checkDenied(t, s, s.dsn, denyCase{
			dirty:   execAll(fmt.Sprintf("SELECT %s(%d)", lock, key)),
			observe: pgLockFree(s, key),
			want:    "free: true",
		})
	})
}

// TestDefaultDenyPostgresPrepared: a function that prepares statements
// with SQL PREPARE (one under a name that needs quoting). The reset keeps
// the statements pgx prepared over the protocol and deallocates these by
// name, so the next user sees none of them.
func TestDefaultDenyPostgresPrepared(t *testing.T) {
	forServer(t, "postgres", func(t *testing.T, s server) {
		prep := routine(t, s, "FUNCTION", "pd_prep", `() RETURNS int LANGUAGE plpgsql AS $$ BEGIN `+
			`EXECUTE 'PREPARE pd_prep_plain AS SELECT 1'; `+
			`EXECUTE 'PREPARE "pd prep; ""odd""" AS SELECT 2'; RETURN 1; END $$`)
		checkDenied(t, s, s.dsn, denyCase{
			dirty:   execAll("SELECT " + prep + "()"),
			observe: asks("SELECT count(*)::text FROM pg_prepared_statements WHERE from_sql"),
			want:    "0",
		})
	})
}

// mariadbDSNs are the ways the MariaDB tests connect: with the wire
// watched, and compressed, where the dialect sees no status flags at all.
func mariadbDSNs(s server) []struct{ name, dsn string } {
	return []struct{ name, dsn string }{{"plain wire", s.dsn}, {"compress", withParams(s.dsn, "compress=true")}}
}

// TestDefaultDenyMariaDBFailedFunction (issue 35, item 8): a function that
// sets a user variable or time_zone and then SIGNALs. The ERR packet
// carries no status flags, and a failed SELECT used to count as harmless.
func TestDefaultDenyMariaDBFailedFunction(t *testing.T) {
	forServer(t, "mysql", func(t *testing.T, s server) {
		var zone string
		require.NoError(t, s.admin(t).QueryRowContext(ctx(t), "SELECT @@global.time_zone").Scan(&zone))
		setVar := routine(t, s, "FUNCTION", "pd_fail_var",
			"() RETURNS INT BEGIN SET @pd_v = 'leaked'; SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'after a change'; RETURN 1; END")
		setZone := routine(t, s, "FUNCTION", "pd_fail_tz",
			"() RETURNS INT BEGIN SET time_zone = '+05:00'; SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'after a change'; RETURN 1; END")
		quietVar := routine(t, s, "FUNCTION", "pd_quiet_var", "() RETURNS INT BEGIN SET @pd_q = 'leaked'; RETURN 1; END")
		for _, d := range mariadbDSNs(s) {
			t.Run(d.name, func(t *testing.T) {
				t.Run("user variable in a *sql.Tx", func(t *testing.T) {
					checkDenied(t, s, d.dsn, denyCase{
						dirty:    inTx("SELECT " + quietVar + "()"),
						observe:  asks("SELECT coalesce(@pd_q, '')"),
						want:     "",
						reported: d.name == "plain wire",
					})
				})
				t.Run("user variable", func(t *testing.T) {
					checkDenied(t, s, d.dsn, denyCase{
						dirty: execAll("SELECT " + setVar + "()"),
						fails: true,
						// A failed statement that ran code counts even when trusted,
						// where the wire shows the ERR.
						reported: d.name == "plain wire",
						observe:  asks("SELECT coalesce(@pd_v, '')"),
						want:     "",
					})
				})
				t.Run("time_zone", func(t *testing.T) {
					checkDenied(t, s, d.dsn, denyCase{
						dirty: execAll("SELECT " + setZone + "()"),
						fails: true,
						// A failed statement that ran code counts even when trusted,
						// where the wire shows the ERR.
						reported: d.name == "plain wire",
						observe:  asks("SELECT @@session.time_zone"),
						want:     zone,
					})
				})
			})
		}
	})
}

// TestDefaultDenyMariaDBQuietProcedure (issue 35, item 7): a procedure that
// turns session_track_state_change off, then creates a temporary table
// that shadows a real one: the server reports nothing, and the next
// user's INSERT went into the temporary table and vanished.
func TestDefaultDenyMariaDBQuietProcedure(t *testing.T) {
	forServer(t, "mysql", func(t *testing.T, s server) {
		tbl := s.table(t, "pd_shadowed", "a int")
		quiet := routine(t, s, "PROCEDURE", "pd_quiet",
			"() BEGIN SET SESSION session_track_state_change = OFF; CREATE TEMPORARY TABLE "+tbl+" (a int); END")
		for _, d := range mariadbDSNs(s) {
			t.Run(d.name, func(t *testing.T) {
				checkDenied(t, s, d.dsn, denyCase{
					dirty: execAll("CALL " + quiet + "()"),
					observe: func(t *testing.T, db *sql.DB) string {
						s.adminExec(t, "DELETE FROM "+tbl)
						_, err := db.ExecContext(ctx(t), "INSERT INTO "+tbl+" (a) VALUES (1)")
						require.NoError(t, err)
						return fmt.Sprintf("rows in the table: %d", s.adminInt(t, "SELECT count(*) FROM "+tbl))
					},
					want: "rows in the table: 1",
				})
			})
		}
	})
}
