package postgres

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pooldriver/pooldriver/dialects"
	"github.com/pooldriver/pooldriver/dialects/internal/sqllex"
)

var (
	_ dialects.StatementKeeper  = (*conn)(nil)
	_ dialects.StatementDropper = (*conn)(nil)
)

// resetSQL returns the session to a new connection's state in one round
// trip: what DISCARD ALL does, but for DEALLOCATE ALL, and what DISCARD
// leaves. The statements pgx and the direct path prepared over the
// protocol stay where they are still what was prepared (see reconcile),
// and are planned again (DISCARD PLANS: one the last session made the
// server parse again, after DDL or ANALYZE, holds constants read under
// its TimeZone or DateStyle). The role and session authorization, every setting,
// cursors, listeners, advisory locks, temporary objects and sequence
// positions go back to what a new connection has; the random seed is
// drawn afresh (setseed would otherwise make the next user's random()
// predictable); a replication origin a session set up is reset, where
// the role may; and, where the database has them, dblink's connections
// (logged in with the last user's credentials) and postgres_fdw's are
// closed. One simple-protocol message: the statements run in one
// implicit transaction, which none of them refuses.
//
// Its last statement returns the names of the prepared statements the
// server has, and whether a user prepared them with SQL PREPARE:
// resetPrepared turns those into DEALLOCATE statements, run in a second
// message (almost always none). Deallocating them in the same message
// would need a DO block, whose PL/pgSQL compile doubled the reset's
// server time (docs/design.md).
//
// A replication origin is reset only where the login role may (by default
// superusers only; others cannot have set one up but through SET ROLE to
// a role granted it): the first reset of a connection asks, after the
// role went back to the login role, and the answer holds for the
// connection's life.
func resetSQL(cat *pgCatalog, origin originPrivilege) string {
	stmts, _ := resetStatements(cat, origin, "", listPrepared, false)
	return strings.Join(stmts, "; ")
}

// listPrepared is the reset's last statement: the prepared statements the
// server has, and whether a user prepared them with SQL PREPARE.
const listPrepared = `SELECT name, from_sql FROM pg_catalog.pg_prepared_statements`

// resetStatements returns resetSQL's statements, one by one, list last,
// and custom (customSQL: the custom settings' names the session lacks),
// where not "", at the index returned (else -1). With settings (the
// session changed nothing but its settings since the last reset:
// settingsOnly), only what undoes settings: the role and session
// authorization, RESET ALL, the plans, the temporary objects (a
// search_path naming pg_temp makes one of every table created), a fresh
// seed (seed is a setting RESET ALL leaves); a connection's first reset
// still asks about replication origins.
func resetStatements(cat *pgCatalog, origin originPrivilege, custom, list string, settings bool) ([]string, int) {
	stmts := make([]string, 0, 13)
	seed := `pg_catalog.setseed(` + strconv.FormatFloat(freshSeed(), 'g', -1, 64) + `)`
	if settings {
		stmts = append(stmts, `SET SESSION AUTHORIZATION DEFAULT`, `RESET ALL`, `DISCARD PLANS`, `DISCARD TEMP`, `SELECT `+seed)
	} else {
		stmts = append(stmts, `CLOSE ALL`, `SET SESSION AUTHORIZATION DEFAULT`, `RESET ALL`, `DISCARD PLANS`, `UNLISTEN *`,
			`DISCARD TEMP`, `DISCARD SEQUENCES`, `SELECT pg_catalog.pg_advisory_unlock_all(), `+seed)
	}
	customAt := -1
	if custom != "" {
		customAt = len(stmts)
		stmts = append(stmts, custom)
	}
	if cat != nil && cat.dblink != "" && !settings {
		stmts = append(stmts, dblinkClose(cat.dblink)...)
	}
	if cat != nil && cat.fdw != "" && !settings {
		stmts = append(stmts, fdwClose(cat.fdw))
	}
	switch {
	case origin == originUnknown:
		// The server checks the privilege of a function a statement
		// names before it runs, whichever branch of a CASE calls it: a
		// role may not even name these unless granted (superusers are).
		stmts = append(stmts, `SELECT pg_catalog.has_function_privilege('pg_catalog.pg_replication_origin_session_is_setup()', 'execute') `+
			`AND pg_catalog.has_function_privilege('pg_catalog.pg_replication_origin_session_reset()', 'execute')`)
	case origin == originMay && !settings:
		stmts = append(stmts, originResetSQL)
	}
	if resetFault != "" {
		stmts = append(stmts, resetFault)
	}
	return append(stmts, list), customAt
}

// resetFault, where a test sets it, is a statement every reset runs
// before its last: a reset that fails on the server (carry_test.go).
var resetFault string

// freshSeed returns a seed for setseed, in [-1, 1), that the last user
// cannot know.
func freshSeed() float64 {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return float64(binary.LittleEndian.Uint64(b[:])>>11)/(1<<52) - 1
}

// ResetSession rolls back an open transaction (the reset refuses to run in
// a failed one, and must not commit a live one), then runs resetSQL,
// deallocates the statements a user prepared in SQL, and brings the
// statement caches in step with what the server still has (reconcile).
func (c *conn) ResetSession(ctx context.Context) error {
	pc := c.pgx().PgConn()
	settings := c.settingsOnly()
	c.stmtsDropped, c.sqlPrepared = false, false // the list finds what a user prepared
	c.setOnly, c.broad = false, false
	c.carry.due, c.carry.done = false, nil
	if pc.TxStatus() != 'I' {
		if err := c.Rollback(ctx); err != nil {
			return err
		}
	}
	cat := c.lastReading(pc)
	custom := c.takeCustom(true)
	stmts, customAt := resetStatements(cat, c.origin, custom, listPrepared, settings)
	res, err := pc.Exec(ctx, strings.Join(stmts, "; ")).ReadAll()
	if err != nil {
		c.customDone(nil, err)
		return fmt.Errorf("pooldriver: postgres: reset session: %w", err)
	}
	c.customDone(customRows(res, customAt), nil)
	if c.origin == originUnknown {
		if c.origin, err = originAnswer(res); err != nil {
			return err
		}
		if c.origin == originMay {
			if _, err := pc.Exec(ctx, originResetSQL).ReadAll(); err != nil {
				return fmt.Errorf("pooldriver: postgres: reset session: replication origin: %w", err)
			}
		}
	}
	prepared, err := resetPrepared(res)
	if err != nil {
		return err
	}
	if err := c.reconcile(ctx, prepared); err != nil {
		return fmt.Errorf("pooldriver: postgres: reset session: %w", err)
	}
	c.afterReset()
	return c.readAfterReset(ctx, pc, cat)
}

// preparedStmt is a row of pg_prepared_statements.
type preparedStmt struct {
	name    string
	fromSQL bool
}

// resetPrepared returns the prepared statements resetSQL's last statement
// listed.
func resetPrepared(res []*pgconn.Result) ([]preparedStmt, error) {
	if len(res) < 2 || !res[len(res)-1].CommandTag.Select() {
		return nil, fmt.Errorf("pooldriver: postgres: reset session: %d results, not the reset's", len(res))
	}
	rows := res[len(res)-1].Rows
	out := make([]preparedStmt, 0, len(rows))
	for _, row := range rows {
		if len(row) != 2 {
			return nil, fmt.Errorf("pooldriver: postgres: reset session: a row of %d columns, not a statement's name and origin", len(row))
		}
		out = append(out, preparedStmt{name: string(row[0]), fromSQL: string(row[1]) == "t"})
	}
	return out, nil
}

// deallocateSQL returns the DEALLOCATE statements for names, or "".
func deallocateSQL(names []string) string {
	var b strings.Builder
	for _, n := range names {
		if b.Len() > 0 {
			b.WriteString("; ")
		}
		b.WriteString("DEALLOCATE ")
		b.WriteString(quoteIdent(n))
	}
	return b.String()
}

// quoteIdent quotes name as an SQL identifier: in double quotes, each
// double quote doubled. A name cannot hold a NUL, the one byte this would
// not carry.
func quoteIdent(name string) string {
	return `"` + strings.ReplaceAll(name, `"`, `""`) + `"`
}

// ResetKeepsStatements reports that ResetSession keeps pgx's prepared
// statements (see resetSQL) where the session left them as they were.
func (c *conn) ResetKeepsStatements() bool { return true }

// ResetDroppedStatements reports that the last ResetSession found the
// session had deallocated or replaced statements pgx or the direct path
// prepared, and dropped them all (see reconcile).
func (c *conn) ResetDroppedStatements() bool { return c.stmtsDropped }

// reconcile brings the statement caches in step with the server after a
// reset, so that the next user's statement neither fails nor runs another
// user's: it deallocates what a user prepared with SQL, or over the
// protocol under a name of their own; drops every
// statement pgx and the direct path prepared (on the server and in their
// caches, and tells pooldriver to drop its own: ResetDroppedStatements)
// when the session deallocated one of the direct path's or prepared a
// statement under a name of pgx's or the direct path's; and otherwise
// drops the statements the direct path prepared while the session was
// changed (under another search_path, with a temporary table shadowing
// a table, their plans read other objects than the next user's would).
func (c *conn) reconcile(ctx context.Context, prepared []preparedStmt) error {
	d := &c.direct
	server := make(map[string]bool, len(prepared))
	var users []string
	tampered := false
	for _, p := range prepared {
		if p.fromSQL {
			users = append(users, p.name)
			tampered = tampered || driverName(p.name)
			continue
		}
		if !driverName(p.name) {
			// Prepared over the protocol under a name of the user's
			// own (pgx.Conn.Prepare through RawConn): pgx forgets it
			// too (clientstate.go).
			if err := c.pgx().Deallocate(ctx, p.name); err != nil {
				return fmt.Errorf("deallocating what the session prepared: %w", err)
			}
			continue
		}
		server[p.name] = true
	}
	pc := c.pgx().PgConn()
	if sql := deallocateSQL(users); sql != "" {
		if _, err := pc.Exec(ctx, sql).ReadAll(); err != nil {
			return fmt.Errorf("deallocating what the session prepared: %w", err)
		}
	}
	for _, st := range d.stmts {
		// A statement a carried reset deallocated (onServer false) is
		// prepared again with its next run: missing is as it should be;
		// the server having one under its name is not.
		tampered = tampered || st.onServer != server[st.sd.Name]
	}
	for name := range c.stdlibNames {
		tampered = tampered || !server[name]
	}
	// The probe's statement (xact.go) is where execProbed left it, or
	// every statement is dropped: its next Parse must not meet one.
	tampered = tampered || server[probeName] != (c.probeAt == c.dropGen+1)
	c.probeDoubt = false
	dirty := c.dirtySeq
	c.dirtySeq = 0
	if tampered {
		if err := c.dropAll(ctx); err != nil {
			return fmt.Errorf("deallocating the statements the session tampered with: %w", err)
		}
		c.stmtsDropped = true
		return nil
	}
	if dirty > 0 {
		for q, st := range d.stmts {
			if st.seq >= dirty {
				c.forget(q, st)
			}
		}
		return c.dropStale(ctx)
	}
	return nil
}

// driverName reports a name of the statements pgx (stmt_…, stmtcache_…)
// or the direct path (pooldriver_…) prepares.
func driverName(name string) bool {
	return strings.HasPrefix(name, "pooldriver_") || strings.HasPrefix(name, "stmt_") || strings.HasPrefix(name, "stmtcache_")
}

// notePrepared records, and returns, the name under which pgx's stdlib
// prepared query (pgx names a statement prepared under its own text stmt_
// and the first 24 bytes of its SHA-256, in hex), for reconcile to find it
// gone. Closing the statement (namedStmt) forgets the name again.
func (c *conn) notePrepared(query string) string {
	if c.stdlibNames == nil {
		c.stdlibNames = make(map[string]struct{})
	}
	sum := sha256.Sum256([]byte(query))
	name := "stmt_" + hex.EncodeToString(sum[:24])
	c.stdlibNames[name] = struct{}{}
	return name
}

// originPrivilege is what a connection's login role may do with a
// replication origin session: not yet asked, reset it, or not.
type originPrivilege uint8

const (
	originUnknown originPrivilege = iota
	originMay
	originMayNot
)

// originResetSQL ends the session's replication origin, if it has one.
// A standby's session can have none, and refuses even the question: the
// CASE asks only outside recovery (its branches run in order).
const originResetSQL = `SELECT CASE WHEN pg_catalog.pg_is_in_recovery() THEN false ` +
	`WHEN pg_catalog.pg_replication_origin_session_is_setup() THEN pg_catalog.pg_replication_origin_session_reset() IS NULL END`

// originAnswer reads the privilege resetSQL asked about: the result
// just before the statements' list.
func originAnswer(res []*pgconn.Result) (originPrivilege, error) {
	if len(res) < 2 {
		return originUnknown, fmt.Errorf("pooldriver: postgres: reset session: %d results, not the reset's", len(res))
	}
	r := res[len(res)-2]
	if len(r.Rows) != 1 || len(r.Rows[0]) != 1 {
		return originUnknown, fmt.Errorf("pooldriver: postgres: reset session: no answer about replication origins")
	}
	if string(r.Rows[0][0]) == "t" {
		return originMay, nil
	}
	return originMayNot, nil
}

// The custom settings a reset defines (custom.go): what the connection
// knows of them, and the statement that defines what it lacks.

// attachCustom finds the connection's names, the first time.
func (c *conn) attachCustom() *customNames {
	if c.custom.reg == nil {
		c.custom.reg = customFor(catalogKey(c.pgx().PgConn(), c.pgx().Config().Database))
	}
	return c.custom.reg
}

// customDue reports a connection that may lack a name another defined (or
// does not know yet): the next statement defines them first (syncCustom).
func (c *conn) customDue() bool {
	s := &c.custom
	return s.reg == nil || s.reg.n.Load() > int64(s.have) && !s.reg.off.Load()
}

// customScanDue reports a session that ran a user's code or DDL since it
// last read the functions' SET clauses: a function's SET clause may have
// defined a name no text showed.
func (c *conn) customScanDue() bool { return c.mustSee != c.custom.scanned }

// customScanAfter makes the next reset read the functions' SET clauses
// where the statement (f, judged with shadows: nil where no reading
// vouches) called a function whose SET clause no reading has read: one
// that runs SQL from a string, or one of the user's the reading proves
// neither harmless nor static (made since, or by its body unread). The
// others' names are the reading's own (pgCatalog.custom), which every
// connection defines already.
func (c *conn) customScanAfter(f sqllex.Facts, shadows *sqllex.Shadows) {
	if f.Calls == sqllex.CallsText || f.Calls == sqllex.CallsUnknown && !shadows.Vouched(f.Unknown) && !shadows.RunsStatic(f.Unknown) {
		c.custom.scanned = c.mustSee - 1
	}
}

// noteCustom learns the custom setting names query's text defines (see
// above). The connection itself defines them with its next statement too
// (customDue), as a statement that failed may not have.
func (c *conn) noteCustom(query string) {
	s := &c.custom
	if query == s.last {
		return
	}
	if len(query) <= maxLexedText {
		s.last = query
	}
	if strings.IndexByte(query, '.') < 0 || !mentionsSet(query) {
		return
	}
	var buf [4]string
	names := appendCustomNames(buf[:0], query)
	if len(names) == 0 {
		return
	}
	r := c.attachCustom()
	for _, n := range names {
		if !r.has(n) {
			r.add(names)
			return
		}
	}
}

// takeCustom returns the statement a reset about to run adds to define
// what the session lacks, "" where it lacks nothing, reading the
// functions' SET clauses where that is due and scan allows; the reset
// calls customDone once it ran.
func (c *conn) takeCustom(scan bool) string {
	r := c.attachCustom()
	s := &c.custom
	s.pending = customDefine{}
	if r.off.Load() {
		return ""
	}
	upto := int(r.n.Load())
	scan = scan && c.customScanDue()
	if upto == s.have && !scan {
		return ""
	}
	s.pending = customDefine{sql: customSQL(r.since(s.have)[:upto-s.have], scan), upto: upto, scan: scan}
	return s.pending.sql
}

// customDone records what the reset's customSQL did (rows: its result's
// first column, the names it saw, nil where it failed: err).
func (c *conn) customDone(rows []string, err error) {
	s := &c.custom
	p := s.pending
	s.pending = customDefine{}
	if p.sql == "" {
		return
	}
	if err != nil {
		if refused(err) {
			s.reg.off.Store(true)
		}
		return
	}
	s.have = max(s.have, p.upto)
	if p.scan {
		s.scanned = c.mustSee
		if before, after := s.reg.add(rows); s.have == before {
			s.have = after // the statement defined what it found
		}
	}
}

// refused reports the server refusing a name as a setting's: under a
// prefix an extension reserved (42602), or not a setting's name at all.
func refused(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "42602" || pe.Code == "22023")
}

// syncCustom defines, in a message of its own, the names the session
// lacks, where no reset is waiting to and no transaction is open (one
// that is waits for its end: a name is defined for good, and the
// statements of a transaction see it as they began).
func (c *conn) syncCustom(ctx context.Context) error {
	if !c.customDue() {
		return nil
	}
	r := c.attachCustom()
	pc := c.pgx().PgConn()
	if r.off.Load() || int(r.n.Load()) == c.custom.have || pc.TxStatus() != 'I' || pc.IsClosed() {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return err // nothing sent
	}
	sql := c.takeCustom(false) // a session between resets is no place to read the catalog
	if sql == "" {
		return nil
	}
	res, err := pc.Exec(ctx, sql).ReadAll()
	if err == nil {
		c.customDone(customRows(res, 0), nil)
		return nil
	}
	c.customDone(nil, err)
	if pc.IsClosed() || !isPgError(err) {
		return c.carryFailed(err) // the statement was not sent
	}
	// Refused (the defining is off), or failed for the session's own
	// reasons (its statement_timeout): the statement runs as it would
	// have; this session tries again once more names come.
	c.custom.have = max(c.custom.have, int(r.n.Load()))
	return nil
}
