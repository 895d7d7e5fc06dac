package main

import (
	"os"
	"strings"
	"testing"
)

func TestTiny(t *testing.T) {
	p, err := load("./testdata/tiny")
	if err != nil {
		t.Fatal(err)
	}
	arrs := arrows(p)
	want := map[arrow]string{
		{"face.go", "mid.go"}:  "Mid, Mid.Base, Mid.Run",
		{"face.go", "base.go"}: "Base.Size",
		{"mid.go", "base.go"}:  "Base, Base.Size",
		{"base.go", "mid.go"}:  "Mid, Mid.Base",
	}
	for a, names := range want {
		if got := strings.Join(arrs[a], ", "); got != names {
			t.Errorf("%s → %s: %q, want %q", a.from, a.to, got, names)
		}
	}
	if len(arrs) != len(want) {
		t.Errorf("%d arrows, want %d: %v", len(arrs), len(want), arrs)
	}

	// Given floors: base.go → mid.go goes up; util.go is unplaced.
	fl, floorOf, up := floors(p.names, arrs, "face.go;mid.go;base.go")
	if len(fl) != 3 || !up[arrow{"base.go", "mid.go"}] || up[arrow{"mid.go", "base.go"}] {
		t.Errorf("layers: floors %v, upward %v", fl, up)
	}
	if _, ok := floorOf["util.go"]; ok {
		t.Error("util.go placed")
	}

	// Automatic: face.go above the SCC {base.go mid.go}, which ties and so
	// ranks base.go first: mid.go → base.go is the upward one.
	fl, _, up = floors(p.names, arrs, "")
	if got := strings.Join(fl[0], " ") + "; " + strings.Join(fl[1], " "); got != "face.go; util.go {base.go mid.go}" {
		t.Errorf("automatic floors %q", got)
	}
	n := 0
	for _, u := range up {
		if u {
			n++
		}
	}
	if n != 1 || !up[arrow{"mid.go", "base.go"}] {
		t.Errorf("automatic upward %v", up)
	}

	// Check: the SCC of two breaks a set of one; the given floors leave
	// util.go unplaced and base.go → mid.go upward.
	if got := check(p, "", 2); len(got) != 0 {
		t.Errorf("check, at most 2 reaching each other: %q", got)
	}
	if got := check(p, "", 1); len(got) != 1 || !strings.Contains(got[0], "2 files reach each other (at most 1): base.go mid.go") {
		t.Errorf("check, at most 1: %q", got)
	}
	got := check(p, "face.go;mid.go;base.go;gone.go", 0)
	wantBroken := []string{"util.go is on no floor (-layers)", "gone.go is on a floor but not in the package", "upward arrow base.go → mid.go (Mid, Mid.Base)"}
	if strings.Join(got, "|") != strings.Join(wantBroken, "|") {
		t.Errorf("check with floors: %q, want %q", got, wantBroken)
	}
	if got := check(p, "face.go;util.go,mid.go,base.go", 2); len(got) != 0 {
		t.Errorf("check, one floor for the SCC: %q", got)
	}

	for _, f := range functions(p) {
		if strings.HasSuffix(f.name, "Mid.Run") && (f.cyc != 8 || f.lines != 18) {
			t.Errorf("%s: lines %d, complexity %d; want 18, 8", f.name, f.lines, f.cyc)
		}
		if strings.HasSuffix(f.name, " twice") && f.cyc != 1 {
			t.Errorf("%s: complexity %d", f.name, f.cyc)
		}
	}
}

func TestCoverDiff(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) string {
		path := dir + "/" + name
		if err := os.WriteFile(path, []byte("mode: count\n"+s), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	a := write("a.out", "m/x.go:1.1,2.2 1 5\nm/x.go:3.1,4.2 1 0\nm/y.go:1.1,2.2 1 7\n")
	b := write("b.out", "m/x.go:1.1,2.2 1 10\nm/x.go:3.1,4.2 1 0\nm/y.go:1.1,2.2 1 7\n")
	var out strings.Builder
	if err := coverDiff(&out, a, b, false); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "       2      1      1       1  m/x.go\n") ||
		strings.Contains(out.String(), "y.go") ||
		!strings.Contains(out.String(), "1 of 2 files") {
		t.Errorf("output:\n%s", out.String())
	}
}

// TestRow: the table row and the names used, on tiny.
func TestRow(t *testing.T) {
	p, err := load("./testdata/tiny")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := row(p, "tiny", ""), "| tiny | 4 | 4 | 1 | 2 {base, mid} |"; got != want {
		t.Errorf("row %q, want %q", got, want)
	}
	// Given floors with util.go unplaced: base.go → mid.go is the one up.
	if got, want := row(p, "tiny", "face.go;mid.go;base.go"), "| tiny | 4 | 4 | 1 | 2 {base, mid} |"; got != want {
		t.Errorf("row with floors %q, want %q", got, want)
	}
	// Its own exported names its files use (a definition is no use):
	// Open and Mid.name are not among them.
	if got, want := strings.Join(uses(p, p.path), ", "), "(field) Base, (field) Size, Base, Mid, Mid.Run"; got != want {
		t.Errorf("uses %q, want %q", got, want)
	}
}

func TestSealed(t *testing.T) {
	p, err := load("./testdata/sealed/outer")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, r := range sealed(p, "github.com/pooldriver/pooldriver/internal/cmd/archstat/testdata/sealed/inner") {
		_, what, _ := strings.Cut(r, ": ")
		got[what] = true
	}
	want := []string{"writes c.Count", "locks c.Mu (Lock)", "reads c.St", "locks c.Mu (Unlock)"}
	for _, w := range want {
		if !got[w] {
			t.Errorf("sealed does not report %q", w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("sealed reports %d places, want %d: %v", len(got), len(want), got)
	}
}
