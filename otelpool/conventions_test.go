package otelpool_test

import (
	"context"
	"database/sql"
	"slices"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/semconv/v1.43.0/dbconv"

	"github.com/pooldriver/pooldriver"
	"github.com/pooldriver/pooldriver/internal/fakedb"
	"github.com/pooldriver/pooldriver/internal/servertest"
	"github.com/pooldriver/pooldriver/otelpool"
)

// convention is what the semantic conventions' generated package says of
// one instrument.
type convention interface {
	Name() string
	Unit() string
	Description() string
}

// Every db.client.connection.* metric of the conventions, by its name as
// the conventions write it: a new version of the package that renames one,
// or a metric that Register stops reporting, fails the test.
var conventions = []struct {
	name  string
	conv  convention
	kind  string // "updown", "counter" or "histogram"
	state bool   // carries db.client.connection.state
}{
	{"db.client.connection.count", dbconv.ClientConnectionCountObservable{}, "updown", true},
	{"db.client.connection.max", dbconv.ClientConnectionMaxObservable{}, "updown", false},
	{"db.client.connection.idle.max", dbconv.ClientConnectionIdleMaxObservable{}, "updown", false},
	{"db.client.connection.idle.min", dbconv.ClientConnectionIdleMinObservable{}, "updown", false},
	{"db.client.connection.pending_requests", dbconv.ClientConnectionPendingRequestsObservable{}, "updown", false},
	{"db.client.connection.timeouts", dbconv.ClientConnectionTimeoutsObservable{}, "counter", false},
	{"db.client.connection.create_time", dbconv.ClientConnectionCreateTime{}, "histogram", false},
	{"db.client.connection.wait_time", dbconv.ClientConnectionWaitTime{}, "histogram", false},
	{"db.client.connection.use_time", dbconv.ClientConnectionUseTime{}, "histogram", false},
}

// TestRegisterFollowsTheConventions collects a registered pool of the fake
// server from an SDK reader and checks every metric's name, unit,
// description, kind and attributes against the conventions, the scope's
// schema URL, and that nothing else is reported.
func TestRegisterFollowsTheConventions(t *testing.T) {
	srv := fakedb.NewServer("otelpool_conventions")
	defer srv.Close()
	// Leak detection keeps parking off, so that every hold is timed and
	// use_time has a data point to check (a hold that parks is counted in
	// Stats.UntimedUses, not timed: see the package doc).
	c := pooldriver.Wrap(srv.Connector(), pooldriver.WithMaxConns(3), pooldriver.WithMinIdleConns(1), pooldriver.WithLeakDetection(time.Minute))
	db := sql.OpenDB(c)
	defer func() { _ = db.Close() }()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer func() { _ = mp.Shutdown(context.Background()) }()
	reg, err := otelpool.Register(c, mp, "orders")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = reg.Unregister() }()

	// One connection held, another statement beside it: a connection is
	// made after Register, whatever the pre-warming did before.
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	if _, err := conn.ExecContext(ctx, "INSERT t 1"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, "INSERT t 1"); err != nil {
		t.Fatal(err)
	}
	servertest.WaitFor(t, "a create time", func() bool {
		m, ok := metric(t, collect(t, reader), "db.client.connection.create_time")
		return ok && len(m.Data.(metricdata.Histogram[float64]).DataPoints) == 1
	})
	rm := collect(t, reader)

	var names []string
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != otelpool.ScopeName {
			continue
		}
		if sm.Scope.SchemaURL != semconv.SchemaURL || otelpool.SchemaURL != semconv.SchemaURL {
			t.Errorf("schema URL %q, want %q", sm.Scope.SchemaURL, semconv.SchemaURL)
		}
		for _, m := range sm.Metrics {
			names = append(names, m.Name)
		}
	}
	var want []string
	for _, cv := range conventions {
		want = append(want, cv.name)
	}
	slices.Sort(names)
	slices.Sort(want)
	if !slices.Equal(names, want) {
		t.Errorf("reported %v, want %v", names, want)
	}
	if otelpool.PoolNameKey != semconv.DBClientConnectionPoolNameKey || otelpool.StateKey != semconv.DBClientConnectionStateKey {
		t.Errorf("attribute keys %q, %q", otelpool.PoolNameKey, otelpool.StateKey)
	}

	for _, cv := range conventions {
		if cv.conv.Name() != cv.name {
			t.Errorf("%s: the conventions call it %s", cv.name, cv.conv.Name())
			continue
		}
		m, ok := metric(t, rm, cv.name)
		if !ok {
			continue // reported above
		}
		if m.Unit != cv.conv.Unit() || m.Description != cv.conv.Description() {
			t.Errorf("%s: unit %q, description %q; the conventions' %q, %q", cv.name, m.Unit, m.Description, cv.conv.Unit(), cv.conv.Description())
		}
		var attrs []attribute.Set
		switch d := m.Data.(type) {
		case metricdata.Sum[int64]:
			if cv.kind == "histogram" || d.IsMonotonic != (cv.kind == "counter") || d.Temporality != metricdata.CumulativeTemporality {
				t.Errorf("%s: a sum, monotonic %v, %v; want a %s", cv.name, d.IsMonotonic, d.Temporality, cv.kind)
			}
			for _, dp := range d.DataPoints {
				attrs = append(attrs, dp.Attributes)
			}
		case metricdata.Histogram[float64]:
			if cv.kind != "histogram" || len(d.DataPoints) != 1 {
				t.Errorf("%s: %d histogram data points, want a %s", cv.name, len(d.DataPoints), cv.kind)
			}
			for _, dp := range d.DataPoints {
				attrs = append(attrs, dp.Attributes)
			}
		default:
			t.Errorf("%s: %T", cv.name, m.Data)
		}
		checkAttributes(t, cv.name, attrs, cv.state)
	}

	checkSums(t, rm, map[string]int64{
		"db.client.connection.count|used":       1,
		"db.client.connection.max":              3,
		"db.client.connection.idle.max":         3,
		"db.client.connection.idle.min":         1,
		"db.client.connection.pending_requests": 0,
		"db.client.connection.timeouts":         0,
	})
}

// checkAttributes checks that every data point carries the pool name and,
// where the conventions want it, the state: one point for each of idle and
// used; nothing else.
func checkAttributes(t *testing.T, name string, attrs []attribute.Set, withState bool) {
	t.Helper()
	var states []string
	for _, set := range attrs {
		want := 1
		if v, ok := set.Value(otelpool.PoolNameKey); !ok || v.AsString() != "orders" {
			t.Errorf("%s: pool name %q", name, v.AsString())
		}
		if withState {
			want = 2
			v, _ := set.Value(otelpool.StateKey)
			states = append(states, v.AsString())
		}
		if set.Len() != want {
			t.Errorf("%s: attributes %v", name, set.ToSlice())
		}
	}
	slices.Sort(states)
	if withState && !slices.Equal(states, []string{string(dbconv.ClientConnectionStateIdle), string(dbconv.ClientConnectionStateUsed)}) {
		t.Errorf("%s: states %v, want idle and used", name, states)
	}
	if len(attrs) == 0 {
		t.Errorf("%s: no data point", name)
	}
}
