package promcollector_test

import (
	"context"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/pooldriver/pooldriver"
	"github.com/pooldriver/pooldriver/internal/fakedb"
	"github.com/pooldriver/pooldriver/promcollector"
)

// standbyFamilies are the metrics collected only with pool_reads=standby.
var standbyFamilies = []string{
	"pooldriver_reads_total",
	"pooldriver_standby_up",
	"pooldriver_standby_lag_seconds",
	"pooldriver_standby_connections",
	"pooldriver_standby_acquires_total",
}

// TestCollectorStandbys: with pool_reads=standby and two hosts that never
// answer, each host has its series, labelled with its host:port, down and
// with an empty pool, without a lag; the reads counters are there at 0.
func TestCollectorStandbys(t *testing.T) {
	// Nothing listens on ports 1 and 2: neither host is ever up.
	c := pooldriver.New("postgres://u:secret@127.0.0.1:1,127.0.0.1:2/db?target_session_attrs=read-write&pool_reads=standby")
	if err := c.Err(); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	col := promcollector.New(c, "orders")

	want := `# HELP pooldriver_reads_total With pool_reads=standby, reads by where they ran: served_by=standby, a standby's pool served it; primary, it went to the primary because no standby could.
# TYPE pooldriver_reads_total counter
pooldriver_reads_total{pool="orders",served_by="primary"} 0
pooldriver_reads_total{pool="orders",served_by="standby"} 0
# HELP pooldriver_standby_up With pool_reads=standby, 1 while the host's last look found it a standby, else 0.
# TYPE pooldriver_standby_up gauge
pooldriver_standby_up{host="127.0.0.1:1",pool="orders"} 0
pooldriver_standby_up{host="127.0.0.1:2",pool="orders"} 0
# HELP pooldriver_standby_connections With pool_reads=standby, the standby host's pool's physical connections by state: idle, used, opening.
# TYPE pooldriver_standby_connections gauge
pooldriver_standby_connections{host="127.0.0.1:1",pool="orders",state="idle"} 0
pooldriver_standby_connections{host="127.0.0.1:1",pool="orders",state="opening"} 0
pooldriver_standby_connections{host="127.0.0.1:1",pool="orders",state="used"} 0
pooldriver_standby_connections{host="127.0.0.1:2",pool="orders",state="idle"} 0
pooldriver_standby_connections{host="127.0.0.1:2",pool="orders",state="opening"} 0
pooldriver_standby_connections{host="127.0.0.1:2",pool="orders",state="used"} 0
# HELP pooldriver_standby_acquires_total With pool_reads=standby, physical connections the standby host's pool handed out.
# TYPE pooldriver_standby_acquires_total counter
pooldriver_standby_acquires_total{host="127.0.0.1:1",pool="orders"} 0
pooldriver_standby_acquires_total{host="127.0.0.1:2",pool="orders"} 0
`
	compare(t, col, want, standbyFamilies...)
	checkRegistry(t, col)
}

// TestCollectorReadsServedBy runs a read-only statement on a real
// PostgreSQL server named twice in a pool_reads=standby DSN, with a host
// that never answers: the server is the primary, no host is a standby, so
// the read goes to the primary, and reads_total and each host's series say
// so, as Stats and Standbys do.
func TestCollectorReadsServedBy(t *testing.T) {
	dsn := postgresDSN(t)
	u, err := url.Parse(dsn)
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
	col := promcollector.New(c, "orders")

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
	if got := series(t, col, "pooldriver_reads_total", "served_by"); len(got) != 2 || got["primary"] != 1 || got["standby"] != 0 {
		t.Fatalf("reads_total by served_by: %v", got)
	}

	up := series(t, col, "pooldriver_standby_up", "host")
	acquires := series(t, col, "pooldriver_standby_acquires_total", "host")
	if len(up) != len(standbys) || len(acquires) != len(standbys) {
		t.Fatalf("up %v, acquires_total %v; Standbys %+v", up, acquires, standbys)
	}
	for _, sb := range standbys {
		if v, ok := up[sb.Host]; !ok || v != 0 || sb.Up {
			t.Errorf("%s: up %v (%v), Standbys' %v", sb.Host, v, ok, sb.Up)
		}
		if v, ok := acquires[sb.Host]; !ok || v != float64(sb.Pool.Acquires) || v != 0 {
			t.Errorf("%s: acquires_total %v (%v), Standbys' %d", sb.Host, v, ok, sb.Pool.Acquires)
		}
	}
	if _, ok := up["127.0.0.1:1"]; !ok {
		t.Errorf("no series of the host 127.0.0.1:1: %v", up)
	}
	if n := testutil.CollectAndCount(col, "pooldriver_standby_connections"); n != 3*len(standbys) {
		t.Errorf("%d standby_connections series, want 3 for each of %d hosts", n, len(standbys))
	}
	checkRegistry(t, col)
}

// TestCollectorWithoutStandbys: a Connector without pool_reads=standby
// has no standby series, and no reads_total.
func TestCollectorWithoutStandbys(t *testing.T) {
	srv := fakedb.NewServer("promcollector_no_standbys")
	defer srv.Close()
	fake := pooldriver.Wrap(srv.Connector())
	defer func() { _ = fake.Close() }()
	pg := pooldriver.New("postgres://u@127.0.0.1:1,127.0.0.1:2/db")
	defer pg.Close()
	for _, c := range []*pooldriver.Connector{fake, pg} {
		if c.Standbys() != nil {
			t.Fatalf("%s: Standbys without pool_reads=standby", c.PoolName())
		}
		col := promcollector.New(c, "orders")
		if n := testutil.CollectAndCount(col, standbyFamilies...); n != 0 {
			t.Errorf("%s: %d standby series", c.PoolName(), n)
		}
		checkRegistry(t, col)
	}
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

// series returns the values of the family called name by the value of
// the label key.
func series(t *testing.T, col prometheus.Collector, name, key string) map[string]float64 {
	t.Helper()
	got := map[string]float64{}
	mf := family(t, col, name)
	for _, m := range mf.GetMetric() {
		v := m.GetGauge().GetValue()
		if mf.GetType() == dto.MetricType_COUNTER {
			v = m.GetCounter().GetValue()
		}
		for _, l := range m.GetLabel() {
			if l.GetName() == key {
				got[l.GetValue()] = v
			}
		}
	}
	return got
}

// checkRegistry gathers col from a pedantic registry, which fails a metric
// whose description Describe did not send, and lints it.
func checkRegistry(t *testing.T, col prometheus.Collector) {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(col); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if strings.Contains(mf.String(), "secret") {
			t.Fatalf("the password in %s", mf)
		}
	}
	if problems, err := testutil.CollectAndLint(col); err != nil || len(problems) != 0 {
		t.Fatalf("lint: %v %+v", err, problems)
	}
}
