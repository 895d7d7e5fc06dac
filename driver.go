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
type Driver struct{}

var (
	_ driver.Driver        = Driver{}
	_ driver.DriverContext = Driver{}
)

// OpenConnector parses dsn and returns a Connector (see NewConnector).
func (Driver) OpenConnector(dsn string) (driver.Connector, error) {
	return NewConnector(dsn)
}

// Open is not supported: a pool per call would leak. database/sql uses
// OpenConnector.
func (Driver) Open(string) (driver.Conn, error) {
	return nil, errors.New("pooldriver: Driver.Open is not supported; use sql.Open(\"pooldriver\", dsn) or sql.OpenDB(pooldriver.New(dsn))")
}
