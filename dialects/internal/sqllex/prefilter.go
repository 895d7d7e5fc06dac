package sqllex

// The quick scan that spares most statements the lexer: a text can only
// change the session if it holds one of a few words (SET, TEMP, PREPARE,
// a word with "lock" or "advisory" in it, ...) or bytes ('@', ":=", "/*!").
// It looks at every run of ASCII word bytes, quoted or not: the lexer's
// words and names are such runs or contain them, so the scan finds every
// word a rule could act on.

// trigger is a word without '_' that some rule of flavors f starts from.
type trigger struct {
	word string // lower case
	f    Flavor
}

var triggers = []trigger{
	{"do", Postgres}, {"xa", MySQL},
	{"set", Any}, {"use", MySQL | others},
	{"load", Postgres}, {"hold", Postgres}, {"lock", MySQL}, {"temp", Any},
	{"reset", Any}, {"flush", MySQL},
	{"listen", Postgres}, {"unlock", MySQL}, {"backup", MySQL}, {"pragma", others}, {"attach", others}, {"detach", others},
	{"prepare", Any}, {"discard", Postgres}, {"handler", MySQL}, {"session", others},
	{"unlisten", Postgres},
	{"temporary", Any},
	{"deallocate", Any},
}

const (
	classWord       = 1 // an ASCII word byte
	classUnderscore = 2 // '_', with classWord
	classSpecial    = 4 // a byte some rule of the flavor starts from
)

// scanTable is the quick scan's view of one flavor.
type scanTable struct {
	class [256]uint8
	// first[n] has the bit letterBit[c] set for the first letter c of every
	// trigger word of length n.
	first [11]uint32
}

var (
	scanTables [Any + 1]scanTable
	letterBit  [256]uint32
)

func init() {
	for c := 'a'; c <= 'z'; c++ {
		letterBit[c] = 1 << (c - 'a')
		letterBit[c-'a'+'A'] = 1 << (c - 'a')
	}
	for _, f := range []Flavor{Postgres, MySQL, Any} {
		t := &scanTables[f]
		for c := range t.class {
			if IsWordByte(byte(c)) {
				t.class[c] = classWord
			}
		}
		t.class['_'] |= classUnderscore
		if f&MySQL != 0 {
			t.class['@'], t.class[':'], t.class['/'] = classSpecial, classSpecial, classSpecial
		}
		if f&others != 0 {
			t.class['#'] = classSpecial
		}
		for _, tr := range triggers {
			if tr.f&f != 0 {
				t.first[len(tr.word)] |= letterBit[tr.word[0]]
			}
		}
	}
}

// mayChangeSession reports whether query holds anything a session rule of
// f acts on. It never allocates.
func mayChangeSession(query string, f Flavor) bool {
	t := &scanTables[f&Any]
	for i := 0; i < len(query); {
		k := t.class[query[i]]
		if k == 0 {
			i++
			continue
		}
		if k == classSpecial {
			if special(query, i) {
				return true
			}
			i++
			continue
		}
		j := i + 1
		for j < len(query) {
			c := t.class[query[j]]
			if c&classWord == 0 {
				break
			}
			k |= c
			j++
		}
		w := query[i:j]
		i = j
		if k&classUnderscore != 0 {
			if len(w) >= 4 && triggerName(w, f) {
				return true
			}
		} else if len(w) < len(t.first) && t.first[len(w)]&letterBit[w[0]] != 0 && triggerWord(w, f) {
			return true
		}
	}
	return false
}

// special looks at a special byte of the flavor: '@', '#', and the
// starts of ":=" and "/*!" or "/*M!".
func special(q string, i int) bool {
	switch q[i] {
	case ':':
		return i+1 < len(q) && q[i+1] == '='
	case '/':
		return i+2 < len(q) && q[i+1] == '*' && (q[i+2] == '!' || q[i+2] == 'M')
	}
	return true
}

// triggerWord reports whether w, a run of ASCII word bytes without '_', is
// a trigger word of f.
func triggerWord(w string, f Flavor) bool {
	for _, t := range triggers {
		if t.f&f != 0 && eqFold(w, t.word) {
			return true
		}
	}
	return false
}

// triggerName reports whether w, a run of ASCII word bytes with a '_',
// contains a name some rule of f looks for: all of them have a '_'.
func triggerName(w string, f Flavor) bool {
	return f&Postgres != 0 && (containsFold(w, "set_config") || containsFold(w, "advisory") || containsFold(w, "pg_temp")) ||
		f&(MySQL|others) != 0 && containsFold(w, "lock") ||
		f&others != 0 && (containsFold(w, "session") || containsFold(w, "approle"))
}
