package integration

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib" // registers "pgx", for the admin connection
	"github.com/stretchr/testify/require"

	"github.com/pooldriver/pooldriver"
)

// The tests watch pooldriver from the server's side, through an admin
// connection that does not go through pooldriver: how many server
// connections a test's pool has, which transactions they hold open, and
// killing them.

var (
	adminMu sync.Mutex // protects admins
	admins  = map[string]*sql.DB{}
)

// admin returns the server's admin connection, shared by every test and
// closed by TestMain. It uses the real driver directly.
func (s server) admin(t *testing.T) *sql.DB {
	t.Helper()
	adminMu.Lock()
	defer adminMu.Unlock()
	if db := admins[s.name]; db != nil {
		return db
	}
	var db *sql.DB
	var err error
	if s.name == "postgres" {
		db, err = sql.Open("pgx", s.dsn)
	} else {
		db, err = sql.Open("mysql", strings.TrimPrefix(s.dsn, "mysql://"))
	}
	require.NoError(t, err)
	db.SetMaxOpenConns(4)
	admins[s.name] = db
	return db
}

func closeAdmins() {
	adminMu.Lock()
	defer adminMu.Unlock()
	for name, db := range admins {
		_ = db.Close()
		delete(admins, name)
	}
}

// adminExec runs a statement on the admin connection.
func (s server) adminExec(t *testing.T, query string, args ...any) {
	t.Helper()
	_, err := s.admin(t).ExecContext(ctx(t), query, args...)
	require.NoError(t, err, query)
}

// adminInt runs a query returning one integer on the admin connection.
func (s server) adminInt(t *testing.T, query string, args ...any) int64 {
	t.Helper()
	var n int64
	require.NoError(t, s.admin(t).QueryRowContext(ctx(t), query, args...).Scan(&n), query)
	return n
}

// table creates a table with a unique name from the admin connection and
// drops it when the test ends.
func (s server) table(t *testing.T, prefix, columns string) string {
	t.Helper()
	return s.tableBy(t, nil, prefix, columns)
}

// tableBy is table, created through db where it is not nil: the pool
// that ran the DDL reads its catalog again at once, off the callers'
// paths, where one whose last reading is older than an admin's CREATE
// TABLE waits for the reading's next turn. Until its reading knows the
// name, a statement naming the table counts as a change of the session,
// which a transaction-mode task keeps: see waitCatalogKnows.
func (s server) tableBy(t *testing.T, db *sql.DB, prefix, columns string) string {
	t.Helper()
	name := unique(prefix)
	engine := ""
	if s.name == "mysql" {
		engine = " ENGINE=InnoDB"
	}
	if db != nil {
		_, err := db.ExecContext(ctx(t), "CREATE TABLE "+name+" ("+columns+")"+engine)
		require.NoError(t, err)
	} else {
		s.adminExec(t, "CREATE TABLE "+name+" ("+columns+")"+engine)
	}
	t.Cleanup(func() {
		if _, err := s.admin(t).ExecContext(context.Background(), "DROP TABLE "+name); err != nil {
			t.Errorf("dropping %s: %v", name, err)
		}
	})
	return name
}

// waitCatalogKnows waits until the catalog reading of c, db's
// Connector, knows table: a statement naming it, in a transaction-mode
// task of its own, gives its connection back while the task goes on,
// rather than leaving it to the task as a possible change of the session.
// The pool that made the table reads its catalog again moments after,
// longer on a loaded machine (tableBy).
func waitCatalogKnows(t *testing.T, db *sql.DB, c *pooldriver.Connector, table string) {
	t.Helper()
	waitFor(t, "the pool's catalog reading to know "+table, func() bool {
		task, end := pooldriver.WithTask(ctx(t))
		defer end()
		var n int64
		require.NoError(t, db.QueryRowContext(task, "SELECT count(*) FROM "+table).Scan(&n))
		// Released moments after the statement, or kept by the task.
		for until := time.Now().Add(time.Second); time.Now().Before(until); time.Sleep(5 * time.Millisecond) {
			if c.Stats().Active == 0 {
				return true
			}
		}
		return false
	})
}

// tenant is a test's own identity on a server, so that its server
// connections, and only those, can be counted and killed: an
// application_name on PostgreSQL, a user of its own on MariaDB.
type tenant struct {
	s    server
	name string // application_name or user name
	base string // pooldriver DSN, without pool parameters
}

// newTenant creates the identity; a MariaDB user is dropped when the test
// ends.
func newTenant(t *testing.T, s server) *tenant {
	t.Helper()
	tn := &tenant{s: s, name: unique("pd")}
	if s.name == "postgres" {
		tn.base = withParams(s.dsn, "application_name="+tn.name)
		return tn
	}
	tn.base = s.mysqlUser(t, tn.name, "pw-"+tn.name)
	return tn
}

// mysqlUser creates a MariaDB user with every privilege on the test
// database, drops it when the test ends, and returns a DSN logging in as it.
func (s server) mysqlUser(t *testing.T, user, password string) string {
	t.Helper()
	cfg, err := mysql.ParseDSN(strings.TrimPrefix(s.dsn, "mysql://"))
	require.NoError(t, err)
	s.adminExec(t, fmt.Sprintf("CREATE USER '%s'@'%%' IDENTIFIED BY '%s'", user, password))
	t.Cleanup(func() {
		if _, err := s.admin(t).ExecContext(context.Background(), fmt.Sprintf("DROP USER '%s'@'%%'", user)); err != nil {
			t.Errorf("dropping user %s: %v", user, err)
		}
	})
	s.adminExec(t, fmt.Sprintf("GRANT ALL PRIVILEGES ON `%s`.* TO '%s'@'%%'", cfg.DBName, user))
	cfg.User, cfg.Passwd = user, password
	return "mysql://" + cfg.FormatDSN()
}

// withParams appends query parameters to a DSN of either kind.
func withParams(dsn string, params ...string) string {
	for _, p := range params {
		if p == "" {
			continue
		}
		sep := "?"
		if containsQuery(dsn) {
			sep = "&"
		}
		dsn += sep + p
	}
	return dsn
}

// dsn returns the tenant's pooldriver DSN with params appended.
func (tn *tenant) dsn(params ...string) string { return withParams(tn.base, params...) }

// open opens sql.OpenDB(pooldriver.New(dsn)), database/sql at its defaults,
// closed when the test ends; then the server must see none of its
// connections left.
func (tn *tenant) open(t *testing.T, params string, opts ...pooldriver.Option) (*sql.DB, *pooldriver.Connector) {
	t.Helper()
	c := pooldriver.New(tn.dsn(params), opts...)
	require.NoError(t, c.Err())
	db := sql.OpenDB(c)
	t.Cleanup(func() {
		_ = db.Close()
		tn.waitConns(t, 0)
	})
	return db, c
}

// backendsErr returns the server's ids of the tenant's connections.
func (tn *tenant) backendsErr(ctx context.Context) ([]int64, error) {
	q := "SELECT pid FROM pg_stat_activity WHERE application_name = $1 ORDER BY pid"
	if tn.s.name == "mysql" {
		q = "SELECT ID FROM information_schema.PROCESSLIST WHERE USER = ? ORDER BY ID"
	}
	rows, err := tn.s.adminDB().QueryContext(ctx, q, tn.name)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}

// adminDB is admin for callers that already made sure it exists (goroutines
// may not call require).
func (s server) adminDB() *sql.DB {
	adminMu.Lock()
	defer adminMu.Unlock()
	return admins[s.name]
}

func (tn *tenant) backends(t *testing.T) []int64 {
	t.Helper()
	tn.s.admin(t)
	ids, err := tn.backendsErr(ctx(t))
	require.NoError(t, err)
	return ids
}

// conns returns how many server connections the tenant has.
func (tn *tenant) conns(t *testing.T) int {
	t.Helper()
	return len(tn.backends(t))
}

// waitConns waits until the tenant has n server connections.
func (tn *tenant) waitConns(t *testing.T, n int) {
	t.Helper()
	waitFor(t, fmt.Sprintf("%d server connections of %s", n, tn.name), func() bool { return tn.conns(t) == n })
}

// openTxs returns how many of the tenant's sessions hold a transaction open
// on the server: "idle in transaction" (or aborted) on PostgreSQL, an InnoDB
// transaction on MariaDB.
func (tn *tenant) openTxs(t *testing.T) int64 {
	t.Helper()
	tn.s.admin(t)
	n, err := tn.openTxsErr(ctx(t))
	require.NoError(t, err)
	return n
}

// openTxsErr is openTxs for goroutines other than the test's.
func (tn *tenant) openTxsErr(ctx context.Context) (int64, error) {
	q := `SELECT count(*) FROM pg_stat_activity
		WHERE application_name = $1 AND state LIKE 'idle in transaction%'`
	if tn.s.name == "mysql" {
		q = `SELECT count(*) FROM information_schema.INNODB_TRX x
			JOIN information_schema.PROCESSLIST p ON p.ID = x.trx_mysql_thread_id WHERE p.USER = ?`
		defer spaceInnodbTrxRead()()
	}
	var n int64
	err := tn.s.adminDB().QueryRowContext(ctx, q, tn.name).Scan(&n)
	return n, err
}

// spaceInnodbTrxRead waits until INNODB_TRX may be read afresh and returns
// the function to call when the read is done. InnoDB serves INNODB_TRX from
// a cache that it refreshes only when nobody read it for 100ms, so every
// read of it, by every test (the ODBC ones too), goes through here.
func spaceInnodbTrxRead() (done func()) {
	innodbTrxMu.Lock()
	if wait := time.Until(innodbTrxRead.Add(innodbTrxRefresh)); wait > 0 {
		<-time.After(wait)
	}
	return func() {
		innodbTrxRead = time.Now()
		innodbTrxMu.Unlock()
	}
}

// innodbTrxRefresh is more than the 100ms for which InnoDB keeps serving
// INNODB_TRX from its cache after a read (CACHE_MIN_IDLE_TIME in trx0i_s).
const innodbTrxRefresh = 150 * time.Millisecond

var (
	innodbTrxMu   sync.Mutex // serializes reads of INNODB_TRX; protects innodbTrxRead
	innodbTrxRead time.Time  // when the last read ended
)

// kill ends the server session id from the admin connection.
func (tn *tenant) kill(t *testing.T, id int64) {
	t.Helper()
	if tn.s.name == "postgres" {
		require.EqualValues(t, 1, tn.s.adminInt(t, "SELECT count(*) FROM (SELECT pg_terminate_backend($1)) k", id))
		return
	}
	_, err := tn.s.admin(t).ExecContext(ctx(t), fmt.Sprintf("KILL CONNECTION %d", id))
	var me *mysql.MySQLError
	if errors.As(err, &me) && me.Number == 1094 { // unknown thread: it ended meanwhile
		err = nil
	}
	require.NoError(t, err)
}

// running returns the id of the tenant's session running a query that
// contains marker, or 0.
func (tn *tenant) running(t *testing.T, marker string) int64 {
	t.Helper()
	q := `SELECT coalesce(max(pid), 0) FROM pg_stat_activity
		WHERE application_name = $1 AND state = 'active' AND query LIKE '%' || $2 || '%'`
	if tn.s.name == "mysql" {
		q = `SELECT coalesce(max(ID), 0) FROM information_schema.PROCESSLIST
			WHERE USER = ? AND INFO LIKE CONCAT('%', ?, '%')`
	}
	return tn.s.adminInt(t, q, tn.name, marker)
}

// waitFor polls cond until it holds or waitLimit passes.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	waitForSaying(t, what, cond, nil)
}

// waitForSaying is waitFor where say, if not nil, tells what was seen
// last, for the message of a timeout.
func waitForSaying(t testing.TB, what string, cond func() bool, say func() string) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			if say != nil {
				t.Fatalf("timed out waiting %v for %s: %s", waitLimit, what, say())
			}
			t.Fatalf("timed out waiting %v for %s", waitLimit, what)
		}
		<-tick.C
	}
}

// backendID returns the server's id of the session a statement run with c
// lands on.
func backendID(t *testing.T, db *sql.DB, c context.Context, s server) int64 {
	t.Helper()
	var id int64
	require.NoError(t, db.QueryRowContext(c, s.backendID).Scan(&id))
	return id
}

// count returns the number of rows of table as seen with c.
func count(t *testing.T, db *sql.DB, c context.Context, table string) int64 {
	t.Helper()
	n, err := countErr(db, c, table)
	require.NoError(t, err)
	return n
}

// countErr is count for goroutines other than the test's.
func countErr(db *sql.DB, c context.Context, table string) (int64, error) {
	var n int64
	err := db.QueryRowContext(c, "SELECT count(*) FROM "+table).Scan(&n)
	return n, err
}
