package postgres

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"net"
	"sort"
	"strings"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/pooldriver/pooldriver/dialects"
)

// Dialect is the PostgreSQL dialect. It is registered for the schemes
// "postgres" and "postgresql" when the package is imported.
var Dialect dialects.Dialect = pgDialect{}

func init() {
	if err := dialects.Register(Dialect, "postgres", "postgresql"); err != nil {
		panic(err)
	}
	dialects.RegisterConnAdapter(adapt)
	dialects.RegisterConnLimitDetector(atConnLimit)
	dialects.RegisterPermanentErrorDetector(permanentConnectError)
}

type pgDialect struct{}

func (pgDialect) Name() string { return "postgres" }

// Parse splits the pool_* parameters off dsn and parses the rest with
// pgx.ParseConfig, once. Environment variables and the password file apply
// as they do for pgx (PGHOST, PGPASSWORD, ~/.pgpass, ...).
func (pgDialect) Parse(dsn string) (dialects.Template, map[string]string, error) {
	d, err := split(dsn)
	if err != nil {
		return nil, nil, err
	}
	cfg, err := pgx.ParseConfig(d.driverDSN)
	if err != nil {
		return nil, nil, parseError(err, d.secrets)
	}
	return &template{cfg: cfg, redacted: d.redacted, execModeSet: d.execMode, role: roleOf(cfg.ValidateConnect), hosts: newHostOrder(&cfg.Config),
		reached: new(atomic.Pointer[dialects.Catalog[*pgCatalog]])}, d.params, nil
}

// template is immutable once built: Open copies cfg before changing it, and
// BehindPooler returns a changed copy.
type template struct {
	cfg         *pgx.ConnConfig
	redacted    string
	execModeSet bool // the DSN sets default_query_exec_mode

	checkPooler bool       // refuse a pooler found at the address (pool_server_pooling unset)
	unnamed     bool       // prepare statements unnamed (behind a transaction pooler)
	role        role       // what target_session_attrs asks of a server
	hosts       *hostOrder // a multi-host DSN's hosts that failed slowly go last; nil: one host

	// reached is the catalog (dialects.CatalogFor) of the server and
	// database the template's newest connection reached, whose reading
	// ReadsOnly proves reads by, without a connection; nil for a
	// standby's template (Standbys). Its key is the address a connection
	// reached, which the template alone cannot tell (a host name may
	// resolve to several addresses, a multi-host DSN's connections reach
	// whichever host is the primary): its connections record it. Any
	// host's reading serves, the newest being the likeliest fresh: the
	// hosts of pool_reads are one database's primary and its physical
	// standbys, whose catalogs are the same. Shared by the template's
	// copies (BehindPooler).
	reached *atomic.Pointer[dialects.Catalog[*pgCatalog]]
}

var (
	_ dialects.ConfigurableTemplate   = (*template)(nil)
	_ dialects.ConnLimitDetector      = (*template)(nil)
	_ dialects.PermanentErrorDetector = (*template)(nil)
	_ dialects.AddressedTemplate      = (*template)(nil)
)

var _ dialects.PoolerTemplate = (*template)(nil)

func (t *template) Credentials() dialects.Credentials {
	return dialects.Credentials{User: t.cfg.User, Password: t.cfg.Password}
}

func (t *template) String() string { return t.redacted }

// Address is the DSN's first host, then the others that pgx tries after
// it (each once, though pgx tries one twice with sslmode=prefer), its port
// and database, as pgx read them (environment variables and defaults
// included). For a unix socket the host is the socket's directory
// (/var/run/postgresql), and the port the one in the socket's name.
func (t *template) Address() dialects.Address {
	a := dialects.Address{Host: t.cfg.Host, Port: int(t.cfg.Port), Database: t.cfg.Database}
	type hostPort struct {
		host string
		port uint16
	}
	seen := map[hostPort]bool{{t.cfg.Host, t.cfg.Port}: true}
	for _, f := range t.cfg.Fallbacks {
		if hp := (hostPort{f.Host, f.Port}); !seen[hp] {
			seen[hp] = true
			a.Others = append(a.Others, dialects.Address{Host: f.Host, Port: int(f.Port)})
		}
	}
	return a
}

func (t *template) Open(ctx context.Context, c dialects.Credentials) (dialects.Conn, error) {
	return t.OpenConfigured(ctx, c, nil)
}

// OpenConfigured is Open with before given the connection's own
// *pgx.ConnConfig first (see dialects.ConfigurableTemplate).
func (t *template) OpenConfigured(ctx context.Context, c dialects.Credentials, before func(context.Context, any) error) (dialects.Conn, error) {
	cfg := t.cfg.Copy()
	cfg.User = c.User
	cfg.Password = c.Password
	if before != nil {
		if err := before(ctx, cfg); err != nil {
			return nil, &redactedError{msg: dialects.Scrub(err.Error(), cfg.Password, c.Password, t.cfg.Password), cause: err}
		}
	}
	w := new(paramWatch)
	cfg.BuildFrontend = watchFrontend(w, cfg.BuildFrontend)
	var tried func(ok bool)
	if t.hosts != nil {
		tried = t.hosts.connect(&cfg.Config)
	}
	dc, err := stdlib.GetConnector(*cfg).Connect(ctx)
	if tried != nil {
		tried(err == nil)
	}
	if err != nil {
		return nil, connectError(err, cfg.Password, c.Password, t.cfg.Password)
	}
	sc, ok := dc.(*stdlib.Conn)
	if !ok {
		_ = dc.Close()
		return nil, fmt.Errorf("pooldriver: postgres: pgx stdlib returned %T, want *stdlib.Conn", dc)
	}
	// The first connection to a server and database reads its catalog
	// now, and so does one that finds the reading no longer Fresh where no
	// other connection reads it (freshen); a reading that is only due is
	// read again off the callers' paths, not on the connect path (a new
	// server process reads it slowest).
	pg := sc.Conn().PgConn()
	cat := dialects.CatalogFor[*pgCatalog](catalogKey(pg, cfg.Database))
	askID := t.hosts != nil && cat.Current() == nil // a sibling's reading may do (hostOrder.sibling)
	id := func() string { return serverID(ctx, pg) }
	if t.checkPooler {
		sid, err := checkNoPooler(ctx, pg, askID)
		if err != nil {
			_ = sc.Close()
			return nil, err
		}
		id = func() string { return sid }
	}
	if t.reached != nil {
		t.reached.Store(cat)
	}
	pc := newConn(sc, w)
	pc.unnamed = t.unnamed
	pc.role = t.role
	if t.hosts != nil {
		t.hosts.sibling(cat, cfg.Database, id)
	}
	if snap := cat.Current(); snap == nil {
		pc.shadows(pg, true)
	} else if !snap.Fresh() {
		if err := pc.freshen(ctx, pg); err != nil {
			_ = sc.Close()
			return nil, err
		}
	}
	return pc, nil
}

// redactedError carries a message from which every password has been
// removed. It unwraps to a cause that holds no configuration, so that
// errors.Is and errors.As still reach *pgconn.PgError, net errors and
// context errors.
type redactedError struct {
	msg   string
	cause error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.cause }

// parseError rewrites an error of pgx.ParseConfig. pgx masks passwords on a
// best-effort basis only, and *pgconn.ParseConfigError keeps the original
// DSN in a public field, so the error is neither quoted as is nor wrapped.
func parseError(err error, secrets []string) error {
	msg := err.Error()
	var pe *pgconn.ParseConfigError
	if errors.As(err, &pe) {
		// Drop the quoted DSN: "cannot parse `<dsn>`: <what went wrong>".
		if i := strings.LastIndex(msg, "`: "); i >= 0 {
			msg = msg[i+len("`: "):]
		}
	}
	// pgx quotes pieces of a malformed DSN, which may hold a password that
	// landed where no password was expected.
	return &redactedError{msg: "pooldriver: postgres: invalid DSN: " + dialects.Scrub(dropQuoted(msg), secrets...)}
}

// dropQuoted replaces everything from the first to the last double quote of
// msg: pgx does not escape quotes inside what it quotes, so pairs cannot be
// trusted.
func dropQuoted(msg string) string {
	i := strings.IndexByte(msg, '"')
	if i < 0 {
		return msg
	}
	j := strings.LastIndexByte(msg, '"')
	if j == i {
		return msg[:i] + `"…"`
	}
	return msg[:i] + `"…"` + msg[j+1:]
}

// connectError rewrites an error of a connection attempt. *pgconn.ConnectError
// holds the whole configuration, password included, so the result unwraps to
// its cause instead. The message leads with the cause (the server's FATAL,
// the dial's "connection refused"), then where pgx was connecting, in
// parentheses: pgx's own message has it the other way round, the cause a
// hundred characters or more in.
func connectError(err error, passwords ...string) error {
	cause := err
	msg := err.Error()
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) {
		if inner := ce.Unwrap(); inner != nil {
			cause = inner
			// Lead with the server's error, or the dial's, not with the
			// host pgx names first.
			lead := inner
			var pe *pgconn.PgError
			var oe *net.OpError
			var de *net.DNSError
			switch {
			case errors.As(inner, &pe):
				lead = pe
			case errors.As(inner, &oe):
				lead = oe
			case errors.As(inner, &de):
				lead = de
			}
			msg = causeFirst(msg, lead.Error())
		}
	}
	sort.Slice(passwords, func(i, j int) bool { return len(passwords[i]) > len(passwords[j]) })
	return &redactedError{msg: "pooldriver: postgres: " + dialects.Scrub(msg, passwords...), cause: cause}
}

// causeFirst returns msg, which ends with the text of its cause, with the
// cause moved to the front: "cause (the rest)". A msg that does not end
// with cause is returned as it is.
func causeFirst(msg, cause string) string {
	rest, ok := strings.CutSuffix(msg, cause)
	if !ok || rest == "" {
		return msg
	}
	rest = strings.TrimRight(rest, ": ")
	return cause + " (" + rest + ")"
}

// AtConnLimit reports the server's refusal of a connection for want of room:
// SQLSTATE 53300, too_many_connections (max_connections, a role's or a
// database's CONNECTION LIMIT).
func (t *template) AtConnLimit(err error) bool { return atConnLimit(err) }

func atConnLimit(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "53300"
}

// PermanentConnectError reports a refusal that trying again does not cure:
// SQLSTATE 28P01 (the password failed), 28000 (no pg_hba.conf entry, a
// role that may not log in or does not exist), 3D000 (no such database),
// a port that refuses the connection, and TLS the server refuses or
// fails (see dialects.PermanentNetError). 53300 (too many connections)
// and 57P03 (starting up, shutting down) are transient.
func (t *template) PermanentConnectError(err error) bool { return permanentConnectError(err) }

func permanentConnectError(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code {
		case "28P01", "28000", "3D000":
			return true
		}
		return false
	}
	// pgconn's own words when the server answers sslmode=require with 'N'.
	return dialects.PermanentNetError(err) || err != nil && strings.Contains(err.Error(), "server refused TLS connection")
}

// newConn returns the dialect's connection over sc; w, if not nil, is the
// watch pgx read sc's messages through.
func newConn(sc *stdlib.Conn, w *paramWatch) *conn {
	c := &conn{sc: sc, watch: w}
	c.MarkBaseline()
	c.initDirect()
	return c
}

// adapt is the dialect's ConnAdapter: it gives a connection of pgx's
// stdlib that pooldriver.Wrap opened PostgreSQL's tracking, as if it had
// come from a postgres:// DSN.
func adapt(dc driver.Conn) (dialects.Conn, bool) {
	sc, ok := dc.(*stdlib.Conn)
	if !ok {
		return nil, false
	}
	return newConn(sc, nil), true
}
