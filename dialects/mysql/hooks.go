package mysql

import (
	"context"
	"database/sql/driver"
	"reflect"

	"github.com/pooldriver/pooldriver/dialects"
)

// Typed adapters of pooldriver's connection hooks: f gets go-sql-driver's
// connection, as pooldriver.RawConn gives it (a driver.Conn of
// github.com/go-sql-driver/mysql, whose type is unexported: use its
// driver interfaces, driver.ExecerContext and the like). An adapter used
// with another dialect's connection fails (AfterConnect, BeforeAcquire)
// or panics, which pooldriver logs (AfterRelease, which then closes the
// connection; BeforeClose).
//
//	pooldriver.WithAfterConnect(mysql.AfterConnect(func(ctx context.Context, c driver.Conn) error {
//		_, err := c.(driver.ExecerContext).ExecContext(ctx, "SET SESSION sql_mode = 'ANSI'", nil)
//		return err
//	}))

// AfterConnect adapts f for pooldriver.WithAfterConnect.
func AfterConnect(f func(ctx context.Context, c driver.Conn) error) func(ctx context.Context, raw any) error {
	return hook("mysql.AfterConnect").AfterConnect(f)
}

// BeforeAcquire adapts f for pooldriver.WithBeforeAcquire.
func BeforeAcquire(f func(ctx context.Context, c driver.Conn) error) func(ctx context.Context, raw any) error {
	return hook("mysql.BeforeAcquire").AfterConnect(f)
}

// AfterRelease adapts f for pooldriver.WithAfterRelease.
func AfterRelease(f func(c driver.Conn) bool) func(raw any) bool {
	return hook("mysql.AfterRelease").AfterRelease(f)
}

// BeforeClose adapts f for pooldriver.WithBeforeClose.
func BeforeClose(f func(c driver.Conn)) func(raw any) {
	return hook("mysql.BeforeClose").BeforeClose(f)
}

// hook describes the typed hook adapter name.
func hook(name string) dialects.RawHook[driver.Conn] {
	return dialects.RawHook[driver.Conn]{
		Name: name,
		Want: "use it with a mysql:// DSN, or Wrap go-sql-driver's connector",
		As:   asDriverConn,
	}
}

// driverPkg is the package of go-sql-driver's connection type.
const driverPkg = "github.com/go-sql-driver/mysql"

// asDriverConn returns raw if it is a connection of go-sql-driver's.
func asDriverConn(raw any) (driver.Conn, bool) {
	c, ok := raw.(driver.Conn)
	if !ok {
		return nil, false
	}
	t := reflect.TypeOf(c)
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return c, t.PkgPath() == driverPkg
}
