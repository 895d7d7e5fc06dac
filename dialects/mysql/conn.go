package mysql

import (
	"cmp"
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/pooldriver/pooldriver/dialects"
	"github.com/pooldriver/pooldriver/dialects/internal/sqllex"
)

// conn is one physical MySQL/MariaDB connection. It is not safe for
// concurrent use; pooldriver serializes all calls.
type conn struct {
	dc      driver.Conn
	execer  driver.ExecerContext
	queryer driver.QueryerContext
	pinger  driver.Pinger
	t       *template
	w       *wire                // the socket, watched; nil for a connection the dialect did not dial
	sock    net.Conn             // w, if COM_RESET_CONNECTION can be sent on it (no TLS, no compression); else nil
	idle    dialects.SocketCheck // CheckIdle's look at sock, set up with it
	addr    string               // the server's address as dialled (one of a DSN's several); "": not known

	// tracking: the server reports changes of the session's state
	// (session_track_state_change is on, CLIENT_SESSION_TRACK agreed).
	tracking bool
	// gtids: the server also reports each commit's GTID (MariaDB's
	// last_gtid, gtids.go), with the tracking.
	gtids bool

	// What the conn believes about the server session when the wire cannot
	// tell (see the package doc). known is false when the next TxStatus must
	// ask the server.
	known      bool
	inTx       bool
	autocommit bool
	inTxVar    int8 // 1: @@in_transaction exists; -1: it does not (MySQL); 0: not yet known
	broken     bool // a raw exchange failed; the protocol stream is lost

	// baseAuto is autocommit as the session started (the server's default,
	// or the DSN's): 1 on, 0 off, -1 not yet known. Autocommit other than
	// that is a change of the session. tainted: a statement that may have
	// changed autocommit ran since; baseAuto can no longer be learnt.
	baseAuto int8
	tainted  bool

	// The role the session started with, which COM_RESET_CONNECTION keeps
	// as it is on MariaDB, as CURRENT_ROLE() said at connect (startRole
	// false: NULL, none). roles: the server has CURRENT_ROLE(). Learnt
	// only where ResetSession can run (sock is set).
	roles     bool
	startRole string
	hadRole   bool

	// The last text the lexers read, the catalog's reading it was
	// compared with, and what they read in it.
	lexed      string
	lexedValid bool
	lexedSnap  *catalogSnap
	lexedFacts lexedFacts

	// cat: what the server's catalog says runs code no text shows (see
	// shadows), shared by the connections to the server; nil where the
	// server cannot be named (every statement that names anything then
	// counts). db: the database the session starts in, lower case.
	cat *dialects.Catalog[shadows]
	db  string

	// trust: the user vouches for their functions (see TrustFunctions).
	trust bool
}

// lexedFacts is what the lexers read in a statement's text.
type lexedFacts struct {
	session     sqllex.SessionFacts // what the text does and what the catalog says it runs, for sqllex.Verdict
	mayChangeTx bool                // see mayChangeTx
	ddl         bool                // the text may change what the catalog says (sqllex.Refs.DDL)
	writes      bool                // a statement that may write (see writes): it can fire triggers
}

// changesSession is the verdict on the text alone: sqllex's rules and
// calls, the catalog's shadows, or a statement whose changes the server
// may not report.
func (f lexedFacts) changesSession() bool { return sqllex.Verdict(f.session) }

// untrusted is changesSession as if the user did not trust their
// functions.
func (f lexedFacts) untrusted() bool {
	s := f.session
	s.Trust = false
	return sqllex.Verdict(s)
}

// wiredConn is a conn whose socket the dialect dialed and watches: it
// counts the bytes written and can interrupt blocked I/O. A conn without
// one (a wrapped connector's, or one on a custom network) lacks both
// interfaces, so that pooldriver takes the driver's word on them.
type wiredConn struct{ *conn }

var (
	_ dialects.Conn              = (*conn)(nil)
	_ dialects.IdleChecker       = (*conn)(nil)
	_ dialects.SessionTracker    = (*conn)(nil)
	_ dialects.StatementObserver = (*conn)(nil)
	_ dialects.SessionBaseline   = (*conn)(nil)
	_ dialects.BeginTxRollbacker = (*conn)(nil)
	_ dialects.FunctionTruster   = (*conn)(nil)
	_ dialects.OneResult         = (*conn)(nil)
	_ dialects.WriteCounter      = (*wiredConn)(nil)
	_ dialects.Interrupter       = (*wiredConn)(nil)
	_ dialects.Cutter            = (*wiredConn)(nil)
)

// OneResultAtATime reports that the server sends one result at a time (see
// dialects.OneResult): go-sql-driver writes a statement sent while a
// result is unread into that result, and breaks the connection.
func (c *conn) OneResultAtATime() bool { return true }

// Written returns the bytes written on the socket since it opened (see
// dialects.WriteCounter): the handshake's, every command's, and those of
// the dialect's own statements and resets.
func (c *wiredConn) Written() uint64 { return c.w.written.Load() }

// Interrupt sets the socket's deadline in the past, and keeps it there
// whatever deadline the driver sets after: blocked I/O fails at once, as
// does any later, and the driver closes the connection. Safe to call from
// any goroutine, at any time, more than once (see dialects.Interrupter).
func (c *wiredConn) Interrupt() { c.w.interrupt() }

// Cut is Interrupt (see dialects.Cutter). The server goes on with a
// statement under way until it next writes to the closed connection.
func (c *wiredConn) Cut() { c.w.interrupt() }

// CheckIdle looks, without a round trip, for the server having closed the
// connection while it was idle (KILL, wait_timeout, a restart). Without the
// plain socket (a connection of a wrapped connector, or with TLS,
// compression or a custom network) it asks the driver's ResetSession, which
// in go-sql-driver/mysql is that very check on the socket the driver keeps
// (unless the DSN says checkConnLiveness=false) and resets nothing.
func (c *conn) CheckIdle() error {
	if c.broken {
		return driver.ErrBadConn
	}
	if c.sock == nil {
		if r, ok := c.dc.(driver.SessionResetter); ok {
			return r.ResetSession(context.Background())
		}
		return nil
	}
	return c.idle.Check()
}

// newConn returns the conn for dc, a connection the template opened through
// w (nil if the template did not dial it), or closes dc and fails if it
// lacks what the dialect needs.
func newConn(t *template, dc driver.Conn, w *wire) (*conn, error) {
	c, ok := wrapConn(t, dc, w)
	if !ok {
		_ = dc.Close()
		return nil, fmt.Errorf("pooldriver: mysql: driver connection %T lacks ExecContext, QueryContext or Ping", dc)
	}
	return c, nil
}

// wrapConn returns the conn for dc, or false if dc lacks ExecContext,
// QueryContext or Ping. t and w are nil for a connection the dialect
// did not open (see adapt): it cannot reset its session.
func wrapConn(t *template, dc driver.Conn, w *wire) (*conn, bool) {
	c := &conn{dc: dc, t: t, w: w, baseAuto: -1}
	if w != nil && t != nil && t.noRawReset == "" {
		c.sock = w
		c.idle.Init(w)
	}
	var ok1, ok2, ok3 bool
	c.execer, ok1 = dc.(driver.ExecerContext)
	c.queryer, ok2 = dc.(driver.QueryerContext)
	c.pinger, ok3 = dc.(driver.Pinger)
	return c, ok1 && ok2 && ok3
}

// maxLexedText is the longest text conn.lexed keeps.
const maxLexedText = 4096

// read returns what the lexers read in query, compared with the catalog's
// reading snap (nil: none yet, and any text that names anything counts),
// remembered for the last text and reading: the same text with the same
// reading costs a string and a pointer compare.
func (c *conn) read(query string, snap *catalogSnap) lexedFacts {
	if !c.lexedValid || query != c.lexed || snap != c.lexedSnap {
		c.lexedFacts = c.lex(query, snap)
		c.lexed, c.lexedValid, c.lexedSnap = "", false, nil
		if len(query) <= maxLexedText {
			c.lexed, c.lexedValid, c.lexedSnap = query, true, snap
		}
	}
	return c.lexedFacts
}

// lex is read, uncached. Untrusted, a text counts that names what the
// catalog says runs code (a stored function, a table with a trigger, a
// view over either), and one that writes where the user may not see
// every trigger; not one CALL of a procedure the catalog proves harmless
// (see shadows.provedCall).
func (c *conn) lex(query string, snap *catalogSnap) lexedFacts {
	f := sqllex.Of(query, sqllex.MySQL)
	tf := textMemo.Get(query)
	var sh *sqllex.Shadows
	blind := false
	if snap != nil {
		sh = snap.Value.s
		blind = tf.writes && snap.Value.writesBlind(c.db, f.Refs)
	}
	s := f.SessionWith(c.trust, sh)
	s.Text = s.Text || tf.hidesChanges
	if snap != nil && !blind && !s.Text && (s.Runs || s.Calls && !s.Vouched) && snap.Value.provedCall(query, f) {
		s.Vouched, s.Runs = true, false // one CALL the reading proves harmless: it runs nothing else
	}
	s.Runs = s.Runs || blind
	return lexedFacts{
		session:     s,
		mayChangeTx: tf.mayChangeTx,
		ddl:         f.Refs != nil && f.Refs.DDL,
		writes:      tf.writes,
	}
}

// TrustFunctions says whether the user vouches for their functions and
// procedures (see dialects.FunctionTruster): trusted, a call counts only
// for what its text or the server shows. Not trusted by default: a stored
// function or procedure can turn session_track_state_change off, change
// the session and then fail (an ERR packet carries no flags), and a
// connection with compression or TLS has no watched wire at all.
func (c *conn) TrustFunctions(trust bool) {
	c.trust = trust
	c.lexedValid = false
}

// wired returns the wire's state, and whether it can answer: the framing
// holds, no reply is awaited, and a command's reply told the flags.
func (c *conn) wired() (uint32, bool) {
	if c.w == nil {
		return 0, false
	}
	s := c.w.state.Load()
	return s, s&(wireLost|wireBusy|wireKnown) == wireKnown
}

// ChangesSession reports a statement that may have changed the session.
// From the statement's text: SET (any), user variables assigned by SELECT
// ... INTO @var or :=, GET_LOCK and RELEASE_*LOCK*, LOCK/UNLOCK, temporary
// tables, PREPARE and DEALLOCATE, USE, HANDLER, XA, executable comments,
// ... (see sqllex.ChangesSession), read with MySQL's quoting and comments,
// and either backslash setting when a string holds a backslash; CALL and
// any call of a function that is not a built-in known to leave the session
// alone, and any name the server's catalog says runs code (a stored
// function, a table with a trigger, a view over either; see shadows),
// unless the user trusts their functions (see sqllex.CallsOf and
// TrustFunctions); and EXECUTE and compound statements, whose changes the
// server may not report (see hidesChanges). From the server, on a
// connection whose socket the dialect watches: SERVER_SESSION_STATE_CHANGED
// in any OK packet since the last statement (read before the framing was
// lost, if it was, and the loss itself), and autocommit other than the
// session started with; after an error, which carries no flags, any
// statement that is not a plain SELECT, INSERT, ..., and any that may
// have run a user's code, trusted or not, counts.
func (c *conn) ChangesSession(query string) bool {
	changed, _, _ := c.observe(context.Background(), query, false, false)
	return changed
}

// Observe is ChangesSession and, when askTx, TxStatus (see
// dialects.StatementObserver). On a watched connection neither costs a
// round trip, but after a statement that failed and may have opened or
// ended a transaction.
func (c *conn) Observe(ctx context.Context, query string, askTx bool) (bool, dialects.TxStatus, error) {
	return c.observe(ctx, query, askTx, true)
}

// observe is Observe; mayRead: the catalog may be read, if due, on the
// caller's path (see readCatalogAfter).
func (c *conn) observe(ctx context.Context, query string, askTx, mayRead bool) (changed bool, status dialects.TxStatus, err error) {
	snap := c.snapshot()
	facts := c.read(query, snap)
	v := facts.session
	if c.w != nil {
		// A change the server reported stands though the framing was
		// lost since; and the loss itself counts as one (see lose).
		if c.w.state.Load()&wireChanged != 0 && c.w.takeChanged() {
			v.Reported = true
		}
	}
	s, wired := c.wired()
	// A failed statement's ERR packet has no flags: a change it made
	// before it failed (a compound statement, a procedure, a trusted
	// function, a trigger, one the catalog did not show yet) goes
	// unreported, so the user's trust, which leans on the server's
	// report, does not hold. Any statement that can run code counts (DML,
	// CALL, anything that fires triggers): errors are rare, and a reset
	// after one costs little. A read that runs nothing but listed
	// built-ins changed nothing, failed or not.
	v.Failed = wired && s&wireErr != 0 && query != ""
	v.MayRunCode = facts.mayChangeTx || facts.writes
	var autocommit, knownAC, idle bool
	switch {
	case askTx:
		var inTx bool
		inTx, autocommit, err = c.txState(ctx, query, facts.mayChangeTx)
		if err != nil {
			return sqllex.Verdict(v), dialects.TxIdle, err
		}
		knownAC = true
		if inTx {
			status = dialects.TxActive
		}
		idle = !inTx
	case wired:
		autocommit, knownAC = s&wireAutocommit != 0, true
		idle = s&wireInTx == 0
	case c.known:
		autocommit, knownAC = c.autocommit, true
	}
	if knownAC && (c.baseAuto < 0 && !autocommit || c.baseAuto >= 0 && autocommit != (c.baseAuto == 1)) {
		// Autocommit off where the session had it on: the next user's
		// statements would run in a transaction nobody commits.
		v.Reported = true
	}
	c.taint(query, facts.mayChangeTx)
	if idle && autocommit && knownAC && mayRead && c.cat != nil && query != "" && (snap == nil || facts.ddl) {
		// Read the catalog now, where it cannot open a transaction nor
		// run inside one; not at all where it can (autocommit off,
		// a transaction open, the state unknown), and another
		// connection's reading serves.
		if err := c.readCatalogAfter(ctx, query, snap, facts.ddl, &v); err != nil && askTx {
			return sqllex.Verdict(v), status, err
		}
	}
	return sqllex.Verdict(v), status, nil
}

// readCatalogAfter reads the catalog after query, if it is due or query
// may have changed it (ddl: a CREATE, a DROP; the reading snap then
// expires for every connection to the server, and this one reads it
// again at once), and adds to v what the new reading says of query (a
// text that creates a trigger and then writes its table), or that none
// could be had.
func (c *conn) readCatalogAfter(ctx context.Context, query string, snap *catalogSnap, ddl bool, v *sqllex.SessionFacts) error {
	if ddl {
		c.cat.Expire()
	}
	next, err := c.loadCatalog(ctx, ddl)
	if err != nil {
		v.Unread = true
		return err
	}
	if ddl && (next == nil || next.Due()) {
		v.Unread = true // judged by a reading older than the DDL: nothing is known
		return nil
	}
	if next != snap {
		n := c.lex(query, next).session
		v.Later, v.LaterVouched, v.LaterRuns = true, n.Vouched, n.Runs
	}
	return nil
}

// taint notes a statement that may have changed autocommit.
func (c *conn) taint(query string, mayChangeTx bool) {
	if query != "" && mayChangeTx {
		c.tainted = true
	}
}

// TxStatus reports whether a transaction is open: on a watched connection,
// from the status flags of the last reply (see wire), without a round
// trip; otherwise, or after a failed statement that may have opened or
// ended one, the server is asked when lastQuery may have changed the
// transaction state or autocommit is believed off (see the package doc).
func (c *conn) TxStatus(ctx context.Context, lastQuery string) (dialects.TxStatus, error) {
	mayChangeTx := c.read(lastQuery, c.snapshot()).mayChangeTx
	inTx, _, err := c.txState(ctx, lastQuery, mayChangeTx)
	c.taint(lastQuery, mayChangeTx)
	if err != nil || !inTx {
		return dialects.TxIdle, err
	}
	return dialects.TxActive, nil
}

// txState returns whether a transaction is open and autocommit is on after
// query, which mayChangeTx says may have opened or ended a transaction.
func (c *conn) txState(ctx context.Context, query string, mayChangeTx bool) (inTx, autocommit bool, err error) {
	if c.broken {
		return false, false, errBroken
	}
	if s, ok := c.wired(); ok {
		// After an error the flags are those of the reply before; they
		// stand if the statement could not have opened or ended a
		// transaction (with autocommit on). One that ended it by failing
		// (a deadlock) leaves the belief on the safe side.
		if s&wireErr == 0 || s&wireAutocommit != 0 && !mayChangeTx {
			c.known = false // should the wire be lost later, ask the server
			inTx, autocommit = s&wireInTx != 0, s&wireAutocommit != 0
			c.learnBase(autocommit, query, mayChangeTx)
			return inTx, autocommit, nil
		}
		c.known = false
	} else if query != "" && (!c.autocommit || mayChangeTx) {
		c.known = false
	}
	if !c.known {
		if err := c.refresh(ctx, query); err != nil {
			return false, false, err
		}
	}
	c.learnBase(c.autocommit, query, mayChangeTx)
	return c.inTx, c.autocommit, nil
}

// learnBase takes autocommit for the session's starting value if that is not
// yet known and nothing since the session started (query included: none,
// or one that cannot change it) may have changed it.
func (c *conn) learnBase(autocommit bool, query string, mayChangeTx bool) {
	if c.baseAuto < 0 && !c.tainted && (query == "" || !mayChangeTx) {
		c.baseAuto = 0
		if autocommit {
			c.baseAuto = 1
		}
	}
}

// MarkBaseline takes the session as it is now for the one it started with
// (see dialects.SessionBaseline): statements ran on the driver connection
// behind the conn's back. It forgets the cached transaction state, so the
// next TxStatus asks the server unless the wire can tell.
func (c *conn) MarkBaseline() {
	c.known = false
	c.baseAuto, c.tainted = -1, false
	if c.w != nil {
		c.w.takeChanged()
	}
	if s, ok := c.wired(); ok && s&wireErr == 0 {
		c.learnBase(s&wireAutocommit != 0, "", true)
	}
}

// baseline takes the session as it is now for the one it started with, and
// learns its transaction state (asking the server if the wire cannot
// tell).
func (c *conn) baseline(ctx context.Context) error {
	c.MarkBaseline()
	_, _, err := c.txState(ctx, "", true)
	return err
}

// Driver returns the go-sql-driver/mysql connection.
func (c *conn) Driver() driver.Conn { return c.dc }

// Raw returns the go-sql-driver/mysql connection; its type is unexported,
// so it is of use through the database/sql/driver interfaces only.
func (c *conn) Raw() any { return c.dc }

var errBroken = fmt.Errorf("pooldriver: mysql: connection lost its protocol state: %w", driver.ErrBadConn)

// erUnknownSystemVariable is the server's error number for @@in_transaction
// on servers that lack it (MySQL).
const erUnknownSystemVariable = 1193

// refresh asks the server whether a transaction is open and whether
// autocommit is on, in one round trip.
func (c *conn) refresh(ctx context.Context, lastQuery string) error {
	if c.inTxVar >= 0 {
		v, err := c.queryInts(ctx, "SELECT @@in_transaction, @@autocommit")
		var me *mysql.MySQLError
		switch {
		case err == nil:
			c.inTxVar = 1
			c.inTx, c.autocommit, c.known = v[0] != 0, v[1] != 0, true
			return nil
		case errors.As(err, &me) && me.Number == erUnknownSystemVariable:
			c.inTxVar = -1
		default:
			return fmt.Errorf("pooldriver: mysql: reading the transaction state: %w", err)
		}
	}
	// No @@in_transaction: autocommit from the server, the transaction
	// from the statement's keywords (best effort).
	v, err := c.queryInts(ctx, "SELECT @@autocommit")
	if err != nil {
		return fmt.Errorf("pooldriver: mysql: reading the transaction state: %w", err)
	}
	c.autocommit = v[0] != 0
	keywords, _ := statementKeywords(lastQuery)
	for _, k := range keywords {
		switch {
		case k == "BEGIN" || k == "START":
			c.inTx = true
		case k == "COMMIT" || k == "ROLLBACK":
			c.inTx = false
		case !c.autocommit && k != "SET":
			c.inTx = true
		}
	}
	c.known = true
	return nil
}

// queryRow runs a one-row query and returns its columns.
func (c *conn) queryRow(ctx context.Context, query string) ([]driver.Value, error) {
	rows, err := c.queryer.QueryContext(ctx, query, nil)
	if err != nil {
		return nil, err
	}
	defer func() { _ = rows.Close() }() // the row is read; a broken connection fails its next use
	dest := make([]driver.Value, len(rows.Columns()))
	if err := rows.Next(dest); err != nil {
		if err == io.EOF {
			return nil, fmt.Errorf("%s: no row", query)
		}
		return nil, err
	}
	return dest, nil
}

// queryInts runs a one-row query whose columns are integers.
func (c *conn) queryInts(ctx context.Context, query string) ([]int64, error) {
	dest, err := c.queryRow(ctx, query)
	if err != nil {
		return nil, err
	}
	out := make([]int64, len(dest))
	for i, v := range dest {
		switch v := v.(type) {
		case int64:
			out[i] = v
		case uint64:
			out[i] = int64(v)
		case []byte:
			n, err := strconv.ParseInt(string(v), 10, 64)
			if err != nil {
				return nil, fmt.Errorf("%s: column %d: %w", query, i, err)
			}
			out[i] = n
		default:
			return nil, fmt.Errorf("%s: column %d is %T", query, i, v)
		}
	}
	return out, nil
}

// Rollback sends a raw ROLLBACK. Autocommit is left as it is.
func (c *conn) Rollback(ctx context.Context) error {
	if c.broken {
		return errBroken
	}
	if _, err := c.execer.ExecContext(ctx, "ROLLBACK", nil); err != nil {
		c.known = false
		return fmt.Errorf("pooldriver: mysql: rollback: %w", err)
	}
	c.inTx = false
	return nil
}

// comResetConnection is the protocol command that resets a session.
const comResetConnection = 0x1f

// ResetSession sends COM_RESET_CONNECTION on the driver's socket, then
// restores what the driver set up at connect time (SET NAMES and the DSN's
// system variables) and the session tracking, and takes the session as it
// is then for the one it started with.
//
// With TLS, compression or a custom network the socket is out of reach and
// ResetSession returns an error: pooldriver then closes the connection. So
// it is for a connection that pooldriver.Wrap's connector opened, whose
// socket the dialect never saw: ResetSession returns an error that
// matches dialects.ErrUnsupported.
func (c *conn) ResetSession(ctx context.Context) error {
	if c.broken {
		return errBroken
	}
	if c.t == nil {
		return fmt.Errorf("pooldriver: mysql: no session reset for a connection of a wrapped connector: %w", dialects.ErrUnsupported)
	}
	if c.sock == nil {
		return fmt.Errorf("pooldriver: mysql: no session reset available: %s", c.t.noRawReset)
	}
	if err := c.rawReset(ctx); err != nil {
		return err
	}
	// The reset reverts the character set and every session variable to the
	// server's defaults. The SET NAMES also refreshes the driver's copy of
	// the server status flags, which decides how it escapes interpolated
	// arguments (NO_BACKSLASH_ESCAPES).
	if err := c.restoreSession(ctx); err != nil {
		return err
	}
	if err := c.restoreIdentity(ctx); err != nil {
		return err
	}
	return c.baseline(ctx)
}

// erSPDoesNotExist is the server's error number for a function it lacks:
// CURRENT_ROLE() on MySQL before 8.0.
const erSPDoesNotExist = 1305

// learnRole reads the role the session starts with (a default role, or
// none), which ResetSession restores.
func (c *conn) learnRole(ctx context.Context) error {
	v, err := c.queryRow(ctx, "SELECT CURRENT_ROLE()")
	var me *mysql.MySQLError
	switch {
	case errors.As(err, &me) && me.Number == erSPDoesNotExist:
		return nil // no roles
	case err != nil:
		return fmt.Errorf("pooldriver: mysql: reading the current role: %w", err)
	}
	c.roles = true
	c.startRole, c.hadRole = textOf(v[0])
	return nil
}

// restoreIdentity puts back what COM_RESET_CONNECTION leaves as it is on
// MariaDB 10.11: the current role (SET ROLE) and the current database, both
// read in one SELECT and set only where they differ from the start. Where
// the DSN names no database, a session that went into one cannot leave it,
// so ResetSession fails and pooldriver replaces the connection. So does a
// role that cannot be named back (MySQL 8 lists its active roles as
// user@host).
func (c *conn) restoreIdentity(ctx context.Context) error {
	q := "SELECT NULL, DATABASE()"
	if c.roles {
		q = "SELECT CURRENT_ROLE(), DATABASE()"
	}
	v, err := c.queryRow(ctx, q)
	if err != nil {
		return fmt.Errorf("pooldriver: mysql: reset session: reading the role and database: %w", err)
	}
	if db, inDB := textOf(v[1]); !inDB && c.t.cfg.DBName != "" || inDB && db != c.t.cfg.DBName {
		if c.t.cfg.DBName == "" {
			return errors.New("pooldriver: mysql: reset session: the session selected a database and the DSN names none to go back to")
		}
		if _, err := c.execer.ExecContext(ctx, "USE "+quoteIdent(c.t.cfg.DBName), nil); err != nil {
			return fmt.Errorf("pooldriver: mysql: reset session: selecting the database: %w", err)
		}
	}
	if !c.roles {
		return nil
	}
	if role, has := textOf(v[0]); role == c.startRole && has == c.hadRole {
		return nil
	}
	set := "SET ROLE NONE"
	if c.hadRole {
		if strings.ContainsAny(c.startRole, "@,`") {
			return errors.New("pooldriver: mysql: reset session: the session's role changed and cannot be set back by name")
		}
		set = "SET ROLE " + quoteIdent(c.startRole)
	}
	if _, err := c.execer.ExecContext(ctx, set, nil); err != nil {
		return fmt.Errorf("pooldriver: mysql: reset session: restoring the role: %w", err)
	}
	return nil
}

// textOf returns a text column's value, and false for NULL.
func textOf(v driver.Value) (string, bool) {
	switch v := v.(type) {
	case nil:
		return "", false
	case []byte:
		return string(v), true
	case string:
		return v, true
	}
	return fmt.Sprint(v), true
}

// aLongTimeAgo is a deadline in the past, to interrupt blocked I/O.
var aLongTimeAgo = time.Unix(1, 0)

// rawReset exchanges COM_RESET_CONNECTION with the server, bypassing the
// driver, which is idle: pooldriver never runs a statement and a session
// call at once. Unless the server answered, the connection is marked broken.
func (c *conn) rawReset(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	nc := c.sock
	if dl, ok := ctx.Deadline(); ok {
		_ = nc.SetDeadline(dl)
	}
	interrupted := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		_ = nc.SetDeadline(aLongTimeAgo)
		close(interrupted)
	})
	serverErr, err := exchangeReset(nc)
	if !stop() {
		<-interrupted
		if err == nil {
			err = ctx.Err() // the deadline in the past would hit the driver next
		}
	}
	if err != nil {
		c.broken = true
		return fmt.Errorf("pooldriver: mysql: reset session: %w", err)
	}
	_ = nc.SetDeadline(time.Time{})
	if serverErr != nil {
		return fmt.Errorf("pooldriver: mysql: reset session: %w", serverErr)
	}
	return nil
}

// exchangeReset writes COM_RESET_CONNECTION and reads the reply: OK, or an
// ERR returned as serverErr.
func exchangeReset(nc net.Conn) (serverErr *mysql.MySQLError, err error) {
	// A packet: 3-byte length, sequence number 0, the command byte.
	if _, err := nc.Write([]byte{1, 0, 0, 0, comResetConnection}); err != nil {
		return nil, err
	}
	var hdr [4]byte
	if _, err := io.ReadFull(nc, hdr[:]); err != nil {
		return nil, err
	}
	n := int(hdr[0]) | int(hdr[1])<<8 | int(hdr[2])<<16
	if n == 0 || n == 0xffffff {
		return nil, fmt.Errorf("unexpected reply of %d bytes", n)
	}
	payload := make([]byte, n)
	if _, err := io.ReadFull(nc, payload); err != nil {
		return nil, err
	}
	switch payload[0] {
	case 0x00: // OK
		return nil, nil
	case 0xff: // ERR: code, optional '#' + SQLSTATE, message
		if len(payload) < 3 {
			return nil, errors.New("short error reply")
		}
		me := &mysql.MySQLError{Number: uint16(payload[1]) | uint16(payload[2])<<8}
		msg := payload[3:]
		if len(msg) >= 6 && msg[0] == '#' {
			copy(me.SQLState[:], msg[1:6])
			msg = msg[6:]
		}
		me.Message = string(msg)
		return me, nil
	default:
		return nil, fmt.Errorf("unexpected reply 0x%02x", payload[0])
	}
}

// restoreSession repeats what the driver does after logging in, in one
// SET: NAMES for the DSN's charset (or the handshake's collation), the DSN's
// system variables and the session tracking. Where the DSN lists more than
// one charset, the first the server accepts, as the driver does.
func (c *conn) restoreSession(ctx context.Context) error {
	cfg := c.t.cfg
	names := c.t.charsets
	if len(names) == 0 {
		collation := cfg.Collation
		if collation == "" {
			collation = "utf8mb4_general_ci" // the driver's handshake default
		}
		charset, _, _ := strings.Cut(collation, "_")
		names = []string{charset}
	}
	var rest strings.Builder
	list := trackedList
	for k, v := range cfg.Params {
		if c.tracking && c.gtids && paramName(k) == "session_track_system_variables" {
			// One SET evaluates every value before it assigns any: the
			// tracking's list is the DSN's value itself, last_gtid added.
			list = v
			continue
		}
		rest.WriteString(", " + k + " = " + v)
	}
	if c.tracking {
		// The reset turned the tracker off with every other session
		// variable.
		rest.WriteString(", " + c.tracked(list))
	}
	var err error
	for _, cs := range names {
		q := "SET NAMES " + cs
		if cfg.Collation != "" || len(c.t.charsets) == 0 {
			q += " COLLATE " + cmp.Or(cfg.Collation, "utf8mb4_general_ci")
		}
		if _, err = c.execer.ExecContext(ctx, q+rest.String(), nil); err == nil {
			return nil
		}
	}
	return fmt.Errorf("pooldriver: mysql: reset session: restoring the character set and the DSN's system variables: %w", err)
}

func quoteIdent(s string) string { return "`" + strings.ReplaceAll(s, "`", "``") + "`" }

// Ping runs COM_PING through the driver.
func (c *conn) Ping(ctx context.Context) error {
	if c.broken {
		return errBroken
	}
	if err := c.pinger.Ping(ctx); err != nil {
		return fmt.Errorf("pooldriver: mysql: ping: %w", err)
	}
	return nil
}

// Close closes the connection.
func (c *conn) Close() error { return c.dc.Close() }

// RollbackBeginTx ends a transaction begun with the driver's BeginTx by a
// raw ROLLBACK under ctx (see dialects.BeginTxRollbacker).
func (c *conn) RollbackBeginTx(ctx context.Context) error { return c.Rollback(ctx) }
