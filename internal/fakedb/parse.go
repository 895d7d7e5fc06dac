package fakedb

import (
	"strconv"
	"strings"
)

// op is a statement kind.
type op uint8

const (
	opSelect op = iota + 1
	opMulti
	opInsert
	opCount
	opSet
	opGet
	opTemp
	opHasTemp
	opBegin
	opCommit
	opRollback
	opSleep
	opConnID
	opEcho
	opFail
	opPing
	opSavepoint
	opRelease
	opRollbackTo
)

// keywords maps each statement keyword to its op and operand count. SET's
// second operand is the rest of the line.
var keywords = [...]struct {
	word  string
	op    op
	nargs int
}{
	{"SELECT", opSelect, 1},
	{"INSERT", opInsert, 2},
	{"COUNT", opCount, 1},
	{"CONNID", opConnID, 0},
	{"SET", opSet, 2},
	{"GET", opGet, 1},
	{"BEGIN", opBegin, 0},
	{"START", opBegin, 1}, // START TRANSACTION
	{"COMMIT", opCommit, 0},
	{"ROLLBACK", opRollback, 0},
	{"SAVEPOINT", opSavepoint, 1},
	{"SLEEP", opSleep, 1},
	{"ECHO", opEcho, 1},
	{"FAIL", opFail, 0},
	{"PING", opPing, 0},
	{"MULTI", opMulti, 0},
	{"TEMP", opTemp, 1},
	{"HASTEMP", opHasTemp, 1},
}

// command is a parsed statement. Operands are substrings of the query as
// written; "?" stands for the next argument. Parsing does not allocate.
type command struct {
	op   op
	a, b string
}

// parse reads one statement.
func parse(query string) (command, error) {
	word, rest := nextWord(query)
	if word == "" {
		return command{}, syntaxError("")
	}
	// RELEASE SAVEPOINT name, ROLLBACK TO SAVEPOINT name.
	if strings.EqualFold(word, "RELEASE") {
		return savepointCommand(opRelease, rest)
	}
	if strings.EqualFold(word, "ROLLBACK") {
		if to, more := nextWord(rest); strings.EqualFold(to, "TO") {
			return savepointCommand(opRollbackTo, more)
		}
	}
	for _, k := range keywords {
		if !strings.EqualFold(word, k.word) {
			continue
		}
		cmd := command{op: k.op}
		if k.nargs >= 1 {
			if cmd.a, rest = nextWord(rest); cmd.a == "" {
				return command{}, syntaxError("")
			}
		}
		if k.nargs == 2 {
			if k.op == opSet {
				cmd.b, rest = strings.TrimSpace(rest), ""
			} else {
				cmd.b, rest = nextWord(rest)
			}
			if cmd.b == "" {
				return command{}, syntaxError("")
			}
		}
		if extra, _ := nextWord(rest); extra != "" {
			return command{}, syntaxError(extra)
		}
		if k.word == "START" {
			if !strings.EqualFold(cmd.a, "TRANSACTION") {
				return command{}, syntaxError(cmd.a)
			}
			cmd.a = ""
		}
		return cmd, nil
	}
	return command{}, syntaxError(word)
}

// savepointCommand reads "SAVEPOINT name", what follows RELEASE and
// ROLLBACK TO.
func savepointCommand(o op, rest string) (command, error) {
	kw, rest := nextWord(rest)
	if !strings.EqualFold(kw, "SAVEPOINT") {
		return command{}, syntaxError(kw)
	}
	name, rest := nextWord(rest)
	if name == "" {
		return command{}, syntaxError("")
	}
	if extra, _ := nextWord(rest); extra != "" {
		return command{}, syntaxError(extra)
	}
	return command{op: o, a: name}, nil
}

// nextWord splits s into its first space-separated word and the rest.
func nextWord(s string) (word, rest string) {
	i := 0
	for i < len(s) && isSpace(s[i]) {
		i++
	}
	j := i
	for j < len(s) && !isSpace(s[j]) {
		j++
	}
	return s[i:j], s[j:]
}

func isSpace(b byte) bool { return b == ' ' || b == '\t' || b == '\n' || b == '\r' || b == ';' }

// syntaxError reports the word where parsing failed ("" for the end).
func syntaxError(word string) error {
	if word == "" {
		return errString("fakedb: syntax error at end of input")
	}
	return errString("fakedb: syntax error at " + strconv.Quote(word))
}

// errString is an error built on the error path only.
type errString string

func (e errString) Error() string { return string(e) }
