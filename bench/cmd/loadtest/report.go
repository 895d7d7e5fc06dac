package main

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/pooldriver/pooldriver/bench"
)

// Row is one contender in one cell, summarized over the rounds: medians of
// the measurements, and medians of the per-round ratios to the baselines
// measured in the same cell of the same round (0: not applicable).
type Row struct {
	Server     string `json:"server"`
	Workload   string `json:"workload"`
	Goroutines int    `json:"goroutines"`
	PoolSize   int    `json:"pool_size"`
	Contender  string `json:"contender"`
	Rounds     int    `json:"rounds"`

	OpsPerS  float64       `json:"ops_per_s"`
	P50      time.Duration `json:"p50_ns"`
	P99      time.Duration `json:"p99_ns"`
	Max      time.Duration `json:"max_ns"`
	CPUPerOp time.Duration `json:"cpu_per_op_ns"`
	UserCPU  time.Duration `json:"user_cpu_per_op_ns"`
	Opened   int64         `json:"conns_opened"`     // median over rounds
	OpenedHi int64         `json:"conns_opened_max"` // highest round
	Peak     int64         `json:"peak_conns"`       // highest round

	Errors       int64  `json:"errors"` // all rounds
	TooManyConns int64  `json:"too_many_conns_errors"`
	Stuck        int64  `json:"stuck,omitempty"`
	FirstError   string `json:"first_error,omitempty"`

	// Ratios to database/sql tuned (SQLTuned) of the same server.
	ThrVsTuned float64 `json:"throughput_vs_tuned"`
	P99VsTuned float64 `json:"p99_vs_tuned"`
	CPUVsTuned float64 `json:"cpu_vs_tuned"`
	// User CPU time per op × tuned's: the client's own code, without the
	// kernel's share of the socket calls.
	UserCPUVsTuned float64 `json:"user_cpu_vs_tuned"`
	// Ratios to pgxpool (PostgreSQL only).
	ThrVsPgxpool float64 `json:"throughput_vs_pgxpool,omitempty"`
	P99VsPgxpool float64 `json:"p99_vs_pgxpool,omitempty"`
	MaxVsPgxpool float64 `json:"max_vs_pgxpool,omitempty"`

	// Fairness: medians of each round's distribution of per-goroutine totals.
	TotalP50 time.Duration `json:"total_wait_p50_ns,omitempty"`
	TotalP99 time.Duration `json:"total_wait_p99_ns,omitempty"`
	TotalMin time.Duration `json:"total_wait_min_ns,omitempty"`
	TotalMax time.Duration `json:"total_wait_max_ns,omitempty"`
}

// Target is one of the load test's targets, checked for pooldriver (database/sql
// at its defaults).
type Target struct {
	What string `json:"what"`
	Cell string `json:"cell"`
	Want string `json:"want"`
	Got  string `json:"got"`
	Met  bool   `json:"met"`
}

// Report is everything results.json holds.
type Report struct {
	Meta    Meta     `json:"meta"`
	Targets []Target `json:"targets"`
	Rows    []Row    `json:"rows"`
	Samples []Sample `json:"samples"`
}

type rowKey struct {
	server, workload string
	g                int
}

func buildReport(meta Meta, samples []Sample) *Report {
	rep := &Report{Meta: meta, Samples: samples}
	// Index: cell → round → contender → sample.
	byCell := map[rowKey]map[int]map[string]*Sample{}
	var order []rowKey
	contenders := map[rowKey][]string{}
	for i := range samples {
		s := &samples[i]
		k := rowKey{s.Server, s.Workload, s.Goroutines}
		if byCell[k] == nil {
			byCell[k] = map[int]map[string]*Sample{}
			order = append(order, k)
		}
		if byCell[k][s.Round] == nil {
			byCell[k][s.Round] = map[string]*Sample{}
		}
		byCell[k][s.Round][s.Contender] = s
		if !slices.Contains(contenders[k], s.Contender) {
			contenders[k] = append(contenders[k], s.Contender)
		}
	}
	for _, k := range order {
		names := contenders[k]
		slices.SortStableFunc(names, func(a, b string) int { return contenderRank(a) - contenderRank(b) })
		for _, name := range names {
			rep.Rows = append(rep.Rows, summarize(k, name, byCell[k]))
		}
	}
	rep.Targets = targets(rep.Rows)
	return rep
}

// contenderRank orders the rows of a cell.
func contenderRank(name string) int {
	for i, n := range []string{bench.SQLTuned, bench.SQLDefault, bench.PgxPool, bench.PgxPoolSQL, bench.Pooldriver, bench.PooldriverTask} {
		if n == name {
			return i
		}
	}
	return 99
}

func summarize(k rowKey, name string, rounds map[int]map[string]*Sample) Row {
	r := Row{Server: k.server, Workload: k.workload, Goroutines: k.g, Contender: name}
	var ops []float64
	var p50, p99, mx, cpu, ucpu, tp50, tp99, tmin, tmax []time.Duration
	var opened []int64
	var thrT, p99T, cpuT, ucpuT, thrP, p99P, maxP []float64
	for _, byName := range rounds {
		s := byName[name]
		if s == nil {
			continue
		}
		r.Rounds++
		r.PoolSize = s.PoolSize
		ops = append(ops, s.OpsPerS)
		p50, p99, mx, cpu = append(p50, s.P50), append(p99, s.P99), append(mx, s.Max), append(cpu, s.CPUPerOp)
		ucpu = append(ucpu, s.UserCPUPerOp)
		tp50, tp99, tmin, tmax = append(tp50, s.TotalP50), append(tp99, s.TotalP99), append(tmin, s.TotalMin), append(tmax, s.TotalMax)
		opened = append(opened, s.Opened)
		r.OpenedHi = max(r.OpenedHi, s.Opened)
		r.Peak = max(r.Peak, s.Peak)
		r.Errors += s.Errors
		r.TooManyConns += s.TooManyConns
		r.Stuck += s.Stuck
		if r.FirstError == "" {
			r.FirstError = s.FirstError
		}
		if b := byName[bench.SQLTuned]; b != nil && b.Ops > 0 && s.Ops > 0 {
			thrT = append(thrT, s.OpsPerS/b.OpsPerS)
			p99T = append(p99T, float64(s.P99)/float64(b.P99))
			cpuT = append(cpuT, float64(s.CPUPerOp)/float64(b.CPUPerOp))
			if b.UserCPUPerOp > 0 {
				ucpuT = append(ucpuT, float64(s.UserCPUPerOp)/float64(b.UserCPUPerOp))
			}
		}
		if b := byName[bench.PgxPool]; b != nil && b.Ops > 0 && s.Ops > 0 {
			thrP = append(thrP, s.OpsPerS/b.OpsPerS)
			p99P = append(p99P, float64(s.P99)/float64(b.P99))
			maxP = append(maxP, float64(s.Max)/float64(b.Max))
		}
	}
	r.OpsPerS = median(ops)
	r.P50, r.P99, r.Max, r.CPUPerOp, r.UserCPU = median(p50), median(p99), median(mx), median(cpu), median(ucpu)
	r.TotalP50, r.TotalP99, r.TotalMin, r.TotalMax = median(tp50), median(tp99), median(tmin), median(tmax)
	r.Opened = median(opened)
	r.ThrVsTuned, r.P99VsTuned, r.CPUVsTuned, r.UserCPUVsTuned = median(thrT), median(p99T), median(cpuT), median(ucpuT)
	r.ThrVsPgxpool, r.P99VsPgxpool, r.MaxVsPgxpool = median(thrP), median(p99P), median(maxP)
	return r
}

type number interface {
	~int64 | ~float64
}

// median returns the median of xs (the mean of the middle two for an even
// count), 0 for none.
func median[T number](xs []T) T {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// targets checks the load test's targets for pooldriver with database/sql at its
// defaults.
func targets(rows []Row) []Target {
	var ts []Target
	find := func(server, w string, g int, name string) *Row {
		for i := range rows {
			r := &rows[i]
			if r.Server == server && r.Workload == w && r.Goroutines == g && r.Contender == name {
				return r
			}
		}
		return nil
	}
	ratio := func(what, cellName, want string, got float64, ok bool) {
		if got == 0 {
			return // no baseline in this run
		}
		ts = append(ts, Target{What: what, Cell: cellName, Want: want, Got: fmt.Sprintf("%.2f", got), Met: ok})
	}
	for _, server := range []string{"postgres", "mysql"} {
		pg := server == "postgres"
		for _, g := range []int{1, 16, 64, 256} {
			r := find(server, wSelect, g, bench.Pooldriver)
			if r == nil {
				continue
			}
			c := fmt.Sprintf("%s select g=%d", server, g)
			ratio("throughput × sql-tuned", c, "≥ 0.95", r.ThrVsTuned, r.ThrVsTuned >= 0.95)
			if pg {
				ratio("throughput × pgxpool", c, "≥ 0.90", r.ThrVsPgxpool, r.ThrVsPgxpool >= 0.90)
			}
			ratio("CPU/op × sql-tuned", c, "≤ 1.10", r.CPUVsTuned, r.CPUVsTuned <= 1.10)
			if g == 256 {
				ts = append(ts, Target{What: "errors", Cell: c, Want: "0", Got: fmt.Sprint(r.Errors), Met: r.Errors == 0})
				ts = append(ts, Target{What: "peak server conns", Cell: c, Want: fmt.Sprintf("≤ %d", r.PoolSize),
					Got: fmt.Sprint(r.Peak), Met: r.Peak <= int64(r.PoolSize)})
			}
		}
		for _, g := range []int{16, 64} {
			r := find(server, wThink, g, bench.Pooldriver)
			if r == nil {
				continue
			}
			c := fmt.Sprintf("%s think g=%d", server, g)
			ratio("throughput × sql-tuned", c, "≥ 0.90", r.ThrVsTuned, r.ThrVsTuned >= 0.90)
			if pg {
				ratio("throughput × pgxpool", c, "≥ 0.90", r.ThrVsPgxpool, r.ThrVsPgxpool >= 0.90)
			}
			ts = append(ts, Target{What: "conns opened after warm-up", Cell: c, Want: "0 (every round)",
				Got: fmt.Sprint(r.OpenedHi), Met: r.OpenedHi == 0})
		}
		if r := find(server, wTx, 64, bench.Pooldriver); r != nil {
			ratio("p99 × sql-tuned", fmt.Sprintf("%s tx g=64", server), "≤ 1.00", r.P99VsTuned, r.P99VsTuned <= 1.0)
		}
		if r := find(server, wFair, 256, bench.Pooldriver); r != nil && pg {
			c := fmt.Sprintf("%s fair g=256 N=%d", server, r.PoolSize)
			ratio("p99 wait × pgxpool", c, "≤ 1.30", r.P99VsPgxpool, r.P99VsPgxpool <= 1.3)
			ratio("max wait × pgxpool", c, "≤ 1.30", r.MaxVsPgxpool, r.MaxVsPgxpool <= 1.3)
		}
	}
	return ts
}

// markdown renders results.md.
func (rep *Report) markdown() string {
	var b strings.Builder
	m := rep.Meta
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p("# pooldriver load test\n\n")
	p("Generated by `bench/cmd/loadtest`; do not edit by hand.\n\n")
	p("- Command (in `bench/`): `%s`\n", m.Command)
	p("- Settings: %s\n", m.Config)
	if m.Tree != "" {
		p("- pooldriver measured: %s\n", m.Tree)
	}
	p("- Date: %s; wall time %s\n", m.Date, m.Elapsed)
	p("- Machine: `nproc` %d, GOMAXPROCS %d, %s, kernel %s, %s; load average %s at start, %s at end (shared machine)\n",
		m.NumCPU, m.GOMAXPROCS, m.CPUModel, m.Kernel, m.GoVersion, m.LoadAvgStart, m.LoadAvgEnd)
	for _, s := range []string{"postgres", "mysql"} {
		if v, ok := m.ServerVersion[s]; ok {
			p("- %s: %s (max_connections %s), loopback\n", s, firstWords(v, 4), m.ServerLimit[s])
		}
	}
	p("\nEach value is the median over rounds; each ratio is the median of the per-round ratios to the baseline measured in the same cell of the same round (× tuned: database/sql tuned to the same pool size; × pgxpool: native pgxpool). Throughput ratio > 1 is better; latency and CPU ratios < 1 are better.\n\n")

	p("## Targets (pooldriver, database/sql at its defaults)\n\n")
	p("| cell | target | want | got | |\n|---|---|---|---|---|\n")
	for _, t := range rep.Targets {
		mark := "met"
		if !t.Met {
			mark = "**missed**"
		}
		p("| %s | %s | %s | %s | %s |\n", t.Cell, t.What, t.Want, t.Got, mark)
	}

	sections := []struct{ w, title string }{
		{wSelect, "1. Point select by primary key, closed loop, N=10"},
		{wThink, "2. Point select with 1 ms think time (no connection held while thinking), N=10"},
		{wTx, "3. Short transactions (BEGIN; UPDATE; SELECT; COMMIT), N=10"},
		{wHTTP, "5. HTTP handler, 3 queries per request (pooldriver-task: under pooldriver.Middleware), N=10; ops = requests"},
	}
	for _, sec := range sections {
		p("\n## %s\n\n", sec.title)
		p("| server | goroutines | contender | ops/s | × tuned | × pgxpool | p50 | p99 | p99 × tuned | max | CPU/op | CPU × tuned | user CPU × tuned | conns opened | peak conns | errors |\n")
		p("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
		for _, r := range rep.Rows {
			if r.Workload != sec.w {
				continue
			}
			p("| %s | %d | %s | %.0f | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %d | %s |\n",
				r.Server, r.Goroutines, bold(r.Contender), r.OpsPerS, fmtRatio(r.ThrVsTuned), fmtRatio(r.ThrVsPgxpool),
				fmtDur(r.P50), fmtDur(r.P99), fmtRatio(r.P99VsTuned), fmtDur(r.Max), fmtDur(r.CPUPerOp), fmtRatio(r.CPUVsTuned), fmtRatio(r.UserCPUVsTuned),
				fmtOpened(r), r.Peak, fmtErrors(r))
		}
		if sec.w == wTx {
			rep.fairness(&b)
		}
	}
	p("\n## Definitions\n\n")
	p("- **ops/s**: operations completed without error in the measured window, after a warm-up of the same workload.\n")
	p("- **p50/p99/max**: latency of one operation as the caller sees it (wait for a connection included).\n")
	p("- **CPU/op**: user+system CPU time of the whole process (getrusage) in the window, divided by ops; the load generator and, for HTTP, the server are in the same process and the same for every contender. **user CPU × tuned**: the same ratio for the user part alone (the system part is mostly the socket calls).\n")
	p("- **conns opened**: server connections opened during the measured window (median over rounds; the highest round in parentheses when it differs): TCP connections dialled, counted by a dial hook on the driver; for pooldriver, `Connector.Stats().Created`.\n")
	p("- **peak conns**: the most server connections the contender had at once in any round: exact from the dial hook, for pooldriver `Stats().Total` sampled every 5 ms, and on PostgreSQL also `pg_stat_activity` by `application_name` sampled every 100 ms.\n")
	p("- **errors**: summed over rounds; `too many` counts the server refusing a connection at its limit; `hung` counts goroutines that never returned from an operation, even 30 s after their context was cancelled (the run goes on without them).\n")
	p("- **fairness**: one cycle is: begin a transaction (the wait: until BEGIN returns, so the wait for a connection plus one round trip, the same for everyone), hold it 2 ms, commit. A transaction is what holds a *physical* connection in every contender: under pooldriver a `*sql.Conn` holds only a logical connection, which owns no server connection between statements. database/sql at its defaults has no pool size and is left out.\n")
	return b.String()
}

func (rep *Report) fairness(b *strings.Builder) {
	p := func(format string, args ...any) { fmt.Fprintf(b, format, args...) }
	p("\n## 4. Fairness: 256 goroutines × 20 cycles of begin / hold 2 ms / commit, N=8\n\n")
	p("Single waits, and each goroutine's total wait over its 20 cycles (min, p50, p99, max across the 256 goroutines).\n\n")
	p("| server | contender | cycles/s | wait p50 | wait p99 | wait max | p99 × pgxpool | max × pgxpool | p99 × tuned | total min | total p50 | total p99 | total max | peak conns | errors |\n")
	p("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rep.Rows {
		if r.Workload != wFair {
			continue
		}
		p("| %s | %s | %.0f | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %d | %s |\n",
			r.Server, bold(r.Contender), r.OpsPerS, fmtDur(r.P50), fmtDur(r.P99), fmtDur(r.Max),
			fmtRatio(r.P99VsPgxpool), fmtRatio(r.MaxVsPgxpool), fmtRatio(r.P99VsTuned),
			fmtDur(r.TotalMin), fmtDur(r.TotalP50), fmtDur(r.TotalP99), fmtDur(r.TotalMax), r.Peak, fmtErrors(r))
	}
}

func bold(name string) string {
	if name == bench.Pooldriver || name == bench.PooldriverTask {
		return "**" + name + "**"
	}
	return name
}

func fmtOpened(r Row) string {
	if r.OpenedHi != r.Opened {
		return fmt.Sprintf("%d (%d)", r.Opened, r.OpenedHi)
	}
	return fmt.Sprint(r.Opened)
}

func fmtErrors(r Row) string {
	switch {
	case r.Stuck > 0:
		return fmt.Sprintf("%d (**hung: %d**)", r.Errors, r.Stuck)
	case r.TooManyConns > 0:
		return fmt.Sprintf("%d (too many: %d)", r.Errors, r.TooManyConns)
	}
	return fmt.Sprint(r.Errors)
}

func fmtRatio(x float64) string {
	if x == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f", x)
}

// fmtDur prints a duration with three significant digits.
func fmtDur(d time.Duration) string {
	switch {
	case d <= 0:
		return "–"
	case d < time.Millisecond:
		return fmt.Sprintf("%.0fµs", float64(d)/1e3)
	case d < time.Second:
		return fmt.Sprintf("%.2fms", float64(d)/1e6)
	default:
		return fmt.Sprintf("%.2fs", d.Seconds())
	}
}

func firstWords(s string, n int) string {
	f := strings.Fields(s)
	if len(f) > n {
		f = f[:n]
	}
	return strings.TrimSuffix(strings.Join(f, " "), ",")
}
