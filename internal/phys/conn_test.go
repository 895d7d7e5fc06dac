package phys

import (
	"database/sql/driver"
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
	srv := fakedb.NewServer(t.Name())
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
	return dc
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
