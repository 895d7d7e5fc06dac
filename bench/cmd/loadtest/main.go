// Command loadtest runs pooldriver and the alternatives side by side against
// real PostgreSQL and MySQL/MariaDB servers, over loopback only, and writes
// results.md, results.json and chart.png to the -out directory.
//
//	cd bench && go run ./cmd/loadtest -out results/
//
// Every workload is bounded in time (or, for the fairness workload, in
// cycles). Each round runs every cell (server × workload × goroutines) once
// per contender, contenders interleaved in an order that rotates each round;
// the report gives medians over rounds and, for each round, the ratio to a
// baseline measured in the same cell of the same round, because on a shared
// machine absolute numbers drift and ratios hold.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/pooldriver/pooldriver/bench"
)

// The workloads, in the order each round runs them.
const (
	wSelect = "select" // point select by primary key, closed loop
	wThink  = "think"  // the same with 1 ms of think time between queries
	wTx     = "tx"     // BEGIN; UPDATE; SELECT; COMMIT
	wFair   = "fair"   // acquire / hold 2 ms / release, FIFO or not
	wHTTP   = "http"   // HTTP handler doing 3 queries per request
)

// cell is one measurement point: every contender runs it once per round.
type cell struct {
	server   bench.Server
	workload string
	g        int // goroutines
	n        int // pool size
}

func (c cell) String() string { return fmt.Sprintf("%s/%s/g=%d", c.server.Name, c.workload, c.g) }

type config struct {
	out        string
	rounds     int
	cellDur    time.Duration
	warmup     time.Duration
	think      time.Duration
	fairCycles int
	fairHold   time.Duration
	exhaust    bool
	only       *regexp.Regexp
	pgDSN      string
	myDSN      string

	instances    bool   // run the many-instances cell only (instances.go)
	pgbouncerIni string // its PgBouncer config file
}

func main() {
	log.SetFlags(0)
	var (
		cfg     config
		quick   = flag.Bool("quick", false, "smoke run of about 2 minutes: 1 round, 1s cells, 200ms warm-up")
		only    = flag.String("only", "", "run only cells/contenders matching this regexp, e.g. 'postgres/select/g=64/pooldriver$'")
		cpuProf = flag.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
		faults  = flag.Bool("faults", false, "run the faults workload instead (a black hole, a connection limit, a cancellation storm) and write faults.md and faults.json; -cell sets a third of each load's length")
	)
	flag.StringVar(&cfg.out, "out", "results", "directory for results.md, results.json and chart.png")
	flag.IntVar(&cfg.rounds, "rounds", 3, "rounds; each runs every cell once per contender")
	flag.DurationVar(&cfg.cellDur, "cell", 3*time.Second, "measured duration of one contender in one cell")
	flag.DurationVar(&cfg.warmup, "warmup", 500*time.Millisecond, "unmeasured warm-up before each measurement")
	flag.DurationVar(&cfg.think, "think", time.Millisecond, "think time of the think workload")
	flag.IntVar(&cfg.fairCycles, "fair-cycles", 20, "acquire/hold/release cycles per goroutine in the fairness workload")
	flag.DurationVar(&cfg.fairHold, "fair-hold", 2*time.Millisecond, "how long each fairness cycle holds its connection")
	flag.BoolVar(&cfg.exhaust, "exhaust", true, "run database/sql at its defaults at 256 goroutines, which exhausts the server's connection limit for a few seconds (other clients of the server are refused meanwhile)")
	flag.StringVar(&cfg.pgDSN, "postgres", bench.PostgresDSN(), "PostgreSQL DSN (default: $POOLDRIVER_POSTGRES_DSN or the local server); empty to skip")
	flag.StringVar(&cfg.myDSN, "mysql", bench.MySQLDSN(), "MySQL DSN in pooldriver's form, mysql://user@tcp(host:port)/db (default: $POOLDRIVER_MYSQL_DSN or the local server); empty to skip")
	flag.BoolVar(&cfg.instances, "instances", false, "run only the many-instances cell: 4 pooldriver instances × pool 10, straight to PostgreSQL and through a PgBouncer this starts (writes instances.md, instances.json)")
	flag.StringVar(&cfg.pgbouncerIni, "pgbouncer-ini", "../integration/testdata/pgbouncer.ini", "PgBouncer config file of -instances")
	flag.Parse()
	if *quick {
		cfg.rounds, cfg.cellDur, cfg.warmup = 1, time.Second, 200*time.Millisecond
	}
	if *only != "" {
		re, err := regexp.Compile(*only)
		if err != nil {
			log.Fatalf("-only: %v", err)
		}
		cfg.only = re
	}
	if *cpuProf != "" {
		f, err := os.Create(*cpuProf)
		if err != nil {
			log.Fatal(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			log.Fatal(err)
		}
		defer pprof.StopCPUProfile()
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	runner := run
	switch {
	case cfg.instances:
		runner = runInstances
	case *faults:
		runner = runFaults
	}
	if err := runner(ctx, cfg); err != nil {
		log.Print(err)
		pprof.StopCPUProfile()
		os.Exit(1)
	}
}

// reachableServers returns the servers the configuration names that answer
// and are prepared for the workloads; the others are skipped, with a line.
func reachableServers(ctx context.Context, cfg config) []bench.Server {
	var servers []bench.Server
	for _, s := range []bench.Server{bench.Postgres(cfg.pgDSN), bench.MySQL(cfg.myDSN)} {
		if s.DSN == "" {
			continue
		}
		if err := s.Prepare(ctx, 10*time.Second); err != nil {
			log.Printf("skipping %s: %v", s.Name, err)
			continue
		}
		servers = append(servers, s)
	}
	return servers
}

func run(ctx context.Context, cfg config) error {
	if err := os.MkdirAll(cfg.out, 0o755); err != nil {
		return err
	}
	e := &env{warmup: cfg.warmup, cell: cfg.cellDur, monitors: map[string]*bench.Monitor{}}
	var servers []bench.Server
	for _, s := range reachableServers(ctx, cfg) {
		m, err := bench.NewMonitor(s)
		if err != nil {
			return err
		}
		defer func() { _ = m.Close() }()
		e.monitors[s.Name] = m
		servers = append(servers, s)
	}
	if len(servers) == 0 {
		return fmt.Errorf("no server reachable")
	}
	meta := machineInfo(ctx, servers, e.monitors)
	meta.Command = commandLine()
	meta.Config = cfg.String()

	cells := plan(servers)
	started := time.Now()
	var samples []Sample
	for round := range cfg.rounds {
		for _, cl := range cells {
			specs := contendersFor(cfg, cl)
			for i := range specs {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				sp := specs[(i+round)%len(specs)] // rotate the order each round
				s := runOne(ctx, e, cfg, cl, sp, round)
				samples = append(samples, s)
				// Keep what was measured so far should the run not finish.
				_ = writeJSON(filepath.Join(cfg.out, "samples.tmp"), samples)
				log.Printf("round %d/%d %-22s %-16s %9.0f ops/s  p50 %8s  p99 %8s  max %8s  cpu/op %7s (user %7s)  opened %4d  peak %3d  errors %d%s  [%s]",
					round+1, cfg.rounds, cl, sp.Name, s.OpsPerS, fmtDur(s.P50), fmtDur(s.P99), fmtDur(s.Max),
					fmtDur(s.CPUPerOp), fmtDur(s.UserCPUPerOp), s.Opened, s.Peak, s.Errors, errNote(s), time.Since(started).Round(time.Second))
			}
		}
	}
	meta.Elapsed = time.Since(started).Round(time.Second).String()
	meta.LoadAvgEnd = loadAvg()
	rep := buildReport(meta, samples)
	if err := writeJSON(filepath.Join(cfg.out, "results.json"), rep); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(cfg.out, "results.md"), []byte(rep.markdown()), 0o644); err != nil {
		return err
	}
	if err := writeChart(filepath.Join(cfg.out, "chart.png"), rep); err != nil {
		return fmt.Errorf("chart: %w", err)
	}
	_ = os.Remove(filepath.Join(cfg.out, "samples.tmp"))
	log.Printf("wrote %s/results.md, results.json, chart.png in %s", cfg.out, meta.Elapsed)
	return nil
}

func errNote(s Sample) string {
	if s.FirstError == "" {
		return ""
	}
	return " (" + truncate(s.FirstError, 60) + ")"
}

// plan lists the cells of one round, each server's cells side by side.
func plan(servers []bench.Server) []cell {
	var cells []cell
	add := func(w string, n int, gs ...int) {
		for _, g := range gs {
			for _, s := range servers {
				cells = append(cells, cell{server: s, workload: w, g: g, n: n})
			}
		}
	}
	add(wSelect, 10, 1, 16, 64, 256)
	add(wThink, 10, 16, 64)
	add(wTx, 10, 64)
	add(wFair, 8, 256)
	add(wHTTP, 10, 64)
	return cells
}

// contendersFor returns the contenders that run cl. A contender without a
// pool size (database/sql at its defaults) has nothing to be fair about in
// the fairness workload, which is defined on a pool of N; it runs at 256
// goroutines only with -exhaust.
func contendersFor(cfg config, cl cell) []bench.Spec {
	var out []bench.Spec
	for _, sp := range bench.Contenders(cl.server) {
		if !sp.Bounded && (cl.workload == wFair || cl.g >= 256 && !cfg.exhaust) {
			continue
		}
		if cfg.only != nil && !cfg.only.MatchString(cl.String()+"/"+sp.Name) {
			continue
		}
		out = append(out, sp)
	}
	return out
}

// runOne opens a fresh contender, measures it in cl and closes it.
func runOne(ctx context.Context, e *env, cfg config, cl cell, sp bench.Spec, round int) Sample {
	s := Sample{Server: cl.server.Name, Workload: cl.workload, Goroutines: cl.g, PoolSize: cl.n, Contender: sp.Name, Round: round}
	c, err := sp.Open(cl.server, cl.n)
	if err != nil {
		s.Errors, s.FirstError = 1, err.Error()
		return s
	}
	defer c.Close()
	randID := func() int { return randIntN(bench.Rows) + 1 }
	switch cl.workload {
	case wSelect:
		runClosedLoop(ctx, e, c, cl.g, 0, func(ctx context.Context) error { return c.PointSelect(ctx, randID()) }, &s)
	case wThink:
		runClosedLoop(ctx, e, c, cl.g, cfg.think, func(ctx context.Context) error { return c.PointSelect(ctx, randID()) }, &s)
	case wTx:
		runClosedLoop(ctx, e, c, cl.g, 0, func(ctx context.Context) error { return c.ShortTx(ctx, randID()) }, &s)
	case wFair:
		runFairness(ctx, e, c, cl.g, cfg.fairCycles, cfg.fairHold, &s)
	case wHTTP:
		runHTTP(ctx, e, c, cl.g, &s)
	}
	if c.PD != nil {
		st := c.PD.Stats()
		s.PD = &st
	}
	return s
}

func (c config) String() string {
	return fmt.Sprintf("rounds=%d cell=%s warmup=%s think=%s fair-cycles=%d fair-hold=%s exhaust=%v",
		c.rounds, c.cellDur, c.warmup, c.think, c.fairCycles, c.fairHold, c.exhaust)
}

func commandLine() string {
	args := []string{"go run ./cmd/loadtest"}
	for _, a := range os.Args[1:] {
		if strings.ContainsAny(a, " '\"$*?()|") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		args = append(args, a)
	}
	return strings.Join(args, " ")
}

// Meta describes the run and the machine.
type Meta struct {
	Date          string            `json:"date"`
	Command       string            `json:"command"`
	Config        string            `json:"config"`
	GoVersion     string            `json:"go_version"`
	GOMAXPROCS    int               `json:"gomaxprocs"`
	NumCPU        int               `json:"nproc"`
	CPUModel      string            `json:"cpu_model"`
	Kernel        string            `json:"kernel"`
	LoadAvgStart  string            `json:"loadavg_start"`
	LoadAvgEnd    string            `json:"loadavg_end"`
	Elapsed       string            `json:"elapsed"`
	ServerVersion map[string]string `json:"server_versions"`
	ServerLimit   map[string]string `json:"server_max_connections"`
	Tree          string            `json:"pooldriver_tree,omitempty"`
}

func machineInfo(ctx context.Context, servers []bench.Server, mons map[string]*bench.Monitor) Meta {
	m := Meta{
		Date:          time.Now().UTC().Format("2006-01-02 15:04 MST"),
		GoVersion:     runtime.Version(),
		GOMAXPROCS:    runtime.GOMAXPROCS(0),
		NumCPU:        runtime.NumCPU(),
		LoadAvgStart:  loadAvg(),
		ServerVersion: map[string]string{},
		ServerLimit:   map[string]string{},
	}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
	}
	m.Tree = treeState()
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	for _, s := range servers {
		v, limit := mons[s.Name].ServerInfo(ctx)
		m.ServerVersion[s.Name], m.ServerLimit[s.Name] = v, limit
	}
	return m
}

// treeState describes the pooldriver source the run was built from, when run
// inside its git repository: the commit, and uncommitted changes outside
// bench/ if any.
func treeState() string {
	git := func(args ...string) string {
		out, err := exec.Command("git", args...).Output()
		if err != nil {
			return ""
		}
		return strings.TrimSpace(string(out))
	}
	top := git("rev-parse", "--show-toplevel")
	if top == "" {
		return ""
	}
	head := git("-C", top, "rev-parse", "--short", "HEAD")
	diff := git("-C", top, "diff", "HEAD", "--shortstat", "--", ".", ":!bench", ":!integration")
	if diff == "" {
		return "commit " + head
	}
	return "commit " + head + " plus uncommitted changes (" + diff + ")"
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}
