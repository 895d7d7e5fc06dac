package otelpool_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/pooldriver/pooldriver"
	"github.com/pooldriver/pooldriver/internal/fakedb"
	"github.com/pooldriver/pooldriver/otelpool"
	"github.com/pooldriver/pooldriver/pool"
)

// BenchmarkExec measures what a registration costs each statement (it
// records a wait and a use time into the SDK's histograms), side by side
// with the same pool unregistered and with a no-op Connector.Observe, which
// costs what being observed costs the pool (parking stays on) without
// otelpool's recording, on the in-memory fake server of the root package's
// benchmarks.
func BenchmarkExec(b *testing.B) {
	for _, name := range []string{"unregistered", "observed", "registered"} {
		b.Run(name, func(b *testing.B) {
			srv := fakedb.NewServer("otelpool_" + name)
			defer srv.Close()
			c := pooldriver.Wrap(srv.Connector(), pooldriver.WithMaxConns(4))
			db := sql.OpenDB(c)
			defer db.Close()
			switch name {
			case "observed":
				defer c.Observe(func(pool.Timing, time.Duration) {})()
			case "registered":
				mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
				defer func() { _ = mp.Shutdown(context.Background()) }()
				reg, err := otelpool.Register(c, mp, "bench")
				if err != nil {
					b.Fatal(err)
				}
				defer func() { _ = reg.Unregister() }()
			}
			if _, err := db.Exec("INSERT t 1"); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := db.Exec("INSERT t 1"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
