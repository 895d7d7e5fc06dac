package integration

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/fstest"
	"time"

	gomysql "github.com/go-sql-driver/mysql"
	"github.com/golang-migrate/migrate/v4"
	migdb "github.com/golang-migrate/migrate/v4/database"
	migmysql "github.com/golang-migrate/migrate/v4/database/mysql"
	migpostgres "github.com/golang-migrate/migrate/v4/database/postgres"
	"github.com/golang-migrate/migrate/v4/source/iofs"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
	"github.com/stretchr/testify/require"

	"github.com/pooldriver/pooldriver"
)

// Migration tools serialize runs with a session-level lock taken on a
// *sql.Conn they get from the application's *sql.DB: golang-migrate with
// pg_advisory_lock / GET_LOCK, goose with pg_try_advisory_lock. Lock, the
// migration statements and unlock must all reach the same server session,
// while the rest of the application keeps using the same *sql.DB. These
// tests run each tool through the real driver and through pooldriver in
// both modes and expect the same outcome: every run succeeds and no lock is
// left behind.

// migrateCycles is how many Up, Up (no change), Down sequences a test runs.
const migrateCycles = 20

// migrateOpLimit bounds one migration call; the tools' own lock timeouts
// (10s) are shorter, so a lock that cannot be taken is an error, and only a
// call stuck elsewhere hits this. A guard against a hang: a minute, for a
// call that takes a second on a machine at load 20.
const migrateOpLimit = time.Minute

// migrateLockTimeout is how long the tools, and PostgreSQL (lock_timeout),
// wait for a lock.
const migrateLockTimeout = 10 * time.Second

// migrateVias are the ways a test opens its *sql.DB, also the subtest names.
var migrateVias = []string{"plain", "pooldriver-transaction", "pooldriver-session"}

// Both tools create a table and insert a row into it; the same SQL works on
// both servers.
const (
	migCreate = "CREATE TABLE mig_item (id int PRIMARY KEY, name varchar(40) NOT NULL)"
	migDrop   = "DROP TABLE mig_item"
	migInsert = "INSERT INTO mig_item (id, name) VALUES (1, 'first')"
	migDelete = "DELETE FROM mig_item WHERE id = 1"
)

// golangMigrateFS holds golang-migrate's migrations, one statement per file
// (the MySQL driver would need multiStatements for more).
var golangMigrateFS = fstest.MapFS{
	"1_create_item.up.sql":   {Data: []byte(migCreate)},
	"1_create_item.down.sql": {Data: []byte(migDrop)},
	"2_insert_item.up.sql":   {Data: []byte(migInsert)},
	"2_insert_item.down.sql": {Data: []byte(migDelete)},
}

// gooseFS holds the same migrations for goose.
var gooseFS = fstest.MapFS{
	"00001_create_item.sql": {Data: []byte("-- +goose Up\n" + migCreate + ";\n\n-- +goose Down\n" + migDrop + ";\n")},
	"00002_insert_item.sql": {Data: []byte("-- +goose Up\n" + migInsert + ";\n\n-- +goose Down\n" + migDelete + ";\n")},
}

// migTarget is a test's private namespace on a server, where the tool keeps
// its migrations table and creates its table: a schema on PostgreSQL (set
// as search_path), a database on MariaDB. golang-migrate's lock name is
// derived from it, so parallel tests do not contend.
type migTarget struct {
	s    server
	ns   string // schema or database name
	app  string // PostgreSQL application_name of the test's sessions
	dsn  string // pooldriver DSN of the namespace, without pool parameters
	load string // qualified name of the table the background load reads
}

func newMigTarget(t *testing.T, s server) *migTarget {
	t.Helper()
	tg := &migTarget{s: s, ns: unique("mig"), app: unique("mig")}
	if s.name == "postgres" {
		s.adminExec(t, "CREATE SCHEMA "+tg.ns)
		t.Cleanup(func() {
			if _, err := s.admin(t).ExecContext(context.Background(), "DROP SCHEMA "+tg.ns+" CASCADE"); err != nil {
				t.Errorf("dropping schema %s: %v", tg.ns, err)
			}
		})
		// lock_timeout bounds pg_advisory_lock, which golang-migrate calls
		// without a deadline.
		tg.dsn = withParams(s.dsn, "search_path="+tg.ns, "application_name="+tg.app,
			fmt.Sprintf("lock_timeout=%d", migrateLockTimeout.Milliseconds()))
	} else {
		s.adminExec(t, "CREATE DATABASE "+tg.ns)
		t.Cleanup(func() {
			if _, err := s.admin(t).ExecContext(context.Background(), "DROP DATABASE "+tg.ns); err != nil {
				t.Errorf("dropping database %s: %v", tg.ns, err)
			}
		})
		cfg, err := gomysql.ParseDSN(strings.TrimPrefix(s.dsn, "mysql://"))
		require.NoError(t, err)
		cfg.DBName = tg.ns
		tg.dsn = "mysql://" + cfg.FormatDSN()
	}
	tg.load = tg.ns + ".mig_load"
	s.adminExec(t, "CREATE TABLE "+tg.load+" (id int PRIMARY KEY)")
	s.adminExec(t, "INSERT INTO "+tg.load+" (id) VALUES (1), (2), (3)")
	return tg
}

// open opens the test's *sql.DB on the namespace: through the real driver
// (plain) or through pooldriver with 4 server connections in the given
// mode. It is closed when the test ends.
func (tg *migTarget) open(t *testing.T, via string) *sql.DB {
	t.Helper()
	var db *sql.DB
	var err error
	switch via {
	case "plain":
		if tg.s.name == "postgres" {
			db, err = sql.Open("pgx", tg.dsn)
		} else {
			db, err = sql.Open("mysql", strings.TrimPrefix(tg.dsn, "mysql://"))
		}
		if err == nil {
			db.SetMaxOpenConns(4)
		}
	case "pooldriver-transaction", "pooldriver-session":
		mode := strings.TrimPrefix(via, "pooldriver-")
		db, err = pooldriver.Open(withParams(tg.dsn, "pool_max_conns=4", "pool_mode="+mode))
	default:
		t.Fatalf("unknown via %q", via)
	}
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// heldLocks returns how many advisory locks the test's sessions hold (or
// wait for), with a description of them. On PostgreSQL that is every
// advisory lock in the test database of a session with the test's
// application_name; on MariaDB, whether the named lock is taken.
func (tg *migTarget) heldLocks(t *testing.T, name string) (int64, string) {
	t.Helper()
	var n int64
	var desc string
	if tg.s.name == "postgres" {
		q := `SELECT count(*), coalesce(string_agg(format('pid %s key %s granted %s',
				l.pid, (l.classid::text::bigint << 32) | l.objid::text::bigint, l.granted), '; '), '')
			FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
			WHERE l.locktype = 'advisory' AND a.application_name = $1
			AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())`
		require.NoError(t, tg.s.admin(t).QueryRowContext(ctx(t), q, tg.app).Scan(&n, &desc))
		return n, desc
	}
	var free, holder sql.NullInt64
	require.NoError(t, tg.s.admin(t).QueryRowContext(ctx(t),
		"SELECT IS_FREE_LOCK(?), IS_USED_LOCK(?)", name, name).Scan(&free, &holder))
	if free.Int64 == 1 {
		return 0, ""
	}
	return 1, fmt.Sprintf("lock %q held by connection %d", name, holder.Int64)
}

// checkNoLock reports a lock left held after what, once per test (it is the
// same lock every time).
func (tg *migTarget) checkNoLock(t *testing.T, name, what string, reported *bool) {
	t.Helper()
	if n, desc := tg.heldLocks(t, name); n != 0 && !*reported {
		*reported = true
		t.Errorf("after %s: %d advisory lock(s) still held: %s", what, n, desc)
	}
}

// bounded runs f, giving up after limit; a call still running then is left
// behind, and ok is false.
func bounded(limit time.Duration, f func() error) (err error, ok bool) {
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err, true
	case <-time.After(limit):
		return nil, false
	}
}

// within runs a migration call, failing the test if it hangs.
func within(t *testing.T, what string, f func() error) error {
	t.Helper()
	err, ok := bounded(migrateOpLimit, f)
	if !ok {
		t.Fatalf("%s: still running after %v", what, migrateOpLimit)
	}
	return err
}

// migLoad is the rest of the application: goroutines running queries on
// the test's *sql.DB without pause while the migrations run.
type migLoad struct {
	stop     chan struct{}
	wg       sync.WaitGroup
	once     sync.Once
	selects  atomic.Int64
	counts   atomic.Int64
	mu       sync.Mutex
	firstErr error
}

func startMigLoad(t *testing.T, db *sql.DB, table string) *migLoad {
	l := &migLoad{stop: make(chan struct{})}
	run := func(n *atomic.Int64, query string) {
		for {
			select {
			case <-l.stop:
				return
			default:
			}
			c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			var v int64
			err := db.QueryRowContext(c, query).Scan(&v)
			cancel()
			if err != nil {
				l.mu.Lock()
				if l.firstErr == nil {
					l.firstErr = fmt.Errorf("%s: %w", query, err)
				}
				l.mu.Unlock()
				return
			}
			n.Add(1)
		}
	}
	l.wg.Go(func() { run(&l.selects, "SELECT 1") })
	l.wg.Go(func() { run(&l.counts, "SELECT count(*) FROM "+table) })
	t.Cleanup(l.halt) // before the *sql.DB is closed
	return l
}

func (l *migLoad) halt() {
	l.once.Do(func() { close(l.stop) })
	l.wg.Wait()
}

// finish stops the load and checks that both goroutines ran queries and
// none failed.
func (l *migLoad) finish(t *testing.T) {
	t.Helper()
	l.halt()
	l.mu.Lock()
	defer l.mu.Unlock()
	require.NoError(t, l.firstErr, "background query")
	require.Positive(t, l.selects.Load(), "SELECT 1 never ran")
	require.Positive(t, l.counts.Load(), "SELECT count(*) never ran")
	t.Logf("background queries during the migrations: %d SELECT 1, %d SELECT count(*)", l.selects.Load(), l.counts.Load())
}

// forEachVia runs f as a parallel subtest per way of opening the *sql.DB,
// each in a namespace of its own.
func forEachVia(t *testing.T, s server, f func(t *testing.T, tg *migTarget, db *sql.DB)) {
	t.Helper()
	for _, via := range migrateVias {
		t.Run(via, func(t *testing.T) {
			t.Parallel()
			tg := newMigTarget(t, s)
			f(t, tg, tg.open(t, via))
		})
	}
}

// TestMigrateGolangMigrate: golang-migrate, with its postgres and mysql
// drivers over the test's *sql.DB (postgres.WithInstance/mysql.WithInstance
// keep one *sql.Conn and lock on it), runs Up, Up, Down 20 times while two
// goroutines query the same *sql.DB. Every call succeeds, no advisory lock
// is left held after any of them, and the migrations table ends empty (no
// version, not dirty).
func TestMigrateGolangMigrate(t *testing.T) {
	longTest(t)
	t.Parallel()
	forEachServer(t, func(t *testing.T, s server) {
		t.Parallel()
		forEachVia(t, s, func(t *testing.T, tg *migTarget, db *sql.DB) {
			const table = "schema_migrations"
			src, err := iofs.New(golangMigrateFS, ".")
			require.NoError(t, err)

			load := startMigLoad(t, db, tg.load)

			// The driver locks while it creates its table, so this is
			// bounded too.
			var drv migdb.Driver
			err = within(t, "WithInstance", func() error {
				var err error
				if s.name == "postgres" {
					drv, err = migpostgres.WithInstance(db, &migpostgres.Config{
						MigrationsTable: table, StatementTimeout: migrateLockTimeout})
				} else {
					drv, err = migmysql.WithInstance(db, &migmysql.Config{
						MigrationsTable: table, StatementTimeout: migrateLockTimeout})
				}
				return err
			})
			require.NoError(t, err, "WithInstance")
			m, err := migrate.NewWithInstance("iofs", src, s.name, drv)
			require.NoError(t, err)
			m.LockTimeout = migrateLockTimeout
			t.Cleanup(func() { // closes db too; a hung call would block it
				err, ok := bounded(migrateOpLimit, func() error {
					srcErr, dbErr := m.Close()
					return errors.Join(srcErr, dbErr)
				})
				if !ok {
					t.Errorf("closing migrate: still running after %v", migrateOpLimit)
				} else if err != nil {
					t.Errorf("closing migrate: %v", err)
				}
			})

			// The MySQL driver's lock is GET_LOCK(name, 10), where name is
			// GenerateAdvisoryLockId("<database>:<migrations table>")
			// (mysql.go, Lock); PostgreSQL's locks are found by session.
			lockName, err := migdb.GenerateAdvisoryLockId(tg.ns + ":" + table)
			require.NoError(t, err)

			var reported bool
			tg.checkNoLock(t, lockName, "WithInstance", &reported)
			version := func(wantVersion uint, wantNil bool, what string) {
				t.Helper()
				v, dirty, err := m.Version()
				if wantNil {
					require.ErrorIs(t, err, migrate.ErrNilVersion, "%s: version %d dirty %v", what, v, dirty)
					return
				}
				require.NoError(t, err, what)
				require.Equal(t, wantVersion, v, what)
				require.False(t, dirty, what)
			}
			for i := 1; i <= migrateCycles; i++ {
				what := fmt.Sprintf("cycle %d: Up", i)
				require.NoError(t, within(t, what, m.Up), what)
				tg.checkNoLock(t, lockName, what, &reported)
				version(2, false, what)
				var name string
				require.NoError(t, db.QueryRowContext(ctx(t), "SELECT name FROM mig_item WHERE id = 1").Scan(&name), what)
				require.Equal(t, "first", name, what)

				what = fmt.Sprintf("cycle %d: second Up", i)
				if err := within(t, what, m.Up); !errors.Is(err, migrate.ErrNoChange) {
					t.Fatalf("%s: got %v, want %v", what, err, migrate.ErrNoChange)
				}
				tg.checkNoLock(t, lockName, what, &reported)
				version(2, false, what)

				what = fmt.Sprintf("cycle %d: Down", i)
				require.NoError(t, within(t, what, m.Down), what)
				tg.checkNoLock(t, lockName, what, &reported)
				version(0, true, what)
			}
			load.finish(t)

			n, desc := tg.heldLocks(t, lockName)
			require.Zero(t, n, "advisory locks held at the end: %s", desc)
			require.Zero(t, tg.s.adminInt(t, "SELECT count(*) FROM "+tg.ns+"."+table),
				"the migrations table keeps a version after Down")

			// The lock check sees the driver's lock: held between Lock and
			// Unlock, and only then.
			require.NoError(t, within(t, "Lock", drv.Lock))
			n, desc = tg.heldLocks(t, lockName)
			require.EqualValues(t, 1, n, "advisory locks held after Lock: %s", desc)
			require.NoError(t, within(t, "Unlock", drv.Unlock))
			n, desc = tg.heldLocks(t, lockName)
			require.Zero(t, n, "advisory locks held after Unlock: %s", desc)
		})
	})
}

// TestMigrateGoose: goose's Provider with PostgreSQL's session locker
// (pg_try_advisory_lock on a *sql.Conn of the test's *sql.DB) runs Up, Up,
// DownTo(0) 20 times while two goroutines query the same *sql.DB. Every call
// succeeds, no advisory lock is left held after any of them, and the
// version table ends at version 0.
func TestMigrateGoose(t *testing.T) {
	longTest(t)
	t.Parallel()
	forServer(t, "postgres", func(t *testing.T, s server) {
		t.Parallel()
		forEachVia(t, s, func(t *testing.T, tg *migTarget, db *sql.DB) {
			// A lock id of its own: goose's default is shared by every
			// test in the database.
			lockID := 1<<40 + rand.Int64N(1<<30)
			locker, err := lock.NewPostgresSessionLocker(lock.WithLockID(lockID),
				lock.WithLockTimeout(1, uint64(migrateLockTimeout/time.Second)),
				lock.WithUnlockTimeout(1, 5))
			require.NoError(t, err)
			p, err := goose.NewProvider(goose.DialectPostgres, db, gooseFS,
				goose.WithSessionLocker(locker), goose.WithDisableGlobalRegistry(true))
			require.NoError(t, err)

			load := startMigLoad(t, db, tg.load)

			var reported bool
			run := func(what string, want int, f func(context.Context) ([]*goose.MigrationResult, error)) {
				t.Helper()
				var res []*goose.MigrationResult
				err := within(t, what, func() error {
					c, cancel := context.WithTimeout(context.Background(), migrateOpLimit)
					defer cancel()
					var err error
					res, err = f(c)
					return err
				})
				require.NoError(t, err, what)
				require.Len(t, res, want, what)
				tg.checkNoLock(t, "", what, &reported)
			}
			version := func(want int64, what string) {
				t.Helper()
				v, err := p.GetDBVersion(ctx(t))
				require.NoError(t, err, what)
				require.Equal(t, want, v, what)
			}
			down := func(c context.Context) ([]*goose.MigrationResult, error) { return p.DownTo(c, 0) }
			for i := 1; i <= migrateCycles; i++ {
				what := fmt.Sprintf("cycle %d: Up", i)
				run(what, 2, p.Up)
				version(2, what)
				var name string
				require.NoError(t, db.QueryRowContext(ctx(t), "SELECT name FROM mig_item WHERE id = 1").Scan(&name), what)
				require.Equal(t, "first", name, what)

				what = fmt.Sprintf("cycle %d: second Up", i)
				run(what, 0, p.Up)
				version(2, what)

				what = fmt.Sprintf("cycle %d: DownTo(0)", i)
				run(what, 2, down)
				version(0, what)
			}
			load.finish(t)

			n, desc := tg.heldLocks(t, "")
			require.Zero(t, n, "advisory locks held at the end: %s", desc)
			require.Zero(t, tg.s.adminInt(t, "SELECT max(version_id) FROM "+tg.ns+"."+goose.DefaultTablename),
				"goose's version table after DownTo(0)")

			// The lock check sees the locker's lock: held between
			// SessionLock and SessionUnlock, and only then.
			conn, err := db.Conn(ctx(t))
			require.NoError(t, err)
			defer conn.Close()
			require.NoError(t, within(t, "SessionLock", func() error { return locker.SessionLock(ctx(t), conn) }))
			n, desc = tg.heldLocks(t, "")
			require.EqualValues(t, 1, n, "advisory locks held after SessionLock: %s", desc)
			require.NoError(t, within(t, "SessionUnlock", func() error { return locker.SessionUnlock(ctx(t), conn) }))
			n, desc = tg.heldLocks(t, "")
			require.Zero(t, n, "advisory locks held after SessionUnlock: %s", desc)
		})
	})
}
