package postgres

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/pooldriver/pooldriver/dialects"
	"github.com/pooldriver/pooldriver/dialects/internal/sqllex"
)

// conn is one physical PostgreSQL connection. Like the *pgx.Conn inside it,
// it is not safe for concurrent use; pooldriver serializes all calls.
type conn struct {
	sc *stdlib.Conn

	// reported holds the values the server reported for the reported
	// parameters when the connection opened (which a session reset
	// restores), in the order of reportedParams.
	reported [len(reportedParams)]string

	// watch tells when the server may have changed a reported parameter
	// (nil for a connection pooldriver did not open: Wrap's). differs is
	// what the last comparison with reported found.
	watch   *paramWatch
	differs bool

	// lexed are the texts the lexer last read on this connection, and
	// what each and the catalog said of it: a connection runs the same few
	// texts again and again (a transaction's statements in turn), and this
	// spares the shared memo's hash and its two cache lines, cold by the
	// time a statement ends, and the judgment by the catalog's reading.
	// Texts the memo would not keep are not kept here either. lexedNext:
	// the entry the next text read takes. lexedSnap: the catalog reading
	// the last judgment was made with.
	lexed     [lexedTexts]lexedText
	lexedNext uint8
	lexedSnap *dialects.CatalogSnapshot[*pgCatalog]
	lexedLong lexedText // what was said of the last text too long to keep, for its one use
	tempPath  tempPath

	// catalog is what the server's catalog says runs code no statement
	// names (catalog.go), shared with the other connections to the same
	// server and database; nil until first needed. mustSee: the last
	// change (dialects.Catalog.Expire) this session made or may have made
	// to the catalog (DDL, a user's code): a reading older than it
	// vouches for none of this connection's statements (vouching).
	// codeSee: the last of those a user's code made, which the session's
	// reset reads a reading since for at once (readAfterReset).
	catalog *dialects.Catalog[*pgCatalog]
	mustSee uint64
	codeSee uint64
	// changedInTx: a statement that may have changed the catalog (DDL:
	// expireDDL; a user's code: expireCode) ran inside a transaction that
	// is still open. A reading taken before its end cannot see what it
	// changed, yet counts as seeing the change (it began after Expire):
	// the end expires the catalog again (judge).
	changedInTx uint8

	// trust: the user vouches for their functions (see TrustFunctions).
	trust bool

	// role: what the DSN's target_session_attrs asks of the server
	// (LostRole); roleGone: the server it reached, once its reports said
	// it left that role (reportsLost, Observe).
	role     role
	roleGone string

	// idle is CheckIdle's look at the socket, set up at its first use
	// (idleReady): pgx keeps one socket for the connection's life.
	idle      dialects.SocketCheck
	idleReady bool

	// unnamed: PrepareContext prepares nothing by name on the server (see
	// pooler.go).
	unnamed bool

	// closedSeen: for a connection of Wrap's, which has no watch to count
	// its bytes, Written saw pgx's connection closed (see Written).
	closedSeen bool

	// direct: the query path past pgx's stdlib (direct.go).
	direct direct

	// xact: what the statements learnt of the open transaction's id
	// (xact.go).
	xact xact
	// probing: the server has probeSQL's function (PostgreSQL 13 and later):
	// 0 until asked, 1 yes, -1 no (see probes).
	probing int8
	probe   probeMsgs // execProbed's messages, kept for the next
	// probeAt: dropGen+1 when execProbed prepared probeSQL under
	// probeName; 0 while it is not prepared (dropped clears it, and a
	// reset that finds it gone, reconcile). probeDoubt: a user had the
	// raw connection since it was prepared (Raw), and may have dropped it:
	// it is not used until a reset finds where it is.
	probeAt    uint64
	probeDoubt bool

	// carry: a session reset waiting for the next statement (carry.go);
	// stdlibCached: pgx's stdlib ran a statement with arguments, which it
	// may keep prepared in a cache of its own.
	carry        carry
	stdlibCached bool
	// dropGen counts the times every prepared statement was dropped
	// (dropAll), for namedStmt to prepare its own again.
	dropGen uint64

	// dirtySeq: the first of the direct path's statements prepared while
	// the session was changed (1 + the last one's number when the change
	// was seen), 0 while it is not; the reset drops them (see reconcile).
	// stmtsDropped: the last reset dropped every prepared statement.
	// stdlibNames: the names pgx's stdlib prepared statements under
	// (notePrepared).
	// sqlPrepared: since the last reset, the session ran a statement
	// after which it may hold one a user prepared (mayPrepare); full:
	// every carried reset deallocates all the same (ResetFully).
	dirtySeq     uint64
	stmtsDropped bool
	sqlPrepared  bool
	full         bool
	stdlibNames  map[string]struct{}
	// setOnly: since the last reset, a statement changed the session's
	// settings (lexedText.settings); broad: one may have changed more.
	// The carried reset undoes only settings where setOnly and not broad
	// (settingsOnly).
	setOnly bool
	broad   bool

	// origin: whether the login role may reset a replication origin
	// session (see resetSQL).
	origin originPrivilege

	custom customState // the custom settings' names (custom.go)
}

var (
	_ dialects.Conn                   = (*conn)(nil)
	_ dialects.IdleChecker            = (*conn)(nil)
	_ dialects.SessionTracker         = (*conn)(nil)
	_ dialects.StatementObserver      = (*conn)(nil)
	_ dialects.StaleStatementDetector = (*conn)(nil)
	_ dialects.ArgumentsAsIs          = (*conn)(nil)
	_ dialects.OneResult              = (*conn)(nil)
	_ dialects.SessionBaseline        = (*conn)(nil)
	_ dialects.WriteCounter           = (*conn)(nil)
	_ dialects.BeginTxRollbacker      = (*conn)(nil)
	_ dialects.FunctionTruster        = (*conn)(nil)
	_ dialects.Cutter                 = (*conn)(nil)
	_ dialects.RoleLossDetector       = (*conn)(nil)
	_ driver.ConnPrepareContext       = (*conn)(nil)
	_ driver.QueryerContext           = (*conn)(nil)
	_ driver.ExecerContext            = (*conn)(nil)
)

// reportedParams are the parameters the server reports whenever they
// change (ParameterStatus, GUC_REPORT), from PostgreSQL 12 to 18, that a
// session can change: every one of them changes what the next user's
// statements mean (client_encoding and standard_conforming_strings how
// their text and literals are read, default_transaction_read_only whether
// their writes succeed, the role through session_authorization and
// is_superuser). A server older than the parameter reports none, and both
// sides of the comparison read "". Left out: server_version,
// server_encoding, integer_datetimes and in_hot_standby, which no session
// changes (a promotion changes the last, for every session alike).
//
// pgx keeps the reports in a map it does not hand out, so the list is
// fixed here. The comparison runs after every statement that brought a
// ParameterStatus on a connection opened from a DSN (see paramWatch), so
// on the common path it costs nothing however long the list is; on a
// connection of Wrap's, which has no watch, it runs after every statement
// outside a transaction: one map lookup per entry, the most often changed
// first, so that a change is found after few.
var reportedParams = [...]string{
	"search_path", "TimeZone", "DateStyle", "session_authorization", "is_superuser",
	"client_encoding", "standard_conforming_strings", "default_transaction_read_only",
	"IntervalStyle", "application_name", "scram_iterations",
}

// maxLexedText is the longest text conn.lexed keeps, as the lexer's memo.
const maxLexedText = 4096

// lexedTexts is how many texts conn.lexed keeps: a transaction's
// statements, or a request's, in turn.
const lexedTexts = 4

// lexedText is a text the lexer read on a connection, and what it and the
// catalog's reading snap said of it.
type lexedText struct {
	text  string
	facts sqllex.SessionFacts
	ddl   bool // the text may change the catalog: judged again each time
	// prepares: the session may hold a statement the text's run prepared
	// (mayPrepare): the carried reset deallocates every one.
	prepares bool
	// settings: every change the text may make is to a setting
	// (onlySettings): the carried reset mends it with the settings'
	// statements alone.
	settings bool
	snap     *dialects.CatalogSnapshot[*pgCatalog]
	path     sqllex.PathUse // what the text does with search_path's choice of schema (pathUse), for tempPath.made
}

// lexedFor returns what was said of query with the reading snap, nil
// where it must be judged (again).
func (c *conn) lexedFor(query string, snap *dialects.CatalogSnapshot[*pgCatalog]) *lexedText {
	for i := range c.lexed {
		if e := &c.lexed[i]; e.text == query && e.snap == snap && !e.ddl && query != "" {
			return e
		}
	}
	return nil
}

// lexedPut keeps e, said of a text just judged (unless the memo would not
// keep it), and returns it where a caller reads it.
func (c *conn) lexedPut(e lexedText) *lexedText {
	if len(e.text) > maxLexedText || e.text == "" {
		c.lexedLong = e
		c.lexedLong.text = ""
		return &c.lexedLong
	}
	i := c.lexedNext
	c.lexedNext = (i + 1) % lexedTexts
	c.lexed[i] = e
	return &c.lexed[i]
}

// forgetLexed forgets what was said of every text: the session may have
// changed what the catalog's reading vouches for (expire), or the user
// what they vouch for.
func (c *conn) forgetLexed() {
	c.lexed = [lexedTexts]lexedText{}
}

// ChangesSession reports a statement that may have changed the session
// (see sqllex.ChangesSession for the rules: SET, set_config(..., false),
// session advisory locks, CREATE TEMP, PREPARE, LISTEN, DECLARE ... WITH
// HOLD, ...), one that runs SQL the text does not show (query_to_xml,
// dblink, EXECUTE, a write to pg_settings), one that calls a function or
// procedure other than the built-ins known to leave the session alone,
// unless the user trusts their functions (see sqllex.CallsOf and
// TrustFunctions), and, once no transaction is open, any reported parameter
// (TimeZone, search_path, the role, ...) that differs from what it was when
// the connection opened. Inside a transaction the latter waits for its end,
// when SET LOCAL values revert: the statement that ends it is asked about
// too.
//
// The server does not report the role a function sets with
// set_config('role', ...), nor search_path before PostgreSQL 18, which is
// why a call the dialect cannot prove harmless counts.
func (c *conn) ChangesSession(query string) bool {
	return c.changesSession(c.pgx().PgConn(), query)
}

// TrustFunctions says whether the user vouches for their functions and
// procedures (see dialects.FunctionTruster): trusted, a call counts only
// for what its text or the server shows. Not trusted by default.
func (c *conn) TrustFunctions(trust bool) {
	c.trust = trust
	c.forgetLexed()
	c.lexedSnap = nil
}

func (c *conn) changesSession(pc *pgconn.PgConn, query string) bool {
	c.noteCustom(query)
	changed := c.judge(pc, query)
	if changed && c.dirtySeq == 0 {
		c.dirtySeq = c.direct.seq + 1
	}
	return changed
}

// judge is changesSession's answer.
func (c *conn) judge(pc *pgconn.PgConn, query string) bool {
	if c.changedInTx != 0 && pc.TxStatus() == 'I' {
		c.expireAfterTx()
	}
	// What the catalog says matters only to a user who does not vouch for
	// their functions (and the code of their triggers, policies, ...).
	var snap *dialects.CatalogSnapshot[*pgCatalog]
	// unsure: snap vouches for nothing now, though it may have when
	// lexedFacts were judged with it (vouching): it is older than DDL
	// the process ran, or than dialects.CatalogMaxAge.
	unsure := false
	if !c.trust {
		if snap = c.lexedSnap; snap == nil || snap.Due() {
			if snap = nil; c.catalog != nil {
				snap = c.catalog.Current()
			}
			if snap == nil {
				// read here only if there is no reading yet
				snap = c.current(pc, sqllex.Of(query, sqllex.Postgres))
			}
			if snap != nil && !snap.Sees(c.codeSee) && c.readable(pc) && leavesSession(sqllex.Of(query, sqllex.Postgres)) {
				// A user's code this session ran may have changed the
				// catalog, and its reset went with a statement, reading
				// nothing (readAfterReset reads after a reset of its
				// own): the first statement since whose text leaves the
				// session reads once, rather than every statement count
				// until the catalog's next reading.
				snap = c.readSince(pc, c.codeSee, 0)
			}
			unsure = snap != nil && (!snap.Fresh() || !snap.Sees(c.catalog.Changed()))
		}
	}
	e := c.lexedFor(query, snap)
	if e == nil || unsure {
		f := sqllex.Of(query, sqllex.Postgres)
		shadows := c.vouching(snap)
		expires := f.Refs != nil && f.Refs.DDL || !c.trust && ranCode(f, shadows)
		if expires && c.catalog != nil {
			// It may have made or changed a function, trigger or policy
			// (DDL, or a user's code that may run DDL no text shows): no
			// reading from before vouches for this session's statements
			// (vouching) until one taken since is stored, off the
			// callers' paths: the expired reading is due, which the
			// catalog's watcher reads at once on an idle connection, and
			// a session reset reads it too.
			how := expireCode
			if f.Refs != nil && f.Refs.DDL {
				how = expireDDL
				seen := shadows
				if c.trust {
					// A user who vouches for their code judges nothing
					// by the reading, but the process's other
					// connectors to the server share it: what the DDL
					// did is judged for them as for one who does not.
					seen = c.vouching(c.catalog.Current())
				}
				if seen != nil && !f.Refs.Makes && !ranCode(f, seen) {
					// It only removed or labelled, or made a table that
					// runs only code its text names, which the reading
					// vouched for: the reading still vouches for all it
					// did, and is read again off the callers' paths.
					how = expireRemoves
				}
			}
			c.expire(how)
			if pc.TxStatus() != 'I' {
				c.changedInTx = max(c.changedInTx, how)
			}
			if how == expireCode || f.Refs.AfterDDL {
				// A DDL statement ran with the catalog the reading
				// before it vouched for: what it changed is the next
				// statements' to meet, one after it in the text
				// included.
				shadows = c.vouching(snap)
			}
		}
		if !c.trust {
			c.customScanAfter(f, shadows)
		}
		e = c.lexedPut(lexedText{
			text:     query,
			facts:    f.SessionWith(c.trust, shadows), // nil: nothing read, every naming text counts
			ddl:      expires,                         // judged again each time: each run may change the catalog
			prepares: mayPrepare(f, shadows),
			settings: onlySettings(f, shadows),
			snap:     snap,
			path:     pathUse(f, c.trust),
		})
		c.lexedSnap = snap
	}
	c.sqlPrepared = c.sqlPrepared || e.prepares
	v, settings := e.facts, e.settings
	if e.path != 0 && c.tempPath.made(pc.TxStatus() != 'I', e.path) {
		v.Text, settings = true, false
	}
	byText := sqllex.Verdict(v)
	if !byText {
		// The server's facts, read only where the text's leave the
		// verdict open: reading them notes a standby and clears the
		// watch.
		v.TxOpen = pc.TxStatus() != 'I'
		if !v.TxOpen {
			v.Params = c.reportedDiffer(pc)
		}
	} else if c.role != roleAny && c.roleGone == "" && (c.watch == nil || c.watch.maybeChanged()) {
		// A change the text decided skips the server's facts, but not
		// what its reports say of its role: a primary fenced read-only,
		// or a standby, is left with this statement (Observe), however
		// its session is judged.
		c.roleGone = reportsLost(pc, c.role)
	}
	changed := sqllex.Verdict(v)
	if changed {
		// A change only the server's reports show is a setting some
		// statement judged before changed (setOnly), or came from what
		// no text showed (a trusted function, Raw), which may have left
		// more than settings.
		settings = settings && !v.Unread && (byText || c.setOnly && !c.trust)
		c.setOnly = c.setOnly || settings
		c.broad = c.broad || !settings
	}
	return changed
}

// How a change to the catalog expires readings: a user's code that ran
// may have changed this connection's catalog (ExpireNow); DDL changed it
// for every connection of the process (ExpireAll); DDL that only removed
// or made a table that runs no code its text does not name leaves what
// a reading vouches for true, and makes it due (Expire).
// The larger the more a reading must see: a transaction that ran more
// than one expires as its largest (changedInTx).
const (
	expireRemoves uint8 = 1 + iota // DDL that makes no code run where none ran (sqllex.Refs.Makes)
	expireCode
	expireDDL
)

// expire expires the catalog's readings for a change made as how says:
// every judgment of this connection's, and with expireDDL every
// connection's, waits for the next reading.
func (c *conn) expire(how uint8) {
	c.forgetLexed() // judged with what the reading vouched for before
	switch how {
	case expireRemoves:
		c.catalog.Expire()
	case expireDDL:
		c.mustSee = c.catalog.ExpireAll()
	default:
		c.mustSee = c.catalog.ExpireNow()
		c.codeSee = c.mustSee
	}
}

// expireAfterTx expires the catalog again once the transaction in which
// a change ran has ended: committed, the change is what a reading sees
// from now on; rolled back, the reading costs one round trip.
func (c *conn) expireAfterTx() {
	if c.catalog != nil {
		c.expire(c.changedInTx)
	}
	c.changedInTx = 0
	c.forgetLexed() // judged again against a reading that sees it
}

// reportedDiffer reports whether a reported parameter differs from the
// session's start, outside a transaction: compared again only where the
// watch saw a report since the last comparison.
func (c *conn) reportedDiffer(pc *pgconn.PgConn) bool {
	if c.watch != nil && !c.watch.maybeChanged() {
		return c.differs
	}
	c.differs = c.paramsDiffer(pc)
	if c.role != roleAny && c.roleGone == "" && pc.ParameterStatus("in_hot_standby") == "on" {
		c.roleGone = serverOf(pc) // no session makes its server a standby
	}
	if c.watch != nil && !pc.IsBusy() {
		// Between statements: pgx decoded what the watch saw (see clear).
		// With a result open, a ParameterStatus read with its rows may
		// still wait in pgx's buffer, not yet among the values compared.
		c.watch.clear()
	}
	return c.differs
}

// paramsDiffer compares the reported parameters with the baseline.
func (c *conn) paramsDiffer(pc *pgconn.PgConn) bool {
	for i, k := range reportedParams {
		if pc.ParameterStatus(k) != c.reported[i] {
			return true
		}
	}
	return false
}

// Observe is ChangesSession and, when askTx, TxStatus, with one unwrapping
// of the pgx connection: pooldriver asks both after every statement.
func (c *conn) Observe(_ context.Context, query string, askTx bool) (bool, dialects.TxStatus, error) {
	if c.carry.broken != nil {
		return false, dialects.TxIdle, c.carry.broken
	}
	p := c.pgx()
	changed := c.changesSession(p.PgConn(), query)
	if !askTx {
		return changed, dialects.TxIdle, nil
	}
	status, err := txStatus(p)
	if c.roleGone != "" && err == nil {
		err = &dialects.RoleLostError{Server: c.roleGone}
	}
	return changed, status, err
}

// Written returns the number of bytes pgx wrote to the server on this
// connection (see dialects.WriteCounter), counted by the watch in front of
// pgx's writer.
//
// A connection of Wrap's, opened by pgx's stdlib without the watch, cannot
// count its bytes: pgx hands its writer to nobody once the connection is
// built. Its count is 0 until Written first finds pgx's connection closed,
// and 1 from then on. pgx closes the connection when a read or a write of
// a statement fails, and only then marks the statement's error safe to
// retry once bytes have left (a reply lost after the server ran the
// statement comes back as "conn closed", which pgx's stdlib turns into
// driver.ErrBadConn); a statement that fails and leaves the connection
// open (its context was done before it started, the connection was busy)
// wrote nothing, and neither did one refused because the connection was
// already closed. So the count moves over every statement that may have
// reached the server, and over a few that provably did not (a write that
// failed at its first byte), which then fail instead of being retried.
func (c *conn) Written() uint64 {
	if c.watch != nil {
		return c.watch.written.Load()
	}
	if !c.closedSeen && c.pgx().IsClosed() {
		c.closedSeen = true
	}
	if c.closedSeen {
		return 1
	}
	return 0
}

// SQLSTATEs of errors that mean a prepared statement is no longer usable.
const (
	featureNotSupported     = "0A000" // with "cached plan must not change result type"
	invalidSQLStatementName = "26000" // prepared statement "..." does not exist
)

// StaleStatement reports an error by which the server says a prepared
// statement is no longer usable: its result type changed after DDL
// ("cached plan must not change result type", matched by message or by the
// server routine that raises it, whatever the server's language), or the
// server no longer knows its name (DEALLOCATE, DISCARD).
func (c *conn) StaleStatement(err error) bool {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return false
	}
	switch pe.Code {
	case invalidSQLStatementName:
		return true
	case featureNotSupported:
		return pe.Message == "cached plan must not change result type" || pe.Routine == "RevalidateCachedQuery"
	}
	return false
}

// CheckIdle looks, without a round trip, for the server having closed the
// connection while it was idle: PostgreSQL sends an error, then hangs up.
func (c *conn) CheckIdle() error {
	pg := c.pgx().PgConn()
	if pg.IsClosed() {
		return driver.ErrBadConn
	}
	if !c.idleReady {
		c.idle.Init(pg.Conn())
		c.idleReady = true
	}
	return c.idle.Check()
}

// repliesRead is the number of answering messages read on the connection
// so far (see paramWatch.replies); 0 on a connection of Wrap's, which has
// no watch.
func (c *conn) repliesRead() uint64 {
	if c.watch == nil {
		return 0
	}
	return c.watch.replies.Load()
}

// unanswered returns err, the error of a statement sent on the extended
// protocol when before answering messages had been read, marked as not
// run (dialects.ErrNotRun, driver.ErrBadConn) where the server ended the
// session before it answered any of the statement's messages: the first
// answer read after them is the server's goodbye, a FATAL of class 57
// (operator intervention: pg_terminate_backend, a shutdown, an idle
// session's timeout). The server answers each message it completes (a
// Parse with ParseComplete, a Bind with BindComplete) before the next one,
// and runs a statement only at its Execute, after its Bind: a goodbye
// first means it got no further than the first message, whose work, if
// any, ended with the session. A connection killed while idle, whose
// goodbye reached the socket after the look at it before it was handed
// out, then fails nothing: database/sql runs the statement on another
// connection. On the simple protocol (Exec without arguments, through
// pgx's stdlib) the server runs the statement before its first answer,
// so the same goodbye may end a statement half run: it is not asked.
func (c *conn) unanswered(err error, before uint64) error {
	var pe *pgconn.PgError
	if c.watch == nil || c.watch.replies.Load()-before > 1 || !errors.As(err, &pe) ||
		pe.Severity != "FATAL" || !strings.HasPrefix(pe.Code, "57") {
		return err
	}
	return fmt.Errorf("%w (%w, %w)", err, dialects.ErrNotRun, driver.ErrBadConn)
}

// Driver returns the *stdlib.Conn.
func (c *conn) Driver() driver.Conn { return c.sc }

// ArgumentsAsIs reports that pgx's stdlib takes every argument as it is: its
// CheckNamedValue accepts all (pgx encodes what it has a codec for, and
// driver.Valuer and sql.Scanner natively), so pooldriver need not ask it
// per argument. TestArgumentsAsIs holds pgx to it.
func (c *conn) ArgumentsAsIs() bool { return true }

// OneResultAtATime reports that the server sends one result at a time (see
// dialects.OneResult): pgx's stdlib answers a statement sent while a
// result is open with driver.ErrBadConn.
func (c *conn) OneResultAtATime() bool { return true }

// Raw returns the *pgx.Conn. What its user prepares through it (pgx's
// caches, Prepare) a carried reset must not deallocate: the connection
// resets on its own from then on (carry.go). What its user runs through
// it no verdict sees: the next reset is the whole one (settingsOnly), and
// a probe prepared before may be gone (probeDoubt).
func (c *conn) Raw() any {
	c.stdlibCached = true
	c.broad = true
	c.probeDoubt = c.probeDoubt || c.probeAt != 0
	return c.sc.Conn()
}

func (c *conn) pgx() *pgx.Conn { return c.sc.Conn() }

// TxStatus reads the status of the last ReadyForQuery message; it never
// talks to the server, so lastQuery is not needed.
func (c *conn) TxStatus(ctx context.Context, lastQuery string) (dialects.TxStatus, error) {
	return txStatus(c.pgx())
}

func txStatus(p *pgx.Conn) (dialects.TxStatus, error) {
	if p.IsClosed() {
		return dialects.TxIdle, fmt.Errorf("pooldriver: postgres: connection is closed: %w", driver.ErrBadConn)
	}
	switch s := p.PgConn().TxStatus(); s {
	case 'I':
		return dialects.TxIdle, nil
	case 'T':
		return dialects.TxActive, nil
	case 'E':
		return dialects.TxFailed, nil
	default:
		return dialects.TxIdle, fmt.Errorf("pooldriver: postgres: unknown transaction status %q", s)
	}
}

// Rollback sends a raw ROLLBACK; outside a transaction the server only warns.
func (c *conn) Rollback(ctx context.Context) error {
	if _, err := c.pgx().PgConn().Exec(ctx, "ROLLBACK").ReadAll(); err != nil {
		return fmt.Errorf("pooldriver: postgres: rollback: %w", err)
	}
	return nil
}

// Ping sends an empty query.
func (c *conn) Ping(ctx context.Context) error {
	if err := c.runDue(ctx); err != nil {
		return err
	}
	if err := c.pgx().PgConn().Ping(ctx); err != nil {
		return fmt.Errorf("pooldriver: postgres: ping: %w", err)
	}
	return nil
}

// RollbackBeginTx ends a transaction begun with the driver's BeginTx by a
// raw ROLLBACK under ctx (see dialects.BeginTxRollbacker).
func (c *conn) RollbackBeginTx(ctx context.Context) error { return c.Rollback(ctx) }
