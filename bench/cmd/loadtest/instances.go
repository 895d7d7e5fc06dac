package main

import (
	"context"
	"database/sql"
	"fmt"
	"log"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pooldriver/pooldriver"
	"github.com/pooldriver/pooldriver/bench"
)

// The many-instances cell (-instances): four pooldriver instances (four
// Connectors, as four copies of a service would have) of 10 connections
// each, 64 goroutines spread over them, once straight to PostgreSQL and once
// through a PgBouncer in transaction mode with default_pool_size=10.
const (
	manyInstances = 4
	manyPool      = 10 // pool_max_conns of each instance, and PgBouncer's default_pool_size
	manyG         = 64
)

// The routes to the server: pooldriver straight to it and through
// PgBouncer, and, for reference, plain pgx stdlib the same two ways
// (database/sql with SetMaxOpenConns(10) per instance, as sql-tuned; behind
// PgBouncer in the exec mode that lets db.QueryRow work there,
// cache_describe).
const (
	routeDirect         = "direct"
	routePgBouncer      = "pgbouncer"
	routeDirectPlain    = "direct-plain-pgx"
	routePgBouncerPlain = "pgbouncer-plain-pgx"
)

var routes = []string{routeDirect, routePgBouncer, routeDirectPlain, routePgBouncerPlain}

// ManyReport is what -instances writes to instances.json.
type ManyReport struct {
	Meta    Meta     `json:"meta"`
	Samples []Sample `json:"samples"`
}

func runInstances(ctx context.Context, cfg config) error {
	if err := os.MkdirAll(cfg.out, 0o755); err != nil {
		return err
	}
	s := bench.Postgres(cfg.pgDSN)
	if err := s.Prepare(ctx, 10*time.Second); err != nil {
		return err
	}
	mon, err := bench.NewMonitor(s)
	if err != nil {
		return err
	}
	defer func() { _ = mon.Close() }()
	addr, stop, err := startPgBouncer(cfg, s)
	if err != nil {
		return err
	}
	defer stop()
	e := &env{warmup: cfg.warmup, cell: cfg.cellDur, monitors: map[string]*bench.Monitor{s.Name: mon}}
	meta := machineInfo(ctx, []bench.Server{s}, e.monitors)
	meta.Command = commandLine()
	meta.Config = cfg.String()

	started := time.Now()
	var samples []Sample
	for round := range cfg.rounds {
		for _, w := range []string{wSelect, wTx} {
			for i := range routes {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				route := routes[(i+round)%len(routes)]
				sm := runMany(ctx, e, s, addr, route, w, round)
				samples = append(samples, sm)
				log.Printf("round %d/%d %-7s %-9s %9.0f ops/s  p99 %8s  server conns %3d  errors %d%s",
					round+1, cfg.rounds, w, route, sm.OpsPerS, fmtDur(sm.P99), sm.Peak, sm.Errors, errNote(sm))
			}
		}
	}
	meta.Elapsed = time.Since(started).Round(time.Second).String()
	meta.LoadAvgEnd = loadAvg()
	if err := writeJSON(filepath.Join(cfg.out, "instances.json"), ManyReport{Meta: meta, Samples: samples}); err != nil {
		return err
	}
	md := manyMarkdown(meta, samples)
	if err := os.WriteFile(filepath.Join(cfg.out, "instances.md"), []byte(md), 0o644); err != nil {
		return err
	}
	fmt.Print(md)
	log.Printf("wrote %s/instances.md and instances.json in %s", cfg.out, meta.Elapsed)
	return nil
}

// runMany opens the four instances on route, runs workload w closed-loop
// from 64 goroutines (each operation on a random instance), and closes
// them. Peak is the most server connections of the instances at once, as
// pg_stat_activity shows them (by application_name, which PgBouncer sets
// on the server connection it links a client to).
func runMany(ctx context.Context, e *env, s bench.Server, bouncer, route, w string, round int) Sample {
	name := "many-" + route
	sm := Sample{Server: s.Name, Workload: w, Goroutines: manyG, PoolSize: manyPool, Contender: name, Round: round}
	base := s.DSN // plain pgx's DSN
	if route == routePgBouncer || route == routePgBouncerPlain {
		cfg, err := pgx.ParseConfig(s.DSN)
		if err != nil {
			sm.Errors, sm.FirstError = 1, err.Error()
			return sm
		}
		base = fmt.Sprintf("postgres://%s@%s/pooldriver_tx?sslmode=disable", cfg.User, bouncer)
	}
	dsn := withParam(base, "pool_max_conns="+strconv.Itoa(manyPool)) // pooldriver's
	if route == routePgBouncer {
		dsn = withParam(dsn, "pool_server_pooling=transaction")
	}
	cs := make([]*bench.Contender, manyInstances)
	for i := range cs {
		var c *bench.Contender
		var err error
		if route == routeDirectPlain || route == routePgBouncerPlain {
			plain := bench.Postgres(base) // pgx's default exec mode straight to the server
			if route == routePgBouncerPlain {
				plain = bench.Postgres(withParam(base, "default_query_exec_mode=cache_describe"))
			}
			sp := bench.Contenders(plain)[0] // sql-tuned, named after the route
			sp.Name = name
			c, err = sp.Open(plain, manyPool)
		} else {
			pd := pooldriver.New(withParam(dsn, "application_name="+bench.AppName(name)))
			err = pd.Err()
			if err == nil {
				c = &bench.Contender{Name: name, Server: s, Bounded: true, DB: sql.OpenDB(pd), PD: pd}
			}
		}
		if err != nil {
			sm.Errors, sm.FirstError = 1, err.Error()
			return sm
		}
		defer c.Close()
		cs[i] = c
	}
	created := func() (n int64) {
		for _, c := range cs {
			n += c.Opened()
		}
		return n
	}
	randID := func() int { return rand.IntN(bench.Rows) + 1 }
	op := func(ctx context.Context) error { return cs[rand.IntN(len(cs))].PointSelect(ctx, randID()) }
	if w == wTx {
		op = func(ctx context.Context) error { return cs[rand.IntN(len(cs))].ShortTx(ctx, randID()) }
	}
	// The window's own counters see only the first instance. Peak is the
	// server's count, which covers all four; Opened is replaced by the
	// four instances' connections opened over the whole cell, warm-up
	// included.
	runClosedLoop(ctx, e, cs[0], manyG, 0, op, &sm)
	sm.Opened = created()
	return sm
}

func withParam(dsn, kv string) string {
	if strings.Contains(dsn, "?") {
		return dsn + "&" + kv
	}
	return dsn + "?" + kv
}

// manyMarkdown renders the samples: medians over rounds per route and
// workload, and the median over rounds of PgBouncer's throughput as a
// fraction of the direct route's in the same round.
func manyMarkdown(m Meta, samples []Sample) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Many instances: %d pooldriver instances × pool %d, straight to PostgreSQL and through PgBouncer\n\n", manyInstances, manyPool)
	fmt.Fprintf(&b, "%s; `%s`; %s; go %s, %d CPUs (%s); %s; load average %s at the start, %s at the end; %s.\n\n",
		m.Date, m.Command, m.Config, m.GoVersion, m.NumCPU, m.CPUModel, m.ServerVersion["postgres"], m.LoadAvgStart, m.LoadAvgEnd, m.Tree)
	fmt.Fprintf(&b, "%d goroutines, each operation on a random instance. PgBouncer: pool_mode=transaction, default_pool_size=%d; pooldriver: `pool_server_pooling=transaction`. Server connections: the most pg_stat_activity showed at once (sampled every 100 ms). Medians over rounds.\n\n", manyG, manyPool)
	b.WriteString("| workload | route | ops/s | × direct | p50 | p99 | server connections | errors |\n|---|---|---|---|---|---|---|---|\n")
	for _, w := range []string{wSelect, wTx} {
		direct := map[int]float64{}
		for _, s := range samples {
			if s.Workload == w && s.Contender == "many-"+routeDirect {
				direct[s.Round] = s.OpsPerS
			}
		}
		for _, route := range routes {
			var ops, ratio []float64
			var p50, p99 []time.Duration
			var peak, errs int64
			for _, s := range samples {
				if s.Workload != w || s.Contender != "many-"+route {
					continue
				}
				ops = append(ops, s.OpsPerS)
				if d := direct[s.Round]; d > 0 {
					ratio = append(ratio, s.OpsPerS/d)
				}
				p50, p99 = append(p50, s.P50), append(p99, s.P99)
				peak = max(peak, s.Peak)
				errs += s.Errors
			}
			fmt.Fprintf(&b, "| %s | %s | %.0f | %.2f | %s | %s | %d | %d |\n", w, route,
				median(ops), median(ratio), fmtDur(median(p50)), fmtDur(median(p99)), peak, errs)
		}
	}
	return b.String()
}

// startPgBouncer starts a PgBouncer with the integration tests' config
// file (-pgbouncer-ini) on a free loopback port, in front of s, with
// default_pool_size manyPool, and returns its address and a stop function
// that ends and reaps it.
func startPgBouncer(cfg config, s bench.Server) (addr string, stop func(), err error) {
	path, err := exec.LookPath("pgbouncer")
	if err != nil {
		if path, err = exec.LookPath("/usr/sbin/pgbouncer"); err != nil {
			return "", nil, fmt.Errorf("pgbouncer is not installed (Debian: apt-get install pgbouncer)")
		}
	}
	pc, err := pgx.ParseConfig(s.DSN)
	if err != nil {
		return "", nil, err
	}
	tmpl, err := os.ReadFile(cfg.pgbouncerIni)
	if err != nil {
		return "", nil, err
	}
	dir, err := os.MkdirTemp("", "loadtest-pgbouncer")
	if err != nil {
		return "", nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	_ = ln.Close() // only its port was wanted
	ini := strings.NewReplacer(
		"@PGHOST@", pc.Host, "@PGPORT@", strconv.Itoa(int(pc.Port)), "@DBNAME@", pc.Database,
		"@PORT@", strconv.Itoa(port), "@POOL_SIZE@", strconv.Itoa(manyPool), "@DIR@", dir, "@USER@", pc.User,
	).Replace(string(tmpl))
	iniPath := filepath.Join(dir, "pgbouncer.ini")
	err = os.WriteFile(iniPath, []byte(ini), 0o644)
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, "userlist.txt"), fmt.Appendf(nil, "%q %q\n", pc.User, pc.Password), 0o644)
	}
	var args []string
	if os.Geteuid() == 0 { // PgBouncer refuses to run as root; it reads its files before it switches
		args = append(args, "-u", "nobody")
	}
	if err != nil {
		_ = os.RemoveAll(dir) // a temporary directory: best effort
		return "", nil, err
	}
	cmd := exec.Command(path, append(args, "-q", iniPath)...)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		_ = os.RemoveAll(dir) // a temporary directory: best effort
		return "", nil, err
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }() // stopped on purpose: its status is no news
	stop = func() {
		_ = cmd.Process.Signal(syscall.SIGTERM) // it may have exited already; Kill below if not
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		_ = os.RemoveAll(dir) // a temporary directory: best effort
	}
	addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	for deadline := time.Now().Add(15 * time.Second); ; {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			_ = c.Close() // the dial only probed that it listens
			return addr, stop, nil
		}
		if time.Now().After(deadline) {
			stop()
			return "", nil, fmt.Errorf("pgbouncer does not listen on %s: %w", addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
