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
// Connector with NewConnector(dsn).
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

// OpenConnector parses dsn and returns a Connector (see NewConnector).
func (Driver) OpenConnector(dsn string) (driver.Connector, error) {
	return NewConnector(dsn)
}

// ConnectorOf returns the Connector under db, if db's connections come from
// pooldriver: opened with sql.OpenDB(New(dsn)), sql.OpenDB(NewConnector(…)),
// sql.OpenDB(Wrap(…)), Open, or sql.Open("pooldriver", dsn). A DB that was
// closed still has its Connector (closed too). ok is false for any other
// driver's DB, and for a DB whose connector wraps pooldriver's in a
// driver of its own (a tracing wrapper, say): keep the *Connector then.
func ConnectorOf(db *sql.DB) (c *Connector, ok bool) {
	if db == nil {
		return nil, false
	}
	d, ok := db.Driver().(Driver)
	if !ok || d.c == nil {
		return nil, false
	}
	return d.c, true
}

// Open is not supported: a pool per call would leak. database/sql uses
// OpenConnector.
func (Driver) Open(string) (driver.Conn, error) {
	return nil, errors.New("pooldriver: Driver.Open is not supported; use sql.Open(\"pooldriver\", dsn) or sql.OpenDB(pooldriver.New(dsn))")
}
