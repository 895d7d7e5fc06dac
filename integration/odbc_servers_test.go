//go:build odbc

package integration

// The ODBC dialect against real servers, through unixODBC: PostgreSQL
// (psqlODBC) and MariaDB (MariaDB Connector/ODBC). These files need cgo and
// unixODBC, hence the build tag: go test -tags odbc ./...

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	_ "github.com/alexbrainman/odbc" // registers "odbc", for the admin connection
	"github.com/stretchr/testify/require"

	"github.com/pooldriver/pooldriver"
	_ "github.com/pooldriver/pooldriver/dialects/odbc"
	"github.com/pooldriver/pooldriver/dialects/odbc/connstr"
)

// odbcServer is one server reached through ODBC, with the SQL that differs.
type odbcServer struct {
	name string // "postgres" or "mysql", also the subtest name
	env  string // variable holding the odbc:// DSN
	dsn  string

	backendID string // the server's id of the session running it
	sleep     string // sleeps %d seconds
	setVar    string // sets a session variable to '1'
	getVar    string // reads it back; '' when unset
	isolation string // the current transaction's isolation level, upper case, words separated by spaces
}

var odbcServerDefs = []odbcServer{
	{
		name: "postgres", env: "POOLDRIVER_ODBC_POSTGRES_DSN",
		backendID: "SELECT pg_backend_pid()",
		sleep:     "SELECT pg_sleep(%d)",
		setVar:    "SELECT set_config('app.x', '1', false)",
		getVar:    "SELECT coalesce(current_setting('app.x', true), '')",
		isolation: "SELECT upper(current_setting('transaction_isolation'))",
	},
	{
		name: "mysql", env: "POOLDRIVER_ODBC_MYSQL_DSN",
		backendID: "SELECT CONNECTION_ID()",
		sleep:     "SELECT SLEEP(%d)",
		setVar:    "SET @v = '1'",
		getVar:    "SELECT coalesce(@v, '')",
		// The session's level; the tests set the transaction's with
		// SET TRANSACTION, which it does not show: see odbcIsolation.
		isolation: "SELECT REPLACE(@@tx_isolation, '-', ' ')",
	},
}

var odbcExamples = map[string]string{
	"POOLDRIVER_ODBC_POSTGRES_DSN": "odbc://Driver={PostgreSQL Unicode};Server=127.0.0.1;Port=5432;Database=test;UID=postgres;",
	"POOLDRIVER_ODBC_MYSQL_DSN":    "odbc://Driver={MariaDB Unicode};Server=127.0.0.1;Port=3306;Database=test;UID=root;",
}

// forEachODBCServer runs f against every ODBC server, as a subtest named
// after it. A server whose DSN variable is unset, and for which TestMain
// started no container, is skipped, unless CI=true, where that is a
// failure.
func forEachODBCServer(t *testing.T, f func(t *testing.T, s odbcServer)) {
	t.Helper()
	forODBCServers(t, "", f)
}

// forODBCServers runs f against the server named only, or against every
// server when only is "".
func forODBCServers(t *testing.T, only string, f func(t *testing.T, s odbcServer)) {
	t.Helper()
	for _, s := range odbcServerDefs {
		if only != "" && s.name != only {
			continue
		}
		t.Run(s.name, func(t *testing.T) {
			s.dsn = dsns[s.env] // the run's database (owndb_test.go), or the container standing in for the server
			if s.dsn == "" {
				s.dsn = os.Getenv(s.env)
			}
			if s.dsn == "" {
				msg := fmt.Sprintf("%s is not set; to run against a server: %s='%s' go test -tags odbc ./...", s.env, s.env, odbcExamples[s.env])
				if os.Getenv("CI") == "true" {
					t.Fatal(msg)
				}
				t.Skip(msg)
			}
			f(t, s)
		})
	}
}

var (
	odbcAdminMu sync.Mutex // protects odbcAdmins
	odbcAdmins  = map[string]*sql.DB{}
)

// admin returns a connection to the server as the DSN's user, through the
// odbc driver directly (not pooldriver). It stays open for the whole run.
func (s odbcServer) admin(t *testing.T) *sql.DB {
	t.Helper()
	odbcAdminMu.Lock()
	defer odbcAdminMu.Unlock()
	if db := odbcAdmins[s.name]; db != nil {
		return db
	}
	attrs, err := connstr.Parse(strings.TrimPrefix(s.dsn, "odbc://"))
	require.NoError(t, err)
	var kept []connstr.Attr
	for _, a := range attrs {
		if !strings.HasPrefix(strings.ToLower(a.Key), "pool_") {
			kept = append(kept, a)
		}
	}
	cs, err := connstr.Build(kept)
	require.NoError(t, err)
	db, err := sql.Open("odbc", cs)
	require.NoError(t, err)
	db.SetMaxOpenConns(4)
	odbcAdmins[s.name] = db
	return db
}

func (s odbcServer) adminExec(t *testing.T, query string, args ...any) {
	t.Helper()
	_, err := s.admin(t).ExecContext(ctx(t), query, args...)
	require.NoError(t, err, query)
}

func (s odbcServer) adminInt(t *testing.T, query string, args ...any) int64 {
	t.Helper()
	var n int64
	require.NoError(t, s.admin(t).QueryRowContext(ctx(t), query, args...).Scan(&n), query)
	return n
}

// table creates a table every tenant may use and drops it when the test
// ends.
func (s odbcServer) table(t *testing.T, prefix, columns string) string {
	t.Helper()
	name := unique(prefix)
	s.adminExec(t, "CREATE TABLE "+name+" ("+columns+")")
	if s.name == "postgres" {
		s.adminExec(t, "GRANT ALL ON "+name+" TO PUBLIC")
	}
	t.Cleanup(func() { _, _ = s.admin(t).ExecContext(context.Background(), "DROP TABLE "+name) })
	return name
}

// odbcTenant is a server user of its own for one test, so that the test
// can count and kill exactly its pool's server connections. Its name
// (PostgreSQL) or password (MariaDB) is full of characters that need
// escaping in a connection string.
type odbcTenant struct {
	s              odbcServer
	user, password string
}

func newODBCTenant(t *testing.T, s odbcServer) *odbcTenant {
	t.Helper()
	id := unique("pd_odbc")
	tn := &odbcTenant{s: s}
	switch s.name {
	case "postgres":
		// Trust authentication here: the password is only parsed, the
		// user name is checked by the server.
		tn.user, tn.password = id+` }{="'é x`, `p;w}d{=x '"é`
		s.adminExec(t, "CREATE ROLE "+pgIdent(tn.user)+" LOGIN")
	default:
		tn.user, tn.password = id, `p;w}d{=x '"é `+id
		s.adminExec(t, "CREATE USER '"+tn.user+"'@'%' IDENTIFIED BY "+mysqlString(tn.password))
		s.adminExec(t, "GRANT ALL ON `"+odbcDSNDatabase(s.dsn)+"`.* TO '"+tn.user+"'@'%'")
	}
	t.Cleanup(func() { tn.drop(t) })
	return tn
}

func (tn *odbcTenant) drop(t *testing.T) {
	for _, id := range tn.backends(t) {
		tn.kill(t, id)
	}
	if tn.s.name == "postgres" {
		tn.s.adminExec(t, "DROP ROLE "+pgIdent(tn.user))
	} else {
		tn.s.adminExec(t, "DROP USER '"+tn.user+"'@'%'")
	}
}

func pgIdent(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

// mysqlString quotes s for MariaDB with its default sql_mode.
func mysqlString(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `''`).Replace(s) + "'"
}

// open returns a *sql.DB over a Connector for the server's DSN with the
// extra attributes (";"-separated), logging in as the tenant through
// WithCredentials. Both are closed when the test ends.
func (tn *odbcTenant) open(t *testing.T, extra string, opts ...pooldriver.Option) (*sql.DB, *pooldriver.Connector) {
	t.Helper()
	opts = append([]pooldriver.Option{pooldriver.WithCredentials(func(context.Context) (string, string, error) {
		return tn.user, tn.password, nil
	})}, opts...)
	c := pooldriver.New(tn.dsn(extra), opts...)
	require.NoError(t, c.Err())
	db := sql.OpenDB(c)
	t.Cleanup(func() { _ = db.Close() })
	return db, c
}

func (tn *odbcTenant) dsn(extra string) string {
	d := tn.s.dsn
	if extra != "" {
		d = strings.TrimSuffix(d, ";") + ";" + extra
	}
	return d
}

// backends returns the ids of the tenant's server sessions, in order.
func (tn *odbcTenant) backends(t *testing.T) []int64 {
	t.Helper()
	q := "SELECT pid FROM pg_stat_activity WHERE usename = ? ORDER BY pid"
	if tn.s.name == "mysql" {
		q = "SELECT ID FROM information_schema.PROCESSLIST WHERE USER = ? ORDER BY ID"
	}
	rows, err := tn.s.admin(t).QueryContext(ctx(t), q, tn.user)
	require.NoError(t, err)
	defer rows.Close()
	var ids []int64
	for rows.Next() {
		var id int64
		require.NoError(t, rows.Scan(&id))
		ids = append(ids, id)
	}
	require.NoError(t, rows.Err())
	return ids
}

func (tn *odbcTenant) conns(t *testing.T) int { return len(tn.backends(t)) }

// waitConns waits until the tenant has n server sessions.
func (tn *odbcTenant) waitConns(t *testing.T, n int) {
	t.Helper()
	odbcWaitFor(t, fmt.Sprintf("%d server connections", n), func() bool { return tn.conns(t) == n })
}

func (tn *odbcTenant) kill(t *testing.T, id int64) {
	t.Helper()
	if tn.s.name == "postgres" {
		tn.s.adminInt(t, "SELECT count(*) FROM (SELECT pg_terminate_backend(?)) x", id)
	} else {
		_, err := tn.s.admin(t).ExecContext(ctx(t), fmt.Sprintf("KILL %d", id))
		if err != nil && !strings.Contains(err.Error(), "Unknown thread") {
			require.NoError(t, err)
		}
	}
}

// running returns the id of the tenant's session running a statement that
// mentions marker, or 0.
func (tn *odbcTenant) running(t *testing.T, marker string) int64 {
	t.Helper()
	q := `SELECT coalesce(max(pid), 0) FROM pg_stat_activity
		WHERE usename = ? AND state = 'active' AND query LIKE '%' || ? || '%'`
	if tn.s.name == "mysql" {
		q = `SELECT coalesce(max(ID), 0) FROM information_schema.PROCESSLIST
			WHERE USER = ? AND INFO LIKE CONCAT('%', ?, '%')`
	}
	return tn.s.adminInt(t, q, tn.user, marker)
}

// openTxs counts the tenant's sessions with a transaction open.
func (tn *odbcTenant) openTxs(t *testing.T) int64 {
	t.Helper()
	if tn.s.name == "postgres" {
		return tn.s.adminInt(t, "SELECT count(*) FROM pg_stat_activity WHERE usename = ? AND xact_start IS NOT NULL", tn.user)
	}
	defer spaceInnodbTrxRead()()
	return tn.s.adminInt(t, `SELECT count(*) FROM information_schema.INNODB_TRX x
		JOIN information_schema.PROCESSLIST p ON p.ID = x.trx_mysql_thread_id WHERE p.USER = ?`, tn.user)
}

// odbcWaitFor polls cond until it holds or waitLimit passes.
func odbcWaitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting %v for %s", waitLimit, what)
		}
		<-tick.C
	}
}

// odbcBackendID returns the id of the server session a statement run with
// qctx lands on.
func odbcBackendID(t *testing.T, db *sql.DB, qctx context.Context, s odbcServer) int64 {
	t.Helper()
	var id int64
	require.NoError(t, db.QueryRowContext(qctx, s.backendID).Scan(&id))
	return id
}
