package mysql

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/pooldriver/pooldriver/dialects"
)

// serverDSN returns the go-sql-driver DSN of the test server (without
// "mysql://"). The test is skipped when no server answers, unless under CI.
func serverDSN(t testing.TB) string {
	t.Helper()
	dsn := strings.TrimPrefix(os.Getenv("POOLDRIVER_MYSQL_DSN"), "mysql://")
	if dsn == "" {
		dsn = "root@tcp(127.0.0.1:3306)/test"
	}
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatalf("POOLDRIVER_MYSQL_DSN: %v", err)
	}
	nc, err := net.DialTimeout(cfg.Net, cfg.Addr, 2*time.Second)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("no MySQL/MariaDB server: %v", err)
		}
		t.Skipf("no MySQL/MariaDB server: %v", err)
	}
	nc.Close()
	return dsn
}

// wrapped opens a connection the way pooldriver.Wrap(connector) does:
// through the generic dialect, which must hand it to this dialect.
func wrapped(t *testing.T) *conn {
	t.Helper()
	cfg, err := mysql.ParseDSN(serverDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	connector, err := mysql.NewConnector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dc, err := dialects.Wrap(connector).Open(t.Context(), dialects.Credentials{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dc.Close() })
	c, ok := dc.(*conn)
	if !ok {
		t.Fatalf("Wrap opened %T, want the mysql dialect's *conn", dc)
	}
	return c
}

func run(t *testing.T, c dialects.Conn, query string) {
	t.Helper()
	if _, err := c.Driver().(driver.ExecerContext).ExecContext(t.Context(), query, nil); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

func txStatus(t *testing.T, c dialects.Conn, lastQuery string) dialects.TxStatus {
	t.Helper()
	s, err := c.TxStatus(t.Context(), lastQuery)
	if err != nil {
		t.Fatalf("TxStatus after %q: %v", lastQuery, err)
	}
	return s
}

func TestAdapterTracksTransactions(t *testing.T) {
	c := wrapped(t)
	if c.Raw() != c.Driver() || !isDriverConn(c.Driver()) {
		t.Errorf("Raw() = %T, want the driver's connection", c.Raw())
	}
	if err := c.Ping(t.Context()); err != nil {
		t.Fatal(err)
	}
	if s := txStatus(t, c, ""); s != dialects.TxIdle {
		t.Fatalf("new connection: %v", s)
	}
	run(t, c, "BEGIN")
	if s := txStatus(t, c, "BEGIN"); s != dialects.TxActive {
		t.Fatalf("after BEGIN: %v", s)
	}
	run(t, c, "SELECT 1")
	if s := txStatus(t, c, "SELECT 1"); s != dialects.TxActive {
		t.Fatalf("after SELECT in a transaction: %v", s)
	}
	if err := c.Rollback(t.Context()); err != nil {
		t.Fatal(err)
	}
	if s := txStatus(t, c, ""); s != dialects.TxIdle {
		t.Fatalf("after Rollback: %v", s)
	}
	run(t, c, "SET autocommit = 0")
	if s := txStatus(t, c, "SET autocommit = 0"); s != dialects.TxIdle || c.autocommit {
		t.Fatalf("after SET autocommit = 0: %v, autocommit believed %v", s, c.autocommit)
	}
	if !c.ChangesSession("SET autocommit = 0") {
		t.Error("SET autocommit did not change the session")
	}
	if err := c.ResetSession(t.Context()); !errors.Is(err, dialects.ErrUnsupported) {
		t.Errorf("ResetSession of a wrapped connection = %v, want ErrUnsupported", err)
	}
	if err := c.CheckIdle(); err != nil {
		t.Errorf("CheckIdle: %v", err)
	}
}

// TestAdapterSeesKilledIdleConn: a wrapped connection the server killed
// while idle is found out before it is handed out, though the dialect has
// no socket of its own to look at.
func TestAdapterSeesKilledIdleConn(t *testing.T) {
	c, admin := wrapped(t), wrapped(t)
	rows, err := c.queryInts(t.Context(), "SELECT CONNECTION_ID()")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.CheckIdle(); err != nil {
		t.Fatalf("CheckIdle before the kill: %v", err)
	}
	run(t, admin, fmt.Sprintf("KILL %d", rows[0]))
	deadline := time.Now().Add(10 * time.Second)
	for c.CheckIdle() == nil {
		if time.Now().After(deadline) {
			t.Fatal("CheckIdle does not see the killed connection")
		}
		time.Sleep(5 * time.Millisecond) // polling a condition, with a deadline
	}
}

func TestAdapterIgnoresOtherConns(t *testing.T) {
	for _, dc := range []driver.Conn{nil, &fakeConn{}} {
		if c, ok := adapt(dc); ok || c != nil {
			t.Errorf("adapt(%T) = %v, %v", dc, c, ok)
		}
	}
}

// fakeConn is a driver.Conn of another driver.
type fakeConn struct{}

func (*fakeConn) Prepare(string) (driver.Stmt, error) { return nil, errors.New("fake") }
func (*fakeConn) Close() error                        { return nil }
func (*fakeConn) Begin() (driver.Tx, error)           { return nil, errors.New("fake") }

// TestDSNConnResets checks that a connection opened from a DSN keeps its
// session reset.
func TestDSNConnResets(t *testing.T) {
	tmpl, _, err := Dialect.Parse("mysql://" + serverDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	c, err := tmpl.Open(t.Context(), tmpl.Credentials())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	run(t, c, "SET @pooldriver_x = 1")
	if !c.(dialects.SessionTracker).ChangesSession("SET @pooldriver_x = 1") {
		t.Error("SET @var did not change the session")
	}
	if err := c.ResetSession(t.Context()); err != nil {
		t.Fatal(err)
	}
	rows, err := c.Driver().(driver.QueryerContext).QueryContext(t.Context(), "SELECT @pooldriver_x IS NULL", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	v := make([]driver.Value, 1)
	if err := rows.Next(v); err != nil && err != io.EOF {
		t.Fatal(err)
	}
	if n, _ := v[0].(int64); n != 1 {
		t.Errorf("@pooldriver_x survived the reset (IS NULL = %v)", v[0])
	}
}

func TestChangesSession(t *testing.T) {
	c, _ := wrapConn(nil, &fakeConn{}, nil)
	c.cat = fixedCatalog(noShadows())
	for _, tc := range []struct {
		query string
		want  bool
	}{
		{"SELECT id FROM users WHERE id = ?", false},
		{"INSERT INTO t (a) VALUES (?)", false},
		{"SELECT 'SET @x = 1', `SET`", false},
		{"UPDATE t SET a = 1", false},
		{"SET @x = 1", true},
		{"SET NAMES utf8mb4", true},
		{"SET TRANSACTION ISOLATION LEVEL SERIALIZABLE", true},
		{"SELECT GET_LOCK('x', 1)", true},
		{"SELECT RELEASE_ALL_LOCKS()", true},
		{"SELECT IS_USED_LOCK('x')", false},
		{"LOCK TABLES t WRITE", true},
		{"CREATE TEMPORARY TABLE t (a int)", true},
		{"SELECT a INTO @x FROM t", true},
		{"/*!40101 SET NAMES utf8 */", true},
		{"USE shop", true},
		{"PREPARE s FROM 'SELECT 1'", true},
		{"SELECT pg_advisory_lock(1)", true}, // not MySQL's: a stored function of that name, unknown
		{"SELECT my_func()", true},
		{"CALL p()", true},
		{"SELECT COUNT(*), IFNULL(a, 0), LAST_INSERT_ID() FROM t", false},
		{"EXECUTE IMMEDIATE 'SET @v = 42'", true},
		{"BEGIN NOT ATOMIC SET @v = 42; END", true},
		{"EXECUTE IMMEDIATE CONCAT('SELECT GET', '_LOCK(''x'', 0)')", true},
		{"BEGIN", false},
		{"COMMIT", false},
	} {
		if got := c.ChangesSession(tc.query); got != tc.want {
			t.Errorf("ChangesSession(%q) = %v, want %v", tc.query, got, tc.want)
		}
	}
}

// TestTrustFunctions (issue 35): trusted, a call of a stored function or
// procedure counts only for what its text shows; EXECUTE and compound
// statements count either way. The remembered text is judged again.
func TestTrustFunctions(t *testing.T) {
	c, _ := wrapConn(nil, &fakeConn{}, nil)
	c.cat = fixedCatalog(noShadows())
	for _, tc := range []struct {
		query            string
		untrusted, trust bool
	}{
		{"SELECT id FROM users WHERE id = ?", false, false},
		{"SELECT my_func()", true, false},
		{"CALL p()", true, false},
		{"CALL p(@out)", true, true},
		{"EXECUTE IMMEDIATE 'SET @a=1'", true, true},
		{"SELECT GET_LOCK('x', 1)", true, true},
	} {
		for _, trust := range []bool{false, true, false} {
			c.TrustFunctions(trust)
			want := tc.untrusted
			if trust {
				want = tc.trust
			}
			if got := c.ChangesSession(tc.query); got != want {
				t.Errorf("trust %v: ChangesSession(%q) = %v, want %v", trust, tc.query, got, want)
			}
		}
	}
}

// TestStartTrackingFallsBack: a server error to the SET (a proxy that offers
// CLIENT_SESSION_TRACK but rejects the variable) leaves tracking off; an
// error of the connection fails.
func TestStartTrackingFallsBack(t *testing.T) {
	for _, tc := range []struct {
		err     error
		wantErr bool
	}{
		{&mysql.MySQLError{Number: 1193, Message: "Unknown system variable"}, false},
		{&mysql.MySQLError{Number: 1227, Message: "Access denied"}, false},
		{&mysql.MySQLError{Number: 1064, Message: "syntax"}, false},
		{driver.ErrBadConn, true},
		{io.ErrUnexpectedEOF, true},
	} {
		w := newWire(nil, true)
		w.state.Store(wireTracked)
		c := &conn{w: w, t: &template{}, execer: failingExecer{tc.err}}
		err := c.startTracking(t.Context())
		if (err != nil) != tc.wantErr || c.tracking {
			t.Errorf("%v: startTracking = %v, tracking %v", tc.err, err, c.tracking)
		}
		if tc.wantErr && !errors.Is(err, tc.err) {
			t.Errorf("%v: the error %v does not wrap it", tc.err, err)
		}
	}
}

type failingExecer struct{ err error }

func (f failingExecer) ExecContext(context.Context, string, []driver.NamedValue) (driver.Result, error) {
	return nil, f.err
}

func TestStateChangeOff(t *testing.T) {
	for _, tc := range []struct {
		params map[string]string
		want   bool
	}{
		{nil, false},
		{map[string]string{"sql_mode": "'ANSI'"}, false},
		{map[string]string{"session_track_state_change": "OFF"}, true},
		{map[string]string{"session_track_state_change": "off"}, true},
		{map[string]string{"Session_Track_State_Change": "0"}, true},
		{map[string]string{"@@session.session_track_state_change": "'OFF'"}, true},
		{map[string]string{"@@local.session_track_state_change": "false"}, true},
		{map[string]string{"`session_track_state_change`": "`OFF`"}, true},
		{map[string]string{"session_track_state_change": "ON"}, false},
		{map[string]string{"session_track_state_change": "DEFAULT"}, false},
		{map[string]string{"session_track_state_changes": "OFF"}, false},
	} {
		if got := stateChangeOff(tc.params); got != tc.want {
			t.Errorf("stateChangeOff(%v) = %v, want %v", tc.params, got, tc.want)
		}
	}
}

// queryString runs a one-row, one-column query on c; NULL reads "NULL".
func queryString(t *testing.T, c dialects.Conn, query string) string {
	t.Helper()
	rows, err := c.Driver().(driver.QueryerContext).QueryContext(t.Context(), query, nil)
	if err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	defer rows.Close()
	v := make([]driver.Value, 1)
	if err := rows.Next(v); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	switch v := v[0].(type) {
	case nil:
		return "NULL"
	case []byte:
		return string(v)
	default:
		return fmt.Sprint(v)
	}
}

// TestResetRestoresRoleAndDatabase (issue 35): MariaDB's
// COM_RESET_CONNECTION keeps the current role and the current database.
// ResetSession puts the role back as the connection started, and, where
// the DSN names no database (MySQL cannot leave one), refuses to hand the
// session on: pooldriver replaces it.
func TestResetRestoresRoleAndDatabase(t *testing.T) {
	c := openWired(t, "")
	if queryString(t, c, "SELECT VERSION() LIKE '%MariaDB%'") != "1" {
		t.Skip("roles as MariaDB has them")
	}
	role := fmt.Sprintf("pd_role_%d", time.Now().UnixNano()%1e9)
	run(t, c, "CREATE ROLE "+role)
	t.Cleanup(func() {
		if _, err := c.Driver().(driver.ExecerContext).ExecContext(context.Background(), "DROP ROLE "+role, nil); err != nil {
			t.Errorf("dropping %s: %v", role, err)
		}
	})
	run(t, c, "GRANT "+role+" TO CURRENT_USER")
	start := queryString(t, c, "SELECT CURRENT_ROLE()")
	run(t, c, "SET ROLE "+role)
	if !c.ChangesSession("SET ROLE " + role) {
		t.Error("SET ROLE did not change the session")
	}
	if err := c.ResetSession(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := queryString(t, c, "SELECT CURRENT_ROLE()"); got != start {
		t.Errorf("after the reset CURRENT_ROLE() = %s, want %s", got, start)
	}

	// A DSN without a database.
	cfg, err := mysql.ParseDSN(serverDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	db := cfg.DBName
	cfg.DBName = ""
	tmpl, _, err := Dialect.Parse("mysql://" + cfg.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	dc, err := tmpl.Open(t.Context(), tmpl.Credentials())
	if err != nil {
		t.Fatal(err)
	}
	defer dc.Close()
	if err := dc.ResetSession(t.Context()); err != nil {
		t.Fatalf("reset of a session in no database: %v", err)
	}
	run(t, dc, "USE "+db)
	if err := dc.ResetSession(t.Context()); err == nil {
		t.Errorf("reset of a session left in %s, the DSN naming none, succeeded: DATABASE() = %s", db, queryString(t, dc, "SELECT DATABASE()"))
	}
}
