package phys

import (
	"database/sql/driver"
	"testing"

	"github.com/pooldriver/pooldriver/dialects"
	"github.com/pooldriver/pooldriver/internal/fakedb"
)

// asIsConn is a dialect conn that says its driver takes every argument as
// it is (dialects.ArgumentsAsIs), as the PostgreSQL dialect says of pgx.
type asIsConn struct{ dialects.Conn }

func (asIsConn) ArgumentsAsIs() bool { return true }

func TestArgumentsAsIsSkipTheConversion(t *testing.T) {
	srv := fakedb.NewServer("TestArgumentsAsIsSkipTheConversion")
	defer srv.Close()
	tmpl, _, err := fakedb.Dialect{}.Parse("fake://" + srv.Name())
	if err != nil {
		t.Fatal(err)
	}
	dc, err := tmpl.Open(t.Context(), dialects.Credentials{})
	if err != nil {
		t.Fatal(err)
	}
	defer dc.Close()
	// fakedb's checker passes an int on to database/sql's default
	// converter, which makes it an int64; a dialect that says its driver
	// takes arguments as they are gets the int itself.
	for _, tc := range []struct {
		name string
		dc   dialects.Conn
		want any
	}{{"checked", dc, int64(7)}, {"as is", asIsConn{dc}, 7}} {
		pc := NewConn(&Env{}, tc.dc)
		args, err := pc.Convert([]driver.NamedValue{{Ordinal: 1, Value: 7}})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if len(args) != 1 || args[0].Value != tc.want {
			t.Fatalf("%s: converted to %#v, want %#v", tc.name, args, tc.want)
		}
	}
}
