package promcollector_test

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/pooldriver/pooldriver"
	_ "github.com/pooldriver/pooldriver/dialects/postgres" // recognizes SQLSTATE 53300 as the server's connection limit
	"github.com/pooldriver/pooldriver/internal/fakedb"
	"github.com/pooldriver/pooldriver/internal/servertest"
	"github.com/pooldriver/pooldriver/pool"
	"github.com/pooldriver/pooldriver/promcollector"
)

// TestCollector runs the servertest scenario on a real server and compares
// what the collector reports, during it and after, with what the scenario
// did to the pool.
func TestCollector(t *testing.T) {
	servertest.Run(t, func(t *testing.T, db *sql.DB, c *pooldriver.Connector) {
		col := promcollector.New(c, "orders")

		servertest.Exercise(t, db, func() {
			compare(t, col, gauges(0, 2, 1, "closed"), "pooldriver_connections", "pooldriver_max_connections",
				"pooldriver_min_connections", "pooldriver_min_idle_connections", "pooldriver_pending_requests",
				"pooldriver_circuit_breaker_state")
		})
		// The scenario: the pre-warmed connection taken at once, three
		// waits (for a new connection, timed out, served by a release),
		// two connections made in all. Of the three holds, one went back
		// to the pool for a waiter (timed in use_seconds), and the other
		// two parked their connection (untimed_uses_total), unless a
		// busy machine let a waiter arrive as one let go: then it was
		// timed too. Either way every hold is counted once.
		s := c.Stats()
		if s.UntimedUses+int64(s.UseTime.Count) != 3 || s.UntimedUses < 1 {
			t.Errorf("Stats: UntimedUses %d, UseTime.Count %d: want 3 holds in all, one of them or more parked", s.UntimedUses, s.UseTime.Count)
		}
		counters := map[string]int{
			"acquires": 3, "waits": 3, "acquire_timeouts": 1, "acquire_cancels": 0,
			"circuit_rejects": 0, "backoff_rejects": 0, "fail_fast_rejects": 0, "circuit_breaker_changes": 0, "connections_created": 2, "connect_errors": 0,
			"connections_closed": 0, "connections_expired": 0, "connections_idle_trimmed": 0, "health_check_failures": 0,
			"idle_check_failures": 0, "auto_rollbacks": 0, "session_resets": 0, "carried_resets": 0, "separate_resets": 0, "panics": 0, "misuses": 0, "leaks": 0,
			"untimed_uses": int(s.UntimedUses), "task_end_rollbacks": 0,
		}
		want := gauges(2, 0, 0, "closed")
		var names []string
		for name, v := range counters {
			name = "pooldriver_" + name + "_total"
			names = append(names, name)
			want += fmt.Sprintf("# HELP %s %s\n# TYPE %s counter\n%s{pool=\"orders\"} %d\n", name, help(t, col, name), name, name, v)
		}
		compare(t, col, want, append(names, "pooldriver_connections", "pooldriver_pending_requests")...)

		for name, h := range map[string]struct {
			count int64
			stats pool.Histogram
		}{
			"pooldriver_wait_seconds":   {4, s.WaitTime},
			"pooldriver_use_seconds":    {3 - s.UntimedUses, s.UseTime},
			"pooldriver_create_seconds": {2, s.CreateTime},
		} {
			checkHistogram(t, col, name, h.count, h.stats)
		}

		if problems, err := testutil.CollectAndLint(col); err != nil || len(problems) != 0 {
			t.Fatalf("lint: %v %+v", err, problems)
		}
		// Every Stats counter has its metric.
		if n := testutil.CollectAndCount(col); n != 3+3+1+4+3+len(counters) {
			t.Fatalf("%d metrics", n)
		}
	})
}

// TestCollectorBreakerStates drives the breaker by hand through every
// state of pool.State: the state's series reads 1, each other state's 0.
func TestCollectorBreakerStates(t *testing.T) {
	srv := fakedb.NewServer("promcollector_states")
	defer srv.Close()
	c := pooldriver.Wrap(srv.Connector(), pooldriver.WithCircuitBreaker(pool.Manual))
	defer func() { _ = c.Close() }()
	col := promcollector.New(c, "orders")
	b := c.Breaker()
	for _, st := range breakerStates() {
		switch st {
		case pool.Active:
			b.Activate()
		case pool.Inactive:
			b.Deactivate()
		case pool.Recovering:
			b.Recover()
		case pool.Limited:
			b.Limit()
		default:
			t.Fatalf("a breaker state this test cannot drive: %v", st)
		}
		if got := breakerSeries(t, col); !onlyOne(got, st) {
			t.Errorf("breaker %v: series %v", st, got)
		}
	}
}

// TestCollectorAtConnectionLimit: a server that refuses every connection
// for want of room (PostgreSQL's SQLSTATE 53300) limits the breaker, and the
// gauge says so while a statement waits.
func TestCollectorAtConnectionLimit(t *testing.T) {
	srv := fakedb.NewServer("promcollector_limit")
	defer srv.Close()
	srv.FailConnects(1<<30, &pgconn.PgError{Severity: "FATAL", Code: "53300", Message: "sorry, too many clients already"})
	c := pooldriver.Wrap(srv.Connector(), pooldriver.WithMaxConns(2))
	db := sql.OpenDB(c)
	defer func() { _ = db.Close() }()
	col := promcollector.New(c, "orders")

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := db.ExecContext(ctx, "SELECT 1")
		done <- err
	}()
	defer func() {
		cancel()
		if err := <-done; err == nil {
			t.Error("a statement succeeded on a server that refuses every connection")
		}
	}()
	var got map[string]float64
	servertest.WaitFor(t, "the breaker's limited series at 1", func() bool {
		got = breakerSeries(t, col)
		return got["limited"] == 1
	})
	if !onlyOne(got, pool.Limited) {
		t.Fatalf("at the server's limit: series %v", got)
	}
	if s := c.Stats(); s.BreakerChanges == 0 || s.Created != 0 {
		t.Fatalf("stats: %+v", s)
	}
}

// breakerStates lists every state of pool.State, read from its String:
// a state added to the pool without a series fails the tests.
func breakerStates() []pool.State {
	var states []pool.State
	for st := pool.State(0); !strings.HasPrefix(st.String(), "State("); st++ {
		states = append(states, st)
	}
	return states
}

// breakerSeries returns the breaker gauge's value by state label.
func breakerSeries(t *testing.T, col prometheus.Collector) map[string]float64 {
	t.Helper()
	got := map[string]float64{}
	for _, m := range family(t, col, "pooldriver_circuit_breaker_state").GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "state" {
				got[l.GetValue()] = m.GetGauge().GetValue()
			}
		}
	}
	return got
}

// onlyOne reports whether got has a series for every breaker state, st's
// at 1 and the others at 0.
func onlyOne(got map[string]float64, st pool.State) bool {
	states := breakerStates()
	if len(got) != len(states) {
		return false
	}
	for _, s := range states {
		v, ok := got[s.String()]
		if !ok || (s == st) != (v == 1) || v != 0 && v != 1 {
			return false
		}
	}
	return true
}

func TestCollectorOfNilConnector(t *testing.T) {
	col := promcollector.New(nil, "none")
	if n := testutil.CollectAndCount(col); n != 0 {
		t.Fatalf("a nil Connector collected %d metrics", n)
	}
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(col); err != nil {
		t.Fatal(err)
	}
	// Two pools side by side, told apart by their label.
	c := pooldriver.New("postgres://u:secret@127.0.0.1:1/db")
	defer c.Close()
	if err := reg.Register(promcollector.New(c, "other")); err != nil {
		t.Fatal(err)
	}
	if err := reg.Register(promcollector.New(c, "other")); err == nil {
		t.Fatal("a second collector with the same pool name was accepted")
	}
	// Without a name, the Connector's: pool_name, else host:port/database
	// (checked below).
	if err := reg.Register(promcollector.New(c, "")); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	unnamed := 0
	for _, mf := range mfs {
		if strings.Contains(mf.String(), "secret") {
			t.Fatalf("the password in %s", mf)
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "pool" && l.GetValue() == c.PoolName() {
					unnamed++
				}
			}
		}
	}
	if unnamed == 0 || c.PoolName() != "127.0.0.1:1/db" {
		t.Fatalf("no metric labelled with the Connector's pool name %q", c.PoolName())
	}
}

// gauges is the exposition of the gauges for the given connection counts
// (servertest.Params: 2 max, 1 min, 1 min idle) and breaker state.
func gauges(idle, used, pending int, breaker string) string {
	s := fmt.Sprintf(`# HELP pooldriver_connections Physical connections by state: idle, used (held for a statement, *sql.Conn, *sql.Tx, rows or task), opening.
# TYPE pooldriver_connections gauge
pooldriver_connections{pool="orders",state="idle"} %d
pooldriver_connections{pool="orders",state="opening"} 0
pooldriver_connections{pool="orders",state="used"} %d
# HELP pooldriver_max_connections The maximum number of physical connections (pool_max_conns).
# TYPE pooldriver_max_connections gauge
pooldriver_max_connections{pool="orders"} 2
# HELP pooldriver_min_connections The number of physical connections kept open (pool_min_conns).
# TYPE pooldriver_min_connections gauge
pooldriver_min_connections{pool="orders"} 1
# HELP pooldriver_min_idle_connections The number of physical connections kept idle (pool_min_idle_conns).
# TYPE pooldriver_min_idle_connections gauge
pooldriver_min_idle_connections{pool="orders"} 1
# HELP pooldriver_pending_requests Statements waiting for a physical connection.
# TYPE pooldriver_pending_requests gauge
pooldriver_pending_requests{pool="orders"} %d
# HELP pooldriver_circuit_breaker_state 1 for the circuit breaker's current state, 0 for the others.
# TYPE pooldriver_circuit_breaker_state gauge
`, idle, used, pending)
	for _, st := range []string{"closed", "half-open", "limited", "open"} {
		v := 0
		if st == breaker {
			v = 1
		}
		s += fmt.Sprintf("pooldriver_circuit_breaker_state{pool=\"orders\",state=%q} %d\n", st, v)
	}
	return s
}

// compare fails the test unless col reports want for names. A healthcheck
// or a look at the server may hold an idle connection for a
// moment at any time: what it reports is compared again for up to 5 s
// until it matches.
func compare(t *testing.T, col prometheus.Collector, want string, names ...string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := testutil.CollectAndCompare(col, strings.NewReader(want), names...)
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// family gathers col and returns the family called name.
func family(t *testing.T, col prometheus.Collector, name string) *dto.MetricFamily {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(col)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf
		}
	}
	t.Fatalf("%s: not collected", name)
	return nil
}

func help(t *testing.T, col prometheus.Collector, name string) string {
	return family(t, col, name).GetHelp()
}

// checkHistogram checks a histogram's count against the scenario's, and its
// buckets and sum against the pool's.
func checkHistogram(t *testing.T, col prometheus.Collector, name string, count int64, stats pool.Histogram) {
	t.Helper()
	mf := family(t, col, name)
	if mf.GetType() != dto.MetricType_HISTOGRAM || len(mf.GetMetric()) != 1 {
		t.Fatalf("%s: %v", name, mf)
	}
	h := mf.GetMetric()[0].GetHistogram()
	if h.GetSampleCount() != uint64(count) || stats.Count != count {
		t.Errorf("%s: count %d, the pool's %d, the scenario's %d", name, h.GetSampleCount(), stats.Count, count)
	}
	if h.GetSampleSum() != stats.Sum.Seconds() {
		t.Errorf("%s: sum %v, the pool's %v", name, h.GetSampleSum(), stats.Sum.Seconds())
	}
	bounds := pool.HistogramBounds()
	if len(h.GetBucket()) != len(bounds) {
		t.Fatalf("%s: %d buckets", name, len(h.GetBucket()))
	}
	var cum int64
	for i, b := range h.GetBucket() {
		cum += stats.Buckets[i]
		if b.GetUpperBound() != bounds[i].Seconds() || b.GetCumulativeCount() != uint64(cum) {
			t.Errorf("%s: bucket %d is ≤%v: %d, the pool's ≤%v: %d", name, i, b.GetUpperBound(), b.GetCumulativeCount(), bounds[i], cum)
		}
	}
}

// TestCollectorUntimedUses: on a fake server, serial statements park their
// connection; the holds not in use_seconds are in untimed_uses_total, the
// two adding up to acquires_total, and task-end rollbacks have their
// counter.
func TestCollectorUntimedUses(t *testing.T) {
	srv := fakedb.NewServer("promcollector_untimed")
	defer srv.Close()
	c := pooldriver.New("fake://" + srv.Name()) // its dialect sees BEGIN
	if err := c.Err(); err != nil {
		t.Fatal(err)
	}
	db := sql.OpenDB(c)
	defer func() { _ = db.Close() }()
	col := promcollector.New(c, "orders")
	for i := range 20 {
		if _, err := db.Exec("ECHO ?", int64(i)); err != nil {
			t.Fatal(err)
		}
	}
	ctx, end := pooldriver.WithTask(context.Background())
	if _, err := db.ExecContext(ctx, "BEGIN"); err != nil {
		t.Fatal(err)
	}
	end() // rolls back the transaction the task left open
	servertest.WaitFor(t, "the task's rollback", func() bool { return c.Stats().TaskEndRollbacks == 1 })

	s := c.Stats()
	untimed := family(t, col, "pooldriver_untimed_uses_total").GetMetric()[0].GetCounter().GetValue()
	acquires := family(t, col, "pooldriver_acquires_total").GetMetric()[0].GetCounter().GetValue()
	timed := family(t, col, "pooldriver_use_seconds").GetMetric()[0].GetHistogram().GetSampleCount()
	rollbacks := family(t, col, "pooldriver_task_end_rollbacks_total").GetMetric()[0].GetCounter().GetValue()
	if untimed == 0 || untimed != float64(s.UntimedUses) || timed != uint64(s.UseTime.Count) {
		t.Fatalf("untimed_uses_total %v, use_seconds count %d; Stats: UntimedUses %d, UseTime.Count %d", untimed, timed, s.UntimedUses, s.UseTime.Count)
	}
	if s.Active == 0 && float64(timed)+untimed != acquires {
		t.Fatalf("use_seconds count %d + untimed_uses_total %v != acquires_total %v", timed, untimed, acquires)
	}
	if rollbacks != 1 {
		t.Fatalf("task_end_rollbacks_total %v, want 1", rollbacks)
	}
}
