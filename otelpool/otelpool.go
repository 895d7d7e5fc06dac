// Package otelpool exports a pooldriver pool's metrics to OpenTelemetry,
// as the semantic conventions for database client connection pools name
// them (semconv v1.43.0, the newest of the otel module this one requires;
// the instruments are made by its generated package dbconv):
//
//	db.client.connection.count             {connection}  state=idle|used
//	db.client.connection.max               {connection}  pool_max_conns
//	db.client.connection.idle.max          {connection}  pool_max_conns: every connection may sit idle
//	db.client.connection.idle.min          {connection}  pool_min_idle_conns
//	db.client.connection.pending_requests  {request}     statements waiting for a connection
//	db.client.connection.timeouts          {timeout}     acquires that ended with ErrAcquireTimeout
//	db.client.connection.create_time       s             histogram
//	db.client.connection.wait_time         s             histogram
//	db.client.connection.use_time          s             histogram
//
// each with the attribute db.client.connection.pool.name, through a meter
// whose scope is [ScopeName] with the conventions' schema URL. The
// connections are pooldriver's physical ones (see pooldriver.Stats), not
// database/sql's logical ones.
//
// With pool_reads=standby (see pooldriver's docs/reads.md), pooldriver's
// own instruments say which host served what, for which the conventions
// have none:
//
//	pooldriver.reads                     {read}        counter: pooldriver.read.served_by=standby|primary
//	pooldriver.standby.up                1             gauge: 1 while the host's last look found it a standby, else 0
//	pooldriver.standby.lag               s             gauge: how far it lags the primary; only while it is up
//	pooldriver.standby.connection.count  {connection}  its pool's connections, db.client.connection.state=idle|used
//	pooldriver.standby.acquires          {acquire}     counter: connections its pool handed out, what it served
//
// The pooldriver.standby.* ones are reported for every host of the DSN
// (pooldriver's Connector.Standbys; the primary's host is among them, not
// up while it is the primary), each with the host as the conventions name
// a database server, server.address and server.port, beside the pool name:
// the db.client.connection.* metrics stay the primary's pool's. A
// Connector without pool_reads=standby has none of these instruments: all
// its reads go to the primary, which pooldriver.reads would not count.
//
//	db, err := pooldriver.Open(dsn)
//	c, _ := pooldriver.ConnectorOf(db)
//	reg, err := otelpool.Register(c, otel.GetMeterProvider(), "shop")
//	defer reg.Unregister()
//
// Spans of the pool's acquires, connects and releases (pool.acquire,
// pool.connect, pool.release) come from [WithTracing], an Option of the
// Connector (see [Tracer]):
//
//	db, err := pooldriver.Open(dsn, otelpool.WithTracing(otel.GetTracerProvider()))
//
// The spans carry the Connector's PoolName (pool_name, else
// host:port/database) as the pool name, and so do the metrics unless
// Register is given another.
//
// The counts are read from the pool when a reader collects. The three
// durations are recorded as the pool measures them (pooldriver's
// Connector.Observe), into histograms whose default buckets are the pool's
// own (pool.HistogramBounds), from 1µs to 1m. Registering does not change
// what the pool measures: parking stays on (see docs/pool.md, "Parking"),
// and use_time records exactly the holds the
// Connector's Stats.UseTime counts. A hold that parked its connection for
// its logical conn's next statement, or took it back from parking (serial
// statements, a transaction begun where the last statement parked), is not
// timed: it is counted in Stats.UntimedUses (promcollector's
// pooldriver_untimed_uses_total), for which the conventions have no
// instrument. use_time's count plus UntimedUses is every hold that ended,
// so for serial work use_time may have no data point at all. With leak
// detection, or an AfterRelease or BeforeAcquire hook, parking is off and
// every hold is timed.
package otelpool

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/embedded"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/semconv/v1.43.0/dbconv"

	"github.com/pooldriver/pooldriver"
	"github.com/pooldriver/pooldriver/pool"
)

// ScopeName is the instrumentation scope of the meter Register uses.
const ScopeName = "github.com/pooldriver/pooldriver/otelpool"

// SchemaURL is the semantic conventions' schema the metrics follow.
const SchemaURL = semconv.SchemaURL

// Attribute keys of the semantic conventions.
const (
	PoolNameKey = semconv.DBClientConnectionPoolNameKey
	StateKey    = semconv.DBClientConnectionStateKey
	// The host of a pooldriver.standby.* data point: its host and port,
	// as the conventions name the server of a database operation.
	ServerAddressKey = semconv.ServerAddressKey
	ServerPortKey    = semconv.ServerPortKey
)

// ServedByKey is pooldriver's attribute of pooldriver.reads: where a read
// ran, "standby" (a standby's pool served it) or "primary" (no standby
// could).
const ServedByKey = attribute.Key("pooldriver.read.served_by")

// The names of pooldriver's own instruments, reported with
// pool_reads=standby (see the package comment).
const (
	ReadsName                  = "pooldriver.reads"
	StandbyUpName              = "pooldriver.standby.up"
	StandbyLagName             = "pooldriver.standby.lag"
	StandbyConnectionCountName = "pooldriver.standby.connection.count"
	StandbyAcquiresName        = "pooldriver.standby.acquires"
)

// Register reports c's pool metrics, as described in the package comment,
// through a meter of mp, with poolName as the pool name attribute (""
// takes c.PoolName(), as the Connector's log lines do). Call Unregister on
// the result when c is closed, so that mp no longer reads it. Several
// registrations of one Connector (with different providers or names) are
// independent.
func Register(c *pooldriver.Connector, mp metric.MeterProvider, poolName string) (metric.Registration, error) {
	switch {
	case c == nil:
		return nil, errors.New("otelpool: Register: the Connector is nil")
	case mp == nil:
		return nil, errors.New("otelpool: Register: the MeterProvider is nil")
	}
	if poolName == "" {
		poolName = c.PoolName()
	}
	m := mp.Meter(ScopeName, metric.WithSchemaURL(SchemaURL))

	count, errCount := dbconv.NewClientConnectionCountObservable(m)
	maxConns, errMax := dbconv.NewClientConnectionMaxObservable(m)
	idleMax, errIdleMax := dbconv.NewClientConnectionIdleMaxObservable(m)
	idleMin, errIdleMin := dbconv.NewClientConnectionIdleMinObservable(m)
	pending, errPending := dbconv.NewClientConnectionPendingRequestsObservable(m)
	timeouts, errTimeouts := dbconv.NewClientConnectionTimeoutsObservable(m)
	errs := []error{errCount, errMax, errIdleMax, errIdleMin, errPending, errTimeouts}

	bounds := pool.HistogramBounds()
	seconds := make([]float64, len(bounds))
	for i, b := range bounds {
		seconds[i] = b.Seconds()
	}
	buckets := metric.WithExplicitBucketBoundaries(seconds...)
	wait, errWait := dbconv.NewClientConnectionWaitTime(m, buckets)
	use, errUse := dbconv.NewClientConnectionUseTime(m, buckets)
	create, errCreate := dbconv.NewClientConnectionCreateTime(m, buckets)
	if err := errors.Join(append(errs, errWait, errUse, errCreate)...); err != nil {
		return nil, fmt.Errorf("otelpool: Register: %w", err)
	}
	var hists [3]metric.Float64Histogram
	hists[pool.TimingWait] = wait.Inst()
	hists[pool.TimingUse] = use.Inst()
	hists[pool.TimingCreate] = create.Inst()

	name := attribute.NewSet(count.AttrClientConnectionPoolName(poolName))
	idle := attribute.NewSet(count.AttrClientConnectionPoolName(poolName), count.AttrClientConnectionState(dbconv.ClientConnectionStateIdle))
	used := attribute.NewSet(count.AttrClientConnectionPoolName(poolName), count.AttrClientConnectionState(dbconv.ClientConnectionStateUsed))
	// The SDK accepts only its own instruments, not dbconv's wrappers.
	countI, maxI, idleMaxI, idleMinI := count.Inst(), maxConns.Inst(), idleMax.Inst(), idleMin.Inst()
	pendingI, timeoutsI := pending.Inst(), timeouts.Inst()
	observed := []metric.Observable{countI, maxI, idleMaxI, idleMinI, pendingI, timeoutsI}
	var sb *standbyInstruments
	if hosts := c.Standbys(); hosts != nil {
		var err error
		if sb, err = newStandbyInstruments(m, count, poolName, hosts); err != nil {
			return nil, fmt.Errorf("otelpool: Register: %w", err)
		}
		observed = append(observed, sb.reads, sb.up, sb.lag, sb.count, sb.acquires)
	}
	cb, err := m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		s := c.Stats()
		o.ObserveInt64(countI, int64(s.Idle), metric.WithAttributeSet(idle))
		o.ObserveInt64(countI, int64(s.Active), metric.WithAttributeSet(used))
		o.ObserveInt64(maxI, int64(s.MaxConns), metric.WithAttributeSet(name))
		// pooldriver has no cap of its own on idle connections: up to
		// pool_max_conns of them may be idle.
		o.ObserveInt64(idleMaxI, int64(s.MaxConns), metric.WithAttributeSet(name))
		o.ObserveInt64(idleMinI, int64(s.MinIdle), metric.WithAttributeSet(name))
		o.ObserveInt64(pendingI, int64(s.Waiting), metric.WithAttributeSet(name))
		o.ObserveInt64(timeoutsI, s.AcquireTimeouts, metric.WithAttributeSet(name))
		if sb != nil {
			sb.observe(o, &s, c.Standbys())
		}
		return nil
	}, observed...)
	if err != nil {
		return nil, fmt.Errorf("otelpool: Register: %w", err)
	}

	// Built once: recording then allocates nothing of ours (dbconv's
	// RecordSet would take a pooled slice per call).
	opts := []metric.RecordOption{metric.WithAttributeSet(name)}
	ctx := context.Background()
	stop := c.Observe(func(t pool.Timing, d time.Duration) {
		if int(t) < len(hists) {
			hists[t].Record(ctx, d.Seconds(), opts...)
		}
	})
	return &registration{callback: cb, stop: stop}, nil
}

// standbyInstruments are the instruments of a Connector with
// pool_reads=standby, with the attribute sets of its hosts, built once:
// its hosts do not change.
type standbyInstruments struct {
	reads, acquires      metric.Int64ObservableCounter
	up                   metric.Int64ObservableGauge
	lag                  metric.Float64ObservableGauge
	count                metric.Int64ObservableUpDownCounter
	onStandby, onPrimary attribute.Set
	hosts                map[string]*hostAttributes
	poolName             attribute.KeyValue
	idleState, usedState attribute.KeyValue
}

// hostAttributes are the attribute sets of one host's data points.
type hostAttributes struct {
	host, idle, used attribute.Set
}

// newStandbyInstruments makes the instruments of pool_reads=standby in m,
// for the pool poolName and its hosts; count gives the conventions'
// attributes.
func newStandbyInstruments(m metric.Meter, count dbconv.ClientConnectionCountObservable, poolName string, hosts []pooldriver.StandbyStats) (*standbyInstruments, error) {
	reads, errReads := m.Int64ObservableCounter(ReadsName, metric.WithUnit("{read}"),
		metric.WithDescription("Reads with pool_reads=standby, by where they ran: on a standby, or on the primary because no standby could serve them."))
	up, errUp := m.Int64ObservableGauge(StandbyUpName, metric.WithUnit("1"),
		metric.WithDescription("1 while the host's last look found it a standby, else 0."))
	lag, errLag := m.Float64ObservableGauge(StandbyLagName, metric.WithUnit("s"),
		metric.WithDescription("How long the primary has had a log position the standby host has not replayed, while it is up."))
	conns, errConns := m.Int64ObservableUpDownCounter(StandbyConnectionCountName, metric.WithUnit("{connection}"),
		metric.WithDescription("The physical connections of the standby host's pool, by state."))
	acquires, errAcquires := m.Int64ObservableCounter(StandbyAcquiresName, metric.WithUnit("{acquire}"),
		metric.WithDescription("Physical connections the standby host's pool handed out."))
	if err := errors.Join(errReads, errUp, errLag, errConns, errAcquires); err != nil {
		return nil, err
	}
	name := count.AttrClientConnectionPoolName(poolName)
	sb := &standbyInstruments{
		reads: reads, acquires: acquires, up: up, lag: lag, count: conns,
		onStandby: attribute.NewSet(name, ServedByKey.String("standby")),
		onPrimary: attribute.NewSet(name, ServedByKey.String("primary")),
		hosts:     make(map[string]*hostAttributes, len(hosts)),
		poolName:  name,
		idleState: count.AttrClientConnectionState(dbconv.ClientConnectionStateIdle),
		usedState: count.AttrClientConnectionState(dbconv.ClientConnectionStateUsed),
	}
	for _, h := range hosts {
		sb.hosts[h.Host] = sb.attributes(h.Host)
	}
	return sb, nil
}

// attributes builds the attribute sets of the host host:port.
func (sb *standbyInstruments) attributes(hostPort string) *hostAttributes {
	kvs := []attribute.KeyValue{sb.poolName}
	if host, port, err := net.SplitHostPort(hostPort); err == nil {
		kvs = append(kvs, semconv.ServerAddress(host))
		if p, err := strconv.Atoi(port); err == nil {
			kvs = append(kvs, semconv.ServerPort(p))
		}
	} else {
		kvs = append(kvs, semconv.ServerAddress(hostPort))
	}
	return &hostAttributes{
		host: attribute.NewSet(kvs...),
		idle: attribute.NewSet(append(slices.Clip(kvs), sb.idleState)...),
		used: attribute.NewSet(append(slices.Clip(kvs), sb.usedState)...),
	}
}

// observe reports the reads of s and each host of standbys.
func (sb *standbyInstruments) observe(o metric.Observer, s *pooldriver.Stats, standbys []pooldriver.StandbyStats) {
	o.ObserveInt64(sb.reads, s.ReadsOnStandby, metric.WithAttributeSet(sb.onStandby))
	o.ObserveInt64(sb.reads, s.ReadsOnPrimary, metric.WithAttributeSet(sb.onPrimary))
	for _, h := range standbys {
		a := sb.hosts[h.Host]
		if a == nil { // a host Register did not see: none, as a Connector's hosts are fixed at New
			a = sb.attributes(h.Host)
		}
		host := metric.WithAttributeSet(a.host)
		up := int64(0)
		if h.Up {
			up = 1
			// A host that did not answer as a standby has no lag to
			// tell: a 0 would read as caught up.
			o.ObserveFloat64(sb.lag, h.Lag.Seconds(), host)
		}
		o.ObserveInt64(sb.up, up, host)
		o.ObserveInt64(sb.count, int64(h.Pool.Idle), metric.WithAttributeSet(a.idle))
		o.ObserveInt64(sb.count, int64(h.Pool.Active), metric.WithAttributeSet(a.used))
		o.ObserveInt64(sb.acquires, h.Pool.Acquires, host)
	}
}

// registration undoes a Register: the callback and the pool observer.
type registration struct {
	embedded.Registration
	callback metric.Registration
	stop     func()
	once     sync.Once
	err      error
}

// Unregister stops the reports. It is idempotent and safe for concurrent
// use.
func (r *registration) Unregister() error {
	r.once.Do(func() {
		r.stop()
		r.err = r.callback.Unregister()
	})
	return r.err
}
