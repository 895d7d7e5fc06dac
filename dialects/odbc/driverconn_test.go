package odbc

import (
	"database/sql/driver"
	"errors"
	"testing"

	"github.com/alexbrainman/odbc"
)

// TestCheck: driver.ErrBadConn reaches database/sql (which then retries on
// another connection) only when the statement cannot have run; a lost
// connection is always reported through IsValid.
func TestCheck(t *testing.T) {
	lost := &odbc.Error{APIName: "SQLExecute", Diag: []odbc.DiagRecord{{State: "08S01", Message: "communication link failure"}}}
	gone := &odbc.Error{APIName: "SQLExecute", Diag: []odbc.DiagRecord{{State: "HY000", NativeError: 2006, Message: "[ma-3.1.15]MySQL server has gone away"}}}
	plain := &odbc.Error{APIName: "SQLExecute", Diag: []odbc.DiagRecord{{State: "22012", Message: "division by zero"}}}
	for _, tc := range []struct {
		name    string
		err     error
		ran     bool
		want    error // matched with errors.Is
		wantBad bool
	}{
		{name: "bad conn, not run", err: driver.ErrBadConn, want: driver.ErrBadConn, wantBad: true},
		{name: "bad conn, may have run", err: driver.ErrBadConn, ran: true, want: errLost, wantBad: true},
		{name: "class 08", err: lost, ran: true, want: lost, wantBad: true},
		{name: "gone away", err: gone, ran: true, want: gone, wantBad: true},
		{name: "statement error", err: plain, ran: true, want: plain},
		{name: "nil", err: nil, ran: true, want: nil},
	} {
		c := &drvConn{server: mysql}
		got := c.check(tc.err, tc.ran)
		if !errors.Is(got, tc.want) || tc.want == nil && got != nil {
			t.Errorf("%s: check = %v, want %v", tc.name, got, tc.want)
		}
		if tc.ran && errors.Is(got, driver.ErrBadConn) {
			t.Errorf("%s: ErrBadConn for a statement that may have run", tc.name)
		}
		if c.IsValid() == tc.wantBad {
			t.Errorf("%s: IsValid = %t", tc.name, c.IsValid())
		}
	}
}

// TestBrokenConnRefusesWithoutRunning: once lost, every call fails with
// driver.ErrBadConn before reaching the odbc driver.
func TestBrokenConnRefusesWithoutRunning(t *testing.T) {
	c := &drvConn{bad: true} // oc is nil: reaching it would panic
	if _, err := c.ExecContext(t.Context(), "SELECT 1", nil); !errors.Is(err, driver.ErrBadConn) {
		t.Errorf("ExecContext = %v", err)
	}
	if _, err := c.QueryContext(t.Context(), "SELECT 1", nil); !errors.Is(err, driver.ErrBadConn) {
		t.Errorf("QueryContext = %v", err)
	}
	if _, err := c.BeginTx(t.Context(), driver.TxOptions{}); !errors.Is(err, driver.ErrBadConn) {
		t.Errorf("BeginTx = %v", err)
	}
	pc := &conn{d: c}
	if _, err := pc.TxStatus(t.Context(), ""); !errors.Is(err, driver.ErrBadConn) {
		t.Errorf("TxStatus = %v", err)
	}
	if err := pc.Ping(t.Context()); !errors.Is(err, driver.ErrBadConn) {
		t.Errorf("Ping = %v", err)
	}
}
