package pooldriver_test

import (
	"database/sql"
	"fmt"
	"log"

	"github.com/pooldriver/pooldriver"
)

// StatsOf reads the pool's Stats from any *sql.DB of pooldriver's, here one
// opened by name, whose Connector the caller never sees. (It needs a
// server: this example is compiled, not run.)
func ExampleStatsOf() {
	db, err := sql.Open("pooldriver", "postgres://app@db:5432/shop?pool_max_conns=20&pool_name=shop")
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	// ... the service runs ...
	if s, ok := pooldriver.StatsOf(db); ok {
		fmt.Printf("%d/%d connections, %d idle, %d waiting; waits: %d, %v in all, p99 ≤ %v; timeouts: %d\n",
			s.Total, s.MaxConns, s.Idle, s.Waiting, s.Waits, s.WaitDuration, s.WaitTime.Quantile(0.99), s.AcquireTimeouts)
	}
	// The Connector itself: its breaker, or an exporter (otelpool,
	// promcollector).
	if c, ok := pooldriver.ConnectorOf(db); ok {
		fmt.Println(c.PoolName(), c.Breaker().State())
	}
}
