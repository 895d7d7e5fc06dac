// Command tasks shows pooldriver under plain database/sql against a
// PostgreSQL server: a raw transaction spread over separate db calls of one
// task, the rollback when a task ends early, a session-mode task, and the
// pool's stats.
//
//	go run ./examples/tasks [-dsn postgres://postgres@127.0.0.1:5432/test?sslmode=disable]
//
// The DSN defaults to $POOLDRIVER_POSTGRES_DSN, then to the local server.
package main

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/pooldriver/pooldriver"
	_ "github.com/pooldriver/pooldriver/dialects/postgres"
)

func main() {
	def := os.Getenv("POOLDRIVER_POSTGRES_DSN")
	if def == "" {
		def = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	}
	dsn := flag.String("dsn", def, "PostgreSQL DSN")
	flag.Parse()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db, c, err := open(ctx, *dsn)
	if err != nil {
		log.Fatal(err)
	}
	defer func() { _ = db.Close() }()
	fmt.Println("connector:", c) // the password, if any, is redacted

	table := fmt.Sprintf("pooldriver_example_%d", os.Getpid())
	must(db.ExecContext(ctx, "CREATE TABLE "+table+" (id int primary key, note text)"))
	defer func() { must(db.ExecContext(context.Background(), "DROP TABLE "+table)) }()

	// 1. A raw transaction across separate db calls of one task.
	func() {
		ctx, end := pooldriver.WithTask(ctx)
		defer end()
		must(db.ExecContext(ctx, "BEGIN"))
		must(db.ExecContext(ctx, "INSERT INTO "+table+" VALUES (1, 'committed')"))
		var pid1, pid2 int
		check(db.QueryRowContext(ctx, "SELECT pg_backend_pid()").Scan(&pid1))
		check(db.QueryRowContext(ctx, "SELECT pg_backend_pid()").Scan(&pid2))
		fmt.Printf("task statements ran on backends %d and %d (same: %v)\n", pid1, pid2, pid1 == pid2)
		must(db.ExecContext(ctx, "COMMIT"))
	}()

	// 2. A task that ends before COMMIT: pooldriver rolls it back.
	func() {
		ctx, end := pooldriver.WithTask(ctx)
		defer end()
		must(db.ExecContext(ctx, "BEGIN"))
		must(db.ExecContext(ctx, "INSERT INTO "+table+" VALUES (2, 'never committed')"))
		// returning without COMMIT: end() rolls back
	}()
	var n int
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM "+table).Scan(&n); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("rows in the table: %d (the ended task's insert was rolled back)\n", n)

	// 3. Session mode: a setting survives across calls, and is gone after.
	func() {
		ctx, end := pooldriver.WithTask(ctx, pooldriver.SessionMode)
		defer end()
		must(db.ExecContext(ctx, "SELECT set_config('app.tenant', 'acme', false)"))
		var tenant string
		check(db.QueryRowContext(ctx, "SELECT current_setting('app.tenant')").Scan(&tenant))
		fmt.Println("tenant seen by a later call of the session task:", tenant)
	}()

	// The session task's reset runs off the caller's path: the stats
	// settle once it is done and the connection is idle again.
	s := c.Stats()
	for deadline := time.Now().Add(5 * time.Second); s.Active > 0 && time.Now().Before(deadline); s = c.Stats() {
		time.Sleep(10 * time.Millisecond)
	}
	fmt.Printf("stats: %d connections opened, %d idle, %d active, %d automatic rollbacks, %d session resets\n",
		s.Created, s.Idle, s.Active, s.AutoRollbacks, s.SessionResets)
}

// open opens the pool on dsn and connects once, so that a DSN that reaches
// no server fails at once with how to point the example at one.
func open(ctx context.Context, dsn string) (*sql.DB, *pooldriver.Connector, error) {
	c := pooldriver.New(dsn, pooldriver.WithMaxConns(4))
	if err := c.Err(); err != nil {
		return nil, nil, err
	}
	db := sql.OpenDB(c)
	if err := db.PingContext(ctx); err != nil {
		_ = db.Close()
		return nil, nil, fmt.Errorf("connecting to %s: %w (point the example at a PostgreSQL server with -dsn or $POOLDRIVER_POSTGRES_DSN)", c, err)
	}
	return db, c, nil
}

func must(_ sql.Result, err error) { check(err) }

func check(err error) {
	if err != nil {
		log.Fatal(err)
	}
}
