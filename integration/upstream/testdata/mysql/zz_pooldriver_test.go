// This file is not part of pooldriver's build: integration/upstream/run.sh
// copies it into a temporary copy of go-sql-driver/mysql, whose test files
// it has rewritten to open every *sql.DB through pdOpen and pdOpenDB. The
// upstream tests are internal (package mysql), so this file can import only
// the root package; the dialect, which imports the driver, is linked in by
// zz_pooldriver_dialect_test.go, an external test file.

package mysql

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"os"
	"sync"

	"github.com/pooldriver/pooldriver"
	"github.com/pooldriver/pooldriver/dialects"
)

// pdMode says how the tests' handles are opened (POOLDRIVER_UPSTREAM_MODE):
//
//	plain    the driver itself: the baseline
//	wrap     sql.OpenDB(pooldriver.Wrap(connector)), the dialect not linked
//	         in: pooldriver's generic tracking from the statements' text
//	dialect  the same with the mysql dialect linked in (build tag
//	         pooldriver_dialect): Wrap adopts the dialect's tracking
//	new      pooldriver.New("mysql://" + dsn) where the test opens
//	         by DSN; a test that builds its own connector gets Wrap
var pdMode = os.Getenv("POOLDRIVER_UPSTREAM_MODE")

var pdChecked sync.Once

// pdCheck stops the run when the mode and the build disagree: a dialect run
// without the dialect would silently test the generic tracking. It runs at
// the first open, after every package's init (the dialect registers itself
// in its init, which runs after this package's).
func pdCheck() {
	pdChecked.Do(func() {
		_, err := dialects.Lookup("mysql")
		linked := err == nil
		switch {
		case pdMode == "wrap" && !linked, (pdMode == "dialect" || pdMode == "new") && linked:
			return
		case pdMode == "wrap" || pdMode == "dialect" || pdMode == "new":
			fmt.Fprintf(os.Stderr, "pooldriver overlay: mode %s with the mysql dialect linked in: %v (build tag pooldriver_dialect)\n", pdMode, linked)
		default:
			fmt.Fprintf(os.Stderr, "pooldriver overlay: POOLDRIVER_UPSTREAM_MODE=%q, want plain, wrap, dialect or new\n", pdMode)
		}
		os.Exit(2)
	})
}

// pdOpen replaces sql.Open: the driver's own name opens a pooldriver
// handle over the same DSN, any other name is left alone. As with
// sql.Open, a DSN the driver rejects is an error here.
func pdOpen(name, dsn string) (*sql.DB, error) {
	if pdMode == "plain" || name != driverName {
		return sql.Open(name, dsn)
	}
	pdCheck()
	if pdMode == "new" {
		c := pooldriver.New("mysql://" + dsn)
		if err := c.Err(); err != nil {
			return nil, err
		}
		return sql.OpenDB(c), nil
	}
	c, err := MySQLDriver{}.OpenConnector(dsn)
	if err != nil {
		return nil, err
	}
	return sql.OpenDB(pooldriver.Wrap(c)), nil
}

// pdOpenDB replaces sql.OpenDB: the test's connector, wrapped. In mode new
// too, since its configuration (a BeforeConnect, a hijacked Connect) has no
// DSN form.
func pdOpenDB(c driver.Connector) *sql.DB {
	if pdMode == "plain" {
		return sql.OpenDB(c)
	}
	pdCheck()
	return sql.OpenDB(pooldriver.Wrap(c))
}

// pdRaw replaces sqlConn.Raw(f): under pooldriver Raw hands out the logical
// connection, and pooldriver.RawConn the driver's own, which is what f
// expects (a *mysqlConn), as an application would reach it.
func pdRaw(c *sql.Conn, f func(driverConn any) error) error {
	return c.Raw(func(dc any) error {
		if pdMode == "plain" {
			return f(dc)
		}
		return pooldriver.RawConn(context.Background(), dc, f)
	})
}
