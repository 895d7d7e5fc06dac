package phys

import (
	"database/sql/driver"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/pooldriver/pooldriver/dialects"
	"github.com/pooldriver/pooldriver/internal/fakedb"
)

// asIsConn is a dialect conn that says its driver takes every argument as
// it is (dialects.ArgumentsAsIs), as the PostgreSQL dialect says of pgx.
type asIsConn struct{ dialects.Conn }

func (asIsConn) ArgumentsAsIs() bool { return true }

// openFake opens a connection to a fake server of the test's own, closed
// with the test.
func openFake(t *testing.T) dialects.Conn {
	t.Helper()
	dc, _ := openFakeServer(t)
	return dc
}

// openFakeServer is openFake, with the server.
func openFakeServer(t *testing.T) (dialects.Conn, *fakedb.Server) {
	t.Helper()
	srv := fakedb.NewServer(strings.ReplaceAll(t.Name(), "/", "-"))
	t.Cleanup(srv.Close)
	tmpl, _, err := fakedb.Dialect{}.Parse("fake://" + srv.Name())
	if err != nil {
		t.Fatal(err)
	}
	dc, err := tmpl.Open(t.Context(), dialects.Credentials{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = dc.Close() })
	return dc, srv
}

func TestArgumentsAsIsSkipTheConversion(t *testing.T) {
	dc := openFake(t)
	// fakedb's checker passes an int on to database/sql's default
	// converter, which makes it an int64; a dialect that says its driver
	// takes arguments as they are gets the int itself.
	for _, tc := range []struct {
		name string
		dc   dialects.Conn
		want any
	}{{"checked", dc, int64(7)}, {"as is", asIsConn{dc}, 7}} {
		pc := newConn(&Env{}, tc.dc)
		args, err := pc.Convert([]driver.NamedValue{{Ordinal: 1, Value: 7}})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if len(args) != 1 || args[0].Value != tc.want {
			t.Fatalf("%s: converted to %#v, want %#v", tc.name, args, tc.want)
		}
	}
}

// plainDriverConn is a dialect conn whose driver offers only driver.Conn:
// no BeginTx, so no TxOptions.
type plainDriverConn struct{ dialects.Conn }

func (c plainDriverConn) Driver() driver.Conn { return struct{ driver.Conn }{c.Conn.Driver()} }

func TestBeginWithoutBeginTx(t *testing.T) {
	dc := openFake(t)
	pc := newConn(&Env{}, plainDriverConn{dc})
	if _, err := pc.begin(t.Context(), driver.TxOptions{ReadOnly: true}); err == nil || !strings.Contains(err.Error(), "read-only") {
		t.Fatalf("begin(ReadOnly) on a driver without BeginTx: %v, want an error that names read-only transactions", err)
	}
	tx, err := pc.begin(t.Context(), driver.TxOptions{})
	if err != nil {
		t.Fatalf("begin: %v", err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatalf("Rollback: %v", err)
	}
}

// counter is a dialect's byte count (dialects.WriteCounter).
type counter struct{ n uint64 }

func (c *counter) Written() uint64 { return c.n }

// validity is a driver's word on its connection (driver.Validator).
type validity struct{ ok bool }

func (v *validity) IsValid() bool { return v.ok }

// TestWrote: an error is the connection's end where it is the driver's
// ErrBadConn or the driver says the connection is no longer usable; bytes
// of the statement left where the count moved since before, or, where the
// dialect does not count, unless the driver said ErrBadConn.
func TestWrote(t *testing.T) {
	other := errors.New("server says no")
	badConn := fmt.Errorf("wrapped: %w", driver.ErrBadConn)
	for _, tc := range []struct {
		name        string
		counts      bool
		moved       bool // the count moved since before
		usable      bool
		err         error
		broke, sent bool
	}{
		{"no error", true, true, true, nil, false, false},
		{"no error, unusable", true, true, false, nil, false, false},
		{"the server's answer", true, true, true, other, false, false},
		{"bad conn, nothing left", true, false, true, badConn, true, false},
		{"bad conn, bytes left", true, true, true, badConn, true, true},
		{"unusable, nothing left", true, false, false, other, true, false},
		{"unusable, bytes left", true, true, false, other, true, true},
		{"uncounted: the server's answer", false, false, true, other, false, false},
		{"uncounted: bad conn", false, false, true, badConn, true, false},
		{"uncounted: unusable", false, false, false, other, true, true},
		{"uncounted: unusable, bad conn", false, false, false, badConn, true, false},
	} {
		pc := &Conn{validity: &validity{tc.usable}}
		const before = 40
		if tc.counts {
			c := &counter{before}
			if tc.moved {
				c.n += 12
			}
			pc.written = c
		}
		if broke, sent := pc.Wrote(before, tc.err); broke != tc.broke || sent != tc.sent {
			t.Errorf("%s: Wrote = broke %t, sent %t; want %t, %t", tc.name, broke, sent, tc.broke, tc.sent)
		}
	}
}

// TestRawCommit: only a COMMIT alone, in a raw transaction, is watched,
// from the bytes written so far.
func TestRawCommit(t *testing.T) {
	pc := &Conn{written: &counter{7}}
	for _, tx := range []TxState{TxNone, TxBegun, TxRaw} {
		pc.st.Tx = tx
		for query, alone := range map[string]bool{"COMMIT": true, "SELECT 1": false} {
			before, ok := pc.RawCommit(query)
			want := tx == TxRaw && alone
			if ok != want || ok && before != 7 {
				t.Errorf("in %v, RawCommit(%q) = %d, %t; want %t (and 7)", tx, query, before, ok, want)
			}
		}
	}
	pc = &Conn{}
	pc.st.Tx = TxRaw
	if before, ok := pc.RawCommit("COMMIT"); !ok || before != 0 {
		t.Errorf("uncounted: RawCommit = %d, %t; want 0, true", before, ok)
	}
}

// TestCommitsAlone: the texts that end a raw transaction by committing it,
// and nothing more, are watched; the others (another statement, a chain,
// a prepared transaction's, several statements, a comment) are not.
func TestCommitsAlone(t *testing.T) {
	for query, want := range map[string]bool{
		"COMMIT": true, "commit": true, " Commit ; ": true, "END": true, "end work": true,
		"COMMIT TRANSACTION": true, "COMMIT\n\tWORK;": true,
		"": false, ";": false, "ROLLBACK": false, "COMMIT AND CHAIN": false, "COMMIT PREPARED 'x'": false,
		"COMMIT; BEGIN": false, "/* c */ COMMIT": false, "COMMIT -- now": false, "ENDS": false,
		"COMMIT WORK WORK": false, "INSERT INTO t VALUES (1); COMMIT": false,
	} {
		if got := commitsAlone(query); got != want {
			t.Errorf("commitsAlone(%q) = %v, want %v", query, got, want)
		}
	}
}

// closeCounter is a prepared statement that counts its closes.
type closeCounter struct {
	driver.Stmt
	closed *int
}

func (s closeCounter) Close() error { *s.closed++; return nil }

// TestReady: beside its hold's open rows, an operation is readied for
// nothing, and only a statement where the server sends one result at a
// time is refused; otherwise the statements EvictLater asked for are
// dropped, the bytes written so far returned, and the task state pc keeps
// already only where asked for.
func TestReady(t *testing.T) {
	for _, tc := range []struct {
		name                   string
		oneResult, stmt, rows  bool
		watch, dirty           bool
		sent                   uint64
		hadState, drops, fails bool
	}{
		{"statement", false, true, false, false, false, 40, false, true, false},
		{"statement, one result", true, true, false, false, false, 40, false, true, false},
		{"watched, clean", false, true, false, true, false, 40, false, true, false},
		{"watched, dirty", false, false, false, true, true, 40, true, true, false},
		{"unwatched, dirty", false, true, false, false, true, 40, false, true, false},
		{"beside rows", false, true, true, true, true, 0, false, false, false},
		{"beside rows, one result", true, true, true, false, false, 0, false, false, true},
		{"not a statement, beside rows, one result", true, false, true, false, false, 0, false, false, false},
	} {
		closed := 0
		pc := &Conn{written: &counter{40}, oneResult: tc.oneResult, stmts: map[string]driver.Stmt{"q": closeCounter{closed: &closed}}}
		if tc.dirty {
			pc.st.Session = SessionDirty
		}
		pc.EvictLater("q")
		sent, hadState, err := pc.Ready(tc.stmt, tc.rows, tc.watch)
		if sent != tc.sent || hadState != tc.hadState || (err != nil) != tc.fails {
			t.Errorf("%s: Ready = %d, %t, %v; want %d, %t, failing %t", tc.name, sent, hadState, err, tc.sent, tc.hadState, tc.fails)
		}
		if tc.fails && !errors.Is(err, dialects.ErrResultOpen) {
			t.Errorf("%s: Ready's error %v, want dialects.ErrResultOpen", tc.name, err)
		}
		if dropped := closed == 1 && len(pc.stmts) == 0; dropped != tc.drops {
			t.Errorf("%s: evicted statement dropped %t, want %t", tc.name, dropped, tc.drops)
		}
	}
}

// TestObserveClosedRows: closing rows, Observe asks the driver first and
// observes nothing on a connection it no longer finds usable; otherwise,
// and after a statement whatever the driver says, it observes.
func TestObserveClosedRows(t *testing.T) {
	pc := &Conn{validity: &validity{false}} // no dialect: observing would fail
	if usable, err := pc.Observe(t.Context(), "SELECT 1", true); usable || err != nil {
		t.Fatalf("closed rows, unusable: Observe = %t, %v; want false, nil", usable, err)
	}
	for _, closedRows := range []bool{false, true} {
		pc, _ := fakeConn(t)
		pc.validity = &validity{closedRows} // unusable where not asked: after a statement
		if _, err := pc.Exec(t.Context(), "BEGIN", nil); err != nil {
			t.Fatal(err)
		}
		if usable, err := pc.Observe(t.Context(), "BEGIN", closedRows); !usable || err != nil || pc.st.Tx != TxRaw {
			t.Fatalf("closed rows %t: Observe = %t, %v, transaction %v; want true, nil, raw", closedRows, usable, err, pc.st.Tx)
		}
	}
}
