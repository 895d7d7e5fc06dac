package sqllex

import "strings"

// ChangesSession reports whether the statements in query may leave state in
// the session that outlives them (see dialects.SessionTracker). It is
// conservative: text it cannot lex with certainty counts as changing.
//
// PostgreSQL: SET and RESET (not SET LOCAL, SET TRANSACTION, SET
// CONSTRAINTS), set_config(…) unless its third argument is the literal true,
// the session advisory lock functions, locking and unlocking (not the
// pg_*advisory_xact_* ones), setval (which sets the session's currval and
// lastval to the value it is given), CREATE TEMP/TEMPORARY … and SELECT … INTO TEMP,
// any name starting with pg_temp, PREPARE, DEALLOCATE, LISTEN, UNLISTEN,
// DECLARE … WITH HOLD, DISCARD, LOAD and DO (whose code may do any of it).
//
// MySQL: every SET (SET TRANSACTION too: it sets the session's next
// transaction), RESET, SELECT … INTO @var, := assignments, GET_LOCK,
// RELEASE_LOCK, RELEASE_ALL_LOCKS and the service_*lock* functions,
// LAST_INSERT_ID(…) with an argument (which plants the value the next
// LAST_INSERT_ID() returns) and SETVAL (sequences), LOCK and
// UNLOCK (TABLES, INSTANCE), FLUSH, BACKUP, CREATE/DROP TEMPORARY, PREPARE,
// DEALLOCATE/DROP PREPARE, USE, HANDLER, XA, and every executable comment.
//
// Any: all of the above, each text lexed both ways, plus PRAGMA, ATTACH,
// DETACH, ALTER SESSION, SQL Server #temporary tables and application locks,
// and Oracle's DBMS_SESSION and DBMS_LOCK.
//
// Names are matched as the server reads them: a quoted name ("set_config")
// counts as the word, and a U&"…" name is decoded first
// (U&"pg\005fadvisory\005flock" is pg_advisory_lock).
//
// Functions and procedures the statement calls are not looked into: what
// they may do is CallsOf's to judge (see Facts.Changes). A text without any
// of the words these rules need is decided by a quick scan that allocates
// nothing.
func ChangesSession(query string, f Flavor) bool {
	if !mayChangeSession(query, f) {
		return false
	}
	return f&Postgres != 0 && scanTwice(query, false, f) || f&MySQL != 0 && scanTwice(query, true, f)
}

// OnlySettings reports whether every change ChangesSession finds in
// query, read as PostgreSQL, is to the session's settings: SET and RESET
// (of a setting, ROLE, SESSION AUTHORIZATION, ALL) and set_config, which
// a reset's SET SESSION AUTHORIZATION DEFAULT and RESET ALL undo. True
// for a text that changes nothing; false for any other change, a
// set_config within another's arguments, and text the rules cannot read
// with certainty, as ChangesSession counts those.
func OnlySettings(query string) bool {
	if !mayChangeSession(query, Postgres) {
		return true
	}
	return !scanTwiceAs(query, false, Postgres, true)
}

// scanTwice runs the session rules over query lexed as PostgreSQL (my
// false) or MySQL, with the server's usual backslash setting and, if a
// string held a backslash, with the other one as well.
func scanTwice(query string, my bool, f Flavor) bool {
	return scanTwiceAs(query, my, f, false)
}

// scanTwiceAs is scanTwice; with settings, a change to a setting does not
// count (OnlySettings).
func scanTwiceAs(query string, my bool, f Flavor, settings bool) bool {
	changes, backslash := scanSession(query, my, my, f, settings)
	if !changes && backslash {
		changes, _ = scanSession(query, my, !my, f, settings)
	}
	return changes
}

// sessionScan is the state of the session rules within one statement.
type sessionScan struct {
	f     Flavor
	first string // the statement's first token if it is a word
	n     int    // tokens of the statement seen
	prev  token
	depth int // parentheses open

	// setWord: PostgreSQL: 1 after SET at the start of the statement, where
	// the next word decides; 2 after SET LOCAL, SET TRANSACTION or SET
	// CONSTRAINTS, where a '.' would make that word part of a setting's name.
	setWord int

	// set_config(…) whose arguments are being read: 1 when its '(' is
	// expected, 2 inside the call.
	call      int
	callDepth int  // depth inside the call's parentheses
	arg       int  // the argument being read, from 1
	third     int  // tokens of the third argument
	isTrue    bool // the third argument's token is the word true

	// lastID: MySQL's LAST_INSERT_ID: 1 when its '(' may come next, 2
	// right after it, where anything but ')' is an argument.
	lastID int

	// settings: PostgreSQL's changes to a setting do not count
	// (OnlySettings).
	settings bool
}

// scanSession runs the rules over query lexed as said. backslash reports a
// string holding a backslash, whose end depends on the server's settings.
func scanSession(query string, my, escapes bool, f Flavor, settings bool) (changes, backslash bool) {
	l := newLexer(query, my, escapes)
	st := sessionScan{f: f, settings: settings}
	for {
		t := l.next()
		switch t.kind {
		case kBad:
			return true, l.backslash
		case kSemi, kEOF:
			if st.setWord == 1 || st.call == 2 {
				return true, l.backslash // a statement cut short
			}
			if t.kind == kEOF {
				return false, l.backslash
			}
			st = sessionScan{f: f, settings: settings}
			continue
		}
		if st.step(t) {
			return true, l.backslash
		}
		st.prev = t
		st.n++
	}
}

// step applies the rules to t, the next token of the statement.
func (st *sessionScan) step(t token) bool {
	switch st.setWord {
	case 1:
		if t.kind == kWord && (eqFold(t.text, "local") || eqFold(t.text, "transaction") || eqFold(t.text, "constraints")) {
			st.setWord = 2
			return false
		}
		// SET name, SET SESSION, SET ROLE, ...
		st.setWord = 0
		return !st.settings
	case 2:
		st.setWord = 0
		if t.kind == kOther && t.text == "." {
			return true // SET local.name = ...: a setting of that name
		}
	}
	if st.call != 0 && st.readCall(t) {
		return true
	}
	switch st.lastID {
	case 1:
		st.lastID = 0
		if t.kind == kOpen {
			st.lastID = 2
		}
	case 2:
		st.lastID = 0
		if t.kind != kClose {
			return true // LAST_INSERT_ID(expr) sets the value
		}
	}
	switch t.kind {
	case kOpen:
		st.depth++
	case kClose:
		if st.depth > 0 {
			st.depth--
		}
	case kWord, kIdent:
		if !isName(t.text) {
			return false
		}
		if st.n == 0 && t.kind == kWord {
			st.first = t.text
			if st.startChanges(t.text) {
				return true
			}
		}
		return st.nameChanges(t)
	case kAt:
		return st.f&MySQL != 0 && st.prevWord("into") // SELECT ... INTO @var
	case kAssign:
		return st.f&MySQL != 0
	case kHash:
		return st.f&others != 0 && (st.prevWord("table") || st.prevWord("into"))
	}
	return false
}

// readCall follows the arguments of set_config(…). It reports a call that
// changes the session: one whose third argument is not the word true.
func (st *sessionScan) readCall(t token) bool {
	if st.call == 1 {
		if t.kind == kOpen {
			st.call, st.callDepth, st.arg = 2, st.depth+1, 1
		} else {
			st.call = 0 // the name, not a call
		}
		return false
	}
	switch {
	case t.kind == kClose && st.depth == st.callDepth:
		changes := st.arg != 3 || st.third != 1 || !st.isTrue
		st.call, st.third, st.isTrue = 0, 0, false
		if changes && !st.settings {
			return true
		}
	case t.kind == kComma && st.depth == st.callDepth:
		st.arg++
	case st.arg == 3:
		st.third++
		st.isTrue = t.kind == kWord && eqFold(t.text, "true")
	}
	return false
}

func (st *sessionScan) prevWord(lw string) bool {
	return st.prev.kind == kWord && eqFold(st.prev.text, lw)
}

// startChanges applies the rules for w, the statement's first word.
func (st *sessionScan) startChanges(w string) bool {
	f := st.f
	switch {
	case eqFold(w, "set"):
		if f&(MySQL|others) != 0 {
			return true
		}
		st.setWord = 1
		return false
	case eqFold(w, "reset"):
		return !st.settings || f&(MySQL|others) != 0
	case eqFold(w, "prepare"), eqFold(w, "deallocate"):
		return true
	}
	if f&Postgres != 0 && (eqFold(w, "listen") || eqFold(w, "unlisten") || eqFold(w, "discard") ||
		eqFold(w, "load") || eqFold(w, "do")) {
		return true
	}
	if f&MySQL != 0 && (eqFold(w, "use") || eqFold(w, "lock") || eqFold(w, "unlock") || eqFold(w, "flush") ||
		eqFold(w, "backup") || eqFold(w, "handler") || eqFold(w, "xa")) {
		return true
	}
	return f&others != 0 && (eqFold(w, "use") || eqFold(w, "pragma") || eqFold(w, "attach") || eqFold(w, "detach"))
}

// nameChanges applies the rules for a word or quoted name anywhere in the
// statement.
func (st *sessionScan) nameChanges(t token) bool {
	w, f := t.text, st.f
	if t.kind == kWord {
		switch {
		case eqFold(w, "temp") || eqFold(w, "temporary"):
			// CREATE [GLOBAL|LOCAL] TEMP, CREATE OR REPLACE TEMP VIEW,
			// SELECT ... INTO TEMP, DROP TEMPORARY TABLE
			return st.prevWord("create") || st.prevWord("global") || st.prevWord("local") ||
				st.prevWord("replace") || st.prevWord("into") || st.prevWord("drop")
		case eqFold(w, "hold"):
			return f&Postgres != 0 && st.prevWord("with") && eqFold(st.first, "declare")
		case eqFold(w, "prepare"):
			return f&MySQL != 0 && st.prevWord("drop")
		case eqFold(w, "session"):
			return f&others != 0 && st.n == 1 && eqFold(st.first, "alter")
		case eqFold(w, "setval"):
			return f&(Postgres|MySQL) != 0
		}
	}
	if strings.IndexByte(w, '_') < 0 {
		return false // every name below has one
	}
	if f&Postgres != 0 {
		switch {
		case eqFold(w, "set_config"):
			if st.call != 0 {
				return true // a call within a call: too much to follow
			}
			st.call = 1
		case hasPrefixFold(w, "pg_temp"):
			return true
		case hasPrefixFold(w, "pg_") && containsFold(w, "advisory") && !containsFold(w, "_xact_"):
			return true
		}
	}
	if f&MySQL != 0 && eqFold(w, "last_insert_id") {
		st.lastID = 1
	}
	if f&MySQL != 0 && (eqFold(w, "get_lock") || eqFold(w, "release_lock") || eqFold(w, "release_all_locks") ||
		hasPrefixFold(w, "service_") && containsFold(w, "lock")) {
		return true
	}
	return f&others != 0 && (hasPrefixFold(w, "dbms_session") || hasPrefixFold(w, "dbms_lock") ||
		eqFold(w, "sp_getapplock") || eqFold(w, "sp_releaseapplock") ||
		eqFold(w, "sp_set_session_context") || eqFold(w, "sp_setapprole"))
}
