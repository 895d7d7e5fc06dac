package main

import (
	"fmt"
	"go/ast"
	"go/token"
	"go/types"
	"sort"
)

// sealed reports, in p, what reaches into the state of the package whose
// import path is sealedPath from outside it: a write of one of its
// structs' fields (an assignment, an op-assignment, ++ or --, however
// deep the selector: x.St.Holds = 0), and a call of Lock, Unlock,
// TryLock, RLock or RUnlock on one of its fields (x.Mu.Lock()); and a
// read of one of its fields whose type is one of its own structs (x.St,
// x.St.Tx): the state behind its locks, which its methods read, or hand
// to a caller under its lock. The sealed package's own methods are the
// way in: its lock rules live where its locks are. Other reads (a handle,
// a setting fixed when it was made) are not reported.
func sealed(p *pkg, sealedPath string) []string {
	field := func(e ast.Expr) (string, bool) {
		sel, ok := ast.Unparen(e).(*ast.SelectorExpr)
		if !ok {
			return "", false
		}
		s := p.info.Selections[sel]
		if s == nil || s.Kind() != types.FieldVal {
			return "", false
		}
		v := s.Obj()
		if v.Pkg() == nil || v.Pkg().Path() != sealedPath {
			return "", false
		}
		return types.ExprString(sel), true
	}
	var found []string
	at := func(pos token.Pos, what string) {
		found = append(found, fmt.Sprintf("%s: %s", p.fset.Position(pos), what))
	}
	// state reports a selector of a field whose type is a struct the
	// sealed package declares.
	state := func(sel *ast.SelectorExpr) bool {
		s := p.info.Selections[sel]
		if s == nil || s.Kind() != types.FieldVal || s.Obj().Pkg() == nil || s.Obj().Pkg().Path() != sealedPath {
			return false
		}
		named, ok := types.Unalias(s.Obj().Type()).(*types.Named)
		if !ok || named.Obj().Pkg() == nil || named.Obj().Pkg().Path() != sealedPath {
			return false
		}
		_, isStruct := named.Underlying().(*types.Struct)
		return isStruct
	}
	for _, f := range p.files {
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.SelectorExpr:
				if state(n) {
					at(n.Pos(), "reads "+types.ExprString(n))
				}
			case *ast.AssignStmt:
				if n.Tok == token.DEFINE {
					return true
				}
				for _, lhs := range n.Lhs {
					if name, ok := field(lhs); ok {
						at(n.Pos(), "writes "+name)
					}
				}
			case *ast.IncDecStmt:
				if name, ok := field(n.X); ok {
					at(n.Pos(), "writes "+name)
				}
			case *ast.CallExpr:
				sel, ok := ast.Unparen(n.Fun).(*ast.SelectorExpr)
				if !ok {
					return true
				}
				switch sel.Sel.Name {
				case "Lock", "Unlock", "TryLock", "RLock", "RUnlock":
					if name, ok := field(sel.X); ok {
						at(n.Pos(), "locks "+name+" ("+sel.Sel.Name+")")
					}
				}
			}
			return true
		})
	}
	sort.Strings(found)
	return found
}
