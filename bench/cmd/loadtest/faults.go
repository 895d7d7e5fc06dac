package main

import (
	"context"
	"fmt"
	"log"
	"math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pooldriver/pooldriver/bench"
	"github.com/pooldriver/pooldriver/internal/faultproxy"
)

// The faults workload (-faults) runs a table of faults for
// pooldriver, tuned database/sql and pgxpool side by side, pool size 10,
// over loopback only, and writes faults.md and faults.json: a network black
// hole under calls with 1s timeouts (a proxy that swallows everything), the
// server at its connection limit (an identity of the run's own limited to
// 20 connections, 15 of them held elsewhere) and a cancellation storm
// (contexts ended 0–20ms after each call starts).

// faultPoolSize is every contender's pool size.
const faultPoolSize = 10

// FaultRow is one contender under one fault.
type FaultRow struct {
	Server      string        `json:"server"`
	Fault       string        `json:"fault"`
	Contender   string        `json:"contender"`
	OK          int64         `json:"ok"`
	Errors      int64         `json:"errors"`
	Dials       int64         `json:"dials"` // connection attempts
	Slowest     time.Duration `json:"slowest_ns"`
	WorstOver   time.Duration `json:"worst_overrun_ns"` // past the call's deadline
	FirstError  string        `json:"first_error,omitempty"`
	Goroutines  int           `json:"goroutines"`
	Duration    time.Duration `json:"duration_ns"`
	Description string        `json:"description"`
}

// faultLoad is what a load saw.
type faultLoad struct {
	ok, errs        atomic.Int64
	slowest, worstO atomic.Int64
	firstErr        atomic.Value
}

func maxInto(a *atomic.Int64, v int64) {
	for {
		old := a.Load()
		if v <= old || a.CompareAndSwap(old, v) {
			return
		}
	}
}

// runFaultLoad calls op from g goroutines for d, each call under a context
// of the timeout to returns.
func runFaultLoad(ctx context.Context, l *faultLoad, d time.Duration, g int, to func() time.Duration, op func(context.Context) error) {
	end := time.Now().Add(d)
	var wg sync.WaitGroup
	for range g {
		wg.Go(func() {
			for ctx.Err() == nil && time.Now().Before(end) {
				t := to()
				c, cancel := context.WithTimeout(ctx, t)
				start := time.Now()
				err := op(c)
				took := time.Since(start)
				cancel()
				maxInto(&l.slowest, int64(took))
				maxInto(&l.worstO, int64(took-t))
				if err == nil {
					l.ok.Add(1)
					continue
				}
				if l.errs.Add(1) == 1 {
					l.firstErr.Store(err.Error())
				}
			}
		})
	}
	wg.Wait()
}

// faultOp is the statement of the faults workload: 1ms on the server.
func faultOp(c *bench.Contender) func(context.Context) error {
	q := "SELECT pg_sleep(0.001)"
	if c.Server.Name == "mysql" {
		q = "DO SLEEP(0.001)"
	}
	if c.DB == nil {
		return func(ctx context.Context) error { _, err := c.Pool.Exec(ctx, q); return err }
	}
	return func(ctx context.Context) error { _, err := c.DB.ExecContext(ctx, q); return err }
}

// dials is how many connection attempts c made: pooldriver's successes and
// failures, the others' TCP dials.
func dials(c *bench.Contender) int64 {
	if c.PD != nil {
		st := c.PD.Stats()
		return st.Created + st.ConnectErrors
	}
	return c.Opened()
}

var faultContenders = map[string]bool{bench.Pooldriver: true, bench.SQLTuned: true, bench.PgxPool: true}

// runFaults runs the faults workload on every reachable server.
func runFaults(ctx context.Context, cfg config) error {
	if err := os.MkdirAll(cfg.out, 0o755); err != nil {
		return err
	}
	var rows []FaultRow
	for _, s := range reachableServers(ctx, cfg) {
		for _, f := range []func(context.Context, config, bench.Server) ([]FaultRow, error){faultBlackHole, faultLimit, faultStorm} {
			r, err := f(ctx, cfg, s)
			if err != nil {
				return fmt.Errorf("%s: %w", s.Name, err)
			}
			rows = append(rows, r...)
		}
	}
	if err := writeJSON(filepath.Join(cfg.out, "faults.json"), rows); err != nil {
		return err
	}
	md := faultsMarkdown(rows, commandLine(), loadAvg())
	if err := os.WriteFile(filepath.Join(cfg.out, "faults.md"), []byte(md), 0o644); err != nil {
		return err
	}
	log.Printf("wrote %s/faults.md, faults.json", cfg.out)
	return nil
}

// eachContender opens every fault contender on s in turn and runs f on it.
func eachContender(s bench.Server, f func(c *bench.Contender) FaultRow) ([]FaultRow, error) {
	var rows []FaultRow
	for _, sp := range bench.Contenders(s) {
		if !faultContenders[sp.Name] {
			continue
		}
		c, err := sp.Open(s, faultPoolSize)
		if err != nil {
			return nil, err
		}
		r := f(c)
		c.Close()
		r.Server, r.Contender = s.Name, sp.Name
		log.Printf("%-8s %-28s %-12s %7d ok %7d errors %6d dials  slowest %8s  worst overrun %8s  %s",
			r.Server, r.Fault, r.Contender, r.OK, r.Errors, r.Dials, fmtDur(r.Slowest), fmtDur(max(r.WorstOver, 0)), truncate(r.FirstError, 70))
		rows = append(rows, r)
	}
	return rows, nil
}

func (l *faultLoad) row(fault, desc string, g int, d time.Duration, c *bench.Contender) FaultRow {
	r := FaultRow{Fault: fault, Description: desc, OK: l.ok.Load(), Errors: l.errs.Load(), Dials: dials(c),
		Slowest: time.Duration(l.slowest.Load()), WorstOver: time.Duration(l.worstO.Load()), Goroutines: g, Duration: d}
	if e, ok := l.firstErr.Load().(string); ok {
		r.FirstError = e
	}
	return r
}

// faultBlackHole: after 1s of normal traffic the network swallows
// everything for 5s (nothing answered, nothing closed), 16 goroutines
// calling with 1s timeouts; then it comes back for 2s. Counted: the hole
// and what follows.
func faultBlackHole(ctx context.Context, cfg config, s bench.Server) ([]FaultRow, error) {
	host, err := serverHostPort(s)
	if err != nil {
		return nil, err
	}
	const g = 16
	return eachContender(s, func(c *bench.Contender) FaultRow {
		// A proxy of its own, and the contender reopened through it.
		px, err := faultproxy.New(host)
		if err != nil {
			return FaultRow{Fault: "black hole", FirstError: err.Error()}
		}
		defer px.Close()
		through := s
		through.DSN = strings.Replace(s.DSN, host, px.Addr(), 1)
		sp := specNamed(s, c.Name)
		c.Close()
		pc, err := sp.Open(through, faultPoolSize)
		if err != nil {
			return FaultRow{Fault: "black hole", FirstError: err.Error()}
		}
		defer pc.Close()
		op := faultOp(pc)
		runFaultLoad(ctx, &faultLoad{}, time.Second, g, fixed(time.Second), op)
		px.Set(faultproxy.BlackHole, 0)
		l := &faultLoad{}
		runFaultLoad(ctx, l, 5*time.Second, g, fixed(time.Second), op)
		px.Set(faultproxy.Forward, 0)
		runFaultLoad(ctx, l, 2*time.Second, g, fixed(time.Second), op)
		return l.row("black hole 5s, 1s timeouts", "calls with 1s timeouts during a 5s network black hole and the 2s after", g, 7*time.Second, pc)
	})
}

// faultLimit: the run's own identity may open 20 connections and 15 are
// held elsewhere; 64 goroutines with 1s timeouts.
func faultLimit(ctx context.Context, cfg config, s bench.Server) ([]FaultRow, error) {
	const (
		limit, held, g = 20, 15, 64
	)
	d := cfg.cellDur * 3
	limited, drop, err := limitedServer(ctx, s, limit)
	if err != nil {
		return nil, err
	}
	defer drop()
	return eachContender(limited, func(c *bench.Contender) FaultRow {
		hold, err := limited.Admin()
		if err != nil {
			return FaultRow{Fault: "connection limit", FirstError: err.Error()}
		}
		defer func() { _ = hold.Close() }()
		hold.SetMaxOpenConns(held)
		for range held {
			conn, err := hold.Conn(ctx)
			if err != nil {
				return FaultRow{Fault: "connection limit", FirstError: err.Error()}
			}
			defer func() { _ = conn.Close() }()
			if err := conn.PingContext(ctx); err != nil {
				return FaultRow{Fault: "connection limit", FirstError: err.Error()}
			}
		}
		l := &faultLoad{}
		runFaultLoad(ctx, l, d, g, fixed(time.Second), faultOp(c))
		return l.row(fmt.Sprintf("connection limit (%d, %d held)", limit, held), "64 goroutines, 1s timeouts, the identity limited to 20 connections of which 15 are held elsewhere", g, d, c)
	})
}

// faultStorm: 64 goroutines whose contexts end 0–20ms after each call
// starts.
func faultStorm(ctx context.Context, cfg config, s bench.Server) ([]FaultRow, error) {
	const g = 64
	d := cfg.cellDur * 3
	return eachContender(s, func(c *bench.Contender) FaultRow {
		l := &faultLoad{}
		runFaultLoad(ctx, l, d, g, func() time.Duration { return rand.N(20 * time.Millisecond) }, faultOp(c))
		return l.row("cancellation storm", "64 goroutines, contexts cancelled 0-20ms after each call starts", g, d, c)
	})
}

func fixed(d time.Duration) func() time.Duration { return func() time.Duration { return d } }

func specNamed(s bench.Server, name string) bench.Spec {
	for _, sp := range bench.Contenders(s) {
		if sp.Name == name {
			return sp
		}
	}
	panic("no contender " + name)
}

// serverHostPort is the host:port of s's DSN.
func serverHostPort(s bench.Server) (string, error) {
	if s.Name == "mysql" {
		i, j := strings.Index(s.DSN, "tcp("), strings.Index(s.DSN, ")/")
		if i < 0 || j < i {
			return "", fmt.Errorf("no tcp(host:port) in the mysql DSN")
		}
		return s.DSN[i+4 : j], nil
	}
	u, err := url.Parse(s.DSN)
	if err != nil || u.Host == "" {
		return "", fmt.Errorf("the postgres DSN must be a URL with a host: %v", err)
	}
	return u.Host, nil
}

// limitedServer creates an identity of the run's own that the server lets
// open at most limit connections (a PostgreSQL role with CONNECTION LIMIT,
// a MariaDB user with MAX_USER_CONNECTIONS) and returns s logged in as it,
// and the function that drops it. No global setting is changed.
func limitedServer(ctx context.Context, s bench.Server, limit int) (bench.Server, func(), error) {
	admin, err := s.Admin()
	if err != nil {
		return s, nil, err
	}
	name := fmt.Sprintf("pdfault_%d", time.Now().UnixNano()%1e9)
	var stmts []string
	var drop string
	limited := s
	if s.Name == "postgres" {
		stmts = []string{fmt.Sprintf("CREATE ROLE %s LOGIN CONNECTION LIMIT %d", name, limit)}
		drop = "DROP ROLE " + name
		u, err := url.Parse(s.DSN)
		if err != nil {
			_ = admin.Close()
			return s, nil, err
		}
		u.User = url.User(name)
		limited.DSN = u.String()
	} else {
		i, j := strings.Index(s.DSN, "://"), strings.Index(s.DSN, "@tcp(")
		k := strings.Index(s.DSN, ")/")
		if i < 0 || j < i || k < j {
			_ = admin.Close()
			return s, nil, fmt.Errorf("mysql DSN not of the form mysql://user@tcp(host:port)/db")
		}
		db := s.DSN[k+2:]
		if q := strings.IndexByte(db, '?'); q >= 0 {
			db = db[:q]
		}
		stmts = []string{
			fmt.Sprintf("CREATE USER '%s'@'%%' IDENTIFIED BY '%s'", name, name),
			fmt.Sprintf("GRANT ALL PRIVILEGES ON `%s`.* TO '%s'@'%%' WITH MAX_USER_CONNECTIONS %d", db, name, limit),
		}
		drop = fmt.Sprintf("DROP USER '%s'@'%%'", name)
		limited.DSN = "mysql://" + name + ":" + name + s.DSN[j:]
	}
	for _, q := range stmts {
		if _, err := admin.ExecContext(ctx, q); err != nil {
			_ = admin.Close()
			return s, nil, fmt.Errorf("%s: %w", q, err)
		}
	}
	return limited, func() {
		if _, err := admin.ExecContext(context.Background(), drop); err != nil {
			log.Printf("%s: %v", drop, err)
		}
		_ = admin.Close()
	}, nil
}

// faultsMarkdown renders the table: one row per server and fault, one
// column per contender.
func faultsMarkdown(rows []FaultRow, cmd, load string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Faults\n\n`cd bench && %s` on %s, load average at the end %s; pool size %d everywhere; ",
		strings.TrimPrefix(cmd, "cd bench && "), time.Now().UTC().Format("2006-01-02 15:04 MST"), load, faultPoolSize)
	b.WriteString("each cell: successful calls / failed calls, connection attempts, slowest call.\n\n")
	b.WriteString("| server | fault | pooldriver | database/sql tuned | pgxpool |\n|---|---|---|---|---|\n")
	type key struct{ server, fault string }
	var order []key
	cells := map[key]map[string]FaultRow{}
	for _, r := range rows {
		k := key{r.Server, r.Fault}
		if cells[k] == nil {
			cells[k] = map[string]FaultRow{}
			order = append(order, k)
		}
		cells[k][r.Contender] = r
	}
	cell := func(r FaultRow, ok bool) string {
		if !ok {
			return "–"
		}
		return fmt.Sprintf("%d ok / %d failed, %d dials, slowest %s", r.OK, r.Errors, r.Dials, fmtDur(r.Slowest))
	}
	for _, k := range order {
		c := cells[k]
		p, okP := c[bench.Pooldriver]
		t, okT := c[bench.SQLTuned]
		x, okX := c[bench.PgxPool]
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", k.server, k.fault, cell(p, okP), cell(t, okT), cell(x, okX))
	}
	return b.String()
}
