package pooldriver_test

import (
	"context"
	"database/sql"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"

	"github.com/pooldriver/pooldriver"
	"github.com/pooldriver/pooldriver/internal/fakedb"
)

// The examples run against internal/fakedb, an in-memory server standing in
// for PostgreSQL or MySQL so that their output is checked by go test. Its
// statements are its own: INSERT <table> <n>, COUNT <table>, SET <name>
// <value>, GET <name>, BEGIN, COMMIT, ROLLBACK. Against a real server the
// code is the same, with its dialect imported and its DSN.

func ExampleNew() {
	srv := fakedb.NewServer("example-new") // the database server
	defer srv.Close()

	// Against PostgreSQL: pooldriver.New("postgres://app@db:5432/shop?pool_max_conns=20")
	// with _ "github.com/pooldriver/pooldriver/dialects/postgres" imported.
	db := sql.OpenDB(pooldriver.New("fake://example-new?pool_max_conns=20"))
	defer db.Close()

	if _, err := db.Exec("INSERT orders 42"); err != nil {
		log.Fatal(err)
	}
	var n int
	if err := db.QueryRow("COUNT orders").Scan(&n); err != nil {
		log.Fatal(err)
	}
	fmt.Println("orders:", n)

	// New never fails: what is wrong with the DSN is the first statement's
	// error. Here the dialect is not imported.
	bad := sql.OpenDB(pooldriver.New("postgres://app@db:5432/shop"))
	defer bad.Close()
	fmt.Println(bad.Ping())
	// Output:
	// orders: 1
	// pooldriver: the postgres dialect is not registered: add the import _ "github.com/pooldriver/pooldriver/dialects/postgres"
}

func ExampleWithTask() {
	srv := fakedb.NewServer("example-with-task")
	defer srv.Close()
	db := sql.OpenDB(pooldriver.New("fake://example-with-task"))
	defer db.Close()

	ctx, end := pooldriver.WithTask(context.Background())
	// A raw transaction across separate calls: while it is open, every
	// statement run with ctx runs on the task's connection.
	if _, err := db.ExecContext(ctx, "BEGIN"); err != nil {
		log.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, "INSERT orders 42"); err != nil {
		log.Fatal(err)
	}
	var inTask, outside int
	if err := db.QueryRowContext(ctx, "COUNT orders").Scan(&inTask); err != nil {
		log.Fatal(err)
	}
	if err := db.QueryRow("COUNT orders").Scan(&outside); err != nil {
		log.Fatal(err)
	}
	fmt.Println("in the task:", inTask, "outside:", outside)

	end() // without a COMMIT: the task's end rolls the transaction back
	if err := db.QueryRow("COUNT orders").Scan(&outside); err != nil {
		log.Fatal(err)
	}
	fmt.Println("after end:", outside)
	// Output:
	// in the task: 1 outside: 0
	// after end: 0
}

func ExampleWithTask_sessionMode() {
	srv := fakedb.NewServer("example-session-mode")
	defer srv.Close()
	db := sql.OpenDB(pooldriver.New("fake://example-session-mode"))
	defer db.Close()

	// In session mode the task keeps one connection from its first
	// statement to its end: session state set by one call is there for the
	// next (PostgreSQL: set_config for row-level security, temp tables).
	ctx, end := pooldriver.WithTask(context.Background(), pooldriver.SessionMode)
	if _, err := db.ExecContext(ctx, "SET tenant acme"); err != nil {
		log.Fatal(err)
	}
	var tenant sql.NullString
	if err := db.QueryRowContext(ctx, "GET tenant").Scan(&tenant); err != nil {
		log.Fatal(err)
	}
	fmt.Println("in the task:", tenant.String)

	end() // the session is reset before anyone else gets the connection
	if err := db.QueryRow("GET tenant").Scan(&tenant); err != nil {
		log.Fatal(err)
	}
	fmt.Println("after end, set:", tenant.Valid)
	// Output:
	// in the task: acme
	// after end, set: false
}

func ExampleMiddleware() {
	srv := fakedb.NewServer("example-middleware")
	defer srv.Close()
	db := sql.OpenDB(pooldriver.New("fake://example-middleware"))
	defer db.Close()

	// A handler that begins a raw transaction and returns without
	// committing it. In a service: http.ListenAndServe(addr, pooldriver.Middleware(mux)).
	h := pooldriver.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := db.ExecContext(r.Context(), "BEGIN"); err != nil {
			log.Fatal(err)
		}
		if _, err := db.ExecContext(r.Context(), "INSERT orders 42"); err != nil {
			log.Fatal(err)
		}
		http.Error(w, "payment declined", http.StatusPaymentRequired)
	}))

	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/orders", nil))

	// The request's task ended with the handler: its transaction was
	// rolled back and its connection is back in the pool.
	var n int
	if err := db.QueryRow("COUNT orders").Scan(&n); err != nil {
		log.Fatal(err)
	}
	fmt.Println(rec.Code, "orders:", n)
	// Output:
	// 402 orders: 0
}

func ExampleWrap() {
	srv := fakedb.NewServer("example-wrap")
	defer srv.Close()

	// Any database/sql driver's connector: here the fake server's own,
	// elsewhere pgx's stdlib.GetConnector(cfg) or mysql.NewConnector(cfg).
	c := pooldriver.Wrap(srv.Connector(), pooldriver.WithMaxConns(2))
	db := sql.OpenDB(c)
	defer db.Close()

	// A *sql.Conn closed in the middle of a raw transaction: the driver
	// cannot roll it back by itself, so pooldriver replaces the connection
	// instead of handing it to anyone else.
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := conn.ExecContext(ctx, "BEGIN"); err != nil {
		log.Fatal(err)
	}
	if _, err := conn.ExecContext(ctx, "INSERT orders 42"); err != nil {
		log.Fatal(err)
	}
	if err := conn.Close(); err != nil {
		log.Fatal(err)
	}

	var n int
	if err := db.QueryRow("COUNT orders").Scan(&n); err != nil {
		log.Fatal(err)
	}
	s := c.Stats()
	fmt.Println("orders:", n, "opened:", s.Created, "closed:", s.Destroyed)
	// Output:
	// orders: 0 opened: 2 closed: 1
}

func ExampleConnectorOf() {
	srv := fakedb.NewServer("example-stats-of")
	defer srv.Close()

	// However the *sql.DB was opened (here by the driver's name),
	// ConnectorOf finds the Connector under it, whose Stats read the pool of
	// physical connections; db.Stats() describes database/sql's logical
	// ones.
	db, err := sql.Open("pooldriver", "fake://example-stats-of?pool_max_conns=4")
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	for i := range 3 {
		if _, err := db.Exec("INSERT orders ?", i); err != nil {
			log.Fatal(err)
		}
	}

	c, ok := pooldriver.ConnectorOf(db)
	fmt.Println("pooldriver's:", ok)
	s := c.Stats()
	fmt.Println("max:", s.MaxConns, "opened:", s.Created, "acquires:", s.Acquires, "idle:", s.Idle)

	plain := sql.OpenDB(srv.Connector()) // the fake driver alone
	defer plain.Close()
	_, ok = pooldriver.ConnectorOf(plain)
	fmt.Println("plain driver's:", ok)
	// Output:
	// pooldriver's: true
	// max: 4 opened: 1 acquires: 3 idle: 1
	// plain driver's: false
}
