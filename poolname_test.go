package pooldriver_test

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/pooldriver/pooldriver"
	"github.com/pooldriver/pooldriver/dialects"
)

// addrDialect is a dialect whose DSNs, addr://host:port/db, say where the
// connections go, and which never connects.
type addrDialect struct{}

func (addrDialect) Name() string { return "addr" }

func (addrDialect) Parse(dsn string) (dialects.Template, map[string]string, error) {
	rest, params, _ := strings.Cut(strings.TrimPrefix(dsn, "addr://"), "?")
	p := map[string]string{}
	if k, v, ok := strings.Cut(params, "="); ok {
		p[k] = v
	}
	host, db, _ := strings.Cut(rest, "/")
	a := dialects.Address{Host: host, Database: db}
	if h, port, err := net.SplitHostPort(host); err == nil {
		a.Host = h
		a.Port, _ = strconv.Atoi(port)
	}
	return addrTemplate{a: a, dsn: dsn}, p, nil
}

type addrTemplate struct {
	a   dialects.Address
	dsn string
}

func (t addrTemplate) Credentials() dialects.Credentials { return dialects.Credentials{} }
func (t addrTemplate) String() string                    { return t.dsn }
func (t addrTemplate) Address() dialects.Address         { return t.a }
func (t addrTemplate) Open(context.Context, dialects.Credentials) (dialects.Conn, error) {
	return nil, errors.New("addr: never connects")
}

func init() {
	if err := dialects.Register(addrDialect{}, "addr"); err != nil {
		panic(err)
	}
}

// A pool without a name is named host:port/database, as the OpenTelemetry
// conventions name one; where the DSN names no host, the DSN without its
// password. (The dialects' Address tests check what each reads of its DSN.)
func TestPoolNameDefault(t *testing.T) {
	srv := newServer(t)
	for _, tc := range []struct{ dsn, want string }{
		{"addr://db.example.com:5432/shop", "db.example.com:5432/shop"},
		{"addr://db.example.com:5432/shop?pool_name=orders", "orders"},
		{"addr://[::1]:5432/shop", "[::1]:5432/shop"},
		{"addr:///shop", "addr:///shop"}, // no host: the DSN
		{"fake://app:s3cret@" + srv.Name(), "fake://app:xxxxx@" + srv.Name()},
	} {
		c := pooldriver.New(tc.dsn)
		if err := c.Err(); err != nil {
			t.Fatalf("%s: %v", tc.dsn, err)
		}
		if got := c.PoolName(); got != tc.want || strings.Contains(got, "s3cret") {
			t.Errorf("%s: PoolName %q, want %q", tc.dsn, got, tc.want)
		}
		_ = c.Close()
	}
	w := pooldriver.Wrap(srv.Connector())
	defer w.Close()
	if got, want := w.PoolName(), w.String(); got != want || !strings.HasPrefix(got, "wrapped ") {
		t.Errorf("Wrap: PoolName %q, want String() %q", got, want)
	}
	if got := pooldriver.New("nosuch://x").PoolName(); !strings.Contains(got, "invalid") {
		t.Errorf("a Connector whose configuration failed: PoolName %q", got)
	}
}
