// Package promcollector exports a pooldriver pool's Stats as Prometheus
// metrics:
//
//	reg.MustRegister(promcollector.New(c, "orders"))
//
// Every metric carries the label pool="orders", so that several pools can
// be registered side by side:
//
//	pooldriver_connections{state="idle"|"used"|"opening"}   gauge
//	pooldriver_max_connections, _min_connections, _min_idle_connections  gauges: the settings
//	pooldriver_pending_requests                              gauge: statements waiting for a connection
//	pooldriver_circuit_breaker_state{state=…}                gauge: 1 for the breaker's state, 0 for the others:
//	                                                         closed (serving normally), open (not dialing),
//	                                                         half-open (a trial dial), limited (the server's connection limit)
//	pooldriver_wait_seconds, _use_seconds, _create_seconds   histograms (pool.HistogramBounds)
//	pooldriver_untimed_uses_total                            counter: holds that ended untimed (parked, or refused by the idle check)
//	pooldriver_…_total                                       a counter for each of Stats' counters
//
// With pool_reads=standby (docs/reads.md), which host served what; the
// pooldriver_standby_ series carry the label host="host:port" too, for
// each host of the DSN (Connector.Standbys):
//
//	pooldriver_reads_total{served_by="standby"|"primary"}    counter: reads a standby served, and those that went to the primary because none could
//	pooldriver_standby_up                                    gauge: 1 while the host's last look found it a standby, else 0
//	pooldriver_standby_lag_seconds                           gauge: how far it lags the primary, while up (no series while not)
//	pooldriver_standby_connections{state=…}                  gauge: its pool's physical connections: idle, used, opening
//	pooldriver_standby_acquires_total                        counter: physical connections its pool handed out, what it served
//
// The primary's host is among the hosts, not up while it is the primary.
// A Connector without pool_reads=standby has none of these series: all its
// reads go to the primary, which reads_total would not count.
//
// use_seconds counts the holds pooldriver timed; a hold that parked its
// connection for its logical conn's next statement, or took it back from
// parking, is not timed (parking reads no clock: see docs/pool.md,
// "Parking") and counts in untimed_uses_total instead. The two add up to
// every hold that ended, acquires_total less the connections in use,
// whatever else is configured (otelpool registered or not); with leak
// detection, which keeps parking off, untimed_uses_total counts only the
// connections refused by the idle check as they were handed out
// (idle_check_failures_total).
//
// The connections are pooldriver's physical ones; database/sql's logical
// ones are what client_golang's collectors.NewDBStatsCollector reports.
// Every scrape reads the pool's Stats once, and its Standbys once.
package promcollector

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/pooldriver/pooldriver"
	"github.com/pooldriver/pooldriver/pool"
)

const namespace = "pooldriver"

// counters maps each counter of pooldriver.Stats to its metric.
var counters = []struct {
	name, help string
	value      func(s *pooldriver.Stats) int64
}{
	{"acquires_total", "Physical connections handed out.", func(s *pooldriver.Stats) int64 { return s.Acquires }},
	{"waits_total", "Acquires that had to wait for a physical connection.", func(s *pooldriver.Stats) int64 { return s.Waits }},
	{"acquire_timeouts_total", "Waits that ended with ErrAcquireTimeout.", func(s *pooldriver.Stats) int64 { return s.AcquireTimeouts }},
	{"acquire_cancels_total", "Waits that ended because the statement's context ended.", func(s *pooldriver.Stats) int64 { return s.CanceledAcquires }},
	{"circuit_rejects_total", "Acquires refused at once with ErrCircuitOpen.", func(s *pooldriver.Stats) int64 { return s.CircuitRejects }},
	{"backoff_rejects_total", "Acquires refused with ErrBackoff while connecting failed.", func(s *pooldriver.Stats) int64 { return s.BackoffRejects }},
	{"fail_fast_rejects_total", "Acquires failed at once, nothing in use to wait for, after a permanent connect error or a timed-out connect.", func(s *pooldriver.Stats) int64 { return s.FailFastRejects }},
	{"circuit_breaker_changes_total", "Changes of the circuit breaker's state.", func(s *pooldriver.Stats) int64 { return s.BreakerChanges }},
	{"connections_created_total", "Physical connections opened.", func(s *pooldriver.Stats) int64 { return s.Created }},
	{"connect_errors_total", "Failed attempts to open a physical connection.", func(s *pooldriver.Stats) int64 { return s.ConnectErrors }},
	{"connections_closed_total", "Physical connections closed, for any reason.", func(s *pooldriver.Stats) int64 { return s.Destroyed }},
	{"connections_expired_total", "Physical connections closed for their maximum lifetime or idle time.", func(s *pooldriver.Stats) int64 { return s.Expired }},
	{"connections_idle_trimmed_total", "Physical connections given back early while the server was at its connection limit: idle ones, and released ones above the pool's share of a full server.", func(s *pooldriver.Stats) int64 { return s.IdleTrimmed }},
	{"health_check_failures_total", "Physical connections closed because the background health check failed.", func(s *pooldriver.Stats) int64 { return s.HealthFailures }},
	{"idle_check_failures_total", "Physical connections closed because they were found broken when taken from idle.", func(s *pooldriver.Stats) int64 { return s.IdleCheckFailures }},
	{"untimed_uses_total", "Holds of a physical connection that ended without being timed in use_seconds: they parked it or took it back from parking, or it failed the idle check as it was handed out.", func(s *pooldriver.Stats) int64 { return s.UntimedUses }},
	{"auto_rollbacks_total", "Transactions pooldriver rolled back: at task end, or left open when a hold ended.", func(s *pooldriver.Stats) int64 { return s.AutoRollbacks }},
	{"task_end_rollbacks_total", "Of auto_rollbacks_total: transactions still open when their task ended, rolled back.", func(s *pooldriver.Stats) int64 { return s.TaskEndRollbacks }},
	{"session_resets_total", "Sessions reset before reuse.", func(s *pooldriver.Stats) int64 { return s.SessionResets }},
	{"carried_resets_total", "Of session_resets_total: resets sent with the next statement run on the connection.", func(s *pooldriver.Stats) int64 { return s.CarriedResets }},
	{"separate_resets_total", "Of session_resets_total: resets run in round trips of their own, off the callers' path.", func(s *pooldriver.Stats) int64 { return s.SeparateResets }},
	{"panics_total", "Panics recovered while connecting, closing or in a circuit breaker strategy.", func(s *pooldriver.Stats) int64 { return s.Panics }},
	{"misuses_total", "Physical connections released twice (a pooldriver bug if ever not 0).", func(s *pooldriver.Stats) int64 { return s.Misuses }},
	{"leaks_total", "Physical connections kept out of the pool past the leak detection threshold.", func(s *pooldriver.Stats) int64 { return s.Leaks }},
}

// breakerStates are every state of pool.State, so that the series of the
// breaker's current state always reads 1 (at the server's connection limit
// too).
var breakerStates = []pool.State{pool.Active, pool.Inactive, pool.Recovering, pool.Limited}

// collector is a prometheus.Collector over one Connector.
type collector struct {
	c *pooldriver.Connector

	connections, maxConns, minConns, minIdle, pending, breaker *prometheus.Desc
	wait, use, create                                          *prometheus.Desc
	counters                                                   []*prometheus.Desc

	// With pool_reads=standby: reads by the pool that served them, and
	// each standby host's state and pool (variable label host).
	reads, standbyUp, standbyLag, standbyConns, standbyAcquires *prometheus.Desc
}

// New returns a Collector of c's Stats, every metric labelled
// pool=poolName ("" takes c.PoolName(): pool_name, else
// host:port/database). A nil c collects nothing.
func New(c *pooldriver.Connector, poolName string) prometheus.Collector {
	if poolName == "" && c != nil {
		poolName = c.PoolName()
	}
	labels := prometheus.Labels{"pool": poolName}
	desc := func(name, help string, variable ...string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName(namespace, "", name), help, variable, labels)
	}
	col := &collector{
		c:           c,
		connections: desc("connections", "Physical connections by state: idle, used (held for a statement, *sql.Conn, *sql.Tx, rows or task), opening.", "state"),
		maxConns:    desc("max_connections", "The maximum number of physical connections (pool_max_conns)."),
		minConns:    desc("min_connections", "The number of physical connections kept open (pool_min_conns)."),
		minIdle:     desc("min_idle_connections", "The number of physical connections kept idle (pool_min_idle_conns)."),
		pending:     desc("pending_requests", "Statements waiting for a physical connection."),
		breaker:     desc("circuit_breaker_state", "1 for the circuit breaker's current state, 0 for the others.", "state"),
		wait:        desc("wait_seconds", "How long acquiring a physical connection took (0: one was idle), failed waits included."),
		use:         desc("use_seconds", "How long a physical connection was held before it went back to the pool, for the holds that were timed; the others count in untimed_uses_total (pooldriver.Stats.UseTime)."),
		create:      desc("create_seconds", "How long opening a physical connection took, failed attempts included."),

		reads:           desc("reads_total", "With pool_reads=standby, reads by where they ran: served_by=standby, a standby's pool served it; primary, it went to the primary because no standby could.", "served_by"),
		standbyUp:       desc("standby_up", "With pool_reads=standby, 1 while the host's last look found it a standby, else 0.", "host"),
		standbyLag:      desc("standby_lag_seconds", "With pool_reads=standby, how long the primary has had a log position the standby host has not replayed; only while it is up.", "host"),
		standbyConns:    desc("standby_connections", "With pool_reads=standby, the standby host's pool's physical connections by state: idle, used, opening.", "host", "state"),
		standbyAcquires: desc("standby_acquires_total", "With pool_reads=standby, physical connections the standby host's pool handed out.", "host"),
	}
	for _, ctr := range counters {
		col.counters = append(col.counters, desc(ctr.name, ctr.help))
	}
	return col
}

// Describe implements prometheus.Collector.
func (col *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{col.connections, col.maxConns, col.minConns, col.minIdle, col.pending, col.breaker, col.wait, col.use, col.create,
		col.reads, col.standbyUp, col.standbyLag, col.standbyConns, col.standbyAcquires} {
		ch <- d
	}
	for _, d := range col.counters {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (col *collector) Collect(ch chan<- prometheus.Metric) {
	if col.c == nil {
		return
	}
	s := col.c.Stats()
	gauge := func(d *prometheus.Desc, v int, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v), labels...)
	}
	gauge(col.connections, s.Idle, "idle")
	gauge(col.connections, s.Active, "used")
	gauge(col.connections, s.Opening, "opening")
	gauge(col.maxConns, s.MaxConns)
	gauge(col.minConns, s.MinConns)
	gauge(col.minIdle, s.MinIdle)
	gauge(col.pending, s.Waiting)
	for _, st := range breakerStates {
		v := 0
		if s.BreakerState == st {
			v = 1
		}
		gauge(col.breaker, v, st.String())
	}
	ch <- histogram(col.wait, s.WaitTime)
	ch <- histogram(col.use, s.UseTime)
	ch <- histogram(col.create, s.CreateTime)
	for i, ctr := range counters {
		ch <- prometheus.MustNewConstMetric(col.counters[i], prometheus.CounterValue, float64(ctr.value(&s)))
	}
	col.collectStandbys(ch, &s)
}

// collectStandbys collects, with pool_reads=standby, the reads by where
// they ran (from s) and each standby host's series; nothing otherwise.
func (col *collector) collectStandbys(ch chan<- prometheus.Metric, s *pooldriver.Stats) {
	standbys := col.c.Standbys()
	if standbys == nil {
		return
	}
	counter := func(d *prometheus.Desc, v int64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter(col.reads, s.ReadsOnStandby, "standby")
	counter(col.reads, s.ReadsOnPrimary, "primary")
	for _, sb := range standbys {
		up := 0.0
		if sb.Up {
			up = 1
			// A host that did not answer as a standby has no lag to
			// tell: a 0 would read as caught up.
			gauge(col.standbyLag, sb.Lag.Seconds(), sb.Host)
		}
		gauge(col.standbyUp, up, sb.Host)
		gauge(col.standbyConns, float64(sb.Pool.Idle), sb.Host, "idle")
		gauge(col.standbyConns, float64(sb.Pool.Active), sb.Host, "used")
		gauge(col.standbyConns, float64(sb.Pool.Opening), sb.Host, "opening")
		counter(col.standbyAcquires, sb.Pool.Acquires, sb.Host)
	}
}

// histogram converts a pool histogram to a Prometheus one: cumulative
// buckets by upper bound in seconds; the last bucket is +Inf's, which
// Prometheus takes from the count.
func histogram(d *prometheus.Desc, h pool.Histogram) prometheus.Metric {
	buckets := make(map[float64]uint64, pool.HistogramBuckets-1)
	var cum int64
	for i, b := range pool.HistogramBounds() {
		cum += h.Buckets[i]
		buckets[b.Seconds()] = uint64(cum)
	}
	return prometheus.MustNewConstHistogram(d, uint64(h.Count), h.Sum.Seconds(), buckets)
}
