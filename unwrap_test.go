package pooldriver_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/pooldriver/pooldriver"
	"github.com/pooldriver/pooldriver/internal/fakedb"
)

// wrapConnector is a tracing wrapper's connector, as sql.OpenDB gets it
// from the wrapper: its Driver returns drv, and each connection it makes is
// wrapped by wrap.
type wrapConnector struct {
	inner driver.Connector
	drv   driver.Driver
	wrap  func(driver.Conn) driver.Conn
}

func (w wrapConnector) Connect(ctx context.Context) (driver.Conn, error) {
	c, err := w.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return w.wrap(c), nil
}

func (w wrapConnector) Driver() driver.Driver { return w.drv }

func (w wrapConnector) Close() error {
	if c, ok := w.inner.(io.Closer); ok {
		return c.Close()
	}
	return nil
}

// opaqueDriver keeps the driver it wraps to itself, as XSAM/otelsql's does.
type opaqueDriver struct{ inner driver.Driver }

func (d opaqueDriver) Open(string) (driver.Conn, error) { return nil, errors.New("not used") }

// unwrapDriver says what it wraps.
type unwrapDriver struct{ opaqueDriver }

func (d unwrapDriver) Unwrap() driver.Driver { return d.inner }

// selfDriver's Unwrap returns itself.
type selfDriver struct{ opaqueDriver }

func (d selfDriver) Unwrap() driver.Driver { return d }

// connectorDriver says which connector it wraps.
type connectorDriver struct {
	opaqueDriver
	c driver.Connector
}

func (d connectorDriver) Unwrap() driver.Connector { return d.c }

// opaqueConn keeps the connection it wraps to itself, as ngrok/sqlmw's
// does; it passes on what pooldriver's connection implements.
type opaqueConn struct{ driver.Conn }

func (c opaqueConn) ExecContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Result, error) {
	return c.Conn.(driver.ExecerContext).ExecContext(ctx, q, args)
}

func (c opaqueConn) QueryContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Rows, error) {
	return c.Conn.(driver.QueryerContext).QueryContext(ctx, q, args)
}

func (c opaqueConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	return c.Conn.(driver.ConnBeginTx).BeginTx(ctx, opts)
}

func (c opaqueConn) ResetSession(ctx context.Context) error {
	if r, ok := c.Conn.(driver.SessionResetter); ok {
		return r.ResetSession(ctx)
	}
	return nil
}

func (c opaqueConn) IsValid() bool {
	if v, ok := c.Conn.(driver.Validator); ok {
		return v.IsValid()
	}
	return true
}

// The methods by which wrappers expose the connection they wrap:
// XSAM/otelsql's, DataDog's and the Unwrap convention.
type (
	rawConn     struct{ opaqueConn }
	wrappedConn struct{ opaqueConn }
	unwrapConn  struct{ opaqueConn }
	selfConn    struct{ opaqueConn }
)

func (c rawConn) Raw() driver.Conn             { return c.Conn }
func (c wrappedConn) WrappedConn() driver.Conn { return c.Conn }
func (c unwrapConn) Unwrap() driver.Conn       { return c.Conn }
func (c selfConn) Unwrap() driver.Conn         { return c }

// openWrapped opens a DB over a wrapper of inner, closed when the test ends.
func openWrapped(t *testing.T, inner driver.Connector, drv driver.Driver, wrap func(driver.Conn) driver.Conn) *sql.DB {
	t.Helper()
	if wrap == nil {
		wrap = func(c driver.Conn) driver.Conn { return opaqueConn{c} }
	}
	db := sql.OpenDB(wrapConnector{inner: inner, drv: drv, wrap: wrap})
	t.Cleanup(func() { db.Close() })
	return db
}

// TestConnectorOfThroughWrappers: ConnectorOf (and so the Stats read
// through it) follows what a wrapper's driver says it wraps, and only that,
// and a wrapper that unwraps to itself ends the search.
func TestConnectorOfThroughWrappers(t *testing.T) {
	srv := newServer(t)
	for _, w := range []struct {
		name string
		drv  func(c *pooldriver.Connector) driver.Driver
		ok   bool
	}{
		{"Driver is the inner one", func(c *pooldriver.Connector) driver.Driver { return c.Driver() }, true},
		{"Unwrap() driver.Driver", func(c *pooldriver.Connector) driver.Driver {
			return unwrapDriver{opaqueDriver{c.Driver()}}
		}, true},
		{"two wrappers", func(c *pooldriver.Connector) driver.Driver {
			return unwrapDriver{opaqueDriver{unwrapDriver{opaqueDriver{c.Driver()}}}}
		}, true},
		{"Unwrap() driver.Connector", func(c *pooldriver.Connector) driver.Driver {
			return connectorDriver{c: c}
		}, true},
		{"opaque", func(c *pooldriver.Connector) driver.Driver { return opaqueDriver{c.Driver()} }, false},
		{"Unwrap to itself", func(*pooldriver.Connector) driver.Driver { return selfDriver{} }, false},
		{"Unwrap to nil", func(*pooldriver.Connector) driver.Driver { return unwrapDriver{} }, false},
		{"Unwrap to the registered Driver", func(*pooldriver.Connector) driver.Driver {
			return unwrapDriver{opaqueDriver{pooldriver.Driver{}}}
		}, false},
		{"Unwrap to another driver", func(*pooldriver.Connector) driver.Driver {
			return unwrapDriver{opaqueDriver{srv.Connector().Driver()}}
		}, false},
	} {
		t.Run(w.name, func(t *testing.T) {
			_, c := newDB(t, srv, "pool_max_conns=3")
			db := openWrapped(t, c, w.drv(c), nil)
			if _, err := db.Exec("INSERT t 1"); err != nil {
				t.Fatal(err)
			}
			got, ok := pooldriver.ConnectorOf(db)
			if ok != w.ok || ok && got != c || !ok && got != nil {
				t.Fatalf("ConnectorOf = %p, %v; want %p, %v", got, ok, c, w.ok)
			}
			if ok {
				if s := got.Stats(); s.MaxConns != 3 || s.Acquires != 1 {
					t.Fatalf("ConnectorOf(db).Stats() = %+v", s)
				}
			}
		})
	}
}

// TestRawConnThroughWrappers: RawConn looks through the connections of
// wrappers that expose the one they wrap, in each way wrappers do, and
// refuses the others with an error that names the type it stopped at.
func TestRawConnThroughWrappers(t *testing.T) {
	srv := newServer(t)
	for _, w := range []struct {
		name    string
		foreign bool // the wrapper wraps the fake server's own connector
		wrap    func(driver.Conn) driver.Conn
		err     string // "": RawConn reaches the fake connection
	}{
		{"Raw() driver.Conn", false, func(c driver.Conn) driver.Conn { return rawConn{opaqueConn{c}} }, ""},
		{"WrappedConn() driver.Conn", false, func(c driver.Conn) driver.Conn { return wrappedConn{opaqueConn{c}} }, ""},
		{"Unwrap() driver.Conn", false, func(c driver.Conn) driver.Conn { return unwrapConn{opaqueConn{c}} }, ""},
		{"two wrappers", false, func(c driver.Conn) driver.Conn {
			return rawConn{opaqueConn{unwrapConn{opaqueConn{c}}}}
		}, ""},
		{"opaque", false, func(c driver.Conn) driver.Conn { return opaqueConn{c} },
			"pooldriver_test.opaqueConn is not a pooldriver connection, nor a wrapper that exposes"},
		{"exposes an opaque one", false, func(c driver.Conn) driver.Conn {
			return rawConn{opaqueConn{opaqueConn{c}}}
		}, "pooldriver_test.rawConn wraps pooldriver_test.opaqueConn, which is not"},
		{"Unwrap to itself", false, func(c driver.Conn) driver.Conn { return selfConn{opaqueConn{c}} },
			"more than 16 wrappers deep"},
		{"another driver's", true, func(c driver.Conn) driver.Conn { return rawConn{opaqueConn{c}} },
			"wraps *fakedb.Conn, which is not a pooldriver connection"},
	} {
		t.Run(w.name, func(t *testing.T) {
			_, c := newDB(t, srv, "")
			var inner driver.Connector = c
			if w.foreign {
				inner = srv.Connector()
			}
			db := openWrapped(t, inner, inner.Driver(), w.wrap)
			sc, err := db.Conn(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			defer sc.Close()
			if _, err := sc.ExecContext(context.Background(), "INSERT t 1"); err != nil {
				t.Fatal(err)
			}
			var id int64
			err = sc.Raw(func(dc any) error {
				return pooldriver.RawConn(context.Background(), dc, func(raw any) error {
					fc, ok := raw.(*fakedb.Conn)
					if !ok {
						t.Fatalf("raw conn is %T", raw)
					}
					id = fc.ID()
					return nil
				})
			})
			if w.err == "" {
				if err != nil || id == 0 {
					t.Fatalf("RawConn: id %d, %v", id, err)
				}
				// The *sql.Conn keeps its connection until it is
				// closed, through the wrapper's IsValid.
				if s := c.Stats(); s.Active != 1 {
					t.Fatalf("before Close: %d active", s.Active)
				}
				if err := sc.Close(); err != nil {
					t.Fatal(err)
				}
				pooldriver.WaitCleanups(c) // the callback dirtied the session
				if s := c.Stats(); s.Active != 0 || s.Acquires != 1 {
					t.Fatalf("after Close: %d active, %d acquires", s.Active, s.Acquires)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), w.err) || !strings.HasPrefix(err.Error(), "pooldriver: RawConn: ") {
				t.Fatalf("RawConn = %v, want an error with %q", err, w.err)
			}
			if id != 0 {
				t.Fatal("f ran")
			}
		})
	}
}
