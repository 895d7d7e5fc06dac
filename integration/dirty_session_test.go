package integration

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pooldriver/pooldriver"
)

// Issue 35, "never a dirty connection": each test here lets a first user
// change the session in a way pooldriver used to miss, then asks, as the
// next user of the same connection (pool_max_conns=1, so the next user
// surely gets it, or its replacement), what the session looks like. It runs
// in every mode that applies and, side by side, with the plain driver and
// one connection, whose outcome is logged, not asserted: database/sql hands
// a session on as it is.

// dirtyMode is one way the first user runs its statements (issue 45: every
// case in every mode).
type dirtyMode struct {
	name   string
	params []string // DSN keys
	task   bool     // inside pooldriver.WithTask
	mode   pooldriver.Mode
	via    via  // what the statements run on
	wrap   bool // pooldriver.Wrap of the plain driver's connector, not New
}

// via is what the first user's statements run on.
type via int

const (
	viaDB   via = iota // the *sql.DB (with the task's context, in a task)
	viaTx              // a *sql.Tx of the *sql.DB, committed (rolled back if a statement fails)
	viaConn            // a *sql.Conn of the *sql.DB, closed afterwards
)

var dirtyModes = []dirtyMode{
	{name: "no task"},
	{name: "transaction task", task: true, mode: pooldriver.TransactionMode},
	{name: "session task", task: true, mode: pooldriver.SessionMode},
	{name: "pool_reset_always", params: []string{"pool_reset_always=true"}},
	{name: "*sql.Tx", via: viaTx},
	{name: "*sql.Conn", via: viaConn},
	{name: "Wrap", wrap: true},
}

// open opens the *sql.DB of mode m on dsn (a pooldriver DSN of s), with one
// physical connection.
func (m dirtyMode) open(t *testing.T, s server, dsn string) *sql.DB {
	t.Helper()
	if m.wrap {
		c := pooldriver.Wrap(plainConnector(t, s, dsn), pooldriver.WithMaxConns(1))
		require.NoError(t, c.Err())
		return sql.OpenDB(c)
	}
	return sql.OpenDB(pooldriver.New(withParams(dsn, append([]string{"pool_max_conns=1"}, m.params...)...)))
}

// run runs dirty as the first user of db in mode m, and ends what it ran
// in: the task, the *sql.Tx (committed; rolled back if dirty failed), the
// *sql.Conn (closed).
func (m dirtyMode) run(c context.Context, db *sql.DB, dirty func(ctx context.Context, r runner) error) error {
	switch m.via {
	case viaTx:
		tx, err := db.BeginTx(c, nil)
		if err != nil {
			return err
		}
		if err := dirty(c, tx); err != nil {
			_ = tx.Rollback()
			return err
		}
		return tx.Commit()
	case viaConn:
		conn, err := db.Conn(c)
		if err != nil {
			return err
		}
		err = dirty(c, conn)
		if cerr := conn.Close(); err == nil {
			err = cerr
		}
		return err
	}
	end := func() {}
	if m.task {
		c, end = pooldriver.WithTask(c, m.mode)
	}
	defer end()
	return dirty(c, db)
}

// skips says why mode m cannot run a case that opts out of *sql.Tx
// (noTx: why), or "".
func (m dirtyMode) skips(noTx string) string {
	if m.via == viaTx && noTx != "" {
		return noTx
	}
	return ""
}

// leakCase is one way of dirtying a session: dirty runs as the first user,
// observe as the next one, whose answer must be want.
type leakCase struct {
	dirty   func(ctx context.Context, r runner) error
	observe string // a query returning one text value
	want    string
	// noTx, if set, says why the case cannot run in a *sql.Tx (a
	// statement the server refuses inside a transaction block).
	noTx string
	// wantWrap, if set, is want through Wrap, where the session starts as
	// the plain driver starts it, not as pooldriver's dialect does.
	wantWrap string
}

// checkNoLeak runs lc on dsn (a pooldriver DSN of s) in every mode and with
// the plain driver.
func checkNoLeak(t *testing.T, s server, dsn string, lc leakCase) {
	t.Helper()
	for _, m := range dirtyModes {
		t.Run(m.name, func(t *testing.T) {
			if why := m.skips(lc.noTx); why != "" {
				t.Skip(why)
			}
			db := m.open(t, s, dsn)
			defer db.Close()
			require.NoError(t, m.run(ctx(t), db, lc.dirty), "the first user's statements")
			want := lc.want
			if m.wrap && lc.wantWrap != "" {
				want = lc.wantWrap
			}
			assert.Equal(t, want, nextUser(t, db, lc.observe), "what the next user sees")
		})
	}
	t.Run("plain", func(t *testing.T) {
		db := sql.OpenDB(plainConnector(t, s, dsn))
		defer db.Close()
		db.SetMaxOpenConns(1)
		require.NoError(t, lc.dirty(ctx(t), db))
		got := nextUser(t, db, lc.observe)
		t.Logf("plain %s driver, one connection: the next user sees %q (clean: %q)", s.name, got, lc.want)
	})
}

// nextUser runs query as a new user of db, outside any task.
func nextUser(t *testing.T, db *sql.DB, query string) string {
	t.Helper()
	var v sql.NullString
	require.NoError(t, db.QueryRowContext(ctx(t), query).Scan(&v), query)
	return v.String
}

// execAll runs the statements one by one, each a hold of its own.
func execAll(queries ...string) func(ctx context.Context, r runner) error {
	return func(ctx context.Context, r runner) error {
		for _, q := range queries {
			if _, err := r.ExecContext(ctx, q); err != nil {
				return fmt.Errorf("%q: %w", q, err)
			}
		}
		return nil
	}
}

// pgRole creates a role that the test's user may SET ROLE to, dropped when
// the test ends.
func pgRole(t *testing.T, s server) string {
	t.Helper()
	role := unique("pd_role")
	s.adminExec(t, "CREATE ROLE "+role)
	t.Cleanup(func() {
		if _, err := s.admin(t).ExecContext(context.Background(), "DROP ROLE "+role); err != nil {
			t.Errorf("dropping role %s: %v", role, err)
		}
	})
	return role
}

// pgDefault returns the setting's value in a new session of the test's
// user, as the next user should see it.
func pgDefault(t *testing.T, s server, name string) string {
	t.Helper()
	db, err := sql.Open("pgx", s.dsn)
	require.NoError(t, err)
	defer db.Close()
	var v string
	require.NoError(t, db.QueryRowContext(ctx(t), "SELECT current_setting($1)", name).Scan(&v))
	return v
}

// TestDirtyCommentEndedByCR (issue 35): PostgreSQL ends a -- comment at a
// lone '\r' too, so the statement after it runs; the lexer used to read it
// as part of the comment, and the change reached the next user.
func TestDirtyCommentEndedByCR(t *testing.T) {
	forServer(t, "postgres", func(t *testing.T, s server) {
		var user string
		require.NoError(t, s.admin(t).QueryRowContext(ctx(t), "SELECT current_user").Scan(&user))
		role := pgRole(t, s)
		t.Run("SET ROLE", func(t *testing.T) {
			checkNoLeak(t, s, s.dsn, leakCase{
				dirty:   execAll("-- x\rSET ROLE " + role),
				observe: "SELECT current_user",
				want:    user,
			})
		})
		t.Run("search_path", func(t *testing.T) {
			checkNoLeak(t, s, s.dsn, leakCase{
				dirty:   execAll("-- x\rSET search_path = pd_evil, public"),
				observe: "SELECT current_setting('search_path')",
				want:    pgDefault(t, s, "search_path"),
			})
		})
		t.Run("set_config", func(t *testing.T) {
			checkNoLeak(t, s, s.dsn, leakCase{
				dirty:   execAll("-- x\rSELECT set_config('statement_timeout', '4321', false)"),
				observe: "SELECT current_setting('statement_timeout')",
				want:    pgDefault(t, s, "statement_timeout"),
			})
		})
		t.Run("temporary table", func(t *testing.T) {
			checkNoLeak(t, s, s.dsn, leakCase{
				dirty:   execAll("-- x\rCREATE TEMP TABLE pd_accounts (a int)"),
				observe: "SELECT coalesce(to_regclass('pg_temp.pd_accounts')::text, '')",
				want:    "",
			})
		})
		t.Run("advisory lock", func(t *testing.T) {
			checkNoLeak(t, s, s.dsn, leakCase{
				dirty:   execAll("-- x\rSELECT pg_advisory_lock(35035)"),
				observe: "SELECT count(*)::text FROM pg_locks WHERE locktype = 'advisory' AND objid = 35035 AND pid = pg_backend_pid()",
				want:    "0",
			})
		})
	})
}

// pgSetter creates a function that sets a parameter for the session, as an
// application's helper may, dropped when the test ends: the statement that
// calls it says nothing of the change.
func pgSetter(t *testing.T, s server) string {
	t.Helper()
	fn := unique("pd_set")
	s.adminExec(t, "CREATE FUNCTION "+fn+"(k text, v text) RETURNS text LANGUAGE sql AS 'SELECT set_config(k, v, false)'")
	t.Cleanup(func() {
		if _, err := s.admin(t).ExecContext(context.Background(), "DROP FUNCTION "+fn); err != nil {
			t.Errorf("dropping %s: %v", fn, err)
		}
	})
	return fn
}

// TestDirtyReportedParameters (issue 35): a function that sets a parameter
// the server reports, other than the five pooldriver used to compare,
// changed what the next user's statements mean: their 'é' arrived as two
// characters, their literals lost a backslash, their writes failed.
func TestDirtyReportedParameters(t *testing.T) {
	forServer(t, "postgres", func(t *testing.T, s server) {
		fn := pgSetter(t, s)
		for _, tc := range []struct {
			name, value string
			observe     string
			want        string
		}{
			{"client_encoding", "LATIN1", "SELECT length('é')::text", "1"},
			{"standard_conforming_strings", "off", `SELECT length('a\b')::text`, "3"},
			{"default_transaction_read_only", "on", "SELECT current_setting('transaction_read_only')", "off"},
			{"IntervalStyle", "sql_standard", "SELECT (interval '1 day 2 hours')::text", "1 day 02:00:00"},
			{"application_name", "pd_other", "SELECT current_setting('application_name')", pgDefault(t, s, "application_name")},
		} {
			t.Run(tc.name, func(t *testing.T) {
				checkNoLeak(t, s, s.dsn, leakCase{
					dirty:   execAll(fmt.Sprintf("SELECT %s('%s', '%s')", fn, tc.name, tc.value)),
					observe: tc.observe,
					want:    tc.want,
				})
			})
		}
	})
}

// TestDirtyMariaDBRole (issue 35): COM_RESET_CONNECTION keeps the current
// role on MariaDB 10.11, so the next user of a connection whose user ran
// SET ROLE read what only the role may read.
func TestDirtyMariaDBRole(t *testing.T) {
	forServer(t, "mysql", func(t *testing.T, s server) {
		user := unique("pd_user")
		dsn := s.mysqlUser(t, user, "pw-"+user)
		role := unique("pd_role")
		s.adminExec(t, "CREATE ROLE "+role)
		t.Cleanup(func() {
			if _, err := s.admin(t).ExecContext(context.Background(), "DROP ROLE "+role); err != nil {
				t.Errorf("dropping role %s: %v", role, err)
			}
		})
		s.adminExec(t, fmt.Sprintf("GRANT %s TO '%s'@'%%'", role, user))
		checkNoLeak(t, s, dsn, leakCase{
			dirty:   execAll("SET ROLE " + role),
			observe: "SELECT coalesce(CURRENT_ROLE(), '')",
			want:    "",
		})
	})
}

// TestDirtyMariaDBDatabase (issue 35): with a DSN that names no database,
// a USE reached the next user, in every mode: COM_RESET_CONNECTION keeps
// the current database, and there is none to go back to.
func TestDirtyMariaDBDatabase(t *testing.T) {
	forServer(t, "mysql", func(t *testing.T, s server) {
		cfg, err := mysql.ParseDSN(strings.TrimPrefix(s.dsn, "mysql://"))
		require.NoError(t, err)
		db := cfg.DBName
		require.NotEmpty(t, db, "the test DSN names a database to USE")
		cfg.DBName = ""
		checkNoLeak(t, s, "mysql://"+cfg.FormatDSN(), leakCase{
			dirty:   execAll("USE " + db),
			observe: "SELECT coalesce(DATABASE(), '')",
			want:    "",
		})
	})
}

// TestDirtyMariaDBStartingSession: the reset puts back, in one SET, what
// the driver set up at login (the first charset of the DSN's list the server
// accepts, the DSN's system variables) and the session tracker, and goes
// back to the DSN's database after a USE of another one.
func TestDirtyMariaDBStartingSession(t *testing.T) {
	forServer(t, "mysql", func(t *testing.T, s server) {
		other := unique("pd_db")
		s.adminExec(t, "CREATE DATABASE "+other)
		t.Cleanup(func() {
			if _, err := s.admin(t).ExecContext(context.Background(), "DROP DATABASE "+other); err != nil {
				t.Errorf("dropping database %s: %v", other, err)
			}
		})
		cfg, err := mysql.ParseDSN(strings.TrimPrefix(s.dsn, "mysql://"))
		require.NoError(t, err)
		// utf16 cannot be a client's charset: the driver, and the reset,
		// go on to latin1.
		dsn := withParams(s.dsn, "charset=utf16,latin1", "sql_mode=%27ANSI_QUOTES%27")
		const observe = "SELECT CONCAT_WS(' ', DATABASE(), @@character_set_client, @@sql_mode, @@session_track_state_change)"
		// Through Wrap the session starts as the plain driver starts it:
		// no session tracker unless the server's default has one.
		var tracker string
		require.NoError(t, s.admin(t).QueryRowContext(ctx(t), "SELECT CONCAT_WS(' ', @@global.session_track_state_change)").Scan(&tracker))
		checkNoLeak(t, s, dsn, leakCase{
			dirty:    execAll("USE "+other, "SET NAMES utf8mb4, sql_mode = '', session_track_state_change = OFF"),
			observe:  observe,
			want:     cfg.DBName + " latin1 ANSI_QUOTES ON",
			wantWrap: cfg.DBName + " latin1 ANSI_QUOTES " + tracker,
		})
	})
}
