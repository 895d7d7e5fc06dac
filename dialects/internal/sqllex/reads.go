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
// Code that runs unseen (a view's functions, a column's default) cannot
// write in a SELECT: PostgreSQL refuses a write in a function that is not
// volatile, and a volatile one is a call the text shows.
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
		if t.kind != kWord {
			continue
		}
		w := strings.ToLower(t.text)
		if first {
			if w != "select" && w != "with" && w != "values" && w != "table" {
				return false, backslash
			}
			first = false
			continue
		}
		if _, no := readsRefused[w]; no || strings.HasPrefix(w, "pg_advisory") || strings.HasPrefix(w, "pg_try_advisory") || strings.HasPrefix(w, "lo_") {
			return false, backslash
		}
	}
}

// readsRefused are the words after which a SELECT may write or lock: its
// clauses (INTO, FOR UPDATE, FOR SHARE, FOR NO KEY UPDATE, FOR KEY SHARE),
// a data-modifying WITH's statements, and the built-ins that write.
var readsRefused = set(`into update share insert delete merge copy call do execute lock
	nextval setval pg_notify txid_current txid_current_if_assigned pg_current_xact_id set_config
	lowrite loread pg_stat_reset pg_stat_reset_shared pg_stat_reset_single_table_counters
	pg_stat_reset_single_function_counters pg_stat_reset_slru pg_stat_reset_replication_slot
	pg_create_restore_point pg_switch_wal pg_create_physical_replication_slot
	pg_create_logical_replication_slot pg_drop_replication_slot pg_logical_emit_message
	pg_replication_origin_create pg_replication_origin_drop pg_replication_origin_session_setup
	pg_replication_origin_advance pg_replication_origin_xact_setup pg_import_system_collations`)
