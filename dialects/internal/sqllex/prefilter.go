package sqllex

import "strings"

// The quick scan that spares most statements the lexer: a text can only
// change the session if it holds one of a few words (SET, TEMP, PREPARE,
// a word with "lock" or "advisory" in it, ...), bytes ('@', ":=", "/*!")
// or, for PostgreSQL, the U&" of a name written with Unicode escapes.
// It looks at every run of ASCII word bytes, quoted or not: the lexer's
// words and names are such runs or contain them, so the scan finds every
// word a rule could act on. Most keywords (SET, DO, LOCK, ...) count only
// first in a statement; in a text without comments, such a word that
// follows anything but white space since the start or a ';' cannot be
// first in any reading of the text, so UPDATE t SET a = 1 needs no lexer.

// trigger is a word without '_' that some rule of flavors f starts from.
type trigger struct {
	word  string // lower case
	f     Flavor
	start bool // every rule for it needs it first in its statement
}

var triggers = []trigger{
	{"do", Postgres, true}, {"xa", MySQL, true},
	{"set", Any, true}, {"use", MySQL | others, true},
	{"load", Postgres, true}, {"hold", Postgres, false}, {"lock", MySQL, true}, {"temp", Any, false},
	{"reset", Any, true}, {"flush", MySQL, true},
	{"listen", Postgres, true}, {"unlock", MySQL, true}, {"backup", MySQL, true},
	{"pragma", others, true}, {"attach", others, true}, {"detach", others, true},
	{"prepare", Any, false}, {"discard", Postgres, true}, {"handler", MySQL, true}, {"session", others, false},
	{"unlisten", Postgres, true}, {"setval", Postgres | MySQL, false},
	{"temporary", Any, false},
	{"deallocate", Any, true},
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
		if f&Postgres != 0 {
			t.class['&'] = classSpecial
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
	comments := -1 // whether query has a comment: 0 or 1 once known
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
		w, start := query[i:j], i
		i = j
		if k&classUnderscore != 0 {
			if len(w) >= 4 && triggerName(w, f) {
				return true
			}
			continue
		}
		if len(w) >= len(t.first) || t.first[len(w)]&letterBit[w[0]] == 0 {
			continue
		}
		found, startOnly := triggerWord(w, f)
		if !found {
			continue
		}
		if !startOnly || mayStartStatement(query, start) {
			return true
		}
		// Words such as SET count only first in a statement: UPDATE t SET
		// a = 1 needs no lexing. Only a comment could hide what comes
		// before this one.
		if comments < 0 {
			comments = 0
			if strings.Contains(query, "--") || strings.Contains(query, "*/") || strings.IndexByte(query, '#') >= 0 {
				comments = 1
			}
		}
		if comments == 1 {
			return true
		}
	}
	return false
}

// mayStartStatement reports whether the word at q[i] follows nothing but
// white space since the start of q or a ';'.
func mayStartStatement(q string, i int) bool {
	for i--; i >= 0; i-- {
		switch q[i] {
		case ' ', '\t', '\n', '\r', '\f', '\v':
		case ';':
			return true
		default:
			return false
		}
	}
	return true
}

// special looks at a special byte of the flavor: '@', '#', the starts of
// ":=" and "/*!" or "/*M!", and PostgreSQL's &", which may end the U&" of
// a name whose escapes spell any name (U&"set\005fconfig") where no run of
// word bytes shows it. The U is not checked: special must stay small
// enough to be inlined into the scan's loop, or every text pays.
func special(q string, i int) bool {
	switch q[i] {
	case ':':
		return i+1 < len(q) && q[i+1] == '='
	case '/':
		return i+2 < len(q) && q[i+1] == '*' && (q[i+2] == '!' || q[i+2] == 'M')
	case '&':
		return i+1 < len(q) && q[i+1] == '"'
	}
	return true
}

// triggerWord reports whether w, a run of ASCII word bytes without '_', is
// a trigger word of f, and whether it counts only first in a statement.
func triggerWord(w string, f Flavor) (found, startOnly bool) {
	for _, t := range triggers {
		if t.f&f != 0 && eqFold(w, t.word) {
			return true, t.start
		}
	}
	return false, false
}

// triggerName reports whether w, a run of ASCII word bytes with a '_',
// contains a name some rule of f looks for: all of them have a '_'.
func triggerName(w string, f Flavor) bool {
	return f&Postgres != 0 && (containsFold(w, "set_config") || containsFold(w, "advisory") || containsFold(w, "pg_temp")) ||
		f&(MySQL|others) != 0 && containsFold(w, "lock") ||
		f&MySQL != 0 && containsFold(w, "last_insert_id") ||
		f&others != 0 && (containsFold(w, "session") || containsFold(w, "approle"))
}
