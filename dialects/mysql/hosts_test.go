package mysql

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/pooldriver/pooldriver/dialects"
)

// TestParseHosts: a DSN naming several servers, in either form, keeps each
// (with the driver's default port where none is given) and gives the
// driver the first; pool_target is the dialect's, not pooldriver's.
func TestParseHosts(t *testing.T) {
	for _, tc := range []struct {
		dsn      string
		hosts    []string
		target   target
		redacted string
	}{
		{"mysql://app:pw@db1:3307,db2,[::1]:3308/shop?pool_target=primary&pool_max_conns=4",
			[]string{"db1:3307", "db2:3306", "[::1]:3308"}, targetPrimary,
			"mysql://app:xxxxx@tcp(db1:3307,db2:3306,[::1]:3308)/shop?pool_target=primary"},
		{"mysql://app@tcp(db1, db2:3310)/shop?parseTime=true",
			[]string{"db1:3306", "db2:3310"}, targetAny,
			"mysql://app@tcp(db1:3306,db2:3310)/shop?parseTime=true"},
		{"mysql://app@db1:3306/shop?pool_target=PRIMARY", nil, targetPrimary,
			"mysql://app@tcp(db1:3306)/shop?pool_target=primary"},
		{"mysql://app@db1/shop?pool_target=any", nil, targetAny, "mysql://app@tcp(db1:3306)/shop"},
	} {
		tmpl, params, err := Dialect.Parse(tc.dsn)
		if err != nil {
			t.Fatalf("%s: %v", tc.dsn, err)
		}
		tm := tmpl.(*template)
		if !slices.Equal(tm.hosts, tc.hosts) || tm.target != tc.target {
			t.Errorf("%s: hosts %q, target %d; want %q, %d", tc.dsn, tm.hosts, tm.target, tc.hosts, tc.target)
		}
		if tc.hosts != nil && tm.cfg.Addr != tc.hosts[0] {
			t.Errorf("%s: the driver's address %q, want the first server", tc.dsn, tm.cfg.Addr)
		}
		if _, ok := params[targetParam]; ok {
			t.Errorf("%s: %s left to pooldriver's parameters", tc.dsn, targetParam)
		}
		if got := tmpl.String(); got != tc.redacted {
			t.Errorf("String() = %q, want %q", got, tc.redacted)
		}
		if tc.hosts != nil {
			want := strings.Join(tc.hosts, ",") + "/shop"
			if got := tm.Address().String(); got != want {
				t.Errorf("Address() = %q, want %q", got, want)
			}
		}
	}
}

// TestParseHostsErrors: a list with an empty or malformed entry, a list on
// a network other than tcp, and an unknown pool_target are errors that
// name what is wrong and show no password.
func TestParseHostsErrors(t *testing.T) {
	for _, tc := range []struct{ dsn, want string }{
		{"mysql://app:hunter22@tcp(db1,,db2)/shop", "is not host"},
		{"mysql://app:hunter22@tcp(db1,db2:99999)/shop", "is not host"},
		{"mysql://app:hunter22@unix(/a.sock,/b.sock)/shop", "only a tcp address"},
		{"mysql://app:hunter22@db1,db2/shop?pool_target=leader", "want any or primary"},
	} {
		_, _, err := Dialect.Parse(tc.dsn)
		if err == nil {
			t.Fatalf("%s: Parse succeeded", tc.dsn)
		}
		if !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "hunter22") {
			t.Errorf("%s: %v; want %q and no password", tc.dsn, err, tc.want)
		}
	}
}

// TestOpenTriesEveryHost: a connect goes on to the next server when one
// does not answer, and the error of a DSN whose servers all fail names
// each, without the password.
func TestOpenTriesEveryHost(t *testing.T) {
	var closed []string
	for range 2 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		closed = append(closed, l.Addr().String())
		_ = l.Close() // nobody listens there now
	}
	tmpl, _, err := Dialect.Parse(fmt.Sprintf("mysql://app@%s,%s/shop?timeout=1s", closed[0], closed[1]))
	if err != nil {
		t.Fatal(err)
	}
	_, err = tmpl.Open(t.Context(), dialects.Credentials{User: "app", Password: "hunter22"})
	if err == nil {
		t.Fatal("Open succeeded with no server listening")
	}
	for _, a := range closed {
		if !strings.Contains(err.Error(), a) {
			t.Errorf("the error does not name %s: %v", a, err)
		}
	}
	if !strings.Contains(err.Error(), "none of the DSN's 2 servers") || strings.Contains(err.Error(), "hunter22") {
		t.Errorf("error %v", err)
	}
}

// TestLostRole: with pool_target=primary, a write the server refused for
// --read-only is a lost role; one refused by a READ ONLY transaction, or
// for another option, or without pool_target=primary, is not.
func TestLostRole(t *testing.T) {
	readOnly := &mysql.MySQLError{Number: 1290, Message: "The MariaDB server is running with the --read-only option so it cannot execute this statement"}
	for _, tc := range []struct {
		target target
		err    error
		lost   bool
	}{
		{targetPrimary, readOnly, true},
		{targetPrimary, fmt.Errorf("wrapped: %w", readOnly), true},
		{targetPrimary, &mysql.MySQLError{Number: 1290, Message: "The MySQL server is running with the --super-read-only option so it cannot execute this statement"}, true},
		{targetPrimary, &mysql.MySQLError{Number: 1290, Message: "The MySQL server is running with the --secure-file-priv option so it cannot execute this statement"}, false},
		{targetPrimary, &mysql.MySQLError{Number: 1792, Message: "Cannot execute statement in a READ ONLY transaction."}, false},
		{targetPrimary, errors.New("read-only"), false},
		{targetAny, readOnly, false},
	} {
		c := &conn{t: &template{target: tc.target}, addr: "db1:3306"}
		server, lost := c.LostRole(tc.err)
		if lost != tc.lost || lost && server != "db1:3306" {
			t.Errorf("target %d, %v: %q, %v; want %v", tc.target, tc.err, server, lost, tc.lost)
		}
	}
}
