package otelpool_test

import (
	"context"
	"maps"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	otelmetric "go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/pooldriver/pooldriver"
	"github.com/pooldriver/pooldriver/internal/fakedb"
	"github.com/pooldriver/pooldriver/otelpool"
)

// standbyInstruments are the instruments reported only with
// pool_reads=standby, with their units and kinds.
var standbyInstruments = []struct {
	name, unit, kind string // kind: "counter", "updown" or "gauge"
}{
	{otelpool.ReadsName, "{read}", "counter"},
	{otelpool.StandbyUpName, "1", "gauge"},
	{otelpool.StandbyLagName, "s", "gauge"},
	{otelpool.StandbyConnectionCountName, "{connection}", "updown"},
	{otelpool.StandbyAcquiresName, "{acquire}", "counter"},
}

// TestRegisterStandbys: with pool_reads=standby and two hosts that never
// answer, each host has its data points, with its server.address and
// server.port beside the pool name, down and with an empty pool, without
// a lag; the reads are there at 0; the conventions' metrics keep their
// attributes; nothing is observed after Unregister.
func TestRegisterStandbys(t *testing.T) {
	// Nothing listens on ports 1 and 2: neither host is ever up.
	c := pooldriver.New("postgres://u:secret@127.0.0.1:1,127.0.0.1:2/db?target_session_attrs=read-write&pool_reads=standby")
	if err := c.Err(); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	reader, reg := registerOrders(t, c)
	rm := collect(t, reader)

	checkStandbyKinds(t, rm)
	if otelpool.ServerAddressKey != semconv.ServerAddressKey || otelpool.ServerPortKey != semconv.ServerPortKey {
		t.Errorf("attribute keys %q, %q", otelpool.ServerAddressKey, otelpool.ServerPortKey)
	}
	for name, want := range map[string]map[string]float64{
		otelpool.ReadsName:                  {"standby": 0, "primary": 0},
		otelpool.StandbyUpName:              {"127.0.0.1:1": 0, "127.0.0.1:2": 0},
		otelpool.StandbyConnectionCountName: {"127.0.0.1:1|idle": 0, "127.0.0.1:1|used": 0, "127.0.0.1:2|idle": 0, "127.0.0.1:2|used": 0},
		otelpool.StandbyAcquiresName:        {"127.0.0.1:1": 0, "127.0.0.1:2": 0},
	} {
		if got := points(t, rm, name); !maps.Equal(got, want) {
			t.Errorf("%s: %v, want %v", name, got, want)
		}
	}
	if m, ok := metric(t, rm, otelpool.StandbyLagName); ok {
		t.Errorf("a lag of hosts that are not up: %+v", m.Data)
	}
	// The conventions' metrics stay the primary's pool's: the pool name
	// and, for the count, the state; no host.
	for _, name := range []string{"db.client.connection.count", "db.client.connection.max"} {
		m, ok := metric(t, rm, name)
		if !ok {
			t.Fatalf("%s: not reported", name)
		}
		var attrs []attribute.Set
		for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
			attrs = append(attrs, dp.Attributes)
		}
		checkAttributes(t, name, attrs, name == "db.client.connection.count")
	}

	if err := reg.Unregister(); err != nil {
		t.Fatal(err)
	}
	rm = collect(t, reader)
	for _, in := range standbyInstruments {
		if m, ok := metric(t, rm, in.name); ok {
			t.Errorf("%s still observed after Unregister: %+v", in.name, m.Data)
		}
	}
}

// TestRegisterReadsServedBy runs a read-only statement on a real
// PostgreSQL server named in a pool_reads=standby DSN beside a host that
// never answers: the server is the primary, no host is a standby, so the
// read goes to the primary, and pooldriver.reads and each host's data
// points say so, as Stats and Standbys do.
func TestRegisterReadsServedBy(t *testing.T) {
	u, err := url.Parse(postgresDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	// Nothing listens on port 1: that host is never up.
	u.Host += ",127.0.0.1:1"
	q := u.Query()
	q.Set("target_session_attrs", "read-write")
	q.Set("pool_reads", "standby")
	u.RawQuery = q.Encode()
	db, err := pooldriver.Open(u.String())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = db.Close() }()
	c, _ := pooldriver.ConnectorOf(db)
	reader, reg := registerOrders(t, c)
	defer func() { _ = reg.Unregister() }()

	var one int
	if err := db.QueryRowContext(pooldriver.ReadOnly(context.Background()), "SELECT 1").Scan(&one); err != nil {
		t.Fatal(err)
	}
	// The first look at the server finds it the primary: Standbys leaves
	// its host out.
	for deadline := time.Now().Add(10 * time.Second); len(c.Standbys()) != 1 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	s, standbys := c.Stats(), c.Standbys()
	if s.ReadsOnPrimary != 1 || s.ReadsOnStandby != 0 || len(standbys) != 1 {
		t.Fatalf("Stats: %d reads on the primary, %d on standbys; Standbys: %+v", s.ReadsOnPrimary, s.ReadsOnStandby, standbys)
	}
	rm := collect(t, reader)
	checkStandbyKinds(t, rm)
	if got, want := points(t, rm, otelpool.ReadsName), map[string]float64{"standby": 0, "primary": 1}; !maps.Equal(got, want) {
		t.Errorf("%s: %v, want %v", otelpool.ReadsName, got, want)
	}
	up, acquires := map[string]float64{}, map[string]float64{}
	for _, sb := range standbys {
		if sb.Up {
			t.Fatalf("%s is up: no host here is a standby", sb.Host)
		}
		up[sb.Host], acquires[sb.Host] = 0, float64(sb.Pool.Acquires)
	}
	if _, ok := up["127.0.0.1:1"]; !ok {
		t.Fatalf("Standbys without the host 127.0.0.1:1: %+v", standbys)
	}
	if got := points(t, rm, otelpool.StandbyUpName); !maps.Equal(got, up) {
		t.Errorf("%s: %v, want %v", otelpool.StandbyUpName, got, up)
	}
	if got := points(t, rm, otelpool.StandbyAcquiresName); !maps.Equal(got, acquires) {
		t.Errorf("%s: %v, want %v", otelpool.StandbyAcquiresName, got, acquires)
	}
	if got := points(t, rm, otelpool.StandbyConnectionCountName); len(got) != 2*len(standbys) {
		t.Errorf("%s: %v, want idle and used for each of %d hosts", otelpool.StandbyConnectionCountName, got, len(standbys))
	}
}

// TestRegisterWithoutStandbys: a Connector without pool_reads=standby
// reports none of pooldriver's own instruments.
func TestRegisterWithoutStandbys(t *testing.T) {
	srv := fakedb.NewServer("otelpool_no_standbys")
	defer srv.Close()
	fake := pooldriver.Wrap(srv.Connector())
	defer func() { _ = fake.Close() }()
	pg := pooldriver.New("postgres://u@127.0.0.1:1,127.0.0.1:2/db")
	defer pg.Close()
	for _, c := range []*pooldriver.Connector{fake, pg} {
		if c.Standbys() != nil {
			t.Fatalf("%s: Standbys without pool_reads=standby", c.PoolName())
		}
		reader := sdkmetric.NewManualReader()
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
		reg, err := otelpool.Register(c, mp, "orders")
		if err != nil {
			t.Fatal(err)
		}
		rm := collect(t, reader)
		if _, ok := metric(t, rm, "db.client.connection.max"); !ok {
			t.Errorf("%s: db.client.connection.max not reported", c.PoolName())
		}
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				if strings.HasPrefix(m.Name, "pooldriver.") {
					t.Errorf("%s: %s reported", c.PoolName(), m.Name)
				}
			}
		}
		_ = reg.Unregister()
		_ = mp.Shutdown(context.Background())
	}
}

// checkStandbyKinds checks the unit and kind of each of pooldriver's
// instruments that rm has.
func checkStandbyKinds(t *testing.T, rm metricdata.ResourceMetrics) {
	t.Helper()
	for _, in := range standbyInstruments {
		m, ok := metric(t, rm, in.name)
		if !ok {
			continue // the tests say which they want
		}
		if m.Unit != in.unit || m.Description == "" {
			t.Errorf("%s: unit %q, description %q; want the unit %q", in.name, m.Unit, m.Description, in.unit)
		}
		var kind string
		switch d := m.Data.(type) {
		case metricdata.Sum[int64]:
			kind = "updown"
			if d.IsMonotonic {
				kind = "counter"
			}
			if d.Temporality != metricdata.CumulativeTemporality {
				t.Errorf("%s: %v", in.name, d.Temporality)
			}
		case metricdata.Gauge[int64], metricdata.Gauge[float64]:
			kind = "gauge"
		default:
			t.Errorf("%s: %T", in.name, m.Data)
		}
		if kind != in.kind {
			t.Errorf("%s: a %s, want a %s", in.name, kind, in.kind)
		}
	}
}

// points returns the data points of pooldriver's instrument name by a key
// of their attributes: the served_by value; else host:port, followed by
// "|" and the state where there is one. Every point must carry the pool
// name "orders" and nothing but the attributes of its key.
func points(t *testing.T, rm metricdata.ResourceMetrics, name string) map[string]float64 {
	t.Helper()
	m, ok := metric(t, rm, name)
	if !ok {
		t.Errorf("%s: not reported", name)
		return nil
	}
	got := map[string]float64{}
	add := func(attrs attribute.Set, v float64) {
		if p, _ := attrs.Value(otelpool.PoolNameKey); p.AsString() != "orders" {
			t.Errorf("%s: pool name %q", name, p.AsString())
		}
		want := 1
		var key string
		if by, ok := attrs.Value(otelpool.ServedByKey); ok {
			key, want = by.AsString(), want+1
		} else {
			host, okHost := attrs.Value(otelpool.ServerAddressKey)
			port, okPort := attrs.Value(otelpool.ServerPortKey)
			if !okHost || !okPort || port.Type() != attribute.INT64 {
				t.Errorf("%s: attributes %v, want server.address and an int server.port", name, attrs.ToSlice())
			}
			key, want = net.JoinHostPort(host.AsString(), strconv.FormatInt(port.AsInt64(), 10)), want+2
			if st, ok := attrs.Value(otelpool.StateKey); ok {
				key, want = key+"|"+st.AsString(), want+1
			}
		}
		if attrs.Len() != want {
			t.Errorf("%s: attributes %v", name, attrs.ToSlice())
		}
		if _, dup := got[key]; dup {
			t.Errorf("%s: two data points of %s", name, key)
		}
		got[key] = v
	}
	switch d := m.Data.(type) {
	case metricdata.Sum[int64]:
		for _, dp := range d.DataPoints {
			add(dp.Attributes, float64(dp.Value))
		}
	case metricdata.Gauge[int64]:
		for _, dp := range d.DataPoints {
			add(dp.Attributes, float64(dp.Value))
		}
	case metricdata.Gauge[float64]:
		for _, dp := range d.DataPoints {
			add(dp.Attributes, dp.Value)
		}
	default:
		t.Errorf("%s: %T", name, m.Data)
	}
	return got
}

// postgresDSN returns the PostgreSQL server's DSN from the environment,
// skipping the test where it is unset as servertest.Run does (failing
// under CI=true).
func postgresDSN(t *testing.T) string {
	t.Helper()
	dsn := os.Getenv("POOLDRIVER_POSTGRES_DSN")
	if dsn == "" {
		msg := "POOLDRIVER_POSTGRES_DSN is unset: no postgres server to test against"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return dsn
}

// registerOrders registers c's metrics as pool "orders" with a meter
// provider of its own, shut down at the test's end, and returns its reader.
func registerOrders(t *testing.T, c *pooldriver.Connector) (*sdkmetric.ManualReader, otelmetric.Registration) {
	t.Helper()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	reg, err := otelpool.Register(c, mp, "orders")
	if err != nil {
		t.Fatal(err)
	}
	return reader, reg
}
