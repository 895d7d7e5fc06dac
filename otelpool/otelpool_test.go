package otelpool_test

import (
	"context"
	"database/sql"
	"math"
	"strings"
	"testing"

	otelmetric "go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/pooldriver/pooldriver"
	"github.com/pooldriver/pooldriver/internal/servertest"
	"github.com/pooldriver/pooldriver/otelpool"
	"github.com/pooldriver/pooldriver/pool"
)

// TestRegister drives a real server's pool through waits, a timeout, holds
// and a connection made on demand, and checks every metric the reader
// collects against the pool's own Stats.
func TestRegister(t *testing.T) {
	servertest.Run(t, func(t *testing.T, db *sql.DB, c *pooldriver.Connector) {
		reader := sdkmetric.NewManualReader()
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
		defer func() { _ = mp.Shutdown(context.Background()) }()
		reg, err := otelpool.Register(c, mp, "orders")
		if err != nil {
			t.Fatal(err)
		}
		before := c.Stats() // the histograms report what happens from now on

		servertest.Exercise(t, db, func() {
			checkSums(t, collect(t, reader), map[string]int64{
				"db.client.connection.count|idle":       0,
				"db.client.connection.count|used":       2,
				"db.client.connection.max":              2,
				"db.client.connection.idle.max":         2,
				"db.client.connection.idle.min":         1,
				"db.client.connection.pending_requests": 1,
				"db.client.connection.timeouts":         1,
			})
		})
		after := c.Stats()
		if after.AcquireTimeouts-before.AcquireTimeouts != 1 {
			t.Fatalf("stats after: %+v", after)
		}
		gauges := map[string]int64{
			"db.client.connection.count|idle":       2,
			"db.client.connection.count|used":       0,
			"db.client.connection.max":              2,
			"db.client.connection.idle.max":         2,
			"db.client.connection.idle.min":         1,
			"db.client.connection.pending_requests": 0,
			"db.client.connection.timeouts":         1,
		}
		// A connection made for a waiter is reported by the goroutine that
		// made it, and a use once the pool has the connection back, either
		// of which may still be on its way on a loaded machine: wait for
		// them.
		for _, h := range []struct {
			name string
			want uint64
		}{
			{"db.client.connection.create_time", uint64(after.CreateTime.Count - before.CreateTime.Count)},
			{"db.client.connection.use_time", uint64(after.UseTime.Count - before.UseTime.Count)},
		} {
			servertest.WaitFor(t, h.name+" reported", func() bool {
				m, ok := metric(t, collect(t, reader), h.name)
				if !ok {
					return false // not yet: none recorded
				}
				d, ok := m.Data.(metricdata.Histogram[float64])
				return ok && len(d.DataPoints) == 1 && d.DataPoints[0].Count == h.want
			})
		}
		rm := collect(t, reader)
		checkSums(t, rm, gauges)
		for name, want := range map[string][2]pool.Histogram{
			"db.client.connection.wait_time":   {before.WaitTime, after.WaitTime},
			"db.client.connection.use_time":    {before.UseTime, after.UseTime},
			"db.client.connection.create_time": {before.CreateTime, after.CreateTime},
		} {
			checkHistogram(t, name, histogram(t, rm, name), want[0], want[1])
		}
		if m, ok := histogram(t, rm, "db.client.connection.wait_time").Max.Value(); !ok || m < servertest.AcquireTimeout.Seconds() {
			t.Errorf("the longest wait reported is %vs (%v): the timed-out one (%v) is missing", m, ok, servertest.AcquireTimeout)
		}

		if err := reg.Unregister(); err != nil {
			t.Fatal(err)
		}
		if err := reg.Unregister(); err != nil {
			t.Fatalf("second Unregister: %v", err)
		}
		if _, err := db.Exec("SELECT 1"); err != nil {
			t.Fatal(err)
		}
		rm = collect(t, reader)
		if got := histogram(t, rm, "db.client.connection.wait_time").Count; got != uint64(after.WaitTime.Count-before.WaitTime.Count) {
			t.Errorf("a wait recorded after Unregister: %d", got)
		}
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				if _, ok := m.Data.(metricdata.Sum[int64]); ok {
					t.Errorf("%s still observed after Unregister", m.Name)
				}
			}
		}
	})
}

func TestRegisterRejectsBadArguments(t *testing.T) {
	c := pooldriver.New("postgres://u:secret@127.0.0.1:1/db")
	defer c.Close()
	mp := sdkmetric.NewMeterProvider()
	for _, tc := range []struct {
		c    *pooldriver.Connector
		mp   otelmetric.MeterProvider
		want string
	}{
		{nil, mp, "otelpool: Register: the Connector is nil"},
		{c, nil, "otelpool: Register: the MeterProvider is nil"},
	} {
		if _, err := otelpool.Register(tc.c, tc.mp, "p"); err == nil || err.Error() != tc.want {
			t.Errorf("got %v, want %q", err, tc.want)
		}
	}
}

// TestRegisterNamesThePool: without a name, the pool is named as in the
// Connector's log lines (PoolName: pool_name, else a default that the root
// package's tests pin down), never with a password.
func TestRegisterNamesThePool(t *testing.T) {
	for dsn, want := range map[string]string{
		"postgres://u:secret@127.0.0.1:1/db?pool_name=shop": "shop",
		"postgres://u:secret@127.0.0.1:1/db":                "", // PoolName's default
	} {
		c := pooldriver.New(dsn)
		defer c.Close()
		if want == "" {
			want = c.PoolName()
		}
		reader := sdkmetric.NewManualReader()
		reg, err := otelpool.Register(c, sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)), "")
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = reg.Unregister() }()
		m, ok := metric(t, collect(t, reader), "db.client.connection.max")
		if !ok {
			t.Fatal("db.client.connection.max not reported")
		}
		got, _ := m.Data.(metricdata.Sum[int64]).DataPoints[0].Attributes.Value(otelpool.PoolNameKey)
		if got.AsString() != want || c.PoolName() != want || want == "" || strings.Contains(want, "secret") {
			t.Errorf("pool name %q (PoolName %q), want %q", got.AsString(), c.PoolName(), want)
		}
	}
}

func collect(t *testing.T, r *sdkmetric.ManualReader) metricdata.ResourceMetrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	return rm
}

// metric returns the metric called name in the otelpool scope.
func metric(t *testing.T, rm metricdata.ResourceMetrics, name string) (metricdata.Metrics, bool) {
	t.Helper()
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != otelpool.ScopeName {
			continue
		}
		for _, m := range sm.Metrics {
			if m.Name == name {
				return m, true
			}
		}
	}
	return metricdata.Metrics{}, false
}

// checkSums checks the value of each counter; a key "name|state" picks the
// data point with that state attribute. Every data point must carry the
// pool name.
func checkSums(t *testing.T, rm metricdata.ResourceMetrics, want map[string]int64) {
	t.Helper()
	for key, v := range want {
		name, state, _ := strings.Cut(key, "|")
		m, ok := metric(t, rm, name)
		if !ok {
			t.Errorf("%s: not reported", name)
			continue
		}
		sum, ok := m.Data.(metricdata.Sum[int64])
		if !ok {
			t.Errorf("%s: %T, want a sum", name, m.Data)
			continue
		}
		if monotonic := name == "db.client.connection.timeouts"; sum.IsMonotonic != monotonic {
			t.Errorf("%s: monotonic %v", name, sum.IsMonotonic)
		}
		found := false
		for _, dp := range sum.DataPoints {
			if v, _ := dp.Attributes.Value(otelpool.PoolNameKey); v.AsString() != "orders" {
				t.Errorf("%s: pool name %q", name, v.AsString())
			}
			if s, _ := dp.Attributes.Value(otelpool.StateKey); s.AsString() == state {
				found = true
				if dp.Value != v {
					t.Errorf("%s: %d, want %d", key, dp.Value, v)
				}
			}
		}
		if !found {
			t.Errorf("%s: no data point", key)
		}
	}
}

func histogram(t *testing.T, rm metricdata.ResourceMetrics, name string) metricdata.HistogramDataPoint[float64] {
	t.Helper()
	m, ok := metric(t, rm, name)
	if !ok {
		t.Fatalf("%s: not reported", name)
	}
	h, ok := m.Data.(metricdata.Histogram[float64])
	if !ok || len(h.DataPoints) != 1 || m.Unit != "s" {
		t.Fatalf("%s: %+v (unit %q), want one histogram data point in seconds", name, m.Data, m.Unit)
	}
	return h.DataPoints[0]
}

// checkHistogram checks that dp counted exactly what the pool counted
// between before and after, bucket by bucket.
func checkHistogram(t *testing.T, name string, dp metricdata.HistogramDataPoint[float64], before, after pool.Histogram) {
	t.Helper()
	if v, _ := dp.Attributes.Value(otelpool.PoolNameKey); v.AsString() != "orders" {
		t.Errorf("%s: pool name %q", name, v.AsString())
	}
	bounds := pool.HistogramBounds()
	if len(dp.Bounds) != len(bounds) || len(dp.BucketCounts) != pool.HistogramBuckets {
		t.Fatalf("%s: %d bounds, %d buckets", name, len(dp.Bounds), len(dp.BucketCounts))
	}
	for i, b := range bounds {
		if dp.Bounds[i] != b.Seconds() {
			t.Fatalf("%s: bound %d is %v, the pool's %v", name, i, dp.Bounds[i], b)
		}
	}
	if dp.Count != uint64(after.Count-before.Count) || dp.Count == 0 {
		t.Errorf("%s: count %d, the pool counted %d", name, dp.Count, after.Count-before.Count)
	}
	for i := range dp.BucketCounts {
		if want := after.Buckets[i] - before.Buckets[i]; dp.BucketCounts[i] != uint64(want) {
			t.Errorf("%s: bucket %d has %d, the pool's %d", name, i, dp.BucketCounts[i], want)
		}
	}
	if want := (after.Sum - before.Sum).Seconds(); math.Abs(dp.Sum-want) > 1e-6 {
		t.Errorf("%s: sum %vs, the pool's %vs", name, dp.Sum, want)
	}
}
