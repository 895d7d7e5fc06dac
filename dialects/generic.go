package dialects

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"

	"github.com/pooldriver/pooldriver/dialects/internal/sqllex"
)

// ErrUnsupported is returned by a Conn method the dialect cannot perform
// (a raw rollback or a session reset, say). pooldriver then falls back to
// what is always safe: the driver's own Tx.Rollback, or closing the
// connection and opening a new one.
var ErrUnsupported = errors.New("pooldriver: not supported by this dialect")

// ErrNotRun marks the error of a statement the server provably did not
// run though its bytes were sent (a session reset carried in front of it
// failed, and the server skipped it: dialects.ResetCarrier). With
// driver.ErrBadConn, it lets database/sql run the statement again on
// another connection.
var ErrNotRun = errors.New("the statement did not run")

// ErrResultOpen is the error of a statement refused, before anything was
// sent, because a result of the same hold is still open on its connection
// (see pooldriver.ErrResultOpen and OneResult).
var ErrResultOpen = errors.New("pooldriver: a result of this transaction or connection is still open (the server sends one at a time): " +
	"read or close its rows before the next statement; nothing was sent")

// OneResult is implemented by a Conn whose server sends one result at a
// time on a connection (PostgreSQL, MySQL): a statement of a *sql.Tx or
// *sql.Conn whose rows are still open is refused by pooldriver with
// ErrResultOpen, before the driver sees it, and the transaction goes on.
// The drivers refuse it with driver.ErrBadConn (pgx's stdlib, which leaves
// the connection as it was) or break the connection with it
// (go-sql-driver, which writes the statement into the unread result).
type OneResult interface {
	OneResultAtATime() bool
}

// Wrap returns a Template that opens physical connections through any
// database/sql driver.Connector: the generic dialect behind
// pooldriver.Wrap. Credentials cannot be applied: the connector logs in by
// itself.
//
// A connection that a registered ConnAdapter recognizes (the postgres
// dialect's for pgx's stdlib, the mysql dialect's for go-sql-driver/mysql:
// import the dialect package) is tracked as that dialect tracks its own.
// Any other connection is tracked from the text of its statements, with
// the rules of PostgreSQL and MySQL together and a few of other
// databases': BEGIN, START TRANSACTION or SAVEPOINT (SQLite opens a
// transaction with it) opens a raw transaction, COMMIT, END or ROLLBACK
// ends it; text that may do either (CALL, SET autocommit, SET
// TRANSACTION, several statements ending with COMMIT, several statements
// one of which starts with a word the rules do not know, such as IF or
// EXEC) counts as leaving one open. RELEASE changes nothing: in SQLite it
// may commit the transaction its savepoint opened, so one is still
// believed open. Such a connection cannot roll back a raw transaction by
// itself, so it is replaced instead. Session changes are found by the same
// rules (SET, advisory locks, GET_LOCK, temporary tables, ...), and, since
// nothing reports what a function or procedure did, by any call the rules
// cannot prove harmless (a function off both lists of built-ins, CALL,
// EXEC, SQL run from a string), unless the user trusts their functions. A
// session believed changed is never handed on: the connection is replaced
// (see genericConn.ResetSession).
func Wrap(c driver.Connector) Template { return genericTemplate{c} }

type genericTemplate struct{ c driver.Connector }

func (t genericTemplate) Credentials() Credentials { return Credentials{} }

func (t genericTemplate) String() string { return fmt.Sprintf("wrapped %T", t.c) }

func (t genericTemplate) Open(ctx context.Context, _ Credentials) (Conn, error) {
	c, err := t.c.Connect(ctx)
	if err != nil {
		return nil, err
	}
	if ac, ok := adapt(c); ok {
		return ac, nil
	}
	return &genericConn{c: c}, nil
}

// genericConn is a connection of a driver no dialect knows. Like every
// Conn it is not safe for concurrent use; pooldriver serializes all calls.
type genericConn struct {
	c    driver.Conn
	inTx bool // a raw transaction is believed open, from the statements' text

	// The facts of the last text asked about: pooldriver asks
	// ChangesSession and TxStatus of each statement in turn.
	last      string
	lastFacts sqllex.Facts

	// trust: the user vouches for their functions (see TrustFunctions).
	trust bool
}

// facts returns the lexer's facts of query, g's own copy (the last
// query's): valid until g's next statement, and not copied per statement.
func (g *genericConn) facts(query string) *sqllex.Facts {
	if query != g.last {
		g.lex(query) // apart, so that facts is inlined
	}
	return &g.lastFacts
}

// lex reads query's facts as g's own (facts). Not inlined: inlined, it
// would make facts too large to inline.
//
//go:noinline
func (g *genericConn) lex(query string) {
	g.last, g.lastFacts = query, sqllex.Of(query, sqllex.Any)
}

var (
	_ Conn              = (*genericConn)(nil)
	_ SessionTracker    = (*genericConn)(nil)
	_ StatementObserver = (*genericConn)(nil)
	_ FunctionTruster   = (*genericConn)(nil)
)

// TrustFunctions says whether the user vouches for their functions and
// procedures: trusted, a call counts only for what its text shows. Not
// trusted by default (see Wrap).
func (g *genericConn) TrustFunctions(trust bool) { g.trust = trust }

func (g *genericConn) Driver() driver.Conn { return g.c }

// TxStatus follows the raw transaction from lastQuery's text; see Wrap.
// An empty lastQuery (no statement text) leaves the belief as it was.
func (g *genericConn) TxStatus(_ context.Context, lastQuery string) (TxStatus, error) {
	return g.txStatus(g.facts(lastQuery)), nil
}

func (g *genericConn) txStatus(f *sqllex.Facts) TxStatus {
	switch f.Tx {
	case sqllex.TxBegins, sqllex.TxUnknown:
		g.inTx = true
	case sqllex.TxEnds:
		g.inTx = false
	}
	if g.inTx {
		return TxActive
	}
	return TxIdle
}

// Observe is ChangesSession and TxStatus from one look at query.
func (g *genericConn) Observe(_ context.Context, query string, askTx bool) (bool, TxStatus, error) {
	f := g.facts(query)
	if !askTx {
		return sqllex.Verdict(f.Session(g.trust)), TxIdle, nil
	}
	return sqllex.Verdict(f.Session(g.trust)), g.txStatus(f), nil
}

// ChangesSession applies the PostgreSQL and MySQL rules together, and a
// few of other databases'; see Wrap.
func (g *genericConn) ChangesSession(query string) bool {
	return sqllex.Verdict(g.facts(query).Session(g.trust))
}

// Rollback is unsupported: the statement that rolls back differs between
// databases, and the driver's own Tx.Rollback needs a transaction it began.
// pooldriver replaces the connection instead.
func (g *genericConn) Rollback(context.Context) error { return ErrUnsupported }

// ResetSession cannot reset a driver it does not know: database/sql's
// SessionResetter promises only what each driver makes of it (pgx's stdlib
// and go-sql-driver/mysql merely check that the connection is alive), so a
// session believed dirty is never handed on through it. pooldriver replaces
// the connection instead.
func (g *genericConn) ResetSession(context.Context) error { return ErrUnsupported }

func (g *genericConn) Ping(ctx context.Context) error {
	if p, ok := g.c.(driver.Pinger); ok {
		return p.Ping(ctx)
	}
	if v, ok := g.c.(driver.Validator); ok && !v.IsValid() {
		return driver.ErrBadConn
	}
	return nil
}

func (g *genericConn) Raw() any { return g.c }

func (g *genericConn) Close() error { return g.c.Close() }
