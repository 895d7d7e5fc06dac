package fakedb

import (
	"context"
	"database/sql/driver"
)

// Connector returns a driver.Connector for plain database/sql use:
// sql.OpenDB(s.Connector()). Its conns log in as no user and skip the
// password check.
func (s *Server) Connector() driver.Connector { return connector{s} }

type connector struct{ s *Server }

var _ driver.Connector = connector{}

func (c connector) Connect(ctx context.Context) (driver.Conn, error) {
	return c.s.connect(ctx, "", "", false, "")
}

func (c connector) Driver() driver.Driver { return Driver{} }

// Driver is a driver.Driver whose Open takes a server name (not a DSN) and
// connects to the server registered under it, without a password check.
// The package does not register it with database/sql.
type Driver struct{}

var _ driver.Driver = Driver{}

// Open connects to the server registered under name.
func (Driver) Open(name string) (driver.Conn, error) {
	s, err := lookupServer(name)
	if err != nil {
		return nil, err
	}
	return s.connect(context.Background(), "", "", false, "")
}
