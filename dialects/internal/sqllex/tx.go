package sqllex

import "strings"

// TxEffect is what a text of statements does to the transaction state of a
// session whose driver runs statements in autocommit mode.
type TxEffect uint8

const (
	// TxNone: the text opens and ends no transaction.
	TxNone TxEffect = iota
	// TxBegins: the text leaves a transaction open (BEGIN, START
	// TRANSACTION, COMMIT AND CHAIN; for Any, SAVEPOINT, which opens one
	// outside a transaction in SQLite).
	TxBegins
	// TxEnds: the text ends the open transaction, if any (COMMIT, END,
	// ROLLBACK, ABORT, PREPARE TRANSACTION).
	TxEnds
	// TxUnknown: the text may leave a transaction open or not: a procedure
	// call (CALL, XA), SET autocommit, text that cannot be lexed with
	// certainty, several statements that end a transaction, of which an
	// error may have stopped the last ones, and, for Any, several
	// statements one of which the rules cannot classify (IF … BEGIN TRAN,
	// EXEC, …) or SET TRANSACTION, which opens one in Oracle.
	TxUnknown
)

// TxEffectOf reports what the statements in query do to the transaction
// state. For several statements it is the effect of the last one that has
// any, made TxUnknown when that is TxEnds (an earlier statement may have
// failed and stopped the text, leaving a transaction open). For Any, a
// text of several statements is TxUnknown as soon as one of them does not
// start with a word the rules know (see classified): the driver's database
// may open a transaction in ways no rule follows. A text of one statement
// whose first word cannot start a transaction statement is decided without
// lexing and allocates nothing.
func TxEffectOf(query string, f Flavor) TxEffect {
	if plainStatement(query) {
		return TxNone
	}
	var e TxEffect
	switch {
	case f&Postgres != 0 && f&MySQL != 0:
		e = txEffectTwice(query, false, f)
		if e2 := txEffectTwice(query, true, f); e2 != e {
			e = TxUnknown
		}
	case f&MySQL != 0:
		e = txEffectTwice(query, true, f)
	default:
		e = txEffectTwice(query, false, f)
	}
	return e
}

// plainStatement reports a text of one statement (no ';' at all) that
// starts, after ASCII white space, with a word that opens no transaction
// statement.
func plainStatement(q string) bool {
	if strings.IndexByte(q, ';') >= 0 {
		return false
	}
	i := 0
	for i < len(q) && (q[i] == ' ' || q[i] == '\t' || q[i] == '\n' || q[i] == '\r' || q[i] == '\f' || q[i] == '\v') {
		i++
	}
	if i == len(q) {
		return true // nothing at all
	}
	if !isLetter(q[i]) {
		return false // a comment, perhaps
	}
	j := i + 1
	for j < len(q) && isWordCont(q[j]) {
		j++
	}
	return !txKeyword(q[i:j])
}

// txKeyword reports the words that can start a statement with an effect.
func txKeyword(w string) bool {
	switch len(w) {
	case 2:
		return eqFold(w, "xa")
	case 3:
		return eqFold(w, "set") || eqFold(w, "end")
	case 4:
		return eqFold(w, "call")
	case 5:
		return eqFold(w, "begin") || eqFold(w, "start") || eqFold(w, "abort")
	case 6:
		return eqFold(w, "commit")
	case 7:
		return eqFold(w, "prepare")
	case 8:
		return eqFold(w, "rollback")
	case 9:
		return eqFold(w, "savepoint")
	}
	return false
}

// txEffectTwice is txEffect with the server's usual backslash setting and,
// if a string held a backslash, with the other one: TxUnknown if they
// disagree.
func txEffectTwice(query string, my bool, f Flavor) TxEffect {
	e, backslash := txEffect(query, my, my, f)
	if backslash {
		if e2, _ := txEffect(query, my, !my, f); e2 != e {
			return TxUnknown
		}
	}
	return e
}

// maxTxWords is how many leading words of a statement decide its effect:
// COMMIT WORK AND NO CHAIN, and one more to see that nothing follows.
const maxTxWords = 6

// txEffect lexes query and combines the effects of its statements.
func txEffect(query string, my, escapes bool, f Flavor) (e TxEffect, backslash bool) {
	l := newLexer(query, my, escapes)
	var (
		words      [maxTxWords]string
		n          int    // leading words of the statement
		leading    bool   // the statement's tokens so far are all words
		autocommit bool   // a word autocommit or implicit_transactions in it
		stmts      int    // statements with at least one token
		head       string // the first statement's first word, if it starts with one
		unknown    bool   // Any: a statement starts with no word the rules know
		last       = TxNone
	)
	leading = true
	for {
		t := l.next()
		switch t.kind {
		case kBad:
			return TxUnknown, l.backslash
		case kSemi, kEOF:
			if n > 0 || !leading {
				stmts++
				if se := statementEffect(words[:n], autocommit, f); se != TxNone {
					last = se
				}
				if f&others != 0 && !unknown {
					// Asked only once a second statement shows: a text of
					// one, the common case, pays nothing.
					switch {
					case stmts == 1:
						head = ""
						if n > 0 {
							head = words[0]
						}
					case stmts == 2 && !classified(head), n == 0 || !classified(words[0]):
						unknown = true
					}
				}
			}
			if t.kind == kEOF {
				if stmts > 1 && (last == TxEnds || unknown) {
					last = TxUnknown
				}
				return last, l.backslash
			}
			n, leading, autocommit = 0, true, false
			continue
		}
		if t.kind == kWord {
			if leading && n < len(words) {
				words[n] = t.text
				n++
			}
			if eqFold(t.text, "autocommit") || eqFold(t.text, "implicit_transactions") {
				autocommit = true
			}
			continue
		}
		leading = false
	}
}

// statementEffect classifies one statement by its leading words, as read
// for flavor f.
func statementEffect(w []string, autocommit bool, f Flavor) TxEffect {
	if len(w) == 0 {
		return TxNone
	}
	at := func(i int) string {
		if i < len(w) {
			return w[i]
		}
		return ""
	}
	switch first := w[0]; {
	case eqFold(first, "begin"):
		return TxBegins
	case eqFold(first, "start"):
		if eqFold(at(1), "transaction") {
			return TxBegins
		}
	case eqFold(first, "commit"), eqFold(first, "end"):
		if eqFold(at(1), "prepared") {
			return TxNone // PostgreSQL: two-phase commit, outside any transaction
		}
		return chained(w[1:])
	case eqFold(first, "rollback"), eqFold(first, "abort"):
		if eqFold(at(1), "prepared") {
			return TxNone
		}
		rest := skipTxNoise(w[1:])
		if len(rest) > 0 && eqFold(rest[0], "to") {
			return TxNone // ROLLBACK TO SAVEPOINT keeps the transaction
		}
		return chained(w[1:])
	case eqFold(first, "prepare"):
		if eqFold(at(1), "transaction") {
			return TxEnds // PostgreSQL: the transaction leaves the session
		}
	case eqFold(first, "set"):
		if autocommit || f&others != 0 && eqFold(at(1), "transaction") {
			return TxUnknown // Oracle: SET TRANSACTION opens one
		}
	case eqFold(first, "call"), eqFold(first, "xa"):
		return TxUnknown // MySQL procedures may leave a transaction open
	case eqFold(first, "savepoint"):
		if f&others != 0 {
			return TxBegins // SQLite: outside a transaction, it opens one
		}
	}
	return TxNone
}

// classified reports whether w is a word that starts a statement whose
// effect on the transaction the rules know: a transaction statement that
// statementEffect reads, or one that opens none in autocommit mode in
// PostgreSQL, MySQL, SQLite, SQL Server or Oracle. A DDL statement may
// commit an open transaction (MySQL, Oracle): that only makes the belief
// that one is open outlast it, which is safe.
func classified(w string) bool {
	switch len(w) {
	case 2:
		return eqFold(w, "xa") || eqFold(w, "do")
	case 3:
		return eqFold(w, "set") || eqFold(w, "end") || eqFold(w, "use")
	case 4:
		return eqFold(w, "call") || eqFold(w, "with") || eqFold(w, "drop") || eqFold(w, "show") ||
			eqFold(w, "desc") || eqFold(w, "lock") || eqFold(w, "copy") || eqFold(w, "save")
	case 5:
		return eqFold(w, "begin") || eqFold(w, "start") || eqFold(w, "abort") || eqFold(w, "table") ||
			eqFold(w, "alter") || eqFold(w, "merge") || eqFold(w, "grant") || eqFold(w, "reset") ||
			eqFold(w, "flush")
	case 6:
		return eqFold(w, "commit") || eqFold(w, "select") || eqFold(w, "insert") || eqFold(w, "update") ||
			eqFold(w, "delete") || eqFold(w, "values") || eqFold(w, "create") || eqFold(w, "revoke") ||
			eqFold(w, "pragma") || eqFold(w, "attach") || eqFold(w, "detach") || eqFold(w, "upsert") ||
			eqFold(w, "listen") || eqFold(w, "notify") || eqFold(w, "vacuum") || eqFold(w, "rename") ||
			eqFold(w, "unlock")
	case 7:
		return eqFold(w, "prepare") || eqFold(w, "replace") || eqFold(w, "explain") || eqFold(w, "comment") ||
			eqFold(w, "analyze") || eqFold(w, "analyse") || eqFold(w, "declare") || eqFold(w, "reindex") ||
			eqFold(w, "release") || eqFold(w, "discard")
	case 8:
		return eqFold(w, "rollback") || eqFold(w, "truncate") || eqFold(w, "describe") || eqFold(w, "unlisten")
	case 9:
		return eqFold(w, "savepoint")
	case 10:
		return eqFold(w, "deallocate")
	}
	return false
}

// skipTxNoise drops an optional WORK, TRANSACTION or TRAN.
func skipTxNoise(w []string) []string {
	if len(w) > 0 && (eqFold(w[0], "work") || eqFold(w[0], "transaction") || eqFold(w[0], "tran")) {
		return w[1:]
	}
	return w
}

// chained reads what follows COMMIT or ROLLBACK: nothing (TxEnds), AND
// CHAIN (TxBegins: a new transaction starts at once), AND NO CHAIN
// (TxEnds), or anything else (TxUnknown: RELEASE, a SQL Server transaction
// name, ...).
func chained(w []string) TxEffect {
	w = skipTxNoise(w)
	switch {
	case len(w) == 0:
		return TxEnds
	case len(w) == 2 && eqFold(w[0], "and") && eqFold(w[1], "chain"):
		return TxBegins
	case len(w) == 3 && eqFold(w[0], "and") && eqFold(w[1], "no") && eqFold(w[2], "chain"):
		return TxEnds
	}
	return TxUnknown
}
