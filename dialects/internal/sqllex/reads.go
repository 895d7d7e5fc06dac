package sqllex

import "strings"

// ReadsOnly reports whether query, read as PostgreSQL, is one statement
// that only reads, so that a standby may run it: a SELECT (or WITH …
// SELECT, VALUES, TABLE, any of them in parentheses) that writes and
// locks nothing by its words (no INTO, FOR UPDATE or FOR SHARE, no
// data-modifying WITH, no other statement after it) and calls nothing but
// built-ins (CallsOf) that write nothing (not nextval, setval, pg_notify,
// the advisory locks, the large objects, txid_current, set_config). It
// says false wherever it is unsure: a word it cannot place, a call of a
// user's function (which may write), a text the lexer reads two ways.
// Code that runs unseen (a view's or a policy's functions, a user's
// operator or cast) is not read: on a standby a write there is refused
// (and pooldriver runs the statement again on the primary), but a
// standby lets such code do what a standby allows (a session's settings
// and locks) where the primary would have done it.
func ReadsOnly(query string) bool {
	return readsMemo.Get(query)
}

var readsMemo = NewMemo(func(q string) bool {
	if CallsOf(q, Postgres) != CallsKnown {
		return false
	}
	ok, backslash := readsOnly(q, false)
	if ok && backslash {
		ok, _ = readsOnly(q, true)
	}
	return ok
})

// readsOnly is ReadsOnly's reading of the words, lexed with or without
// backslash escapes in strings; backslash reports a string that held one.
func readsOnly(q string, escapes bool) (ok, backslash bool) {
	l := newLexer(q, false, escapes)
	first, ended := true, false
	for {
		t := l.next()
		if l.backslash {
			backslash = true
		}
		switch t.kind {
		case kEOF:
			return !first, backslash
		case kBad:
			return false, backslash
		case kSemi:
			ended = true
			continue
		case kOpen:
			if ended {
				return false, backslash
			}
			continue
		}
		if ended {
			return false, backslash // a second statement
		}
		if t.kind != kWord && t.kind != kIdent {
			continue // a quoted name is checked as a word: "nextval"(...) calls it
		}
		w := strings.ToLower(t.text)
		if first {
			if w != "select" && w != "with" && w != "values" && w != "table" {
				return false, backslash
			}
			first = false
			continue
		}
		if _, no := readsClauses[w]; no && t.kind == kWord {
			return false, backslash
		}
		if writerName(w) {
			return false, backslash
		}
	}
}

// writerName reports a name, in lower case, of a built-in that writes or
// whose answer is the session's: readsWriters, the advisory locks, the
// large objects.
func writerName(w string) bool {
	_, no := readsWriters[w]
	return no || strings.HasPrefix(w, "pg_advisory") || strings.HasPrefix(w, "pg_try_advisory") || strings.HasPrefix(w, "lo_")
}

// NamesWriter reports whether text, a function's body, names a built-in
// that writes or whose answer is the session's (writerName) as a word or
// a quoted name, however it stands: a body that does may not count as a
// read (Shadows.Reads), whatever the call rules make of it. Text the
// lexer cannot read with certainty names one.
func NamesWriter(text string) bool {
	for _, escapes := range []bool{false, true} {
		l := newLexer(text, false, escapes)
		for {
			t := l.next()
			if t.kind == kBad {
				return true
			}
			if t.kind == kEOF {
				break
			}
			if (t.kind == kWord || t.kind == kIdent) && writerName(strings.ToLower(t.text)) {
				return true
			}
		}
		if !l.backslash {
			break
		}
	}
	return false
}

// ReadsOnStandby reports whether s, a reading of the server's catalog,
// proves that a standby runs query as the primary would: its words are
// ReadsOnly's, but for calls of functions not on the list, every one of
// which s proves a read (Shadows.Reads: a user's function that
// PostgreSQL runs read-only, calling nothing that writes or answers for
// the session, whichever overload a call resolves to); it names nothing s
// says runs code its text does not show (Refs.Meets), and no relation a
// standby answers differently (Shadows.Standby). Without a reading
// nothing is proved: the proof fails closed.
func ReadsOnStandby(query string, s *Shadows) bool {
	if s == nil {
		return false
	}
	v := readsCallsMemo.Get(query)
	if !v.ok {
		return false
	}
	for _, n := range v.names {
		if _, ok := s.Reads[n]; !ok {
			return false
		}
	}
	return !v.refs.Meets(s) && !v.refs.NamesAny(s.Standby)
}

// readsCalls is what ReadsOnStandby needs of a text, once: whether its
// words read as ReadsOnly's but for its calls of functions not on the
// list (ok), their names, and its refs.
type readsCalls struct {
	ok    bool
	names []string
	refs  *Refs
}

var readsCallsMemo = NewMemo(func(q string) readsCalls {
	var names []string
	switch CallsOf(q, Postgres) {
	case CallsKnown:
	case CallsUnknown:
		var ok bool
		if names, ok = UnknownCalls(q); !ok || len(names) == 0 {
			return readsCalls{}
		}
	default:
		return readsCalls{}
	}
	ok, backslash := readsOnly(q, false)
	if ok && backslash {
		ok, _ = readsOnly(q, true)
	}
	if !ok {
		return readsCalls{}
	}
	return readsCalls{ok: true, names: names, refs: RefsOf(q, Postgres)}
})

// readsClauses are the words after which a SELECT may write or lock: its
// clauses (INTO, FOR UPDATE, FOR SHARE, FOR NO KEY UPDATE, FOR KEY SHARE)
// and a data-modifying WITH's statements. Quoted, they are names.
var readsClauses = set(`into update share insert delete merge copy call do execute lock`)

// readsWriters are the built-ins that write, or whose answer is the
// session's (currval, lastval), by name, quoted or not.
var readsWriters = set(`nextval setval currval lastval pg_notify txid_current txid_current_if_assigned
	pg_current_xact_id set_config lowrite loread pg_stat_reset pg_stat_reset_shared
	pg_stat_reset_single_table_counters pg_stat_reset_single_function_counters pg_stat_reset_slru
	pg_stat_reset_replication_slot pg_create_restore_point pg_switch_wal
	pg_create_physical_replication_slot pg_create_logical_replication_slot pg_drop_replication_slot
	pg_logical_emit_message pg_replication_origin_create pg_replication_origin_drop
	pg_replication_origin_session_setup pg_replication_origin_advance pg_replication_origin_xact_setup
	pg_import_system_collations`)
