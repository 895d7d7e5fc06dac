package postgres

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"reflect"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/pooldriver/pooldriver/dialects"
)

// serverDSN returns the DSN of the test server, a pgx DSN without pool_*
// parameters. The test is skipped when no server answers, unless under CI.
func serverDSN(t testing.TB) string {
	t.Helper()
	dsn := os.Getenv("POOLDRIVER_POSTGRES_DSN")
	if dsn == "" {
		dsn = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	}
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatalf("POOLDRIVER_POSTGRES_DSN: %v", err)
	}
	nc, err := net.DialTimeout("tcp", net.JoinHostPort(cfg.Host, fmt.Sprint(cfg.Port)), 2*time.Second)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("no PostgreSQL server: %v", err)
		}
		t.Skipf("no PostgreSQL server: %v", err)
	}
	nc.Close()
	return dsn
}

// wrapped opens a connection the way pooldriver.Wrap(stdlib.GetConnector(cfg))
// does: through the generic dialect, which must hand it to this dialect.
func wrapped(t testing.TB) *conn {
	t.Helper()
	cfg, err := pgx.ParseConfig(serverDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	dc, err := dialects.Wrap(stdlib.GetConnector(*cfg)).Open(t.Context(), dialects.Credentials{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dc.Close() })
	c, ok := dc.(*conn)
	if !ok {
		t.Fatalf("Wrap opened %T, want the postgres dialect's *conn", dc)
	}
	return c
}

func exec(t *testing.T, c *conn, query string) {
	t.Helper()
	if _, err := c.Driver().(driver.ExecerContext).ExecContext(t.Context(), query, nil); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

func TestAdapterTracksTransactions(t *testing.T) {
	c := wrapped(t)
	ctx := t.Context()
	if _, ok := c.Raw().(*pgx.Conn); !ok {
		t.Errorf("Raw() = %T, want *pgx.Conn", c.Raw())
	}
	if err := c.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	exec(t, c, "BEGIN")
	if s, err := c.TxStatus(ctx, "BEGIN"); err != nil || s != dialects.TxActive {
		t.Fatalf("after BEGIN: %v, %v", s, err)
	}
	if _, err := c.Driver().(driver.ExecerContext).ExecContext(ctx, "SELECT 1/0", nil); err == nil {
		t.Fatal("1/0 succeeded")
	}
	if s, err := c.TxStatus(ctx, "SELECT 1/0"); err != nil || s != dialects.TxFailed {
		t.Fatalf("after an error: %v, %v", s, err)
	}
	if err := c.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if s, err := c.TxStatus(ctx, ""); err != nil || s != dialects.TxIdle {
		t.Fatalf("after Rollback: %v, %v", s, err)
	}
	if err := c.CheckIdle(); err != nil {
		t.Errorf("CheckIdle: %v", err)
	}
}

func TestChangesSessionFromReports(t *testing.T) {
	c := wrapped(t)
	for _, q := range []string{"SELECT 1", "SELECT set_config('TimeZone', 'UTC', true)", "SET LOCAL TimeZone = 'UTC'"} {
		if c.ChangesSession(q) {
			t.Errorf("ChangesSession(%q) on a new connection", q)
		}
	}

	// SET LOCAL shows in the reports until the transaction ends.
	exec(t, c, "BEGIN")
	exec(t, c, "SET LOCAL TimeZone = 'Pacific/Chatham'")
	if c.ChangesSession("SET LOCAL TimeZone = 'Pacific/Chatham'") {
		t.Error("SET LOCAL inside a transaction changed the session")
	}
	exec(t, c, "COMMIT")
	if c.ChangesSession("COMMIT") {
		t.Error("the session changed after SET LOCAL's transaction ended")
	}

	// A setting changed where no statement text shows it: EXECUTE of a
	// statement prepared to call set_config. (EXECUTE counts by its text
	// too; a text showing nothing is asked, so that the reports decide.)
	exec(t, c, "PREPARE tz AS SELECT set_config('TimeZone', 'Pacific/Chatham', false)")
	exec(t, c, "EXECUTE tz")
	if !c.ChangesSession("SELECT 1") {
		t.Error("a reported setting changed, ChangesSession missed it")
	}
	if err := c.ResetSession(t.Context()); err != nil {
		t.Fatal(err)
	}
	if c.ChangesSession("SELECT 1") {
		t.Error("the session still differs after ResetSession")
	}
}

// TestDefaultDenyCalls (issue 35): a call of a function that is not a
// built-in known to leave the session alone counts as a change, unless the
// user trusts their functions; SQL run from a string counts either way.
// The connection's remembered text is judged again when trust changes.
func TestDefaultDenyCalls(t *testing.T) {
	c := wrapped(t)
	for _, tc := range []struct {
		query            string
		untrusted, trust bool
	}{
		{"SELECT a FROM t WHERE id = $1", false, false},
		{"SELECT lower('A'), count(*), now()", false, false},
		{"SELECT f()", true, false},
		{"SELECT public.f(1)", true, false},
		{"CALL p()", true, false},
		{"SELECT query_to_xml('select 1', true, true, '')", true, true},
		{"UPDATE pg_settings SET setting = 'x' WHERE name = 'search_path'", true, true},
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

// TestChangesSessionEveryReport (issue 35): a function that sets any
// parameter the server reports leaves the session changed, on a connection
// with the watch and on Wrap's: the statement's text shows nothing, and
// client_encoding, standard_conforming_strings or
// default_transaction_read_only change what the next user's statements
// mean. A reset brings the session back.
func TestChangesSessionEveryReport(t *testing.T) {
	for _, kind := range connKinds {
		t.Run(kind.name, func(t *testing.T) {
			c := kind.open(t)
			fn := fmt.Sprintf("pd_set_%d", time.Now().UnixNano())
			exec(t, c, "CREATE FUNCTION "+fn+"(k text, v text) RETURNS text LANGUAGE sql AS 'SELECT set_config(k, v, false)'")
			t.Cleanup(func() {
				if _, err := c.Driver().(driver.ExecerContext).ExecContext(context.Background(), "DROP FUNCTION "+fn, nil); err != nil {
					t.Errorf("dropping %s: %v", fn, err)
				}
			})
			// Trusted: the call does not count, the server's reports do.
			c.TrustFunctions(true)
			for _, p := range []struct{ name, value string }{
				{"client_encoding", "LATIN1"},
				{"standard_conforming_strings", "off"},
				{"default_transaction_read_only", "on"},
				{"application_name", "pd_other"},
				{"IntervalStyle", "sql_standard"},
			} {
				q := "SELECT " + fn + "('" + p.name + "', '" + p.value + "')"
				exec(t, c, q)
				if !c.ChangesSession(q) {
					t.Errorf("%s set to %s by a function: ChangesSession = false", p.name, p.value)
				}
				exec(t, c, "RESET "+p.name)
				if c.ChangesSession("SELECT 1") {
					t.Errorf("after RESET %s the session still differs", p.name)
				}
			}
		})
	}
}

// TestObserveAgrees runs statements that leave every transaction state and
// change the session by text and behind it, and checks after each that
// Observe answers what ChangesSession and TxStatus answer, also once the
// connection is closed.
func TestObserveAgrees(t *testing.T) {
	c := wrapped(t)
	ctx := t.Context()
	check := func(q string) {
		t.Helper()
		changed, status, err := c.Observe(ctx, q, true)
		wantStatus, wantErr := c.TxStatus(ctx, q)
		if want := c.ChangesSession(q); changed != want || status != wantStatus || (err == nil) != (wantErr == nil) {
			t.Errorf("after %q: Observe = %t, %v, %v; ChangesSession, TxStatus = %t, %v, %v", q, changed, status, err, want, wantStatus, wantErr)
		}
		if changed2, status2, err2 := c.Observe(ctx, q, false); changed2 != changed || status2 != dialects.TxIdle || err2 != nil {
			t.Errorf("after %q: Observe(askTx=false) = %t, %v, %v", q, changed2, status2, err2)
		}
	}
	for _, q := range []string{"SELECT 1", "BEGIN", "SELECT 1", "COMMIT", "SET TimeZone = 'UTC'", "RESET ALL"} {
		exec(t, c, q)
		check(q)
	}
	exec(t, c, "BEGIN")
	if _, err := c.Driver().(driver.ExecerContext).ExecContext(ctx, "SELECT 1/0", nil); err == nil {
		t.Fatal("1/0 succeeded")
	}
	check("SELECT 1/0")
	exec(t, c, "ROLLBACK")
	exec(t, c, "PREPARE tz AS SELECT set_config('TimeZone', 'Pacific/Chatham', false)")
	exec(t, c, "EXECUTE tz")
	check("EXECUTE tz")
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	check("SELECT 1")
}

func TestStaleStatementFromServer(t *testing.T) {
	c := wrapped(t)
	ctx := t.Context()
	pg := c.pgx()
	exec(t, c, "CREATE TEMP TABLE stale (a int)")
	if _, err := pg.Prepare(ctx, "stale_s", "SELECT * FROM stale"); err != nil {
		t.Fatal(err)
	}
	exec(t, c, "ALTER TABLE stale ADD COLUMN b int")
	_, err := pg.PgConn().ExecPrepared(ctx, "stale_s", nil, nil, nil).Close()
	if err == nil || !c.StaleStatement(err) {
		t.Errorf("after ALTER TABLE: StaleStatement(%v) = false", err)
	}
	exec(t, c, "DEALLOCATE ALL")
	_, err = pg.PgConn().ExecPrepared(ctx, "stale_s", nil, nil, nil).Close()
	if err == nil || !c.StaleStatement(err) {
		t.Errorf("after DEALLOCATE: StaleStatement(%v) = false", err)
	}
	_, err = pg.PgConn().Exec(ctx, "SELECT 1/0").ReadAll()
	if err == nil || c.StaleStatement(err) {
		t.Errorf("StaleStatement(%v) = true", err)
	}
}

func TestStaleStatement(t *testing.T) {
	c := &conn{}
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{&pgconn.PgError{Code: "0A000", Message: "cached plan must not change result type"}, true},
		{fmt.Errorf("wrapped: %w", &pgconn.PgError{Code: "0A000", Message: "cached plan must not change result type"}), true},
		{&pgconn.PgError{Code: "0A000", Message: "der gecachte Plan darf den Ergebnistyp nicht ändern", Routine: "RevalidateCachedQuery"}, true},
		{&pgconn.PgError{Code: "26000", Message: `prepared statement "s" does not exist`}, true},
		{&pgconn.PgError{Code: "0A000", Message: "cannot do that"}, false},
		{&pgconn.PgError{Code: "42P01"}, false},
		{errors.New("cached plan must not change result type"), false},
		{context.Canceled, false},
		{nil, false},
	} {
		if got := c.StaleStatement(tc.err); got != tc.want {
			t.Errorf("StaleStatement(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

func TestAdapterIgnoresOtherConns(t *testing.T) {
	if c, ok := adapt(nil); ok || c != nil {
		t.Errorf("adapt(nil) = %v, %v", c, ok)
	}
}

// BenchmarkChangesSession is the check after every statement, on a
// connection opened from a DSN (with its watch) and on one of Wrap's
// (looking every reported parameter up).
func BenchmarkChangesSession(b *testing.B) {
	cfg, err := pgx.ParseConfig(serverDSN(b))
	if err != nil {
		b.Fatal(err)
	}
	dc, err := stdlib.GetConnector(*cfg).Connect(b.Context())
	if err != nil {
		b.Fatal(err)
	}
	defer dc.Close()
	for _, c := range []struct {
		name string
		c    *conn
	}{{"dsn", opened(b)}, {"wrapped", newConn(dc.(*stdlib.Conn), nil)}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if c.c.ChangesSession("SELECT a FROM t WHERE id = $1") {
					b.Fatal("changed")
				}
			}
		})
	}
}

// TestArgumentsAsIs holds pgx to what ArgumentsAsIs says of it: its stdlib
// checker accepts every argument and changes none, values database/sql's
// default converter would change or refuse included.
func TestArgumentsAsIs(t *testing.T) {
	c := wrapped(t)
	if !c.ArgumentsAsIs() {
		t.Fatal("ArgumentsAsIs = false")
	}
	checker, ok := c.Driver().(driver.NamedValueChecker)
	if !ok {
		t.Fatalf("%T has no CheckNamedValue", c.Driver())
	}
	type custom struct{ A, B int }
	for _, v := range []any{nil, 7, uint8(3), int64(-1), "s", []byte("b"), []int32{1, 2}, time.Unix(0, 0),
		pgtype.Numeric{Int: big.NewInt(5), Valid: true}, custom{1, 2}, &custom{3, 4}} {
		nv := driver.NamedValue{Ordinal: 1, Value: v}
		if err := checker.CheckNamedValue(&nv); err != nil {
			t.Fatalf("CheckNamedValue(%T) = %v, want nil", v, err)
		}
		if !reflect.DeepEqual(nv.Value, v) {
			t.Fatalf("CheckNamedValue changed %#v to %#v", v, nv.Value)
		}
	}
}

// TestLexedTexts: a connection keeps what it judged of its last few texts,
// so that a transaction's statements, run in turn, are judged once each;
// a change that makes the catalog's reading vouch for less (a user's code
// ran that no reading proves harmless) forgets them all, to be judged
// again by a reading that sees it. A text that may change the catalog is
// judged each time.
func TestLexedTexts(t *testing.T) {
	c := opened(t)
	pg := c.pgx().PgConn()
	c.catalogOf(pg)
	texts := []string{
		"SELECT v FROM pd_lexed_a WHERE v = $1",
		"UPDATE pd_lexed_b SET v = $1 WHERE id = $2",
		"SELECT v FROM pd_lexed_c WHERE v = $1",
	}
	for range 2 {
		for _, q := range texts {
			if c.judge(pg, q) {
				t.Fatalf("%s: judged a change with a fresh reading", q)
			}
		}
	}
	for _, q := range texts {
		if c.lexedFor(q, c.lexedSnap) == nil {
			t.Errorf("%s: not kept among the connection's last %d texts", q, lexedTexts)
		}
	}
	c.expire(expireCode)
	for _, q := range texts {
		if c.lexedFor(q, c.lexedSnap) != nil {
			t.Errorf("%s: kept after the reading stopped vouching for this session", q)
		}
	}
	const ddl = "CREATE TABLE pd_lexed_d (v int)"
	c.judge(pg, ddl)
	if c.lexedFor(ddl, c.lexedSnap) != nil {
		t.Error("a text that may change the catalog was kept")
	}
}
