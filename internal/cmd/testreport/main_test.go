package main

import (
	"strings"
	"testing"
	"time"
)

// A stream as go test -json writes it: a package without test files, one
// that passes with a skip, one whose subtest fails, one that does not build.
const stream = `{"Action":"start","Package":"example.com/m/none"}
{"Action":"output","Package":"example.com/m/none","Output":"?   \texample.com/m/none\t[no test files]\n"}
{"Action":"skip","Package":"example.com/m/none","Elapsed":0}
{"Action":"start","Package":"example.com/m/a"}
{"Action":"run","Package":"example.com/m/a","Test":"TestOK"}
{"Action":"pass","Package":"example.com/m/a","Test":"TestOK","Elapsed":0.01}
{"Action":"run","Package":"example.com/m/a","Test":"TestLong"}
{"Action":"output","Package":"example.com/m/a","Test":"TestLong","Output":"    a_test.go:9: long test, skipped by -short: make test-all runs it\n"}
{"Action":"output","Package":"example.com/m/a","Test":"TestLong","Output":"--- SKIP: TestLong (0.00s)\n"}
{"Action":"skip","Package":"example.com/m/a","Test":"TestLong","Elapsed":0}
{"Action":"run","Package":"example.com/m/a","Test":"TestSlow"}
{"Action":"pass","Package":"example.com/m/a","Test":"TestSlow","Elapsed":12.5}
{"Action":"run","Package":"example.com/m/a","Test":"TestPar"}
{"Action":"pause","Package":"example.com/m/a","Test":"TestPar"}
{"Action":"cont","Package":"example.com/m/a","Test":"TestPar"}
{"Action":"pass","Package":"example.com/m/a","Test":"TestPar","Elapsed":15}
{"Action":"pass","Package":"example.com/m/a","Elapsed":12.6}
{"Action":"start","Package":"example.com/m/b"}
{"Action":"run","Package":"example.com/m/b","Test":"TestX"}
{"Action":"run","Package":"example.com/m/b","Test":"TestX/sub"}
{"Action":"output","Package":"example.com/m/b","Test":"TestX/sub","Output":"    b_test.go:7: boom\n"}
{"Action":"output","Package":"example.com/m/b","Test":"TestX/sub","Output":"--- FAIL: TestX/sub (0.00s)\n"}
{"Action":"fail","Package":"example.com/m/b","Test":"TestX/sub","Elapsed":0}
{"Action":"output","Package":"example.com/m/b","Test":"TestX","Output":"--- FAIL: TestX (0.00s)\n"}
{"Action":"fail","Package":"example.com/m/b","Test":"TestX","Elapsed":0}
{"Action":"output","Package":"example.com/m/b","Output":"FAIL\texample.com/m/b\t0.01s\n"}
{"Action":"fail","Package":"example.com/m/b","Elapsed":0.01}
{"ImportPath":"example.com/m/c [example.com/m/c.test]","Action":"build-output","Output":"c_test.go:3:27: undefined: nope\n"}
{"ImportPath":"example.com/m/c [example.com/m/c.test]","Action":"build-fail"}
{"Action":"start","Package":"example.com/m/c"}
{"Action":"fail","Package":"example.com/m/c","Elapsed":0,"FailedBuild":"example.com/m/c [example.com/m/c.test]"}
go: a line of the go command's own
`

func TestReport(t *testing.T) {
	var out strings.Builder
	r := newReport(&out, false, 10*time.Second)
	if err := r.read(strings.NewReader(stream)); err != nil {
		t.Fatal(err)
	}
	r.summary()
	got := out.String()
	t.Logf("report:\n%s", got)

	for _, want := range []string{
		"start example.com/m/a\n",
		"TestSlow PASS\n",                  // slow enough for a line of its own
		"12.6s  3 passed, 1 skipped\n",     // the package's end
		"--- example.com/m/b TestX/sub:\n", // a failure's output
		"b_test.go:7: boom",
		"--- build of example.com/m/c [example.com/m/c.test] failed:\n",
		"undefined: nope",
		"build failed\n",
		"go: a line of the go command's own\n",
		"skipped 1: long test, skipped by -short: make test-all runs it\n      TestLong\n",
		"FAILED example.com/m/b TestX/sub TestX\n",
		"3 passed, 2 failed, 1 skipped in ",
		"(2 packages failed)\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q", want)
		}
	}
	for _, unwanted := range []string{
		"example.com/m/none",         // no test files: no lines
		"TestOK",                     // quick and passed
		"--- example.com/m/b TestX:", // its output is its subtest's
		"--- example.com/m/b output", // only the FAIL line of go test's
		"=== RUN",                    // noise in a failure report
	} {
		if strings.Contains(got, unwanted) {
			t.Errorf("unwanted %q", unwanted)
		}
	}
}

func TestSkipReason(t *testing.T) {
	for _, c := range []struct {
		out  []string
		want string
	}{
		{[]string{"=== RUN   TestA\n", "    a_test.go:12: no server\n", "--- SKIP: TestA (0.00s)\n"}, "no server"},
		{[]string{"--- SKIP: TestA (0.00s)\n"}, "no reason given"},
		{[]string{"    a reason: with a colon\n"}, "a reason: with a colon"},
	} {
		if got := skipReason(c.out); got != c.want {
			t.Errorf("skipReason(%q) = %q, want %q", c.out, got, c.want)
		}
	}
}

// The -build pass's stream: true ran in place of each test binary.
const builtStream = `{"Action":"start","Package":"example.com/m/none"}
{"Action":"output","Package":"example.com/m/none","Output":"?   \texample.com/m/none\t[no test files]\n"}
{"Action":"skip","Package":"example.com/m/none","Elapsed":0}
{"Action":"start","Package":"example.com/m/a"}
{"Action":"output","Package":"example.com/m/a","Output":"ok  \texample.com/m/a\t0.001s\n"}
{"Action":"pass","Package":"example.com/m/a","Elapsed":0.001}
{"ImportPath":"example.com/m/c [example.com/m/c.test]","Action":"build-output","Output":"c_test.go:3:27: undefined: nope\n"}
{"ImportPath":"example.com/m/c [example.com/m/c.test]","Action":"build-fail"}
{"Action":"start","Package":"example.com/m/c"}
{"Action":"fail","Package":"example.com/m/c","Elapsed":0,"FailedBuild":"example.com/m/c [example.com/m/c.test]"}
`

func TestBuildPass(t *testing.T) {
	var out strings.Builder
	r := newReport(&out, false, 10*time.Second)
	r.building = true
	if err := r.read(strings.NewReader(builtStream)); err != nil {
		t.Fatal(err)
	}
	r.mu.Lock()
	tick := r.underWayLocked(time.Now())
	r.mu.Unlock()
	r.building = false
	got := out.String()
	t.Logf("build pass:\n%s", got)
	for _, want := range []string{"built example.com/m/a ", "built example.com/m/c ", "build failed"} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q", want)
		}
	}
	for _, unwanted := range []string{"example.com/m/none", "undefined: nope", "start ", "ok  "} {
		if strings.Contains(got, unwanted) {
			t.Errorf("unwanted %q", unwanted)
		}
	}
	if r.builtPkgs != 2 || r.passed+r.failed+r.skipped != 0 || len(r.pkgs) != 0 {
		t.Errorf("after the build pass: %d built, %d/%d/%d counted, %d packages under way", r.builtPkgs, r.passed, r.failed, r.skipped, len(r.pkgs))
	}
	if !strings.HasSuffix(tick, "building test binaries, 2 ready") {
		t.Errorf("the ticker's line while building: %q", tick)
	}
}

func TestBuildCommand(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"go test -json -race ./...", "go test -json -race ./... -exec true"},
		{"go test -json -exec echo ./... -run X", "go test -json -exec echo ./... -run X -exec true"},
		{"go test -json ./... -args -x 1", "go test -json ./... -exec true -args -x 1"},
	} {
		if got := strings.Join(buildCommand(strings.Fields(c.in)), " "); got != c.want {
			t.Errorf("buildCommand(%s) = %s, want %s", c.in, got, c.want)
		}
	}
}
