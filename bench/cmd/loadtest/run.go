package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"math/rand/v2"

	"github.com/pooldriver/pooldriver"
	"github.com/pooldriver/pooldriver/bench"
)

// Sample is one contender's measurement in one cell of one round.
type Sample struct {
	Server     string `json:"server"`
	Workload   string `json:"workload"`
	Goroutines int    `json:"goroutines"`
	PoolSize   int    `json:"pool_size"`
	Contender  string `json:"contender"`
	Round      int    `json:"round"`

	Ops      int64         `json:"ops"` // completed without error while measured
	Duration time.Duration `json:"duration_ns"`
	OpsPerS  float64       `json:"ops_per_s"`
	// Latency of one operation; for the fairness workload, of one wait.
	P50 time.Duration `json:"p50_ns"`
	P99 time.Duration `json:"p99_ns"`
	Max time.Duration `json:"max_ns"`
	// Process CPU time (user+sys, getrusage) per completed operation, and
	// its user part: the system part is mostly the socket calls, the same
	// for every contender that sends the same statements.
	CPUPerOp     time.Duration `json:"cpu_per_op_ns"`
	UserCPUPerOp time.Duration `json:"user_cpu_per_op_ns"`
	// Server connections opened while measured, and the most open at once.
	Opened int64 `json:"conns_opened"`
	Peak   int64 `json:"peak_conns"`

	Errors       int64  `json:"errors"`
	TooManyConns int64  `json:"too_many_conns_errors"` // of Errors: the server's connection limit
	Stuck        int64  `json:"stuck,omitempty"`       // of Errors: goroutines that never returned (see stuck)
	FirstError   string `json:"first_error,omitempty"`

	// Fairness only: each goroutine's total wait over its cycles.
	TotalP50 time.Duration `json:"total_wait_p50_ns,omitempty"`
	TotalP99 time.Duration `json:"total_wait_p99_ns,omitempty"`
	TotalMin time.Duration `json:"total_wait_min_ns,omitempty"`
	TotalMax time.Duration `json:"total_wait_max_ns,omitempty"`

	// pooldriver contenders: the Connector's Stats at the end of the cell.
	PD *pooldriver.Stats `json:"pooldriver_stats,omitempty"`

	cpuTotal, cpuUser time.Duration // process CPU time of the measured window
}

// env is what every cell needs besides the contender.
type env struct {
	warmup, cell time.Duration
	monitors     map[string]*bench.Monitor // by server name
}

// opFunc is one operation of a closed-loop workload.
type opFunc func(ctx context.Context) error

// workerResult is one goroutine's share of a measurement.
type workerResult struct {
	lat      []time.Duration
	errs     int64
	tooMany  int64
	firstErr error
}

func (r *workerResult) fail(err error) {
	r.errs++
	if bench.IsTooManyConns(err) {
		r.tooMany++
	}
	if r.firstErr == nil {
		r.firstErr = err
	}
}

// window is the measured part of a cell: counters read at its start and
// end, and a sampler of the connection count in between.
type window struct {
	c       *bench.Contender
	opened  int64
	cpu     cpuTimes
	start   time.Time
	stopS   chan struct{}
	sampled chan int64
}

func startWindow(e *env, c *bench.Contender) *window {
	w := &window{c: c, stopS: make(chan struct{}), sampled: make(chan int64, 1)}
	c.ResetPeak()
	go w.sample(e.monitors[c.Server.Name])
	w.opened = c.Opened()
	w.cpu = cpuTime()
	w.start = time.Now()
	return w
}

// sample polls the contender's live connection count every 5 ms and, on
// PostgreSQL, the server's count of the contender's connections every
// 100 ms, and reports the highest seen.
func (w *window) sample(mon *bench.Monitor) {
	peak := w.c.Live()
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for i := 0; ; i++ {
		select {
		case <-w.stopS:
			w.sampled <- peak
			return
		case <-t.C:
		}
		peak = max(peak, w.c.Live())
		if mon != nil && i%20 == 0 {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			if n, ok, err := mon.ServerConns(ctx, w.c.Name); ok && err == nil {
				peak = max(peak, int64(n))
			}
			cancel()
		}
	}
}

// end closes the window and fills in s's counters.
func (w *window) end(s *Sample) {
	s.Duration = time.Since(w.start)
	cpu := cpuTime().sub(w.cpu)
	s.Opened = w.c.Opened() - w.opened
	close(w.stopS)
	s.Peak = max(w.c.Peak(), <-w.sampled)
	s.cpuTotal, s.cpuUser = cpu.user+cpu.sys, cpu.user
}

// finish computes the derived fields of s from the workers' results.
func (s *Sample) finish(rs []workerResult) {
	var lat []time.Duration
	for i := range rs {
		r := &rs[i]
		lat = append(lat, r.lat...)
		s.Errors += r.errs
		s.TooManyConns += r.tooMany
		if r.firstErr != nil && s.FirstError == "" {
			s.FirstError = truncate(r.firstErr.Error(), 160)
		}
	}
	s.Ops = int64(len(lat))
	s.OpsPerS = float64(s.Ops) / s.Duration.Seconds()
	slices.Sort(lat)
	s.P50, s.P99, s.Max = quantile(lat, 0.50), quantile(lat, 0.99), quantile(lat, 1)
	if s.Ops > 0 {
		s.CPUPerOp = s.cpuTotal / time.Duration(s.Ops)
		s.UserCPUPerOp = s.cpuUser / time.Duration(s.Ops)
	}
}

// runClosedLoop runs op in g goroutines, each as fast as it can, with think
// between operations (holding no connection meanwhile): first for the
// warm-up, unmeasured, then for the cell's duration, measured. An error is
// followed by a 1 ms pause, so that a contender the server refuses does not
// hammer it with connection attempts.
func runClosedLoop(ctx context.Context, e *env, c *bench.Contender, g int, think time.Duration, op opFunc, s *Sample) {
	var measuring, stopped atomic.Bool
	var inOp atomic.Int64 // goroutines inside op
	rs := make([]workerResult, g)
	opCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	for i := range g {
		wg.Go(func() {
			r := &rs[i]
			r.lat = make([]time.Duration, 0, 1024)
			for !stopped.Load() {
				inOp.Add(1)
				m := measuring.Load()
				t0 := time.Now()
				err := op(opCtx)
				el := time.Since(t0)
				inOp.Add(-1)
				if m && !stopped.Load() {
					if err != nil {
						r.fail(err)
					} else {
						r.lat = append(r.lat, el)
					}
				}
				switch {
				case err != nil:
					time.Sleep(time.Millisecond)
				case think > 0:
					time.Sleep(think)
				}
			}
		})
	}
	sleepCtx(ctx, e.warmup)
	w := startWindow(e, c)
	measuring.Store(true)
	sleepCtx(ctx, e.cell)
	stopped.Store(true)
	w.end(s)
	// Workers write nothing to rs once stopped is set, so a goroutine stuck
	// in op cannot race with finish.
	if !waitBounded(&wg, cancel, 10*time.Second, 20*time.Second) {
		s.stuck(inOp.Load())
	}
	s.finish(rs)
}

// stuck records n goroutines that never returned from an operation, even
// after their context was cancelled: a hang in the contender, reported as
// errors. The run goes on without them.
func (s *Sample) stuck(n int64) {
	s.Errors += n
	s.Stuck = n
	s.FirstError = fmt.Sprintf("%d goroutine(s) stuck in an operation 30s after the cell ended, context cancelled; first error otherwise: %s", n, s.FirstError)
	s.FirstError = truncate(s.FirstError, 200)
}

// runFairness runs g goroutines, started together, each doing cycles of
// hold: take a connection, keep it for hold, give it back. The latency
// fields are single waits; the Total fields, each goroutine's sum of waits.
func runFairness(ctx context.Context, e *env, c *bench.Contender, g, cycles int, hold time.Duration, s *Sample) {
	if err := fill(ctx, c, s.PoolSize); err != nil {
		s.Errors++
		s.FirstError = truncate("warm-up: "+err.Error(), 160)
		return
	}
	rs := make([]workerResult, g)
	totals := make([]time.Duration, g)
	start := make(chan struct{})
	opCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	var abandoned atomic.Bool // stuck goroutines must not write once we gave up
	var inOp atomic.Int64
	for i := range g {
		wg.Go(func() {
			r := &rs[i]
			r.lat = make([]time.Duration, 0, cycles)
			<-start
			for range cycles {
				inOp.Add(1)
				wait, err := c.Hold(opCtx, hold)
				inOp.Add(-1)
				if abandoned.Load() {
					return
				}
				if err != nil {
					r.fail(err)
					continue
				}
				r.lat = append(r.lat, wait)
				totals[i] += wait
			}
		})
	}
	w := startWindow(e, c)
	close(start)
	ok := waitBounded(&wg, cancel, 3*time.Minute, 20*time.Second)
	abandoned.Store(true)
	w.end(s)
	if !ok {
		s.stuck(inOp.Load())
	}
	s.finish(rs)
	slices.Sort(totals)
	s.TotalP50, s.TotalP99 = quantile(totals, 0.5), quantile(totals, 0.99)
	s.TotalMin, s.TotalMax = totals[0], totals[len(totals)-1]
}

// fill makes the contender open n connections by holding n at once.
func fill(ctx context.Context, c *bench.Contender, n int) error {
	errs := make(chan error, n)
	for range n {
		go func() {
			_, err := c.Hold(ctx, 10*time.Millisecond)
			errs <- err
		}()
	}
	var first error
	for range n {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// runHTTP serves an HTTP handler doing three point selects per request
// (under pooldriver.Middleware for the task contender) on a loopback
// listener, and drives it closed-loop from g client goroutines.
func runHTTP(ctx context.Context, e *env, c *bench.Contender, g int, s *Sample) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		s.Errors++
		s.FirstError = err.Error()
		return
	}
	var h http.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ids := [3]int{rand.IntN(bench.Rows) + 1, rand.IntN(bench.Rows) + 1, rand.IntN(bench.Rows) + 1}
		if err := c.Request(r.Context(), ids); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	if c.Task {
		h = pooldriver.Middleware(h)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }() // ErrServerClosed once closed below
	defer func() { _ = srv.Close() }()
	tr := &http.Transport{MaxIdleConnsPerHost: g, MaxConnsPerHost: g, DisableCompression: true}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	url := "http://" + ln.Addr().String() + "/"
	runClosedLoop(ctx, e, c, g, 0, func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusNoContent {
			return fmt.Errorf("HTTP %d: %s", resp.StatusCode, body)
		}
		return nil
	}, s)
}

// cpuTimes is the process's CPU time so far, user and system.
type cpuTimes struct{ user, sys time.Duration }

func (a cpuTimes) sub(b cpuTimes) cpuTimes { return cpuTimes{a.user - b.user, a.sys - b.sys} }

// cpuTime returns the process's user and system CPU time so far.
func randIntN(n int) int { return rand.IntN(n) }

func cpuTime() cpuTimes {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return cpuTimes{}
	}
	return cpuTimes{time.Duration(ru.Utime.Nano()), time.Duration(ru.Stime.Nano())}
}

// quantile returns the q-quantile of sorted (nearest rank), 0 if empty.
func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.5) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// waitBounded waits for wg; past limit it cancels the operations' context
// and waits up to grace more. It reports whether every goroutine returned.
func waitBounded(wg *sync.WaitGroup, cancel context.CancelFunc, limit, grace time.Duration) bool {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
		return true
	case <-time.After(limit):
	}
	cancel()
	select {
	case <-done:
		return true
	case <-time.After(grace):
		return false
	}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
