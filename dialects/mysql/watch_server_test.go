package mysql

import (
	"context"
	"database/sql/driver"
	"errors"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/pooldriver/pooldriver/dialects"
)

// openWired opens a connection from a mysql:// DSN of the test server with
// params added, and returns its conn, whose socket the dialect watches.
func openWired(t testing.TB, params string) *conn {
	t.Helper()
	dsn := "mysql://" + serverDSN(t)
	if params != "" {
		sep := "?"
		if strings.Contains(dsn, "?") {
			sep = "&"
		}
		dsn += sep + params
	}
	tmpl, _, err := Dialect.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	dc, err := tmpl.Open(t.Context(), tmpl.Credentials())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dc.Close() })
	wc, ok := dc.(*wiredConn)
	if !ok {
		t.Fatalf("Open returned %T, want *wiredConn", dc)
	}
	if s := wc.w.state.Load(); s&wireLost != 0 {
		t.Fatalf("the wire lost the framing while connecting (state %#x)", s)
	}
	// Judged against an empty catalog that is never read again, the
	// statements of a test cost the round trips the test counts, and
	// what other tests create in the database meanwhile does not count.
	// (TestCatalog* use the server's.)
	wc.cat = fixedCatalog(noShadows())
	return wc.conn
}

// drain runs query through the driver and reads every row of every result.
func drain(ctx context.Context, c *conn, query string) error {
	rows, err := c.queryer.QueryContext(ctx, query, nil)
	if err != nil {
		return err
	}
	defer rows.Close()
	for {
		dest := make([]driver.Value, len(rows.Columns()))
		for {
			if err := rows.Next(dest); err == io.EOF {
				break
			} else if err != nil {
				return err
			}
		}
		nrs, ok := rows.(driver.RowsNextResultSet)
		if !ok || !nrs.HasNextResultSet() {
			return rows.Close()
		}
		if err := nrs.NextResultSet(); err == io.EOF {
			return rows.Close()
		} else if err != nil {
			return err
		}
	}
}

// prepared prepares query, runs it once with args, reads its rows if any,
// and closes it.
func prepared(ctx context.Context, c *conn, query string, rows bool, args ...driver.NamedValue) error {
	st, err := c.dc.(driver.ConnPrepareContext).PrepareContext(ctx, query)
	if err != nil {
		return err
	}
	defer st.Close()
	if !rows {
		_, err = st.(driver.StmtExecContext).ExecContext(ctx, args)
		return err
	}
	r, err := st.(driver.StmtQueryContext).QueryContext(ctx, args)
	if err != nil {
		return err
	}
	dest := make([]driver.Value, len(r.Columns()))
	for {
		if err := r.Next(dest); err == io.EOF {
			break
		} else if err != nil {
			r.Close()
			return err
		}
	}
	return r.Close()
}

func arg(v any) driver.NamedValue { return driver.NamedValue{Ordinal: 1, Value: v} }

// TestWireMatchesServer: after every kind of statement the watched answer
// (no round trip) is what the server says of itself.
func TestWireMatchesServer(t *testing.T) {
	c := openWired(t, "multiStatements=true")
	ctx := t.Context()
	if !c.tracking {
		t.Fatal("session tracking is off")
	}
	exec := func(q string) func() error {
		return func() error { _, err := c.execer.ExecContext(ctx, q, nil); return err }
	}
	query := func(q string) func() error { return func() error { return drain(ctx, c, q) } }
	setup := []string{
		"DROP TABLE IF EXISTS pooldriver_wire",
		"CREATE TABLE pooldriver_wire (a int PRIMARY KEY) ENGINE=InnoDB",
		"DROP PROCEDURE IF EXISTS pooldriver_wire_begin",
		"CREATE PROCEDURE pooldriver_wire_begin() BEGIN START TRANSACTION; INSERT INTO pooldriver_wire VALUES (900); END",
	}
	for _, q := range setup {
		if err := exec(q)(); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	t.Cleanup(func() { // before c closes
		ctx := context.Background()
		_, _ = c.execer.ExecContext(ctx, "UNLOCK TABLES; DROP TABLE IF EXISTS pooldriver_wire", nil)
		_, _ = c.execer.ExecContext(ctx, "DROP PROCEDURE IF EXISTS pooldriver_wire_begin", nil)
	})
	mysql.RegisterReaderHandler("pooldriver_wire", func() io.Reader { return strings.NewReader("700\n701\n") })
	defer mysql.DeregisterReaderHandler("pooldriver_wire")
	infile := false
	if v, err := c.queryInts(ctx, "SELECT @@local_infile"); err == nil && v[0] == 1 {
		infile = true
	}

	steps := []struct {
		query   string
		run     func() error
		wantErr bool
	}{
		{"SELECT 1", query("SELECT 1"), false},
		{"BEGIN", exec("BEGIN"), false},
		{"INSERT INTO pooldriver_wire VALUES (1)", exec("INSERT INTO pooldriver_wire VALUES (1)"), false},
		{"SELECT * FROM pooldriver_wire", query("SELECT * FROM pooldriver_wire"), false},
		{"SELECT nosuch", query("SELECT nosuch"), true},
		{"INSERT INTO pooldriver_wire VALUES (1)", exec("INSERT INTO pooldriver_wire VALUES (1)"), true}, // duplicate key
		{"COMMIT", exec("COMMIT"), false},
		{"START TRANSACTION READ ONLY", exec("START TRANSACTION READ ONLY"), false},
		{"SELECT a FROM pooldriver_wire", query("SELECT a FROM pooldriver_wire"), false},
		{"ROLLBACK", exec("ROLLBACK"), false},
		{"SET autocommit = 0", exec("SET autocommit = 0"), false},
		{"SELECT a FROM pooldriver_wire", query("SELECT a FROM pooldriver_wire"), false},
		{"INSERT INTO pooldriver_wire VALUES (2)", exec("INSERT INTO pooldriver_wire VALUES (2)"), false},
		{"COMMIT", exec("COMMIT"), false},
		{"SELECT nosuch", query("SELECT nosuch"), true},
		{"INSERT INTO pooldriver_wire VALUES (3)", exec("INSERT INTO pooldriver_wire VALUES (3)"), false},
		{"SET autocommit = 1", exec("SET autocommit = 1"), false}, // commits
		{"BEGIN", exec("BEGIN"), false},
		{"CREATE TABLE pooldriver_wire2 (a int)", exec("CREATE TABLE pooldriver_wire2 (a int)"), false}, // commits
		{"DROP TABLE pooldriver_wire2", exec("DROP TABLE pooldriver_wire2"), false},
		{"EXECUTE IMMEDIATE 'SET autocommit = 0'", exec("EXECUTE IMMEDIATE 'SET autocommit = 0'"), false},
		{"EXECUTE IMMEDIATE 'SET autocommit = 1'", exec("EXECUTE IMMEDIATE 'SET autocommit = 1'"), false},
		{"CALL pooldriver_wire_begin()", exec("CALL pooldriver_wire_begin()"), false},
		{"ROLLBACK", exec("ROLLBACK"), false},
		{"BEGIN; INSERT INTO pooldriver_wire VALUES (4); SELECT * FROM pooldriver_wire", query("BEGIN; INSERT INTO pooldriver_wire VALUES (4); SELECT * FROM pooldriver_wire"), false},
		{"COMMIT; SELECT 1; BEGIN; SELECT nosuch", exec("COMMIT; SELECT 1; BEGIN; SELECT nosuch"), true},
		{"ROLLBACK", exec("ROLLBACK"), false},
		{"INSERT INTO pooldriver_wire VALUES (?)", func() error {
			return prepared(ctx, c, "INSERT INTO pooldriver_wire VALUES (?)", false, arg(int64(5)))
		}, false},
		{"BEGIN", exec("BEGIN"), false},
		{"SELECT a FROM pooldriver_wire WHERE a > ?", func() error {
			return prepared(ctx, c, "SELECT a FROM pooldriver_wire WHERE a > ?", true, arg(int64(0)))
		}, false},
		{"INSERT INTO pooldriver_wire VALUES (?)", func() error {
			return prepared(ctx, c, "INSERT INTO pooldriver_wire VALUES (?)", false, arg(int64(5)))
		}, true},
		{"COMMIT", exec("COMMIT"), false},
		{"SAVEPOINT s", exec("SAVEPOINT s"), false},
		{"BEGIN", exec("BEGIN"), false},
		{"SAVEPOINT s", exec("SAVEPOINT s"), false},
		{"ROLLBACK TO SAVEPOINT s", exec("ROLLBACK TO SAVEPOINT s"), false},
		{"COMMIT", exec("COMMIT"), false},
		{"XA START 'pooldriver'", exec("XA START 'pooldriver'"), false},
		{"XA END 'pooldriver'", exec("XA END 'pooldriver'"), false},
		{"XA ROLLBACK 'pooldriver'", exec("XA ROLLBACK 'pooldriver'"), false},
		{"LOCK TABLES pooldriver_wire WRITE", exec("LOCK TABLES pooldriver_wire WRITE"), false},
		{"UNLOCK TABLES", exec("UNLOCK TABLES"), false},
	}
	if infile {
		steps = append(steps,
			struct {
				query   string
				run     func() error
				wantErr bool
			}{"BEGIN; LOAD DATA LOCAL INFILE", exec("BEGIN; LOAD DATA LOCAL INFILE 'Reader::pooldriver_wire' INTO TABLE pooldriver_wire"), false},
			struct {
				query   string
				run     func() error
				wantErr bool
			}{"COMMIT", exec("COMMIT"), false},
		)
	} else {
		t.Log("local_infile is off on the server: LOAD DATA LOCAL not tried")
	}
	for i, s := range steps {
		err := s.run()
		if (err != nil) != s.wantErr {
			t.Fatalf("step %d %q: error %v, want one: %v", i, s.query, err, s.wantErr)
		}
		before := c.w.roundTrips.Load()
		_, st, err := c.Observe(ctx, s.query, true)
		if err != nil {
			t.Fatalf("step %d %q: Observe: %v", i, s.query, err)
		}
		// A failed statement may ask the server (see txState).
		if asked := c.w.roundTrips.Load() - before; asked > 1 || asked == 1 && !s.wantErr {
			t.Errorf("step %d %q: Observe made %d round trips", i, s.query, asked)
		}
		v, err := c.queryInts(ctx, "SELECT @@in_transaction, @@autocommit")
		if err != nil {
			t.Fatal(err)
		}
		if want := v[0] != 0; (st == dialects.TxActive) != want {
			t.Errorf("step %d %q: watched %v, server says in_transaction=%d", i, s.query, st, v[0])
		}
		if s := c.w.state.Load(); (s&wireAutocommit != 0) != (v[1] != 0) {
			t.Errorf("step %d %q: watched autocommit %v, server says %d", i, s, s&wireAutocommit != 0, v[1])
		}
		if s := c.w.state.Load(); s&(wireLost|wireBusy) != 0 {
			t.Fatalf("step %d %q: wire state %#x", i, s, s)
		}
	}
}

// TestWireSeesSessionChanges: what MariaDB's session tracker reports, the
// dialect counts as a change of the session; statements whose changes it
// does not report count by their text.
func TestWireSeesSessionChanges(t *testing.T) {
	c := openWired(t, "")
	ctx := t.Context()
	for _, q := range []string{
		"DROP PROCEDURE IF EXISTS pooldriver_wire_setvar",
		"CREATE PROCEDURE pooldriver_wire_setvar() SET @pooldriver_wire = 1",
		"DROP PROCEDURE IF EXISTS pooldriver_wire_out",
		"CREATE PROCEDURE pooldriver_wire_out(OUT x INT) SET x = 42",
		"DROP TABLE IF EXISTS pooldriver_wire_ld",
		"CREATE TABLE pooldriver_wire_ld (a int)",
	} {
		run(t, c, q)
	}
	t.Cleanup(func() { // before c closes
		for _, q := range []string{"DROP PROCEDURE IF EXISTS pooldriver_wire_setvar", "DROP PROCEDURE IF EXISTS pooldriver_wire_out", "DROP TABLE IF EXISTS pooldriver_wire_ld"} {
			_, _ = c.execer.ExecContext(context.Background(), q, nil)
		}
	})
	mysql.RegisterReaderHandler("pooldriver_wire_ld", func() io.Reader { return strings.NewReader("1\t2\n") })
	defer mysql.DeregisterReaderHandler("pooldriver_wire_ld")
	infile := false
	if v, err := c.queryInts(ctx, "SELECT @@local_infile"); err == nil && v[0] == 1 {
		infile = true
	}
	if err := c.ResetSession(ctx); err != nil {
		t.Fatal(err)
	}
	type change struct {
		query   string
		changes bool
		byWire  bool // the tracker reports it; the text alone would not tell
	}
	cases := []change{
		{"SELECT 1", false, false},
		{"BEGIN", false, false},
		{"COMMIT", false, false},
		{"CALL pooldriver_wire_setvar()", true, true},
		{"EXECUTE IMMEDIATE 'SET @v = 42'", true, true},
		{"BEGIN NOT ATOMIC SET @v = 42; END", true, true},
		{"EXECUTE IMMEDIATE 'SET SESSION group_concat_max_len = 4242'", true, true},
		{"EXECUTE IMMEDIATE 'SET autocommit = 0'", true, true},
		{"EXECUTE IMMEDIATE CONCAT('SELECT GET', '_LOCK(''pooldriver_wire'', 0)')", true, false},
		{"EXECUTE IMMEDIATE 'SELECT 1 INTO @pooldriver_wire'", true, false},
		{"SELECT GET_LOCK(CONCAT('pooldriver', '_wire2'), 0)", true, false},
		// The tracker does not report user variables assigned as OUT
		// parameters or by LOAD DATA's column list: the text counts.
		{"CALL pooldriver_wire_out(@pooldriver_wire)", true, false},
		// The OUT parameter comes back as a result, as go-sql-driver runs
		// it (prepared); a procedure counts all the same (default-deny).
		{"CALL pooldriver_wire_out(?)", true, false},
	}
	if infile {
		cases = append(cases, change{"LOAD DATA LOCAL INFILE 'Reader::pooldriver_wire_ld' INTO TABLE pooldriver_wire_ld (a, @pooldriver_wire)", true, false})
	} else {
		t.Log("local_infile is off on the server: LOAD DATA LOCAL not tried")
	}
	for _, tc := range cases {
		t.Run(tc.query, func(t *testing.T) {
			if err := c.ResetSession(ctx); err != nil {
				t.Fatal(err)
			}
			var err error
			if strings.Contains(tc.query, "?") {
				err = prepared(ctx, c, tc.query, true, arg(int64(0)))
			} else {
				err = drain(ctx, c, tc.query)
			}
			if err != nil {
				t.Fatal(err)
			}
			if v, err := c.queryInts(ctx, "SELECT @pooldriver_wire IS NOT NULL"); err != nil {
				t.Fatal(err)
			} else if set := v[0] != 0; set && !tc.changes {
				t.Error("@pooldriver_wire is set, and the case says the session is unchanged")
			}
			reported := c.w.state.Load()&wireChanged != 0 || c.w.state.Load()&wireAutocommit == 0
			before := c.w.roundTrips.Load()
			changed, _, err := c.Observe(ctx, tc.query, true)
			if err != nil {
				t.Fatal(err)
			}
			if changed != tc.changes {
				t.Errorf("changes the session: %v, want %v", changed, tc.changes)
			}
			if tc.byWire && !reported {
				t.Error("the server did not report the change")
			}
			if n := c.w.roundTrips.Load() - before; n != 0 {
				t.Errorf("Observe made %d round trips", n)
			}
			if again, _, _ := c.Observe(ctx, "SELECT 1", true); again && c.w.state.Load()&wireAutocommit != 0 {
				t.Error("the change was reported twice")
			}
		})
	}
	// The reset turns tracking back on, and is no change itself.
	if err := c.ResetSession(ctx); err != nil {
		t.Fatal(err)
	}
	if v, err := c.queryInts(ctx, "SELECT @@session_track_state_change"); err != nil || v[0] != 1 {
		t.Fatalf("session_track_state_change after a reset: %v, %v", v, err)
	}
	if changed, _, _ := c.Observe(ctx, "SELECT @@session_track_state_change", true); changed {
		t.Error("a clean session reads as changed")
	}
}

// TestWireOneRoundTrip: a raw transaction statement costs the statement's
// round trip and no other.
func TestWireOneRoundTrip(t *testing.T) {
	c := openWired(t, "")
	ctx := t.Context()
	for _, q := range []string{"BEGIN", "SELECT 1", "COMMIT", "START TRANSACTION", "ROLLBACK", "SET autocommit = 0", "SET autocommit = 1"} {
		before := c.w.roundTrips.Load()
		if err := drain(ctx, c, q); err != nil {
			t.Fatal(err)
		}
		if _, _, err := c.Observe(ctx, q, true); err != nil {
			t.Fatal(err)
		}
		if n := c.w.roundTrips.Load() - before; n != 1 {
			t.Errorf("%s: %d round trips, want 1", q, n)
		}
	}
}

// TestWireAutocommitBaseline: a DSN that turns autocommit off makes that
// the session's own state, not a change.
func TestWireAutocommitBaseline(t *testing.T) {
	c := openWired(t, "autocommit=0")
	ctx := t.Context()
	if changed, _, _ := c.Observe(ctx, "SELECT 1", true); changed {
		t.Error("autocommit=0 from the DSN counts as a change")
	}
	run(t, c, "SET autocommit = 1")
	if changed, _, _ := c.Observe(ctx, "SET autocommit = 1", true); !changed {
		t.Error("autocommit on where the DSN turned it off is no change")
	}
	if err := c.ResetSession(ctx); err != nil {
		t.Fatal(err)
	}
	if v, err := c.queryInts(ctx, "SELECT @@autocommit"); err != nil || v[0] != 0 {
		t.Fatalf("autocommit after a reset: %v, %v", v, err)
	}
	if changed, _, _ := c.Observe(ctx, "SELECT @@autocommit", true); changed {
		t.Error("the reset session counts as changed")
	}
}

// TestWireWrittenAndInterrupt: the connection counts what it writes, and
// Interrupt fails a COMMIT at once; the driver gives the connection up.
func TestWireWrittenAndInterrupt(t *testing.T) {
	c := openWired(t, "")
	wc := &wiredConn{c}
	ctx := t.Context()
	before := wc.Written()
	run(t, c, "DO 1")
	if got, want := wc.Written()-before, uint64(4+1+len("DO 1")); got != want {
		t.Errorf("written for DO 1: %d, want %d", got, want)
	}
	tx, err := c.dc.(driver.ConnBeginTx).BeginTx(ctx, driver.TxOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wc.Interrupt()
	start := time.Now()
	err = tx.Commit()
	if err == nil {
		t.Fatal("COMMIT succeeded after Interrupt")
	}
	if time.Since(start) > 5*time.Second {
		t.Errorf("COMMIT took %v after Interrupt", time.Since(start))
	}
	if v, ok := c.dc.(driver.Validator); ok && v.IsValid() {
		t.Error("the driver still holds the connection valid")
	}
	wc.Interrupt() // again: harmless
}

// TestWireCompressedConnFallsBack: with compression the wire cannot read
// the packets; the connection asks the server, and still counts its bytes.
func TestWireCompressedConnFallsBack(t *testing.T) {
	c := openWired0(t, "compress=true")
	if c.w.state.Load()&wireLost == 0 {
		t.Fatal("the wire follows a compressed stream")
	}
	ctx := t.Context()
	run(t, c, "BEGIN")
	before := c.w.written.Load()
	if _, st, err := c.Observe(ctx, "BEGIN", true); err != nil || st != dialects.TxActive {
		t.Fatalf("after BEGIN: %v, %v", st, err)
	}
	if c.w.written.Load() == before {
		t.Error("the transaction state came without asking the server")
	}
	run(t, c, "EXECUTE IMMEDIATE 'SET autocommit = 0'")
	if changed, _, _ := c.Observe(ctx, "EXECUTE IMMEDIATE 'SET autocommit = 0'", true); !changed {
		t.Error("EXECUTE IMMEDIATE does not change the session")
	}
	run(t, c, "SET autocommit = 1")
	if changed, _, _ := c.Observe(ctx, "ROLLBACK", true); changed {
		t.Error("ROLLBACK changes the session")
	}
}

// openWired0 is openWired for a connection whose wire may have lost the
// framing.
func openWired0(t *testing.T, params string) *conn {
	t.Helper()
	tmpl, _, err := Dialect.Parse("mysql://" + serverDSN(t) + "?" + params)
	if err != nil {
		t.Fatal(err)
	}
	dc, err := tmpl.Open(t.Context(), tmpl.Credentials())
	if err != nil {
		var me *mysql.MySQLError
		if errors.As(err, &me) {
			t.Skipf("the server refuses: %v", err)
		}
		t.Fatal(err)
	}
	t.Cleanup(func() { dc.Close() })
	wc, ok := dc.(*wiredConn)
	if !ok {
		t.Fatalf("Open returned %T, want *wiredConn", dc)
	}
	return wc.conn
}

// TestAdapterAutocommitOff: a wrapped connection, whose socket the dialect
// does not watch, still counts autocommit off as a change of the session
// when the state it asks the server for says so (a stored procedure's SET
// shows in no text), and does not take a changed autocommit for the
// session's own.
func TestAdapterAutocommitOff(t *testing.T) {
	c := wrapped(t)
	ctx := t.Context()
	run(t, c, "DROP PROCEDURE IF EXISTS pooldriver_wire_acoff")
	run(t, c, "CREATE PROCEDURE pooldriver_wire_acoff() SET autocommit = 0")
	t.Cleanup(func() { // before c closes
		_, _ = c.execer.ExecContext(context.Background(), "DROP PROCEDURE IF EXISTS pooldriver_wire_acoff", nil)
	})
	if changed, _, err := c.Observe(ctx, "SELECT 1", true); err != nil || changed {
		t.Fatalf("SELECT 1: changed %v, %v", changed, err)
	}
	run(t, c, "CALL pooldriver_wire_acoff()")
	if changed, _, err := c.Observe(ctx, "CALL pooldriver_wire_acoff()", true); err != nil || !changed {
		t.Fatalf("CALL of a procedure that turns autocommit off: changed %v, %v", changed, err)
	}
	if changed, _, err := c.Observe(ctx, "SELECT 1", true); err != nil || !changed {
		t.Fatalf("SELECT 1 with autocommit off: changed %v, %v", changed, err)
	}

	fresh := wrapped(t)
	run(t, fresh, "SET autocommit = 0")
	for _, q := range []string{"SET autocommit = 0", "SELECT 1"} {
		if changed, _, err := fresh.Observe(ctx, q, true); err != nil || !changed {
			t.Fatalf("%s, autocommit turned off first: changed %v, %v", q, changed, err)
		}
	}
	run(t, fresh, "SET autocommit = 1")
}

// TestWirePreparedExecAgain: a prepared statement that returns rows, run
// again with Exec, returns (go-sql-driver v1.10's Stmt.Exec blocks where
// MariaDB skips the column definitions it sent before, which the wire
// keeps it from asking for), and the wire follows every reply.
func TestWirePreparedExecAgain(t *testing.T) {
	c := openWired(t, "")
	if c.w.cacheMeta {
		t.Fatal("the driver asked for MARIADB_CLIENT_CACHE_METADATA")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	st, err := c.dc.(driver.ConnPrepareContext).PrepareContext(ctx, "SELECT ?, 2, 3, 4, 5")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for i := range 3 {
		if _, err := st.(driver.StmtExecContext).ExecContext(ctx, []driver.NamedValue{arg(int64(i))}); err != nil {
			t.Fatalf("exec %d: %v", i, err)
		}
		r, err := st.(driver.StmtQueryContext).QueryContext(ctx, []driver.NamedValue{arg(int64(i))})
		if err != nil {
			t.Fatalf("query %d: %v", i, err)
		}
		dest := make([]driver.Value, len(r.Columns()))
		if len(dest) != 5 || r.Next(dest) != nil || dest[0] != int64(i) || r.Next(dest) != io.EOF {
			t.Fatalf("query %d: %d columns, %v", i, len(dest), dest)
		}
		r.Close()
		if s := c.w.state.Load(); s&(wireLost|wireBusy|wireKnown) != wireKnown {
			t.Fatalf("after run %d: wire state %#x", i, s)
		}
		if v, err := c.queryInts(ctx, "SELECT 7"); err != nil || v[0] != 7 {
			t.Fatalf("after run %d: SELECT 7 = %v, %v", i, v, err)
		}
	}
}

// TestWireTrackingOffInDSN: a DSN that turns session_track_state_change off
// keeps it off, on a new and on a reset connection.
func TestWireTrackingOffInDSN(t *testing.T) {
	c := openWired(t, "session_track_state_change=OFF")
	ctx := t.Context()
	if c.tracking || c.w.trackAsked {
		t.Errorf("tracking %v, CLIENT_SESSION_TRACK asked %v", c.tracking, c.w.trackAsked)
	}
	for range 2 {
		if v, err := c.queryInts(ctx, "SELECT @@session_track_state_change"); err != nil || v[0] != 0 {
			t.Fatalf("session_track_state_change = %v, %v", v, err)
		}
		if err := c.ResetSession(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// What the text shows still counts.
	run(t, c, "SET @v = 1")
	if changed, _, _ := c.Observe(ctx, "SET @v = 1", true); !changed {
		t.Error("SET @v is no change")
	}
}

// TestRegisterDialContext: a dial function registered through the dialect
// for "tcp" opens its connections, whose socket it still watches.
func TestRegisterDialContext(t *testing.T) {
	serverDSN(t)
	var calls atomic.Int32
	RegisterDialContext("tcp", func(ctx context.Context, addr string) (net.Conn, error) {
		calls.Add(1)
		var d net.Dialer
		return d.DialContext(ctx, "tcp", addr)
	})
	t.Cleanup(func() { DeregisterDialContext("tcp") })
	c := openWired(t, "")
	if calls.Load() != 1 {
		t.Fatalf("the registered dial function ran %d times", calls.Load())
	}
	run(t, c, "BEGIN")
	if _, st, err := c.Observe(t.Context(), "BEGIN", true); err != nil || st != dialects.TxActive {
		t.Fatalf("after BEGIN: %v, %v", st, err)
	}
	DeregisterDialContext("tcp")
	openWired(t, "")
	if calls.Load() != 1 {
		t.Error("a deregistered dial function still runs")
	}
}
