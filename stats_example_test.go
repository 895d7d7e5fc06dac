package pooldriver_test

import (
	"database/sql"
	"fmt"
	"log"

	"github.com/pooldriver/pooldriver"
)

// ConnectorOf finds the Connector under any *sql.DB of pooldriver's, here
// one opened by name, whose Connector the caller never sees, and its Stats
// read the pool. (It needs a server: this example is compiled, not run.)
func ExampleConnector_Stats() {
	db, err := sql.Open("pooldriver", "postgres://app@db:5432/shop?pool_max_conns=20&pool_name=shop")
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	// ... the service runs ...
	if c, ok := pooldriver.ConnectorOf(db); ok {
		s := c.Stats()
		fmt.Printf("%d/%d connections, %d idle, %d waiting; waits: %d, %v in all, p99 ≤ %v; timeouts: %d\n",
			s.Total, s.MaxConns, s.Idle, s.Waiting, s.Waits, s.WaitDuration, s.WaitTime.Quantile(0.99), s.AcquireTimeouts)
		// The Connector itself: its breaker, or an exporter (otelpool,
		// promcollector).
		fmt.Println(c.PoolName(), c.Breaker().State())
	}
}
