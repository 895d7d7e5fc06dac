package pooldriver_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"log"
	"strings"
	"sync/atomic"

	"github.com/pooldriver/pooldriver"
	"github.com/pooldriver/pooldriver/internal/fakedb"
)

// A Config read from a DSN, changed, printed and opened: pgxpool's shape.
func ExampleParseConfig() {
	srv := fakedb.NewServer("example-parse-config")
	defer srv.Close()

	// A real program parses its PostgreSQL DSN, with
	// _ "github.com/pooldriver/pooldriver/dialects/postgres" imported:
	//
	//	cfg, err := pooldriver.ParseConfig("postgres://app:s3cret@db:5432/shop?pool_max_conns=20&pool_acquire_timeout=5s")
	//
	// Here the in-memory fake server stands in for PostgreSQL.
	cfg, err := pooldriver.ParseConfig("fake://app:s3cret@example-parse-config?pool_max_conns=20&pool_acquire_timeout=5s")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("from the DSN:", cfg.MaxConns, cfg.AcquireTimeout)
	fmt.Println("defaults:", cfg.MinConns, cfg.MaxConnLifetime, cfg.Mode)

	cfg.MinIdleConns = 2 // change what the DSN did not say, then open
	c, err := pooldriver.NewConnectorWithConfig(cfg)
	if err != nil {
		log.Fatal(err)
	}
	db := sql.OpenDB(c)
	defer db.Close()

	// The Connector's Config is the one in use; it prints itself (String,
	// and slog's LogValue) without the password.
	inUse := c.Config()
	fmt.Println("in use:", inUse.MaxConns, inUse.MinIdleConns)
	fmt.Println("password printed:", strings.Contains(inUse.String(), "s3cret"))

	// A value that makes no sense is an error that names the parameter.
	_, err = pooldriver.ParseConfig("fake://example-parse-config?pool_max_conns=zero")
	fmt.Println("error names it:", strings.Contains(fmt.Sprint(err), "pool_max_conns"))
	// Output:
	// from the DSN: 20 5s
	// defaults: 0 1h0m0s transaction
	// in use: 20 2
	// password printed: false
	// error names it: true
}

// Hooks on a physical connection's life, set as Config fields (or with
// WithAfterConnect, WithAfterRelease and the like).
func ExampleConfig_hooks() {
	srv := fakedb.NewServer("example-hooks")
	defer srv.Close()

	// A real program: ParseConfig("postgres://app@db:5432/shop?pool_max_conns=1"),
	// and dialects/postgres's typed adapter, whose connection is a *pgx.Conn:
	//
	//	cfg.AfterConnect = postgres.AfterConnect(func(ctx context.Context, conn *pgx.Conn) error {
	//		_, err := conn.Exec(ctx, "SET application_name = 'orders'")
	//		return err
	//	})
	cfg, err := pooldriver.ParseConfig("fake://example-hooks?pool_max_conns=1")
	if err != nil {
		log.Fatal(err)
	}

	// AfterConnect sets what every session starts with. It runs on each new
	// connection, and again after each session reset, which undoes it.
	var connects atomic.Int32
	cfg.AfterConnect = func(ctx context.Context, raw any) error {
		connects.Add(1)
		_, err := raw.(driver.ExecerContext).ExecContext(ctx, "SET app orders", nil)
		return err
	}
	// AfterRelease has the last word as a connection goes back to the pool:
	// false closes it. Here every third release closes its connection.
	var releases atomic.Int32
	cfg.AfterRelease = func(raw any) bool {
		return releases.Add(1)%3 != 0
	}

	c, err := pooldriver.NewConnectorWithConfig(cfg)
	if err != nil {
		log.Fatal(err)
	}
	db := sql.OpenDB(c)
	defer db.Close()

	var app string
	if err := db.QueryRow("GET app").Scan(&app); err != nil {
		log.Fatal(err)
	}
	fmt.Println("a new session:", app)

	// A SET outside a task changes the session: it is reset before anyone
	// else gets the connection, and AfterConnect runs again.
	if _, err := db.Exec("SET app billing"); err != nil {
		log.Fatal(err)
	}
	if err := db.QueryRow("GET app").Scan(&app); err != nil {
		log.Fatal(err)
	}
	fmt.Println("after a reset:", app)

	s := c.Stats()
	fmt.Println("AfterConnect:", connects.Load(), "AfterRelease:", releases.Load(), "closed:", s.Destroyed)
	// Output:
	// a new session: orders
	// after a reset: orders
	// AfterConnect: 2 AfterRelease: 3 closed: 1
}
