// This file is not part of pooldriver's build: integration/upstream/run.sh
// copies it into a temporary copy of pgx's stdlib package, whose test files
// it has rewritten to open every *sql.DB through pdOpen, pdOpenDB and
// pdOpenDBFromPool, and to reach the driver's connection through pdRaw and
// pdPgxConn. The upstream tests are an external test package, so the
// dialect can be linked in (zz_pooldriver_dialect_test.go, build tag
// pooldriver_dialect) without an import cycle.

package stdlib_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"os"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/pooldriver/pooldriver"
	"github.com/pooldriver/pooldriver/dialects"
)

// pdMode says how the tests' handles are opened (POOLDRIVER_UPSTREAM_MODE):
//
//	plain    pgx's stdlib itself: the baseline
//	wrap     sql.OpenDB(pooldriver.Wrap(connector)), the dialect not linked
//	         in: pooldriver's generic tracking from the statements' text
//	dialect  the same with the postgres dialect linked in (build tag
//	         pooldriver_dialect): Wrap adopts the dialect's tracking
//	new      pooldriver.New(dsn) where the test's configuration
//	         has a DSN form; a test that passes stdlib options, a registered
//	         configuration or a pgxpool gets Wrap
var pdMode = os.Getenv("POOLDRIVER_UPSTREAM_MODE")

var pdChecked sync.Once

// pdCheck stops the run when the mode and the build disagree: a dialect run
// without the dialect would silently test the generic tracking.
func pdCheck() {
	pdChecked.Do(func() {
		_, err := dialects.Lookup("postgres")
		linked := err == nil
		switch {
		case pdMode == "wrap" && !linked, (pdMode == "dialect" || pdMode == "new") && linked:
			return
		case pdMode == "wrap" || pdMode == "dialect" || pdMode == "new":
			fmt.Fprintf(os.Stderr, "pooldriver overlay: mode %s with the postgres dialect linked in: %v (build tag pooldriver_dialect)\n", pdMode, linked)
		default:
			fmt.Fprintf(os.Stderr, "pooldriver overlay: POOLDRIVER_UPSTREAM_MODE=%q, want plain, wrap, dialect or new\n", pdMode)
		}
		os.Exit(2)
	})
}

// pdOpen replaces sql.Open: pgx's names open a pooldriver handle over the
// same DSN (or registered configuration), any other name is left alone.
func pdOpen(name, dsn string) (*sql.DB, error) {
	if pdMode == "plain" || name != "pgx" && name != "pgx/v5" {
		return sql.Open(name, dsn)
	}
	pdCheck()
	if _, isDSN := dialects.SchemeOf(dsn); pdMode == "new" && isDSN {
		c := pooldriver.New(dsn)
		if err := c.Err(); err != nil {
			return nil, err
		}
		return sql.OpenDB(c), nil
	}
	c, err := stdlib.GetDefaultDriver().(driver.DriverContext).OpenConnector(dsn)
	if err != nil {
		return nil, err
	}
	return sql.OpenDB(pooldriver.Wrap(c)), nil
}

// pdOpenDB replaces stdlib.OpenDB. In mode new, a configuration parsed from
// PGX_TEST_DATABASE and given no option is opened from that DSN, the exec
// mode and tracer the test set on it put back by a BeforeConnect hook.
func pdOpenDB(config pgx.ConnConfig, opts ...stdlib.OptionOpenDB) *sql.DB {
	if pdMode == "plain" {
		return stdlib.OpenDB(config, opts...)
	}
	pdCheck()
	dsn := os.Getenv("PGX_TEST_DATABASE")
	if pdMode == "new" && len(opts) == 0 && config.ConnString() == dsn {
		c := pooldriver.New(dsn, pooldriver.WithBeforeConnect(func(_ context.Context, raw any) error {
			cfg, ok := raw.(*pgx.ConnConfig)
			if !ok {
				return fmt.Errorf("pooldriver overlay: BeforeConnect got %T, want *pgx.ConnConfig", raw)
			}
			cfg.DefaultQueryExecMode = config.DefaultQueryExecMode
			cfg.Tracer = config.Tracer
			return nil
		}))
		// An error (see Err) is reported by the test's first statement, as
		// with the plain driver.
		return sql.OpenDB(c)
	}
	return sql.OpenDB(pooldriver.Wrap(stdlib.GetConnector(config, opts...)))
}

// pdOpenDBFromPool replaces stdlib.OpenDBFromPool: a pgxpool under
// pooldriver is wrapped like any other connector.
func pdOpenDBFromPool(pool *pgxpool.Pool, opts ...stdlib.OptionOpenDB) *sql.DB {
	if pdMode == "plain" {
		return stdlib.OpenDBFromPool(pool, opts...)
	}
	pdCheck()
	return sql.OpenDB(pooldriver.Wrap(stdlib.GetPoolConnector(pool, opts...)))
}

// pdRaw replaces sqlConn.Raw(f): under pooldriver Raw hands out the logical
// connection, and pooldriver.RawConn the driver's own, as an application
// would reach it.
func pdRaw(c *sql.Conn, f func(driverConn any) error) error {
	return c.Raw(func(dc any) error {
		if pdMode == "plain" {
			return f(dc)
		}
		return pooldriver.RawConn(context.Background(), dc, f)
	})
}

// pdPgxConn replaces driverConn.(*stdlib.Conn).Conn() inside pdRaw's
// callback: pooldriver.RawConn hands out the *stdlib.Conn of a connection
// it tracks generically and the *pgx.Conn of one the dialect tracks.
func pdPgxConn(driverConn any) *pgx.Conn {
	switch c := driverConn.(type) {
	case *stdlib.Conn:
		return c.Conn()
	case *pgx.Conn:
		return c
	}
	panic(fmt.Sprintf("pooldriver overlay: the raw connection is %T, not pgx's", driverConn))
}
