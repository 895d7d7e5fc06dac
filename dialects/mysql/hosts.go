package mysql

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/go-sql-driver/mysql"

	"github.com/pooldriver/pooldriver/dialects"
)

// A DSN may name several servers, tcp(db1:3306,db2:3306) or, in the URL
// form, db1:3306,db2:3306: a new connection goes to the first that answers
// and, with pool_target=primary (Targeted), takes writes (@@global.read_only off).
// When a write is refused because its server turned read-only, LostRole
// says so, and pooldriver retires the connections opened so far: the next
// ones go where the DSN's servers now take writes.

var _ dialects.RoleLossDetector = (*conn)(nil)

var _ dialects.TargetTemplate = (*template)(nil)

// Targeted returns a copy of t whose new connections go to the first of
// its servers that takes writes, where target is dialects.TargetPrimary
// (pool_target=primary): one whose @@global.read_only is off.
func (t *template) Targeted(target dialects.Target) (dialects.Template, error) {
	n := *t
	n.target = target
	return &n, nil
}

// defaultPort is the port go-sql-driver gives a tcp address without one.
const defaultPort = "3306"

// splitHosts takes the servers out of a go-sql-driver DSN whose tcp
// address names several, tcp(db1:3306,db2): it returns the DSN with the
// first of them alone, for the driver's parser, and every one with its
// port (3306 where none is given). A DSN naming one server comes back as
// it is, with no hosts. An empty or malformed entry is an error that
// quotes no part of the DSN but the addresses.
func splitHosts(dsn string) (string, []string, error) {
	slash := strings.LastIndexByte(dsn, '/')
	if slash < 0 {
		return dsn, nil, nil
	}
	at := strings.LastIndexByte(dsn[:slash], '@')
	addr := dsn[at+1 : slash]
	open := strings.IndexByte(addr, '(')
	if open < 0 || !strings.HasSuffix(addr, ")") || !strings.Contains(addr, ",") {
		return dsn, nil, nil
	}
	switch addr[:open] {
	case "tcp", "tcp4", "tcp6":
	default:
		return "", nil, fmt.Errorf("pooldriver: mysql: invalid DSN: only a tcp address may name several servers, not %s", addr[:open])
	}
	var hosts []string
	for h := range strings.SplitSeq(addr[open+1:len(addr)-1], ",") {
		h = strings.TrimSpace(h)
		if !hostPort(h) {
			return "", nil, fmt.Errorf("pooldriver: mysql: invalid DSN: server %q of a list is not host, host:port or [ipv6]:port", h)
		}
		if _, _, err := net.SplitHostPort(h); err != nil {
			h = net.JoinHostPort(strings.Trim(h, "[]"), defaultPort)
		}
		hosts = append(hosts, h)
	}
	first := dsn[:at+1] + addr[:open+1] + hosts[0] + ")" + dsn[slash:]
	return first, hosts, nil
}

// open opens a connection as the DSN's servers and target say: to its
// one server, or to each of its servers in turn until one answers and, for
// dialects.TargetPrimary, takes writes. The error of a DSN whose servers all fail
// says what each did.
func (t *template) open(ctx context.Context, c dialects.Credentials) (dialects.Conn, error) {
	hosts := t.hosts
	if len(hosts) == 0 {
		if t.target == dialects.TargetAny {
			return t.openAt(ctx, c, "")
		}
		hosts = []string{t.cfg.Addr}
	}
	var errs []error
	for _, h := range hosts {
		dc, err := t.openAt(ctx, c, h)
		if err == nil {
			return dc, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	if len(errs) == 1 {
		return nil, errs[0]
	}
	return nil, fmt.Errorf("pooldriver: mysql: none of the DSN's %d servers could be used: %w", len(hosts), errors.Join(errs...))
}

// ErrReadOnly is what a connect returns, wrapped, when pool_target=primary
// and the server's @@global.read_only is on.
var ErrReadOnly = errors.New("pooldriver: mysql: the server is read-only (@@global.read_only), and pool_target=primary asks for one that takes writes")

// isZero reports a 0 the driver returned as bytes or an integer.
func isZero(v driver.Value) bool {
	switch x := v.(type) {
	case []byte:
		return string(x) == "0"
	case int64:
		return x == 0
	}
	return false
}

// errReadOnlyServer is ER_OPTION_PREVENTS_STATEMENT: a statement refused
// for an option the server runs with, --read-only (or --super-read-only)
// for a write.
const errReadOnlyServer = 1290

// LostRole reports, for a connection whose DSN asks for a server that
// takes writes (pool_target=primary), that err refused a write because
// the server runs read-only as a whole (see dialects.RoleLossDetector):
// error 1290 for the --read-only option. A write refused in a transaction
// begun READ ONLY is another error (1792) and is not a lost role.
func (c *conn) LostRole(err error) (server string, lost bool) {
	if c.t == nil || c.t.target != dialects.TargetPrimary {
		return "", false
	}
	var me *mysql.MySQLError
	if !errors.As(err, &me) || me.Number != errReadOnlyServer || !strings.Contains(strings.ToLower(me.Message), "read-only") {
		return "", false
	}
	return c.server(), true
}

// server returns the address c reached.
func (c *conn) server() string {
	if c.addr != "" {
		return c.addr
	}
	if c.w != nil {
		return c.w.RemoteAddr().String()
	}
	return "?"
}

// retarget points cfg, a clone of the DSN's configuration, at addr, one of
// its servers: a TLS configuration the driver named after the first
// server (its ServerName) is named after addr.
func retarget(cfg *mysql.Config, addr string) {
	first, _, _ := net.SplitHostPort(cfg.Addr)
	cfg.Addr = addr
	if cfg.TLS != nil && cfg.TLS.ServerName == first {
		host, _, _ := net.SplitHostPort(addr)
		cfg.TLS = cfg.TLS.Clone()
		cfg.TLS.ServerName = host
	}
}
