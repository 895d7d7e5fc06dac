// Package otelpool exports a pooldriver pool's metrics to OpenTelemetry,
// named by the semantic conventions for database client connection pools:
//
//	db.client.connection.count             {connection}  state=idle|used
//	db.client.connection.max               {connection}  pool_max_conns
//	db.client.connection.idle.min          {connection}  pool_min_idle_conns
//	db.client.connection.pending_requests  {request}     statements waiting for a connection
//	db.client.connection.timeouts          {timeout}     acquires that ended with ErrAcquireTimeout
//	db.client.connection.create_time       s             histogram
//	db.client.connection.wait_time         s             histogram
//	db.client.connection.use_time          s             histogram
//
// each with the attribute db.client.connection.pool.name. The connections
// are pooldriver's physical ones (see pooldriver.Stats), not database/sql's
// logical ones.
//
//	db, err := pooldriver.Open(dsn)
//	c, _ := pooldriver.ConnectorOf(db)
//	reg, err := otelpool.Register(c, otel.GetMeterProvider(), "shop")
//	defer reg.Unregister()
//
// The counts are read from the pool when a reader collects. The three
// durations are recorded as the pool measures them, into histograms whose
// default buckets are the pool's own (pool.HistogramBounds), from 1µs to 1m.
package otelpool

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/embedded"

	"github.com/pooldriver/pooldriver"
	"github.com/pooldriver/pooldriver/pool"
)

// ScopeName is the instrumentation scope of the meter Register uses.
const ScopeName = "github.com/pooldriver/pooldriver/otelpool"

// Attribute keys of the semantic conventions.
const (
	PoolNameKey = attribute.Key("db.client.connection.pool.name")
	StateKey    = attribute.Key("db.client.connection.state")
)

// Register reports c's pool metrics, as described in the package comment,
// through a meter of mp, with poolName as the pool name attribute (""
// takes c.PoolName(): pool_name, else the DSN without its password). Call
// Unregister on the result when c is closed, so that mp no longer reads it.
// Several registrations of one Connector (with different providers or
// names) are independent.
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
	m := mp.Meter(ScopeName)
	name := attribute.NewSet(PoolNameKey.String(poolName))
	idle := attribute.NewSet(PoolNameKey.String(poolName), StateKey.String("idle"))
	used := attribute.NewSet(PoolNameKey.String(poolName), StateKey.String("used"))

	var errs []error
	counter := func(name, unit, desc string) metric.Int64ObservableUpDownCounter {
		i, err := m.Int64ObservableUpDownCounter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return i
	}
	count := counter("db.client.connection.count", "{connection}", "The number of connections that are currently in state described by the state attribute.")
	maxConns := counter("db.client.connection.max", "{connection}", "The maximum number of open connections allowed.")
	minIdle := counter("db.client.connection.idle.min", "{connection}", "The minimum number of idle open connections allowed.")
	pending := counter("db.client.connection.pending_requests", "{request}", "The number of current pending requests for an open connection.")
	timeouts, err := m.Int64ObservableCounter("db.client.connection.timeouts", metric.WithUnit("{timeout}"),
		metric.WithDescription("The number of connection timeouts that have occurred trying to obtain a connection from the pool."))
	errs = append(errs, err)

	bounds := pool.HistogramBounds()
	seconds := make([]float64, len(bounds))
	for i, b := range bounds {
		seconds[i] = b.Seconds()
	}
	histogram := func(name, desc string) metric.Float64Histogram {
		h, err := m.Float64Histogram(name, metric.WithUnit("s"), metric.WithDescription(desc),
			metric.WithExplicitBucketBoundaries(seconds...))
		errs = append(errs, err)
		return h
	}
	var hists [3]metric.Float64Histogram
	hists[pool.TimingWait] = histogram("db.client.connection.wait_time", "The time it took to obtain an open connection from the pool.")
	hists[pool.TimingUse] = histogram("db.client.connection.use_time", "The time between borrowing a connection and returning it to the pool.")
	hists[pool.TimingCreate] = histogram("db.client.connection.create_time", "The time it took to create a new connection.")
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("otelpool: Register: %w", err)
	}

	cb, err := m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		s := c.Stats()
		o.ObserveInt64(count, int64(s.Idle), metric.WithAttributeSet(idle))
		o.ObserveInt64(count, int64(s.Active), metric.WithAttributeSet(used))
		o.ObserveInt64(maxConns, int64(s.MaxConns), metric.WithAttributeSet(name))
		o.ObserveInt64(minIdle, int64(s.MinIdle), metric.WithAttributeSet(name))
		o.ObserveInt64(pending, int64(s.Waiting), metric.WithAttributeSet(name))
		o.ObserveInt64(timeouts, s.AcquireTimeouts, metric.WithAttributeSet(name))
		return nil
	}, count, maxConns, minIdle, pending, timeouts)
	if err != nil {
		return nil, fmt.Errorf("otelpool: Register: %w", err)
	}

	// Built once: recording then allocates nothing of ours.
	opts := []metric.RecordOption{metric.WithAttributeSet(name)}
	ctx := context.Background()
	stop := c.Observe(func(t pool.Timing, d time.Duration) {
		if int(t) < len(hists) {
			hists[t].Record(ctx, d.Seconds(), opts...)
		}
	})
	return &registration{callback: cb, stop: stop}, nil
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
