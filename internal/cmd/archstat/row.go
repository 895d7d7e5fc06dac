package main

import (
	"fmt"
	"go/types"
	"sort"
	"strings"
)

// row is p's line in the table of the structure in docs/design.md,
// named name: its files, its arrows, how many of them run upward (on the
// floors of layers, or the computed ones), and its sets of files that
// reach each other, largest first, each set's files without ".go":
//
//	| root | 38 | 143 | 0 | 5 {conn, hold, rows, stmt, tx}; 2 {config, settings}, {dial, trace} |
func row(p *pkg, name, layers string) string {
	arrs := arrows(p)
	_, floorOf, up := floors(p.names, arrs, layers)
	nUp := 0
	for a := range arrs {
		_, okA := floorOf[a.from]
		_, okB := floorOf[a.to]
		if okA && okB && up[a] {
			nUp++
		}
	}
	bySize := map[int][]string{}
	var sizes []int
	for _, set := range sccs(p.names, arrs) {
		n := len(set)
		if bySize[n] == nil {
			sizes = append(sizes, n)
		}
		bySize[n] = append(bySize[n], "{"+strings.ReplaceAll(strings.Join(set, ", "), ".go", "")+"}")
	}
	sort.Sort(sort.Reverse(sort.IntSlice(sizes)))
	var parts []string
	for _, n := range sizes {
		sort.Strings(bySize[n])
		parts = append(parts, fmt.Sprintf("%d %s", n, strings.Join(bySize[n], ", ")))
	}
	sets := strings.Join(parts, "; ")
	if sets == "" {
		sets = "none"
	}
	return fmt.Sprintf("| %s | %d | %d | %d | %s |", name, len(p.names), len(arrs), nUp, sets)
}

// uses returns the exported names of the package whose import path is
// path that p's files refer to: its functions, types, variables and
// constants, and the fields and methods of its types, each once (a field
// or method is named with its type: Conn.Exec).
func uses(p *pkg, path string) []string {
	seen := map[types.Object]bool{}
	var names []string
	for _, obj := range p.info.Uses {
		if obj == nil || obj.Pkg() == nil || obj.Pkg().Path() != path || !obj.Exported() || seen[obj] {
			continue
		}
		seen[obj] = true
		names = append(names, qualified(obj))
	}
	sort.Strings(names)
	return names
}

// qualified is obj's name, a field's or method's with its type's.
func qualified(obj types.Object) string {
	switch o := obj.(type) {
	case *types.Func:
		if recv := o.Type().(*types.Signature).Recv(); recv != nil {
			return typeName(recv.Type()) + "." + o.Name()
		}
	case *types.Var:
		if o.IsField() {
			if o.Origin() != nil && o.Origin() != o {
				o = o.Origin()
			}
			return "(field) " + o.Name()
		}
	}
	return obj.Name()
}

// typeName is the name of t, a method's receiver type, without its
// package or pointer.
func typeName(t types.Type) string {
	if p, ok := t.(*types.Pointer); ok {
		t = p.Elem()
	}
	if n, ok := t.(*types.Named); ok {
		return n.Obj().Name()
	}
	return t.String()
}
