package mysql

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"net"
	"reflect"
	"strconv"
	"strings"

	"github.com/go-sql-driver/mysql"

	"github.com/pooldriver/pooldriver/dialects"
)

// Dialect is the MySQL/MariaDB dialect. It is registered for the scheme
// "mysql" when the package is imported.
var Dialect dialects.Dialect = mysqlDialect{}

func init() {
	if err := dialects.Register(Dialect, "mysql"); err != nil {
		panic(err)
	}
	dialects.RegisterConnAdapter(adapt)
	dialects.RegisterConnLimitDetector(atConnLimit)
	dialects.RegisterPermanentErrorDetector(permanentConnectError)
}

// driverPkgPath is the import path of go-sql-driver/mysql as this binary
// has it, taken from one of its exported types.
var driverPkgPath = reflect.TypeFor[mysql.Config]().PkgPath()

// isDriverConn reports a connection of go-sql-driver/mysql. Its type,
// *mysqlConn, is unexported, so it is recognized by its package and name.
func isDriverConn(dc driver.Conn) bool {
	t := reflect.TypeOf(dc)
	return t != nil && t.Kind() == reflect.Pointer &&
		t.Elem().Name() == "mysqlConn" && t.Elem().PkgPath() == driverPkgPath
}

// adapt is the dialect's ConnAdapter: it gives a connection of
// go-sql-driver/mysql that pooldriver.Wrap opened this dialect's tracking
// of transactions (through @@in_transaction; read at the first TxStatus,
// since adapting may not talk to the server) and of session changes. Its
// socket is out of reach, so its session cannot be reset: pooldriver
// replaces such a connection instead.
func adapt(dc driver.Conn) (dialects.Conn, bool) {
	if !isDriverConn(dc) {
		return nil, false
	}
	c, ok := wrapConn(nil, dc, nil)
	if !ok {
		return nil, false
	}
	c.useCatalog(nil) // read at the first statement it may be read after
	return c, true
}

type mysqlDialect struct{}

func (mysqlDialect) Name() string { return "mysql" }

// Parse reads "mysql://" followed by a go-sql-driver DSN. The pool_*
// parameters are removed; the rest is parsed once with mysql.ParseDSN.
func (mysqlDialect) Parse(dsn string) (dialects.Template, map[string]string, error) {
	const scheme = "mysql://"
	if len(dsn) < len(scheme) || !strings.EqualFold(dsn[:len(scheme)], scheme) {
		return nil, nil, fmt.Errorf("pooldriver: mysql: DSN must start with %s", scheme)
	}
	d, err := split(dsn[len(scheme):])
	if err != nil {
		return nil, nil, err
	}
	first, hosts, err := splitHosts(d.driverDSN)
	if err != nil {
		return nil, nil, err
	}
	cfg, err := parseDriverDSN(first)
	if err != nil {
		return nil, nil, err
	}
	t := &template{cfg: cfg, charsets: d.charsets, trackOff: stateChangeOff(cfg.Params), hosts: hosts, domain: &gtidDomain{}}
	switch cfg.Net {
	case "tcp", "tcp4", "tcp6", "unix":
		t.dial = true
	}
	switch {
	case cfg.TLS != nil:
		t.noRawReset = "TLS is enabled"
	case d.compress:
		t.noRawReset = "compression is enabled"
	case cfg.Net != "tcp" && cfg.Net != "tcp4" && cfg.Net != "tcp6" && cfg.Net != "unix":
		t.noRawReset = fmt.Sprintf("network %q is a custom dialer", cfg.Net)
	}
	redacted := cfg.Clone()
	if redacted.Passwd != "" {
		redacted.Passwd = "xxxxx"
	}
	if hosts != nil {
		redacted.Addr = strings.Join(hosts, ",")
	}
	t.redacted = scheme + redacted.FormatDSN()
	return t, d.params, nil
}

// parseDriverDSN parses a go-sql-driver DSN without ever quoting its
// password. The driver splits a DSN at its last '/' first, so a password
// with a '/' in a DSN without "/dbname" lands in another field, and the
// driver's error (or a later String) would show part of it. So the DSN is
// first parsed with everything that could be the password (from the first
// ':' to the last '@' before the parameters) replaced: an error then names
// the real mistake ("missing the slash ..."), and can quote nothing of the
// password. A DSN whose database name holds an '@' fails that reading; it
// is accepted if the narrower one (the password ends at the '@' that starts
// the address, "@tcp(" or "@/") parses and the driver reads that very
// password from the real DSN.
func parseDriverDSN(dsn string) (*mysql.Config, error) {
	lastAt := strings.LastIndexByte(dsn, '@')
	colon := -1
	if lastAt >= 0 {
		colon = strings.IndexByte(dsn[:lastAt], ':')
	}
	if colon < 0 {
		cfg, err := mysql.ParseDSN(dsn)
		if err != nil {
			return nil, invalidDSN(err, passwordCandidates(dsn)...)
		}
		return cfg, nil
	}
	redact := func(at int) string { return dsn[:colon+1] + "xxxxx" + dsn[at:] }
	head := dsn[:paramsStart(dsn)]
	if wideAt := strings.LastIndexByte(head, '@'); wideAt > colon {
		if _, err := mysql.ParseDSN(redact(wideAt)); err == nil {
			cfg, err := mysql.ParseDSN(dsn)
			if err != nil {
				return nil, errPasswordApart
			}
			return cfg, nil
		}
	}
	if at := addressAt(head); at > colon {
		if _, err := mysql.ParseDSN(redact(at)); err == nil {
			if cfg, err := mysql.ParseDSN(dsn); err == nil && cfg.Passwd == dsn[colon+1:at] {
				return cfg, nil
			}
		}
	}
	// Malformed: word the error from the widest reading of the password,
	// which hides the most.
	if _, err := mysql.ParseDSN(redact(lastAt)); err != nil {
		return nil, invalidDSN(err, dsn[colon+1:lastAt])
	}
	return nil, errPasswordApart
}

var errPasswordApart = &redactedError{msg: "pooldriver: mysql: invalid DSN: the password cannot be told apart from the rest of the DSN (escape it, or give it with WithCredentials)"}

// invalidDSN words a driver's parse error, scrubbed of secrets.
func invalidDSN(err error, secrets ...string) error {
	return &redactedError{msg: "pooldriver: mysql: invalid DSN: " + dialects.Scrub(strings.TrimPrefix(err.Error(), "invalid DSN: "), secrets...)}
}

// paramsStart returns where the parameters of a go-sql-driver DSN start:
// at the first '?' after the last '/', as the driver reads it; len(dsn)
// without any.
func paramsStart(dsn string) int {
	slash := strings.LastIndexByte(dsn, '/')
	if slash < 0 {
		return len(dsn)
	}
	if q := strings.IndexByte(dsn[slash:], '?'); q >= 0 {
		return slash + q
	}
	return len(dsn)
}

// addressAt returns the last '@' of s that starts an address part: a
// network name followed by '(' ("@tcp(host)"), or '/' ("@/db",
// "@tcp/db"); -1 if none does.
func addressAt(s string) int {
	for at := strings.LastIndexByte(s, '@'); at >= 0; at = strings.LastIndexByte(s[:at], '@') {
		rest := s[at+1:]
		i := 0
		for i < len(rest) && (rest[i] >= 'a' && rest[i] <= 'z' || rest[i] >= 'A' && rest[i] <= 'Z' || rest[i] >= '0' && rest[i] <= '9') {
			i++
		}
		if i < len(rest) && (rest[i] == '(' || rest[i] == '/') {
			return at
		}
	}
	return -1
}

// template is immutable once built: Open clones cfg before changing it.
type template struct {
	cfg        *mysql.Config
	charsets   []string // as in the DSN; the driver keeps its copy private
	redacted   string
	noRawReset string          // why ResetSession cannot reach the socket, or ""
	dial       bool            // the network is one the dialect dials itself (not a custom dialer's)
	trackOff   bool            // the DSN turns session_track_state_change off: leave the tracker alone
	hosts      []string        // the servers a DSN names several of, each host:port; nil: cfg.Addr alone (hosts.go)
	target     dialects.Target // pool_target (Targeted)
	standby    bool            // a replica's template (Standbys): its server must run read-only
	domain     *gtidDomain     // the replication domain of the positions, shared with the copies (gtids.go)
}

var (
	_ dialects.Template               = (*template)(nil)
	_ dialects.ConnLimitDetector      = (*template)(nil)
	_ dialects.PermanentErrorDetector = (*template)(nil)
	_ dialects.AddressedTemplate      = (*template)(nil)
)

func (t *template) Credentials() dialects.Credentials {
	return dialects.Credentials{User: t.cfg.User, Password: t.cfg.Passwd}
}

func (t *template) String() string { return t.redacted }

// Address is the DSN's host and port (the driver's defaults, 127.0.0.1
// and 3306, when it gives none), its other servers where it names several,
// and database; for a unix socket, the
// socket's path and no port; for a custom dialer's network, its address as
// written.
func (t *template) Address() dialects.Address {
	a := dialects.Address{Host: t.cfg.Addr, Database: t.cfg.DBName}
	if t.cfg.Net == "unix" {
		return a
	}
	if h, p, err := net.SplitHostPort(t.cfg.Addr); err == nil {
		if n, err := strconv.Atoi(p); err == nil && n > 0 {
			a.Host, a.Port = h, n
		}
	}
	for _, h := range t.hosts[min(1, len(t.hosts)):] {
		host, p, _ := net.SplitHostPort(h)
		n, _ := strconv.Atoi(p)
		a.Others = append(a.Others, dialects.Address{Host: host, Port: n})
	}
	return a
}

// Open opens a connection to the DSN's server, or to the first of its
// servers that answers and is the target (hosts.go).
func (t *template) Open(ctx context.Context, c dialects.Credentials) (dialects.Conn, error) {
	return t.open(ctx, c)
}

// openAt opens a connection to addr ("": the DSN's address), and fails it
// if its server is not the DSN's target.
func (t *template) openAt(ctx context.Context, c dialects.Credentials, addr string) (dialects.Conn, error) {
	cfg := t.cfg.Clone()
	cfg.User = c.User
	cfg.Passwd = c.Password
	if addr != "" && addr != cfg.Addr {
		retarget(cfg, addr)
	}
	var w *wire
	if t.dial {
		// Dial the socket, and watch it: the status flags of every reply
		// tell the transaction state and session changes (see wire), and
		// ResetSession sends COM_RESET_CONNECTION on it, which the driver
		// has no method for.
		cfg.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
			nc, err := dial(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			w = newWire(nc, !t.trackOff)
			return w, nil
		}
	}
	connector, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, t.openError(err, c.Password)
	}
	dc, err := connector.Connect(ctx)
	if err != nil {
		return nil, t.openError(err, c.Password)
	}
	mc, err := newConn(t, dc, w)
	if err != nil {
		return nil, err
	}
	mc.addr = cfg.Addr
	if err := mc.checkRole(ctx); err != nil {
		_ = mc.Close()
		return nil, err
	}
	if err := mc.startTracking(ctx); err != nil {
		_ = mc.Close()
		return nil, err
	}
	// Learn the starting state (the server's or the DSN's autocommit, and
	// the role, which a reset restores).
	if err := mc.baseline(ctx); err != nil {
		_ = mc.Close()
		return nil, err
	}
	if mc.sock != nil {
		if err := mc.learnRole(ctx); err != nil {
			_ = mc.Close()
			return nil, err
		}
	}
	// Read the server's catalog (see shadows) if no connection has
	// yet: with autocommit on only, where the SELECT cannot open a
	// transaction. A due reading is read again by a statement's
	// connection, not on the connect path.
	mc.useCatalog(cfg)
	if mc.cat != nil && mc.baseAuto == 1 && mc.cat.Current() == nil {
		if _, err := mc.loadCatalog(ctx, true); err != nil {
			_ = mc.Close()
			return nil, err
		}
	}
	if w == nil {
		return mc, nil
	}
	return &wiredConn{mc}, nil
}

// trackStateChange turns on the server's report of any change of the
// session's state (SERVER_SESSION_STATE_CHANGED): user variables, session
// variables, temporary tables, prepared statements, the current database.
const trackStateChange = "session_track_state_change = ON"

// trackedList is the session's list of the system variables whose new
// values the server reports: after the driver's connect, the DSN's or the
// server's.
const trackedList = "@@session.session_track_system_variables"

// tracked returns the assignments that turn c's session tracking on. On
// MariaDB they add last_gtid to list, an SQL expression of the system
// variables whose new values the server reports: each commit's GTID then
// comes with its OK packet (gtids.go). CONCAT_WS keeps the list, and an
// empty one.
func (c *conn) tracked(list string) string {
	if c.gtids {
		return trackStateChange + ", session_track_system_variables = CONCAT_WS(',', NULLIF(" + list + ", ''), 'last_gtid')"
	}
	return trackStateChange
}

// startTracking turns the server's session tracking on, where the wire
// agreed CLIENT_SESSION_TRACK with it and the DSN does not turn it off. A
// server that refuses (MySQL before 5.7 and MariaDB before 10.2 lack the
// variable; a proxy may offer CLIENT_SESSION_TRACK and reject the SET)
// tracks nothing: the statement's text is then all there is. Only an
// error of the connection itself fails.
func (c *conn) startTracking(ctx context.Context) error {
	if c.w == nil || c.t == nil || c.t.trackOff || c.w.state.Load()&(wireTracked|wireLost) != wireTracked {
		return nil
	}
	c.gtids = c.w.serverCaps&capMySQL == 0 // MariaDB
	if _, err := c.execer.ExecContext(ctx, "SET "+c.tracked(trackedList), nil); err != nil {
		c.gtids = false
		var me *mysql.MySQLError
		if errors.As(err, &me) {
			return nil
		}
		return fmt.Errorf("pooldriver: mysql: turning session tracking on: %w", err)
	}
	c.tracking = true
	return nil
}

// paramName returns the system variable a DSN parameter k sets, under
// any of its spellings (@@session.x, `x`, LOCAL.x), in lower case.
func paramName(k string) string {
	name := strings.ToLower(strings.Trim(k, "` "))
	name = strings.TrimPrefix(name, "@@")
	for _, scope := range []string{"session.", "local."} {
		name = strings.TrimPrefix(name, scope)
	}
	return strings.Trim(name, "`")
}

// stateChangeOff reports DSN parameters (system variables the driver sets
// at connect) that turn session_track_state_change off, under any of its
// spellings: the dialect then leaves it so.
func stateChangeOff(params map[string]string) bool {
	for k, v := range params {
		if paramName(k) != "session_track_state_change" {
			continue
		}
		switch strings.ToUpper(strings.Trim(v, "'\"` ")) {
		case "OFF", "0", "FALSE":
			return true
		}
	}
	return false
}

// openError is the error of a failed connect, scrubbed of the passwords.
func (t *template) openError(err error, password string) error {
	secrets := []string{password, t.cfg.Passwd}
	if len(secrets[1]) > len(secrets[0]) {
		secrets[0], secrets[1] = secrets[1], secrets[0]
	}
	msg := err.Error()
	if scrubbed := dialects.Scrub(msg, secrets...); scrubbed != msg {
		return &redactedError{msg: "pooldriver: mysql: " + scrubbed, cause: cleanCause(err, secrets)}
	}
	// Nothing to hide: the driver's own error, as the plain driver returns
	// it (callers compare a dialer's error with ==).
	return err
}

// cleanCause returns what a scrubbed error may unwrap to: the first error
// of err's chain that holds no secret, nor does anything it unwraps to (a
// net or context error, say); a *mysql.MySQLError on the way is rebuilt
// scrubbed, so that errors.As still finds its number. nil if none.
func cleanCause(err error, secrets []string) error {
	for e := err; e != nil; e = errors.Unwrap(e) {
		if clean(e, secrets) {
			return e
		}
		if me, ok := e.(*mysql.MySQLError); ok {
			scrubbed := *me
			scrubbed.Message = dialects.Scrub(me.Message, secrets...)
			return &scrubbed
		}
	}
	return nil
}

// clean reports whether neither err's text nor that of anything it unwraps
// to holds a secret.
func clean(err error, secrets []string) bool {
	if msg := err.Error(); dialects.Scrub(msg, secrets...) != msg {
		return false
	}
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		if next := u.Unwrap(); next != nil {
			return clean(next, secrets)
		}
	case interface{ Unwrap() []error }:
		for _, next := range u.Unwrap() {
			if next != nil && !clean(next, secrets) {
				return false
			}
		}
	}
	return true
}

// redactedError carries a message from which every password has been
// removed; it unwraps to a cause that holds none either (see cleanCause),
// or to nothing.
type redactedError struct {
	msg   string
	cause error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.cause }

// AtConnLimit reports the server's refusal of a connection for want of room:
// 1040 (ER_CON_COUNT_ERROR, max_connections), 1203
// (ER_TOO_MANY_USER_CONNECTIONS) and 1226 (ER_USER_LIMIT_REACHED,
// max_user_connections).
func (t *template) AtConnLimit(err error) bool { return atConnLimit(err) }

func atConnLimit(err error) bool {
	var me *mysql.MySQLError
	if !errors.As(err, &me) {
		return false
	}
	switch me.Number {
	case 1040, 1203, 1226:
		return true
	}
	return false
}

// PermanentConnectError reports a refusal that trying again does not cure:
// 1044 and 1045 (access denied), 1698 (access denied to a user the server
// authenticates otherwise), 1049 (unknown database), 1251 (an
// authentication protocol the client lacks), the driver's own refusals of
// the server's authentication plugin or TLS, a port that refuses the
// connection, and TLS failures (see dialects.PermanentNetError). The
// connection limits (AtConnLimit) and 1053 (shutting down) are transient.
func (t *template) PermanentConnectError(err error) bool { return permanentConnectError(err) }

func permanentConnectError(err error) bool {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		switch me.Number {
		case 1044, 1045, 1049, 1251, 1698:
			return true
		}
		return false
	}
	for _, e := range []error{mysql.ErrNoTLS, mysql.ErrNativePassword, mysql.ErrCleartextPassword, mysql.ErrOldPassword, mysql.ErrUnknownPlugin} {
		if errors.Is(err, e) {
			return true
		}
	}
	return dialects.PermanentNetError(err)
}
