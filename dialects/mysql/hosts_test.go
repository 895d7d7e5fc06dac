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
// driver the first; pool_target is pooldriver's, which hands it back to
// the template (Targeted).
func TestParseHosts(t *testing.T) {
	for _, tc := range []struct {
		dsn      string
		hosts    []string
		redacted string
	}{
		{"mysql://app:pw@db1:3307,db2,[::1]:3308/shop?pool_target=primary&pool_max_conns=4",
			[]string{"db1:3307", "db2:3306", "[::1]:3308"},
			"mysql://app:xxxxx@tcp(db1:3307,db2:3306,[::1]:3308)/shop"},
		{"mysql://app@tcp(db1, db2:3310)/shop?parseTime=true",
			[]string{"db1:3306", "db2:3310"},
			"mysql://app@tcp(db1:3306,db2:3310)/shop?parseTime=true"},
		{"mysql://app@db1/shop?pool_target=any", nil, "mysql://app@tcp(db1:3306)/shop"},
	} {
		tmpl, params, err := Dialect.Parse(tc.dsn)
		if err != nil {
			t.Fatalf("%s: %v", tc.dsn, err)
		}
		tm := tmpl.(*template)
		if !slices.Equal(tm.hosts, tc.hosts) || tm.target != dialects.TargetAny {
			t.Errorf("%s: hosts %q, target %v; want %q, any", tc.dsn, tm.hosts, tm.target, tc.hosts)
		}
		if tc.hosts != nil && tm.cfg.Addr != tc.hosts[0] {
			t.Errorf("%s: the driver's address %q, want the first server", tc.dsn, tm.cfg.Addr)
		}
		if strings.Contains(tc.dsn, "pool_target=") && params["pool_target"] == "" {
			t.Errorf("%s: pool_target not left to pooldriver's parameters (%v)", tc.dsn, params)
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
		primary, err := tm.Targeted(dialects.TargetPrimary)
		if err != nil {
			t.Fatalf("%s: Targeted: %v", tc.dsn, err)
		}
		if got := primary.(*template).target; got != dialects.TargetPrimary || tm.target != dialects.TargetAny {
			t.Errorf("%s: Targeted(primary) gave %v and left the template at %v", tc.dsn, got, tm.target)
		}
	}
}

// TestParseHostsErrors: a list with an empty or malformed entry, and a
// list on a network other than tcp, are errors that name what is wrong
// and show no password.
func TestParseHostsErrors(t *testing.T) {
	for _, tc := range []struct{ dsn, want string }{
		{"mysql://app:hunter22@tcp(db1,,db2)/shop", "is not host"},
		{"mysql://app:hunter22@tcp(db1,db2:99999)/shop", "is not host"},
		{"mysql://app:hunter22@unix(/a.sock,/b.sock)/shop", "only a tcp address"},
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
		target dialects.Target
		err    error
		lost   bool
	}{
		{dialects.TargetPrimary, readOnly, true},
		{dialects.TargetPrimary, fmt.Errorf("wrapped: %w", readOnly), true},
		{dialects.TargetPrimary, &mysql.MySQLError{Number: 1290, Message: "The MySQL server is running with the --super-read-only option so it cannot execute this statement"}, true},
		{dialects.TargetPrimary, &mysql.MySQLError{Number: 1290, Message: "The MySQL server is running with the --secure-file-priv option so it cannot execute this statement"}, false},
		{dialects.TargetPrimary, &mysql.MySQLError{Number: 1792, Message: "Cannot execute statement in a READ ONLY transaction."}, false},
		{dialects.TargetPrimary, errors.New("read-only"), false},
		{dialects.TargetAny, readOnly, false},
	} {
		c := &conn{t: &template{target: tc.target}, addr: "db1:3306"}
		server, lost := c.LostRole(tc.err)
		if lost != tc.lost || lost && server != "db1:3306" {
			t.Errorf("target %d, %v: %q, %v; want %v", tc.target, tc.err, server, lost, tc.lost)
		}
	}
}
