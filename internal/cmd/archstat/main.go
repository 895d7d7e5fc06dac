// Command archstat prints numbers about the structure of one Go package, its
// non-test files, so that a refactoring can be measured before and after.
//
// Usage:
//
//	go run ./internal/cmd/archstat [-v] [-top 10] [-layers 'a.go,b.go;c.go;...'] DIR
//	go run ./internal/cmd/archstat [-v] -covdiff A.out B.out
//	go run ./internal/cmd/archstat -row NAME [-layers ...] [-uses PATH] DIR
//
// for example `go run ./internal/cmd/archstat .` or `... ./pool`.
//
// Arrows. File A has an arrow to file B ≠ A when an identifier in A refers,
// as go/types resolves it, to something declared in B: a package-level func,
// type, var or const; a method (declared where the method is written); a
// struct field or interface method (declared with its type), including the
// embedded fields a promoted selector passes through. Arrows are distinct
// (A, B) pairs, listed with the names that make them; -v lists them all.
//
// Floors. -layers lists the floors from the top (the face) down: files
// separated by ',', floors by ';'. An arrow A → B is upward when A's floor is
// below B's (a lower file uses a higher one). Files not listed are reported
// as "unplaced", and the arrows to or from them are counted apart, neither
// upward nor not. Without -layers the floors are computed: the strongly
// connected components (SCCs) of the arrows are condensed, an SCC's level is
// its longest path to a sink (sinks are 0), and the floors are the levels
// from the highest down. An arrow between SCCs then always goes down; inside
// an SCC (printed in braces) the files are ranked by arrows out − arrows in
// within it, highest first, ties by name, and an arrow to a file ranked
// above its source is upward.
//
// Functions. For each func and method with a body: its lines, from the func
// keyword to the closing brace, and its cyclomatic complexity, 1 + the if,
// for and range statements, the case and comm clauses other than default,
// and the && and || operators, function literals inside it included.
//
// Check. -check prints nothing but what breaks the rules and exits 1 when
// one is broken: more than -max-set files that reach each other (a path of
// arrows leads from each to each: an SCC), and with -layers a file left
// unplaced, a listed file that is not in the package, or an upward arrow.
// make lint runs it, so that a change that ties the files together, or
// climbs back up, fails there rather than in a later review. With -sealed
// PATH it also reports every write of a field declared in package PATH
// and every Lock, Unlock or TryLock called on one (see sealed).
//
// Row. -row NAME prints nothing but the package's row of the table of the
// structure in docs/design.md (see row), which make lint holds against
// the page. -uses PATH counts the exported names of the package PATH that
// the package's files refer to, each function, type, field or method
// once: how much of that package's face it uses.
//
// -covdiff compares two coverage profiles (go test -covermode=count
// -coverprofile): the files with blocks whose counts differ. Two runs of a
// loop, N and 2N times, differ in the files that one iteration executes.
//
// The package is type-checked from the export data `go list -export`
// builds, so it must compile.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

func main() {
	layers := flag.String("layers", "", "floors from the top: files separated by ',', floors by ';'")
	top := flag.Int("top", 10, "how many functions to list by lines and by complexity")
	verbose := flag.Bool("v", false, "list every arrow (with -covdiff: every differing block)")
	covdiff := flag.Bool("covdiff", false, "compare the two coverage profiles given as arguments")
	checkOnly := flag.Bool("check", false, "report only what breaks -max-set and -layers, and exit 1 if anything does")
	maxSet := flag.Int("max-set", 0, "with -check: the most files that may reach each other (0: any number)")
	sealedPkg := flag.String("sealed", "", "with -check: the import path of a package whose fields no code outside it writes or locks")
	rowName := flag.String("row", "", "print only the package's row of docs/design.md's table, named this")
	usesPath := flag.String("uses", "", "also print how many exported names of the package with this import path the package uses (-v: which)")
	flag.Parse()
	var err error
	switch {
	case *covdiff && flag.NArg() == 2:
		err = coverDiff(os.Stdout, flag.Arg(0), flag.Arg(1), *verbose)
	case *checkOnly && flag.NArg() == 1:
		var p *pkg
		if p, err = load(flag.Arg(0)); err == nil {
			broken := check(p, *layers, *maxSet)
			if *sealedPkg != "" {
				broken = append(broken, sealed(p, *sealedPkg)...)
			}
			if len(broken) > 0 {
				_, _ = fmt.Fprintf(os.Stderr, "archstat: %s breaks its layering:\n  %s\n", p.path, strings.Join(broken, "\n  "))
				os.Exit(1)
			}
		}
	case *rowName != "" && flag.NArg() == 1:
		var p *pkg
		if p, err = load(flag.Arg(0)); err == nil {
			printf(os.Stdout, "%s\n", row(p, *rowName, *layers))
			if *usesPath != "" {
				printf(os.Stdout, "%s uses %d exported names of %s.\n", *rowName, len(uses(p, *usesPath)), *usesPath)
			}
		}
	case !*covdiff && flag.NArg() == 1:
		var p *pkg
		if p, err = load(flag.Arg(0)); err == nil {
			report(os.Stdout, p, *layers, *top, *verbose)
			if *usesPath != "" {
				names := uses(p, *usesPath)
				printf(os.Stdout, "\nexported names of %s used: %d\n", *usesPath, len(names))
				if *verbose {
					printf(os.Stdout, "  %s\n", strings.Join(names, "\n  "))
				}
			}
		}
	default:
		flag.Usage()
		os.Exit(2)
	}
	if err != nil {
		_, _ = fmt.Fprintln(os.Stderr, "archstat:", err)
		os.Exit(1)
	}
}

// pkg is one type-checked package; names[i] is the base name of files[i].
type pkg struct {
	path  string
	fset  *token.FileSet
	files []*ast.File
	names []string
	types *types.Package
	info  *types.Info
}

// load type-checks the package in dir, its imports read from the export
// data that `go list -export -deps` builds.
func load(dir string) (*pkg, error) {
	cmd := exec.Command("go", "list", "-export", "-deps", "-json=ImportPath,Dir,GoFiles,CgoFiles,Export,DepOnly", dir)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list %s: %v", dir, err)
	}
	var target struct {
		ImportPath, Dir string
		GoFiles         []string
	}
	exports := map[string]string{}
	for d := json.NewDecoder(strings.NewReader(string(out))); d.More(); {
		var l struct {
			ImportPath, Dir, Export string
			GoFiles, CgoFiles       []string
			DepOnly                 bool
		}
		if err := d.Decode(&l); err != nil {
			return nil, err
		}
		exports[l.ImportPath] = l.Export
		if !l.DepOnly {
			// A file that imports "C" is one of the package's files too
			// (its uses of C are checked by name only: FakeImportC).
			target.ImportPath, target.Dir, target.GoFiles = l.ImportPath, l.Dir, append(l.GoFiles, l.CgoFiles...)
		}
	}
	p := &pkg{path: target.ImportPath, fset: token.NewFileSet()}
	for _, name := range target.GoFiles {
		f, err := parser.ParseFile(p.fset, filepath.Join(target.Dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		p.files, p.names = append(p.files, f), append(p.names, name)
	}
	lookup := func(path string) (io.ReadCloser, error) { return os.Open(exports[path]) }
	conf := types.Config{Importer: importer.ForCompiler(p.fset, "gc", lookup), FakeImportC: true}
	p.info = &types.Info{Uses: map[*ast.Ident]types.Object{}, Selections: map[*ast.SelectorExpr]*types.Selection{}}
	p.types, err = conf.Check(p.path, p.fset, p.files, p.info)
	return p, err
}

type arrow struct{ from, to string }

// arrows returns every arrow of p with the sorted names that make it.
func arrows(p *pkg) map[arrow][]string {
	owner := map[types.Object]string{} // a field → the type it is declared in
	for _, name := range p.types.Scope().Names() {
		if tn, ok := p.types.Scope().Lookup(name).(*types.TypeName); ok {
			if st, ok := tn.Type().Underlying().(*types.Struct); ok {
				for i := range st.NumFields() {
					owner[st.Field(i)] = name
				}
			}
		}
	}
	names := map[arrow]map[string]bool{}
	add := func(from string, obj types.Object) {
		if obj == nil || obj.Pkg() != p.types || !obj.Pos().IsValid() {
			return
		}
		a := arrow{from, filepath.Base(p.fset.Position(obj.Pos()).Filename)}
		if a.to == from {
			return
		}
		if names[a] == nil {
			names[a] = map[string]bool{}
		}
		names[a][label(obj, owner)] = true
	}
	for i, f := range p.files {
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.Ident:
				add(p.names[i], p.info.Uses[n])
			case *ast.SelectorExpr:
				// The embedded fields a promoted field or method is reached through.
				if sel := p.info.Selections[n]; sel != nil {
					t, idx := sel.Recv(), sel.Index()
					for _, j := range idx[:len(idx)-1] {
						if ptr, ok := t.Underlying().(*types.Pointer); ok {
							t = ptr.Elem()
						}
						st, ok := t.Underlying().(*types.Struct)
						if !ok {
							break
						}
						add(p.names[i], st.Field(j))
						t = st.Field(j).Type()
					}
				}
			}
			return true
		})
	}
	out := map[arrow][]string{}
	for a, set := range names {
		for n := range set {
			out[a] = append(out[a], n)
		}
		sort.Strings(out[a])
	}
	return out
}

// label names obj as an arrow lists it: Type.method, Type.field or name.
func label(obj types.Object, owner map[types.Object]string) string {
	if f, ok := obj.(*types.Func); ok && f.Signature().Recv() != nil {
		t := f.Signature().Recv().Type()
		if ptr, ok := t.(*types.Pointer); ok {
			t = ptr.Elem()
		}
		if named, ok := t.(*types.Named); ok {
			return named.Obj().Name() + "." + f.Name()
		}
		return types.TypeString(t, func(*types.Package) string { return "" }) + "." + f.Name()
	}
	if o := owner[obj]; o != "" {
		return o + "." + obj.Name()
	}
	return obj.Name()
}

// check returns what in p breaks the rules -check enforces (see the
// package comment), one line each.
func check(p *pkg, layers string, maxSet int) []string {
	arrs := arrows(p)
	var broken []string
	if maxSet > 0 {
		for _, set := range sccs(p.names, arrs) {
			if len(set) > maxSet {
				broken = append(broken, fmt.Sprintf("%d files reach each other (at most %d): %s", len(set), maxSet, strings.Join(set, " ")))
			}
		}
	}
	if layers == "" {
		return broken
	}
	_, floorOf, up := floors(p.names, arrs, layers)
	present := map[string]bool{}
	for _, n := range p.names {
		present[n] = true
		if _, ok := floorOf[n]; !ok {
			broken = append(broken, n+" is on no floor (-layers)")
		}
	}
	for f := range floorOf {
		if !present[f] {
			broken = append(broken, f+" is on a floor but not in the package")
		}
	}
	var ups []string
	for a, names := range arrs {
		if up[a] {
			ups = append(ups, fmt.Sprintf("upward arrow %s → %s (%s)", a.from, a.to, strings.Join(names, ", ")))
		}
	}
	sort.Strings(ups)
	return append(broken, ups...)
}

// sccs returns the sets of files that reach each other (the SCCs of the
// arrows) with more than one file, each sorted.
func sccs(files []string, arrs map[arrow][]string) [][]string {
	reach := reaches(files, arrs)
	seen := map[string]bool{}
	var out [][]string
	for _, f := range files {
		if seen[f] {
			continue
		}
		var set []string
		for _, g := range files {
			if reach[f][g] && reach[g][f] {
				set = append(set, g)
				seen[g] = true
			}
		}
		if len(set) > 1 {
			sort.Strings(set)
			out = append(out, set)
		}
	}
	return out
}

// reaches returns reach[a][b]: a path of arrows leads from a to b
// (Floyd–Warshall); reach[a][a] always.
func reaches(files []string, arrs map[arrow][]string) map[string]map[string]bool {
	reach := map[string]map[string]bool{}
	for _, f := range files {
		reach[f] = map[string]bool{f: true}
	}
	for a := range arrs {
		reach[a.from][a.to] = true
	}
	for _, k := range files {
		for _, i := range files {
			for _, j := range files {
				reach[i][j] = reach[i][j] || reach[i][k] && reach[k][j]
			}
		}
	}
	return reach
}

// floors returns the floors from the top, the floor of each placed file,
// and the upward arrows; see the package comment.
func floors(files []string, arrs map[arrow][]string, layers string) (fl [][]string, floorOf map[string]int, up map[arrow]bool) {
	floorOf, up = map[string]int{}, map[arrow]bool{}
	if layers != "" {
		for i, layer := range strings.Split(layers, ";") {
			fl = append(fl, nil)
			for _, f := range strings.Split(layer, ",") {
				if f = strings.TrimSpace(f); f != "" {
					fl[i], floorOf[f] = append(fl[i], f), i
				}
			}
		}
		for a := range arrs {
			fa, okA := floorOf[a.from]
			fb, okB := floorOf[a.to]
			up[a] = okA && okB && fa > fb
		}
		return fl, floorOf, up
	}
	reach := reaches(files, arrs)
	// An SCC is named by its first file; level counts the SCCs below.
	scc, members, level := map[string]string{}, map[string][]string{}, map[string]int{}
	for _, f := range files {
		for _, g := range files {
			if reach[f][g] && reach[g][f] {
				scc[f] = g
				members[g] = append(members[g], f)
				break
			}
		}
	}
	var visit func(c string) int
	visit = func(c string) int {
		if _, ok := level[c]; !ok {
			level[c] = 0
			for a := range arrs {
				if scc[a.from] == c && scc[a.to] != c {
					level[c] = max(level[c], visit(scc[a.to])+1)
				}
			}
		}
		return level[c]
	}
	top := 0
	for c := range members {
		top = max(top, visit(c))
	}
	fl = make([][]string, top+1)
	for c, ms := range members {
		score := map[string]int{} // out − in inside the SCC
		for a := range arrs {
			if scc[a.from] == c && scc[a.to] == c {
				score[a.from]++
				score[a.to]--
			}
		}
		sort.Slice(ms, func(i, j int) bool {
			return score[ms[i]] > score[ms[j]] || score[ms[i]] == score[ms[j]] && ms[i] < ms[j]
		})
		rank := map[string]int{}
		for i, f := range ms {
			rank[f], floorOf[f] = i, top-level[c]
		}
		for a := range arrs {
			up[a] = up[a] || scc[a.from] == c && scc[a.to] == c && rank[a.to] < rank[a.from]
		}
		name := strings.Join(ms, " ")
		if len(ms) > 1 {
			name = "{" + name + "}"
		}
		fl[top-level[c]] = append(fl[top-level[c]], name)
	}
	for _, f := range fl {
		sort.Strings(f)
	}
	return fl, floorOf, up
}

type function struct {
	name       string // file:line name
	lines, cyc int
}

// functions returns every func and method of p that has a body.
func functions(p *pkg) []function {
	var fns []function
	for i, f := range p.files {
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			name := fd.Name.Name
			if fd.Recv != nil {
				t := types.ExprString(fd.Recv.List[0].Type)
				if strings.HasPrefix(t, "*") {
					t = "(" + t + ")"
				}
				name = t + "." + name
			}
			start, end := p.fset.Position(fd.Type.Func).Line, p.fset.Position(fd.Body.Rbrace).Line
			fns = append(fns, function{fmt.Sprintf("%s:%d %s", p.names[i], start, name), end - start + 1, complexity(fd.Body)})
		}
	}
	return fns
}

// complexity is 1 + the decision points in body.
func complexity(body ast.Node) int {
	c := 1
	ast.Inspect(body, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.IfStmt, *ast.ForStmt, *ast.RangeStmt:
			c++
		case *ast.CaseClause:
			if n.List != nil {
				c++
			}
		case *ast.CommClause:
			if n.Comm != nil {
				c++
			}
		case *ast.BinaryExpr:
			if n.Op == token.LAND || n.Op == token.LOR {
				c++
			}
		}
		return true
	})
	return c
}

func report(w io.Writer, p *pkg, layers string, top int, verbose bool) {
	arrs := arrows(p)
	fl, floorOf, up := floors(p.names, arrs, layers)
	printf(w, "package %s: %d files (non-test)\n", p.path, len(p.names))
	if layers == "" {
		printf(w, "%s", "automatic floors, from the top: SCCs condensed, floor = longest path to a sink; an arrow\n"+
			"inside an SCC {…} is upward when it goes to a file ranked above its source, the files ranked\n"+
			"by arrows out − in within the SCC, ties by name (printed in rank order):\n")
	} else {
		printf(w, "floors from -layers, from the top; A → B is upward when A's floor is below B's:\n")
	}
	for i, f := range fl {
		printf(w, "  floor %d: %s\n", i+1, strings.Join(f, " "))
	}
	var unplaced []string
	present := map[string]bool{}
	for _, n := range p.names {
		if _, ok := floorOf[n]; !ok {
			unplaced = append(unplaced, n)
		}
		present[n] = true
	}
	for f := range floorOf {
		if !present[f] {
			printf(w, "  (%s is not in the package)\n", f)
		}
	}
	var list []arrow
	nUp, nUnplaced := 0, 0
	for a := range arrs {
		list = append(list, a)
		_, okA := floorOf[a.from]
		_, okB := floorOf[a.to]
		if !okA || !okB {
			nUnplaced++
		} else if up[a] {
			nUp++
		}
	}
	sort.Slice(list, func(i, j int) bool {
		return list[i].from < list[j].from || list[i].from == list[j].from && list[i].to < list[j].to
	})
	printf(w, "\nfiles %d, arrows %d, upward %d (%.1f%%), floors %d\n",
		len(p.names), len(list), nUp, 100*float64(nUp)/float64(max(1, len(list))), len(fl))
	if len(unplaced) > 0 {
		printf(w, "unplaced %d: %s; arrows to or from them %d\n", len(unplaced), strings.Join(unplaced, " "), nUnplaced)
	}
	for _, which := range []string{"upward", "all"} {
		if which == "all" && !verbose {
			break
		}
		printf(w, "\n%s arrows:\n", which)
		for _, a := range list {
			if up[a] || which == "all" {
				printf(w, "  %s → %s (%s)\n", a.from, a.to, strings.Join(arrs[a], ", "))
			}
		}
	}
	fns := functions(p)
	total := 0
	for _, f := range fns {
		total += f.lines
	}
	printf(w, "\nfunctions %d, lines in them %d\n", len(fns), total)
	for _, by := range []string{"lines", "complexity"} {
		sort.Slice(fns, func(i, j int) bool {
			a, b := [2]int{fns[i].lines, fns[i].cyc}, [2]int{fns[j].lines, fns[j].cyc}
			if by == "complexity" {
				a[0], a[1], b[0], b[1] = a[1], a[0], b[1], b[0]
			}
			return a[0] > b[0] || a[0] == b[0] && (a[1] > b[1] || a[1] == b[1] && fns[i].name < fns[j].name)
		})
		printf(w, "\ntop %d by %s:\n  lines  cyclo  function\n", top, by)
		for _, f := range fns[:min(top, len(fns))] {
			printf(w, "  %5d  %5d  %s\n", f.lines, f.cyc, f.name)
		}
	}
}

// printf writes to the report; a failed write of stdout leaves nothing to
// report it to.
func printf(w io.Writer, format string, a ...any) { _, _ = fmt.Fprintf(w, format, a...) }
