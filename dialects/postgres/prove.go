package postgres

// fnBodies is what the catalog holds under one function name: whether
// every body read as harmless but for its calls, and the names those
// calls make that are not on the list.
type fnBodies struct {
	ok    bool
	calls []string
}

// maxCallDepth bounds how deep a chain of calls provedFunctions follows:
// a name proved only through a longer chain stays a change.
const maxCallDepth = 8

// provedFunctions returns the names whose bodies read as harmless and
// whose calls, followed through the bodies of the names they call, reach
// only names that do too, by chains of at most maxCallDepth calls. A name
// no body is known for (a function of another language, a built-in not
// on the list, none at all) is no proof, and neither is a cycle: a name
// that reaches itself.
func provedFunctions(bodies map[string]*fnBodies) map[string]struct{} {
	// height is the longest chain of calls from a name, or never where
	// one reaches what is not proved or a cycle; visiting marks the
	// names on the chain being followed.
	const never, visiting = -1, -2
	height := make(map[string]int, len(bodies))
	var follow func(name string) int
	follow = func(name string) int {
		if h, seen := height[name]; seen {
			if h == visiting {
				return never
			}
			return h
		}
		b := bodies[name]
		if b == nil || !b.ok {
			height[name] = never
			return never
		}
		height[name] = visiting
		h := 0
		for _, c := range b.calls {
			ch := follow(c)
			if ch == never {
				h = never
				break
			}
			h = max(h, ch+1)
		}
		height[name] = h
		return h
	}
	harmless := make(map[string]struct{})
	for name := range bodies {
		if h := follow(name); h != never && h <= maxCallDepth {
			harmless[name] = struct{}{}
		}
	}
	return harmless
}
