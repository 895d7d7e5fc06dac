package odbc

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/alexbrainman/odbc"

	"github.com/pooldriver/pooldriver/dialects"
	"github.com/pooldriver/pooldriver/dialects/odbc/connstr"
)

// Dialect is the ODBC dialect. It is registered for the scheme "odbc" when
// the package is imported.
var Dialect dialects.Dialect = odbcDialect{}

func init() {
	if err := dialects.Register(Dialect, "odbc"); err != nil {
		panic(err)
	}
}

type odbcDialect struct{}

func (odbcDialect) Name() string { return "odbc" }

// Parse reads "odbc://" followed by an ODBC connection string or a data
// source name (see the package doc). It does not touch the ODBC
// configuration: the driver is looked up by the first Open.
func (odbcDialect) Parse(dsn string) (dialects.Template, map[string]string, error) {
	d, err := split(dsn)
	if err != nil {
		return nil, nil, err
	}
	t := &template{d: d, ini: unixODBC{}}
	return t, d.params, nil
}

// template is immutable once built, but for what the first Open learns
// from the ODBC configuration (once, under once).
type template struct {
	d   splitDSN
	ini odbcIni

	once      sync.Once
	server    server // set by once
	extra     string // set by once: attributes the dialect adds for the driver
	configErr error  // set by once
}

var _ dialects.AddressedTemplate = (*template)(nil)

func (t *template) Credentials() dialects.Credentials {
	return dialects.Credentials{User: t.d.user, Password: t.d.password}
}

func (t *template) String() string { return t.d.redacted() }

// Address is what the connection string says of the server: SERVER (or
// SERVERNAME, psqlODBC's; a "host,port" as SQL Server's drivers write it
// is split), PORT, and DATABASE (or DB). A data source name alone
// (odbc://MyDSN) keeps its server in odbc.ini, which is not read here: the
// host is then unknown.
func (t *template) Address() dialects.Address {
	var a dialects.Address
	port := ""
	for _, at := range t.d.attrs {
		switch strings.ToUpper(at.Key) {
		case "SERVER", "SERVERNAME":
			a.Host = strings.TrimSpace(at.Value)
		case "PORT":
			port = strings.TrimSpace(at.Value)
		case "DATABASE", "DB":
			a.Database = strings.TrimSpace(at.Value)
		}
	}
	if h, p, ok := strings.Cut(a.Host, ","); ok && port == "" {
		a.Host, port = strings.TrimSpace(h), strings.TrimSpace(p)
	}
	if n, err := strconv.Atoi(port); err == nil && n > 0 {
		a.Port = n
	}
	return a
}

// Open builds a connection string for c (the template's attributes as
// written, then UID and PWD written as the server's driver reads them),
// connects through unixODBC, and learns the new connection's state. The
// driver cannot be interrupted while it connects, so ctx is only checked
// first; a login timeout, if any, is the driver's (psqlODBC's
// ConnectTimeout, MariaDB's ConnectTimeout / CONN_TIMEOUT attribute).
func (t *template) Open(ctx context.Context, c dialects.Credentials) (dialects.Conn, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	srv, err := t.config()
	if err != nil {
		return nil, err
	}
	creds, err := credentials(srv, c.User, c.Password)
	if err != nil {
		return nil, err
	}
	dc, err := odbcDriver().Open(t.d.base() + t.extra + creds)
	if err != nil {
		return nil, t.openError(err, c.Password)
	}
	oc, ok := dc.(*odbc.Conn)
	if !ok {
		_ = dc.Close()
		return nil, fmt.Errorf("pooldriver: odbc: the odbc driver returned %T, want *odbc.Conn", dc)
	}
	pc := &conn{d: &drvConn{oc: oc, server: srv}}
	if err := pc.start(ctx); err != nil {
		_ = pc.Close()
		return nil, fmt.Errorf("pooldriver: odbc: setting up a new connection: %w", err)
	}
	return pc, nil
}

// odbcDriver returns github.com/alexbrainman/odbc's driver, which it only
// registers with database/sql.
var odbcDriver = sync.OnceValue(func() driver.Driver {
	db, _ := sql.Open("odbc", "") // opens nothing
	defer func() { _ = db.Close() }()
	return db.Driver()
})

// config finds the driver behind the template, once: which server it
// serves, and whether unixODBC would pool its connections (an error).
func (t *template) config() (server, error) {
	t.once.Do(func() {
		driverName := t.d.driver
		if driverName == "" {
			dsn := t.d.dsn
			if dsn == "" {
				dsn = "DEFAULT" // as unixODBC does
			}
			driverName = t.ini.dsnDriver(dsn)
		}
		lib := ""
		if driverName != "" {
			lib = t.ini.driverEntry(driverName, "Driver")
		}
		t.server = serverOf(driverName, lib)
		if t.server == postgres {
			t.extra, t.configErr = psqlODBCAttrs(t.d.attrs)
			if t.configErr != nil {
				return
			}
		}
		if driverName != "" && poolingOn(t.ini.pooling()) {
			if n := cpTimeout(t.ini.driverEntry(driverName, "CPTimeout")); n > 0 {
				t.configErr = fmt.Errorf("pooldriver: odbc: unixODBC connection pooling is on for driver %q "+
					"(odbcinst.ini: [ODBC] Pooling, and CPTimeout=%d in the driver's section): its connections would "+
					"outlive their close in a second pool under pooldriver's; set CPTimeout=0 for this driver or Pooling=No",
					driverName, n)
			}
		}
	})
	return t.server, t.configErr
}

// psqlODBCAttrs returns the attributes the dialect adds for psqlODBC:
// UseServerSidePrepare=0. With server-side prepared statements (its
// default), psqlODBC does not notice that a raw BEGIN opened a transaction
// and, autocommit being on, sends COMMIT after the next statement, so raw
// transactions would not work. A DSN that asks for them is refused.
func psqlODBCAttrs(attrs []connstr.Attr) (string, error) {
	for _, a := range attrs {
		if strings.EqualFold(a.Key, "UseServerSidePrepare") || strings.EqualFold(a.Key, "C8") {
			if strings.TrimSpace(a.Value) != "0" {
				return "", fmt.Errorf("pooldriver: odbc: %s=%s is not supported: psqlODBC then commits the transactions "+
					"of raw BEGIN statements by itself; leave it out (the dialect sets UseServerSidePrepare=0)", a.Key, a.Value)
			}
			return "", nil
		}
	}
	return "UseServerSidePrepare=0;", nil
}

// openError rewrites an error of SQLDriverConnect. Drivers do not echo the
// connection string, but nothing promises it: every form of the password
// is scrubbed from the message, and the result unwraps to a copy of the
// *odbc.Error scrubbed the same way.
func (t *template) openError(err error, password string) error {
	secrets := []string{password, t.d.password}
	for _, p := range []string{password, t.d.password} {
		if b, err := connstr.Braced(p); err == nil {
			secrets = append(secrets, b, b[1:len(b)-1])
		}
	}
	secrets = append(secrets, t.d.secrets...) // other attributes that hold a password
	sort.Slice(secrets, func(i, j int) bool { return len(secrets[i]) > len(secrets[j]) })
	cause := err
	var oe *odbc.Error
	if errors.As(err, &oe) {
		clean := &odbc.Error{APIName: oe.APIName}
		for _, d := range oe.Diag {
			d.Message = dialects.Scrub(d.Message, secrets...)
			clean.Diag = append(clean.Diag, d)
		}
		cause = clean
	}
	return &redactedError{msg: "pooldriver: odbc: connect: " + dialects.Scrub(err.Error(), secrets...), cause: cause}
}

// redactedError carries a message from which every password has been
// removed.
type redactedError struct {
	msg   string
	cause error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.cause }
