package pooldriver

import (
	"database/sql"
	"database/sql/driver"
	"errors"
	"slices"
)

// DriverName is the name pooldriver registers with database/sql.
const DriverName = "pooldriver"

func init() {
	// Registration is idempotent: a second copy of the package (vendored
	// twice, say) does not panic.
	if !slices.Contains(sql.Drivers(), DriverName) {
		sql.Register(DriverName, Driver{})
	}
}

// Driver is the database/sql driver registered as "pooldriver". It
// implements driver.DriverContext, so sql.Open("pooldriver", dsn) builds a
// Connector with New(dsn), returning its error (see Connector.Err).
//
// The zero Driver is the registered one. A Connector's Driver method
// returns one that knows that Connector: DB.Driver() returns it however the
// *sql.DB was opened, which is how [ConnectorOf] finds the Connector without
// any registry to keep or to clean up.
type Driver struct {
	c *Connector // nil in the registered Driver
}

var (
	_ driver.Driver        = Driver{}
	_ driver.DriverContext = Driver{}
)

// OpenConnector parses dsn and returns a Connector, or the error New would
// defer (see Connector.Err).
func (Driver) OpenConnector(dsn string) (driver.Connector, error) {
	c := New(dsn)
	if err := c.Err(); err != nil {
		return nil, err
	}
	return c, nil
}

// ConnectorOf returns the Connector under db, if db's connections come from
// pooldriver: opened with sql.OpenDB(New(dsn)), sql.OpenDB(Wrap(…)), Open,
// or sql.Open("pooldriver", dsn). A DB that was closed still has its
// Connector (closed too). ok is false for any other driver's DB.
//
// Behind a wrapper (tracing, metrics), ConnectorOf follows DB.Driver() to
// pooldriver's [Driver] through drivers that say what they wrap, with
// Unwrap() driver.Driver or Unwrap() driver.Connector, up to 16 deep. It
// needs none where the wrapper's connector returns the inner one's Driver
// (uptrace's otelsql.OpenDB, DataDog's sqltrace). XSAM/otelsql (v0.44.0:
// Open, OpenDB, Register), ngrok/sqlmw, instrumentedsql and ocsql keep the
// inner driver in an unexported field with no method to reach it, so ok is
// false behind them: keep the Connector you give the wrapper
// (c := New(dsn); db := otelsql.OpenDB(c); c.Stats()).
func ConnectorOf(db *sql.DB) (c *Connector, ok bool) {
	if db == nil {
		return nil, false
	}
	var v any = db.Driver()
	for range maxWrappers {
		switch d := v.(type) {
		case Driver:
			return d.c, d.c != nil
		case *Connector:
			return d, d != nil
		case interface{ Unwrap() driver.Driver }:
			v = d.Unwrap()
		case interface{ Unwrap() driver.Connector }:
			v = d.Unwrap()
		default:
			return nil, false
		}
	}
	return nil, false
}

// maxWrappers bounds how many wrappers ConnectorOf and RawConn look
// through, so that an Unwrap that returns its receiver, or a cycle of them,
// ends the search instead of looping.
const maxWrappers = 16

// Open is not supported: a pool per call would leak. database/sql uses
// OpenConnector.
func (Driver) Open(string) (driver.Conn, error) {
	return nil, errors.New("pooldriver: Driver.Open is not supported; use sql.Open(\"pooldriver\", dsn) or sql.OpenDB(pooldriver.New(dsn))")
}

// Driver returns the pooldriver Driver, one that knows c (see ConnectorOf).
func (c *Connector) Driver() driver.Driver { return Driver{c: c} }
