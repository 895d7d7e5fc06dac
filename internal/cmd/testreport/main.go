// Command testreport runs `go test -json` and says what it is doing, for
// `make test`: one line when a package's tests start and one when they end,
// with the time they took; a line every so often while a long package runs,
// naming the tests under way, so that slow is told from hung; the output of
// every failed test; and at the end `N passed, N failed, N skipped`, with the
// skipped tests grouped by the reason they gave.
//
// With -build, it first runs the same command with `-exec true`: go test
// compiles and links every test binary and runs none, and a line says when
// each package's binary is ready (go test -json says nothing while it
// compiles, which can take minutes on a cold cache). The go command keeps
// what it compiled, so the tests then start at once (each binary is linked
// again, a few seconds in all). While nothing else is said, a line every
// -tick tells that it is building.
//
// Usage:
//
//	testreport [-v] [-build] [-slow 10s] [-tick 30s] go test -json [flags] [packages]
//
// It exits non-zero when a test or a build failed or the command did. Only
// the standard library: a fresh machine needs nothing installed.
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

func main() {
	os.Exit(run())
}

func run() int {
	verbose := flag.Bool("v", false, "a line for every top-level test as it ends, not only the slow ones")
	build := flag.Bool("build", false, "first build every test binary, with a line per package as its binary is ready")
	slow := flag.Duration("slow", 10*time.Second, "a top-level test, not parallel, that takes at least this long gets a line of its own")
	tick := flag.Duration("tick", 30*time.Second, "while nothing else is said, say what is under way this often")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: testreport [-v] [-build] [-slow d] [-tick d] go test -json [flags] [packages]")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() == 0 {
		flag.Usage()
		return 2
	}

	// Ctrl-C reaches go test too (same process group); stay alive to read
	// what it prints as it stops and to give the summary, and do not start
	// the tests after an interrupted build.
	var interrupted atomic.Bool
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT)
	go func() {
		for range sigs {
			interrupted.Store(true)
		}
	}()

	r := newReport(os.Stdout, *verbose, *slow)
	if *build {
		r.building = true
		readErr, waitErr := r.runCommand(buildCommand(flag.Args()), *tick)
		r.building = false
		switch {
		case readErr != nil:
			fmt.Fprintln(os.Stderr, "testreport: reading go test's output:", readErr)
			return 2
		case interrupted.Load():
			r.printf("interrupted while building, after %s\n", round(time.Since(r.began)))
			return 130
		case waitErr != nil && r.builtPkgs == 0:
			// The go command refused to start (a bad flag, no such
			// package): running it again would say the same.
			return exitCode(waitErr)
		}
		// A package that did not build fails again below, with its output.
	}
	readErr, waitErr := r.runCommand(flag.Args(), *tick)

	r.summary()
	switch {
	case readErr != nil:
		fmt.Fprintln(os.Stderr, "testreport: reading go test's output:", readErr)
		return 2
	case waitErr != nil:
		return exitCode(waitErr)
	case r.failed > 0 || len(r.failedPkgs) > 0:
		return 1
	}
	return 0
}

// runCommand runs args, reading its standard output as go test -json's
// events, with the ticker's lines while it runs.
func (r *report) runCommand(args []string, tick time.Duration) (readErr, waitErr error) {
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdin, cmd.Stderr = os.Stdin, os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	stop := make(chan struct{})
	ticked := make(chan struct{})
	go func() {
		defer close(ticked)
		r.ticker(tick, stop)
	}()
	readErr = r.read(out)
	waitErr = cmd.Wait()
	close(stop)
	<-ticked
	return readErr, waitErr
}

// exitCode is the status to exit with for a command that failed: its own,
// or 2 when it did not run or was killed (and says why).
func exitCode(err error) int {
	var exit *exec.ExitError
	if errors.As(err, &exit) && exit.ExitCode() > 0 {
		return exit.ExitCode()
	}
	fmt.Fprintln(os.Stderr, "testreport:", err)
	return 2
}

// buildCommand is the go test command args with -exec true: it builds every
// test binary, and true stands in for each (nothing runs, nothing is
// cached as a result: go test caches no run that used -exec). The flag goes
// last among go test's own, where it overrides an -exec given before it:
// before -args, if any, or at the end (go test reads its flags after the
// packages too).
func buildCommand(args []string) []string {
	out := make([]string, 0, len(args)+2)
	for i, a := range args {
		if a == "-args" || a == "--args" {
			out = append(out, "-exec", "true")
			return append(out, args[i:]...)
		}
		out = append(out, a)
	}
	return append(out, "-exec", "true")
}

// event is one line of `go test -json` (cmd/test2json), and of the build
// events go test -json writes since Go 1.24.
type event struct {
	Time        time.Time
	Action      string
	Package     string
	ImportPath  string // build-output, build-fail
	Test        string
	Elapsed     float64 // seconds
	Output      string
	FailedBuild string
}

// pkgState is what the report knows of one package's run.
type pkgState struct {
	start   time.Time
	shown   bool                 // its start line is printed
	running map[string]time.Time // top-level tests under way (not paused), since when
	began   map[string]time.Time // top-level tests, when they last started or continued
	paused  map[string]bool      // top-level tests that are parallel (they paused)
	output  map[string][]string  // by test name ("" for the package's own)
	passed  int
	failed  []string // tests, in the order they failed
	skipped int
}

// report turns the events into lines; mu protects everything below it,
// shared by the reader and the ticker.
type report struct {
	w       io.Writer
	verbose bool
	slow    time.Duration
	began   time.Time

	mu         sync.Mutex
	lastLine   time.Time
	pkgs       map[string]*pkgState
	build      map[string][]string // build output, by import path
	passed     int
	failed     int
	skipped    int
	failedPkgs []string            // each a package and its failed tests
	skips      map[string][]string // skip reason -> tests
	width      int                 // of the package column
	building   bool                // the -build pass: events say a test binary is ready
	builtPkgs  int                 // packages whose test binary the -build pass saw ready or failing
}

func newReport(w io.Writer, verbose bool, slow time.Duration) *report {
	now := time.Now()
	return &report{w: w, verbose: verbose, slow: slow, began: now, lastLine: now,
		pkgs: map[string]*pkgState{}, build: map[string][]string{}, skips: map[string][]string{}, width: 40}
}

// read consumes go test's standard output to its end. A line that is not
// an event (a message of the go command) is passed through.
func (r *report) read(in io.Reader) error {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &e) != nil {
			r.printf("%s\n", line)
			continue
		}
		r.handle(e)
	}
	return sc.Err()
}

func (r *report) printf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.printfLocked(format, args...)
}

func (r *report) printfLocked(format string, args ...any) {
	_, _ = fmt.Fprintf(r.w, format, args...)
	r.lastLine = time.Now()
}

func (r *report) pkgLocked(name string) *pkgState {
	p := r.pkgs[name]
	if p == nil {
		p = &pkgState{start: time.Now(), running: map[string]time.Time{}, began: map[string]time.Time{}, paused: map[string]bool{}, output: map[string][]string{}}
		r.pkgs[name] = p
	}
	return p
}

func (r *report) handle(e event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.building {
		r.builtLocked(e)
		return
	}
	switch e.Action {
	case "build-output":
		r.build[e.ImportPath] = append(r.build[e.ImportPath], e.Output)
		return
	case "build-fail":
		return
	}
	if e.Package == "" {
		return
	}
	p := r.pkgLocked(e.Package)
	if e.Test == "" {
		r.packageEventLocked(e, p)
		return
	}
	r.showStartLocked(e.Package, p)
	top := !strings.Contains(e.Test, "/")
	switch e.Action {
	case "run", "cont":
		if top {
			p.running[e.Test] = time.Now()
			p.began[e.Test] = time.Now()
		}
	case "pause": // a parallel test waiting for its turn is not under way
		if top {
			delete(p.running, e.Test)
			p.paused[e.Test] = true
		}
	case "output":
		p.output[e.Test] = append(p.output[e.Test], e.Output)
	case "pass", "fail", "skip":
		// A parallel test's own Elapsed ends when its function returns,
		// before its subtests ran: its time is since it continued.
		took := time.Duration(e.Elapsed * float64(time.Second))
		if since, ok := p.began[e.Test]; ok && top {
			took = max(took, time.Since(since))
		}
		switch e.Action {
		case "pass":
			p.passed++
			r.passed++
		case "fail":
			p.failed = append(p.failed, e.Test)
			r.failed++
		case "skip":
			p.skipped++
			r.skipped++
			reason := skipReason(p.output[e.Test])
			r.skips[reason] = append(r.skips[reason], e.Test)
		}
		if top {
			// A slow test gets a line, unless it is parallel: those share
			// the package's parallel phase, which the ticker's lines show.
			slow := took >= r.slow && !p.paused[e.Test]
			delete(p.running, e.Test)
			delete(p.began, e.Test)
			delete(p.paused, e.Test)
			if r.verbose || slow || e.Action == "fail" {
				r.printfLocked("      %-*s %8s  %s %s\n", r.width, short(e.Package), round(took), e.Test, strings.ToUpper(e.Action))
			}
		}
		if e.Action != "fail" {
			delete(p.output, e.Test) // keep only what a failure shows
		}
	}
}

// builtLocked handles an event of the -build pass, where true ran in place
// of each test binary: a package's end says its binary is ready, or that it
// did not build (its output comes when the tests run). A package without
// test files gets no line, as when the tests run.
func (r *report) builtLocked(e event) {
	if e.Package == "" || e.Test != "" {
		return
	}
	switch {
	case e.Action == "pass":
		r.builtPkgs++
		r.printfLocked("built %-*s %8s\n", r.width, short(e.Package), round(time.Since(r.began)))
	case e.Action == "fail" && e.FailedBuild != "":
		r.builtPkgs++
		r.printfLocked("built %-*s %8s  build failed (its output follows when the tests run)\n", r.width, short(e.Package), round(time.Since(r.began)))
	case e.Action == "fail":
		r.builtPkgs++ // true cannot fail; the go command said why on stderr
	}
}

func (r *report) showStartLocked(name string, p *pkgState) {
	if !p.shown {
		p.shown = true
		r.printfLocked("start %s\n", short(name))
	}
}

func (r *report) packageEventLocked(e event, p *pkgState) {
	switch e.Action {
	case "start":
		// Shown at its first test, or a moment later: a package without
		// test files starts and ends at once, and gets no lines.
		p.start = time.Now()
	case "output":
		if !strings.HasSuffix(e.Output, "[no test files]\n") {
			r.showStartLocked(e.Package, p)
		}
		p.output[""] = append(p.output[""], e.Output)
	case "pass", "fail", "skip":
		if e.Action == "skip" && !p.shown {
			delete(r.pkgs, e.Package)
			return
		}
		r.showStartLocked(e.Package, p)
		took := time.Duration(e.Elapsed * float64(time.Second))
		counts := fmt.Sprintf("%d passed", p.passed)
		if len(p.failed) > 0 {
			counts += fmt.Sprintf(", %d failed", len(p.failed))
		}
		if p.skipped > 0 {
			counts += fmt.Sprintf(", %d skipped", p.skipped)
		}
		word := map[string]string{"pass": "ok   ", "fail": "FAIL ", "skip": "ok   "}[e.Action]
		if e.Action == "skip" || p.passed+len(p.failed)+p.skipped == 0 {
			counts = "no tests"
		}
		if e.Action == "fail" {
			r.showFailureLocked(e, p)
		}
		if e.FailedBuild != "" {
			counts = "build failed"
		}
		r.printfLocked("%s %-*s %8s  %s\n", word, r.width, short(e.Package), round(took), counts)
		delete(r.pkgs, e.Package)
	}
}

// showFailureLocked prints what explains a package's failure: the build's
// output, each failed test's output, and the package's own output (a
// panic, TestMain's messages).
func (r *report) showFailureLocked(e event, p *pkgState) {
	if e.FailedBuild != "" {
		r.printfLocked("--- build of %s failed:\n%s", e.FailedBuild, strings.Join(r.build[e.FailedBuild], ""))
	}
	for _, name := range p.failed {
		out := p.output[name]
		if !onlyFramework(out) {
			r.printfLocked("--- %s %s:\n%s", short(e.Package), name, indentLines(out))
		}
	}
	var own []string
	for _, l := range p.output[""] {
		if t := strings.TrimSpace(l); t != "" && t != "FAIL" && t != "PASS" && !strings.HasPrefix(t, "FAIL\t") && !strings.HasPrefix(t, "ok  \t") {
			own = append(own, l)
		}
	}
	if len(own) > 0 && e.FailedBuild == "" {
		r.printfLocked("--- %s output:\n%s", short(e.Package), indentLines(own))
	}
	r.failedPkgs = append(r.failedPkgs, strings.TrimSpace(short(e.Package)+" "+strings.Join(p.failed, " ")))
}

// onlyFramework reports whether a failed test's output holds only the
// testing package's lines about itself (a parent failed by its subtests,
// whose output is shown with them).
func onlyFramework(out []string) bool {
	for _, l := range out {
		t := strings.TrimSpace(l)
		if !strings.HasPrefix(t, "=== ") && !strings.HasPrefix(t, "--- ") {
			return false
		}
	}
	return true
}

func indentLines(out []string) string {
	var b strings.Builder
	for _, l := range out {
		if strings.HasPrefix(l, "=== ") {
			continue // RUN, PAUSE, CONT, NAME: noise in a failure report
		}
		b.WriteString("    ")
		b.WriteString(l)
		if !strings.HasSuffix(l, "\n") {
			b.WriteString("\n")
		}
	}
	return b.String()
}

// skipReason is the message a skipped test gave (its last line that is not
// the testing package's own), without the file:line prefix.
func skipReason(out []string) string {
	for i := len(out) - 1; i >= 0; i-- {
		l := strings.TrimSpace(out[i])
		if l == "" || strings.HasPrefix(l, "=== ") || strings.HasPrefix(l, "--- ") {
			continue
		}
		if j := strings.Index(l, ": "); j > 0 && strings.Contains(l[:j], ".go:") {
			l = l[j+2:]
		}
		return l
	}
	return "no reason given"
}

// ticker shows the start of packages that have run half a second without
// a test yet (a TestMain at work), and says, every d without another line,
// which packages and tests are under way and for how long, or, when none
// is, that go test is building.
func (r *report) ticker(d time.Duration, stop <-chan struct{}) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case now := <-t.C:
			r.mu.Lock()
			for n, p := range r.pkgs {
				if !p.start.IsZero() && now.Sub(p.start) > 500*time.Millisecond {
					r.showStartLocked(n, p)
				}
			}
			if d > 0 && now.Sub(r.lastLine) >= d {
				r.printfLocked("...   %s\n", r.underWayLocked(now))
			}
			r.mu.Unlock()
		}
	}
}

func (r *report) underWayLocked(now time.Time) string {
	if r.building {
		return fmt.Sprintf("%s: building test binaries, %d ready", round(now.Sub(r.began)), r.builtPkgs)
	}
	if len(r.pkgs) == 0 {
		return fmt.Sprintf("%s: building test binaries", round(now.Sub(r.began)))
	}
	names := make([]string, 0, len(r.pkgs))
	for n := range r.pkgs {
		names = append(names, n)
	}
	sort.Strings(names)
	var parts []string
	for _, n := range names {
		p := r.pkgs[n]
		s := fmt.Sprintf("%s %s", short(n), round(now.Sub(p.start)))
		type run struct {
			name  string
			since time.Time
		}
		var runs []run
		for tn, since := range p.running {
			runs = append(runs, run{tn, since})
		}
		sort.Slice(runs, func(i, j int) bool { return runs[i].since.Before(runs[j].since) })
		var rs []string
		for _, x := range runs[:min(3, len(runs))] {
			rs = append(rs, fmt.Sprintf("%s %s", x.name, round(now.Sub(x.since))))
		}
		if len(runs) > 3 {
			rs = append(rs, fmt.Sprintf("%d more", len(runs)-3))
		}
		if len(rs) > 0 {
			s += " (" + strings.Join(rs, ", ") + ")"
		}
		parts = append(parts, s)
	}
	return fmt.Sprintf("%s: running %s", round(now.Sub(r.began)), strings.Join(parts, "; "))
}

// summary prints the skipped tests by reason, the failures' names and the
// counts.
func (r *report) summary() {
	r.mu.Lock()
	defer r.mu.Unlock()
	reasons := make([]string, 0, len(r.skips))
	for k := range r.skips {
		reasons = append(reasons, k)
	}
	sort.Slice(reasons, func(i, j int) bool { return len(r.skips[reasons[i]]) > len(r.skips[reasons[j]]) })
	for _, k := range reasons {
		tests := topLevel(r.skips[k])
		r.printfLocked("skipped %d: %s\n      %s\n", len(r.skips[k]), k, strings.Join(tests, " "))
	}
	for _, p := range r.failedPkgs {
		r.printfLocked("FAILED %s\n", p)
	}
	// Packages that started and never ended: go test was stopped.
	if len(r.pkgs) > 0 {
		r.printfLocked("UNFINISHED: %s\n", r.underWayLocked(time.Now()))
	}
	pkgs := ""
	if len(r.failedPkgs) > 0 {
		pkgs = fmt.Sprintf(" (%d packages failed)", len(r.failedPkgs))
	}
	r.printfLocked("%d passed, %d failed, %d skipped in %s%s\n", r.passed, r.failed, r.skipped, round(time.Since(r.began)), pkgs)
}

// topLevel names the tests, a subtest by its top-level test, each once.
func topLevel(tests []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, t := range tests {
		if i := strings.Index(t, "/"); i > 0 {
			t = t[:i]
		}
		if !seen[t] {
			seen[t] = true
			out = append(out, t)
		}
	}
	return out
}

// short drops the module path's common prefix from a package's name.
func short(pkg string) string {
	const mod = "github.com/pooldriver/pooldriver"
	if pkg == mod {
		return "pooldriver"
	}
	return strings.TrimPrefix(pkg, mod+"/")
}

// round formats a duration for a column: 0.4s, 12.3s, 2m05s.
func round(d time.Duration) string {
	if d < time.Minute {
		return fmt.Sprintf("%.1fs", d.Seconds())
	}
	d = d.Round(time.Second)
	return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
}
