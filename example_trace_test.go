package pooldriver_test

import (
	"context"
	"database/sql"
	"fmt"
	"log"

	"github.com/pooldriver/pooldriver"
	"github.com/pooldriver/pooldriver/internal/fakedb"
)

// printTracer prints what the pool tells it. A real tracer starts a span in
// each Start method, keeps it in the context it returns, and ends it in the
// End method, which gets that context.
type printTracer struct{}

func (printTracer) TraceAcquireStart(ctx context.Context, d pooldriver.TraceAcquireStartData) context.Context {
	fmt.Println("acquire start, pool", d.PoolName)
	return ctx
}

func (printTracer) TraceAcquireEnd(ctx context.Context, d pooldriver.TraceAcquireEndData) {
	fmt.Println("acquire end, error:", d.Err)
}

func (printTracer) TraceConnectStart(ctx context.Context, d pooldriver.TraceConnectStartData) context.Context {
	fmt.Println("connect start, pool", d.PoolName)
	return ctx
}

func (printTracer) TraceConnectEnd(ctx context.Context, d pooldriver.TraceConnectEndData) {
	fmt.Println("connect end, error:", d.Err)
}

// A Tracer hears of each acquire that goes to the pool and of each connect,
// the child of the acquire that caused it. For OpenTelemetry spans, a real
// program uses otelpool's tracer on its PostgreSQL DSN:
//
//	c := pooldriver.New("postgres://app@db:5432/shop?pool_name=orders",
//		otelpool.WithTracing(otel.GetTracerProvider()))
func ExampleTracer() {
	srv := fakedb.NewServer("example-tracer")
	defer srv.Close()

	// The in-memory fake server stands in for PostgreSQL here.
	cfg, err := pooldriver.ParseConfig("fake://example-tracer?pool_name=orders")
	if err != nil {
		log.Fatal(err)
	}
	cfg.Tracer = printTracer{} // the option WithTracer sets the same field
	c, err := pooldriver.NewConnectorWithConfig(cfg)
	if err != nil {
		log.Fatal(err)
	}
	db := sql.OpenDB(c)
	defer db.Close()

	// The first statement goes to the pool, which opens a connection.
	if _, err := db.Exec("INSERT orders 1"); err != nil {
		log.Fatal(err)
	}
	// The next, serial, takes back the connection its logical connection
	// parked: it neither waits nor connects, and is not traced.
	if _, err := db.Exec("INSERT orders 2"); err != nil {
		log.Fatal(err)
	}
	// Output:
	// acquire start, pool orders
	// connect start, pool orders
	// connect end, error: <nil>
	// acquire end, error: <nil>
}
