package postgres

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/pooldriver/pooldriver/dialects"
)

// A session reset carried with the next statement: instead of a
// round trip of its own when a hold lets go, the reset waits on the
// connection and goes out in front of the next statement run there, in
// the same write:
//
//	BEGIN; <the reset's statements>; COMMIT; Sync; <the statement>; Sync
//
// The BEGIN is what makes it safe. A reset statement that fails aborts the
// block and the server skips to the first Sync, leaving the block open and
// failed: the statement behind it then fails with 25P02 without running,
// and the connection is replaced. Committed before the statement's own
// transaction begins, the reset is not undone by the statement failing,
// and the statement's transaction starts from the reset session's
// defaults (a transaction begun before RESET ALL would keep the last
// session's default_transaction_read_only and isolation). Only a statement
// whose first word cannot end the block (a SELECT, INSERT, UPDATE, DELETE,
// MERGE, WITH, VALUES or TABLE, alone in its text: carries) goes behind
// the reset; VACUUM, CALL, a text of several statements and any the check
// cannot read get the reset on its own first.
//
// The carried reset is resetSQL's but for one thing: it does not list the
// prepared statements to find what a user prepared with SQL PREPARE, which
// cost more than the rest of the reset together (docs/design.md). Where
// the session may hold one (a text that changes the session, PREPARE
// among what it may do, or code no reading proves runs no SQL of its own:
// sqlPrepared), or the direct path prepared a statement while the session
// was changed (dirtySeq), it deallocates every prepared statement
// (DEALLOCATE ALL), and the direct path prepares its statements again,
// each in the same write as its next run (prepareRun): the statement
// behind the reset at once, the others when next run. Otherwise, after a
// call the catalog proves only sets a setting (Shadows.Static), say, the
// statements stay prepared, and are planned again (DISCARD PLANS). With
// pool_reset_always it always deallocates (ResetFully).
//
// Everything else that reaches the server runs the reset on its own first
// (runDue): a statement of pgx's stdlib path, a prepared statement's, a
// transaction's BEGIN, a ping, a catalog or load reading. So does the
// direct path's where pgx holds prepared statements of its own (a
// *sql.Stmt's, Raw's), which DEALLOCATE ALL would take from under it.

var (
	_ dialects.ResetCarrier = (*conn)(nil)
	_ dialects.FullResetter = (*conn)(nil)
	_ driver.Validator      = (*conn)(nil)
	_ driver.ConnBeginTx    = (*conn)(nil)
)

// carry is a connection's reset in waiting.
type carry struct {
	due  bool               // a reset waits for the next statement
	done func(carried bool) // called once it ran: with a statement, or on its own
	// broken: why the connection must not be used again, after a reset
	// that failed (IsValid, Observe).
	broken error
}

// CarryReset takes the reset on, to go with the next statement, where the
// direct path runs the connection's statements and the connection is idle.
// The first reset of a connection asks what the login role may do with a
// replication origin, which takes a second message: it runs on its own.
// So does the reset of a session that owes a reading of the catalog
// (owesReading), which it takes once reset (readAfterReset).
func (c *conn) CarryReset(done func(carried bool)) bool {
	pc := c.pgx().PgConn()
	if !c.direct.on || c.origin == originUnknown || pc.IsClosed() || pc.TxStatus() != 'I' || c.carry.broken != nil || c.owesReading() {
		return false
	}
	c.carry.due, c.carry.done = true, done
	return true
}

// ResetPending reports a reset CarryReset took on that has not run.
func (c *conn) ResetPending() bool { return c.carry.due }

// IsValid reports false once a carried reset failed or found the session
// tampered with the driver's prepared statements, and once pgx closed the
// connection (a statement its context interrupted, a read or write that
// failed).
func (c *conn) IsValid() bool { return c.carry.broken == nil && !c.pgx().IsClosed() }

// BeginTx runs a waiting reset, then begins as pgx's stdlib does.
func (c *conn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	if err := c.runDue(ctx); err != nil {
		return nil, err
	}
	tx, err := c.sc.BeginTx(ctx, opts)
	if err == nil {
		c.began()
	}
	return tx, err
}

// runDue runs a waiting reset on its own. (Statements it drops, where the
// session tampered with them, pooldriver's prepared ones included, are
// prepared again when next run: see namedStmt.)
func (c *conn) runDue(ctx context.Context) error {
	if !c.carry.due {
		return c.syncCustom(ctx)
	}
	done := c.carry.done
	if err := c.ResetSession(ctx); err != nil {
		return c.carryFailed(err)
	}
	done(false)
	return nil
}

// carryFailed marks the connection broken by err and returns the error of
// the statement that therefore did not run: driver.ErrBadConn and
// dialects.ErrNotRun, so that it runs on another connection.
func (c *conn) carryFailed(err error) error {
	c.carry.broken = fmt.Errorf("pooldriver: postgres: session reset: %w", err)
	return fmt.Errorf("%w (%w, %w)", c.carry.broken, dialects.ErrNotRun, driver.ErrBadConn)
}

// dropAll deallocates every prepared statement and empties the caches;
// pooldriver's statements prepared on Driver() prepare again when next
// run (namedStmt).
func (c *conn) dropAll(ctx context.Context) error {
	if err := c.pgx().DeallocateAll(ctx); err != nil {
		return err
	}
	c.direct.stmts, c.direct.stale = nil, nil
	clear(c.stdlibNames)
	c.dropGen++
	c.probeDoubt = false // none is left
	return nil
}

// dueReset is a reset taken off the connection for a statement to carry.
type dueReset struct {
	stmts    []string   // BEGIN, the reset's, COMMIT (carriedReset)
	customAt int        // the custom settings' statement's index, or -1
	dealloc  bool       // DEALLOCATE ALL among them: nothing stays prepared
	done     func(bool) // the callback to call once it ran
}

// carriedReset returns the statements of the reset carried in front of a
// statement, BEGIN and COMMIT included: resetStatements' (custom, where
// not "", at the index returned, else -1), with DEALLOCATE ALL for the
// list of prepared statements where dealloc (DISCARD PLANS where not),
// and the functions it calls in one SELECT (each statement that plans
// costs the server more than the utility statements). With settings (the
// session changed nothing but its settings since the last reset:
// settingsOnly), only what undoes settings: the role and session
// authorization, RESET ALL, the plans (or the statements), a fresh seed
// (seed is a setting RESET ALL leaves), and the temporary objects (a
// search_path that names pg_temp makes one of every table created).
func carriedReset(cat *pgCatalog, origin originPrivilege, custom string, dealloc, settings bool) ([]string, int) {
	stmts := make([]string, 0, 15)
	stmts = append(stmts, `BEGIN`)
	if !settings {
		stmts = append(stmts, `CLOSE ALL`)
	}
	stmts = append(stmts, `SET SESSION AUTHORIZATION DEFAULT`, `RESET ALL`)
	if dealloc {
		stmts = append(stmts, `DEALLOCATE ALL`)
	} else {
		// The statements kept are planned again, under the reset's
		// settings: one the last session made the server parse again
		// (after DDL or ANALYZE) holds constants read under its
		// TimeZone or DateStyle.
		stmts = append(stmts, `DISCARD PLANS`)
	}
	if !settings {
		stmts = append(stmts, `UNLISTEN *`)
	}
	// A temporary table can be made without the word TEMP once
	// search_path names pg_temp, which a setting's value may do.
	stmts = append(stmts, `DISCARD TEMP`)
	if !settings {
		stmts = append(stmts, `DISCARD SEQUENCES`)
	}
	customAt := -1
	if custom != "" {
		customAt = len(stmts)
		stmts = append(stmts, custom)
	}
	if cat != nil && cat.dblink != "" && !settings {
		stmts = append(stmts, dblinkClose(cat.dblink)...)
	}
	var b strings.Builder
	b.WriteString(`SELECT `)
	if !settings {
		b.WriteString(`pg_catalog.pg_advisory_unlock_all(), `)
	}
	b.WriteString(`pg_catalog.setseed(`)
	b.WriteString(strconv.FormatFloat(freshSeed(), 'g', -1, 64))
	b.WriteString(`)`)
	if !settings {
		if origin == originMay {
			b.WriteString(`, (` + originResetSQL + `)`)
		}
		if cat != nil && cat.fdw != "" {
			fmt.Fprintf(&b, `, %s.postgres_fdw_disconnect_all()`, cat.fdw)
		}
	}
	stmts = append(stmts, b.String())
	if resetFault != "" {
		stmts = append(stmts, resetFault)
	}
	return append(stmts, `COMMIT`), customAt
}

// carriable reports whether the waiting reset can go with a statement of
// the direct path: nothing pgx's stdlib prepared would be dropped from
// under it (see above).
func (c *conn) carriable() bool {
	return len(c.stdlibNames) == 0 && !c.stdlibCached
}

// carries reports a statement text that may share a transaction with the
// reset in front of it (see above): one statement (no semicolon but
// trailing) whose first word is one of those that run in any transaction.
func carries(query string) bool {
	i := 0
	for i < len(query) && isSpace(query[i]) {
		i++
	}
	j := i
	for j < len(query) && (query[j]|0x20 >= 'a' && query[j]|0x20 <= 'z') {
		j++
	}
	if j == i || j < len(query) && !isSpace(query[j]) && query[j] != '(' {
		return false
	}
	if k := strings.IndexByte(query, ';'); k >= 0 && strings.TrimLeft(query[k:], "; \t\n\v\f\r") != "" {
		return false
	}
	switch strings.ToUpper(query[i:j]) {
	case "SELECT", "INSERT", "UPDATE", "DELETE", "MERGE", "WITH", "VALUES", "TABLE":
		return true
	}
	return false
}

// takeDue takes the waiting reset off the connection for a statement to
// carry.
func (c *conn) takeDue() dueReset {
	cat := c.lastReading(c.pgx().PgConn())
	r := dueReset{done: c.carry.done, dealloc: c.mustDeallocate()}
	c.carry.due, c.carry.done = false, nil
	c.stmtsDropped = false
	r.stmts, r.customAt = carriedReset(cat, c.origin, c.takeCustom(true), r.dealloc, c.settingsOnly())
	return r
}

// mustDeallocate reports whether the carried reset must deallocate every
// prepared statement (see above): the session may hold one a user
// prepared, or the direct path prepared one while the session was changed.
func (c *conn) mustDeallocate() bool {
	return c.full || c.sqlPrepared || c.dirtySeq != 0 && c.direct.seq >= c.dirtySeq
}

// settingsOnly reports a session that, since the last reset, changed its
// settings and nothing else, as every statement's verdict says
// (lexedText.settings): its reset undoes only settings. A change only the
// server's reports showed (code the text did not show, a trusted
// function's), the user's code on Raw (which marks the session broad)
// and pool_reset_always get the whole one.
func (c *conn) settingsOnly() bool {
	return c.setOnly && !c.broad && !c.full
}

// ResetFully makes every carried reset deallocate every prepared
// statement (pool_reset_always: see dialects.FullResetter).
func (c *conn) ResetFully() { c.full = true }

// carriedRan records a carried reset that ran: what it deallocated
// (dropped), and that the session is as a reset leaves it.
func (c *conn) carriedRan(r dueReset) {
	if r.dealloc {
		c.dropped()
	}
	c.sqlPrepared, c.dirtySeq = false, 0
	c.setOnly, c.broad = false, false
	c.afterReset()
	r.done(true)
}

// closeCarried closes the pipeline a statement ran in (prepareRun); err
// is the statement's, the pipeline's own error if it has none.
func (c *conn) closeCarried(pl *pgconn.Pipeline, err error) error {
	if e := pl.Close(); err == nil {
		err = e
	}
	return err
}

// dropped records what a carried reset's DEALLOCATE ALL did: no statement
// of the direct path is prepared on the server any more (their
// descriptions stay: each is prepared again with its next run).
func (c *conn) dropped() {
	for _, st := range c.direct.stmts {
		st.onServer = false
	}
	c.direct.stale = nil
	c.probeAt, c.probeDoubt = 0, false
	c.dirtySeq = 0
}

// prepareRun runs st (its arguments built into c.direct.eqb) behind the
// waiting reset if withReset, and where its server statement is gone
// (or the reset deallocates it) prepared again under its name in the same
// write as its run; with the transaction id's probe behind it if probe
// (readProbe reads it once the result is closed). It returns the
// statement's result, the pipeline to close after it (closeCarried), and
// whether the result is to be read by rr.FieldDescriptions() rather than
// st's (DDL changed it since: redescribe); or the error of the statement,
// which did not run; one that matches dialects.ErrNotRun says the reset
// failed and the connection is broken.
func (c *conn) prepareRun(ctx context.Context, st *directStmt, withReset, probe bool) (*pgconn.ResultReader, *pgconn.Pipeline, bool, error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, false, err // nothing sent, nothing taken
	}
	d := &c.direct
	pc := c.pgx().PgConn()
	var reset dueReset
	if withReset {
		reset = c.takeDue()
	}
	pl := pc.StartPipeline(ctx)
	for _, s := range reset.stmts {
		pl.SendQueryParams(s, nil, nil, nil, nil)
	}
	if withReset {
		pl.SendPipelineSync()
	}
	prepare := !st.onServer || reset.dealloc
	if prepare {
		// Numbered as a statement prepared now: one prepared again while
		// the session is changed is dropped by the next reset too
		// (mustDeallocate, reconcile).
		d.seq++
		st.seq = d.seq
		pl.SendPrepare(st.sd.Name, st.sd.SQL, st.sd.ParamOIDs)
		described := *st.sd
		described.Fields = nil // for pgx to ask for the result's description
		pl.SendQueryStatement(&described, d.eqb.ParamValues, d.eqb.ParamFormats, st.formats)
	} else {
		pl.SendQueryStatement(st.sd, d.eqb.ParamValues, d.eqb.ParamFormats, st.formats)
	}
	if probe {
		pl.SendQueryParams(probeSQL, nil, nil, nil, nil) // read by readProbe
	}
	pl.SendPipelineSync()
	if err := pl.Flush(); err != nil {
		_ = pl.Close()
		if withReset {
			return nil, nil, false, c.carryLost(err)
		}
		return nil, nil, false, err
	}
	if withReset {
		rows, err := readReset(pl, len(reset.stmts), reset.customAt)
		c.customDone(rows, err)
		if err != nil {
			// The block is open and failed: the statement did not run.
			_ = pl.Close()
			if !isPgError(err) {
				return nil, nil, false, c.carryLost(err)
			}
			if rerr := c.Rollback(ctx); rerr != nil {
				return nil, nil, false, c.carryLost(rerr)
			}
			return nil, nil, false, c.carryFailed(err)
		}
		c.carriedRan(reset)
	}
	var err error
	changed := false
	if prepare {
		changed, err = c.prepared(pl, st)
	}
	if err == nil {
		var res any
		if res, err = pl.GetResults(); err == nil {
			if rr, ok := res.(*pgconn.ResultReader); ok {
				return rr, pl, changed, nil
			}
			err = fmt.Errorf("pooldriver: postgres: an unexpected reply %T to a statement", res)
		}
	}
	return nil, nil, false, c.closeCarried(pl, err)
}

// prepared reads the reply to st's Parse and Describe in pl, and reports
// whether the description changed (redescribe).
func (c *conn) prepared(pl *pgconn.Pipeline, st *directStmt) (bool, error) {
	sd, err := pl.GetResults()
	if err != nil {
		return false, err
	}
	psd, ok := sd.(*pgconn.StatementDescription)
	if !ok {
		return false, fmt.Errorf("pooldriver: postgres: an unexpected reply %T to a prepare", sd)
	}
	st.onServer = true
	return c.redescribe(st, psd), nil
}

// redescribe brings st in step with the description its statement got
// when prepared again: the same (almost always), or one DDL changed since,
// which the next runs read their results by. It reports a change.
func (c *conn) redescribe(st *directStmt, sd *pgconn.StatementDescription) bool {
	if sameFields(st.sd.Fields, sd.Fields) {
		return false
	}
	fresh := *sd
	fresh.Name, fresh.SQL = st.sd.Name, st.sd.SQL // a pipeline's description has neither
	next := newDirectStmt(c.direct.types, &fresh)
	next.seq, next.onServer = st.seq, true
	*st = *next
	return true
}

func sameFields(a, b []pgconn.FieldDescription) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].DataTypeOID != b[i].DataTypeOID || a[i].Name != b[i].Name || a[i].TypeModifier != b[i].TypeModifier {
			return false
		}
	}
	return true
}

func isPgError(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe)
}

// readReset reads the replies to the reset's n statements and its Sync,
// and returns the first column of the at-th statement's rows and the
// first error (the server skipped the rest to the Sync).
func readReset(pl *pgconn.Pipeline, n, at int) ([]string, error) {
	var first error
	var rows []string
	for i := 0; ; i++ {
		res, err := pl.GetResults()
		if err != nil {
			if first == nil {
				first = err
			}
			if !isPgError(err) {
				return nil, first
			}
			continue
		}
		switch r := res.(type) {
		case *pgconn.ResultReader:
			for i == at && r.NextRow() {
				if v := r.Values(); len(v) > 0 {
					rows = append(rows, string(v[0]))
				}
			}
			if _, err := r.Close(); err != nil && first == nil {
				first = err
			}
		case *pgconn.PipelineSync:
			if first == nil && i != n {
				first = fmt.Errorf("pooldriver: postgres: reset: %d replies, not %d", i, n)
			}
			return rows, first
		default:
			return nil, fmt.Errorf("pooldriver: postgres: reset: an unexpected reply %T", res)
		}
	}
}

// A statement without arguments that ExecContext hands to pgx's stdlib
// runs over the simple protocol. There the reset goes as a Query message
// of its own in front of the text's, in the same write, where the text
// carries it (carries: one statement of those kinds):
//
//	Query("BEGIN; <the reset>; COMMIT")
//	Query(<the text>)
//
// A failing reset skips the rest of its message and leaves the block open
// and failed: the text fails with 25P02 without running.

// execCarriedSimple runs the waiting reset and query (no arguments) as
// above, and returns what pgx's stdlib would: the statement's rows
// affected, or its error.
func (c *conn) execCarriedSimple(ctx context.Context, query string) (driver.Result, error) {
	if err := ctx.Err(); err != nil {
		return nil, err // nothing sent, nothing taken
	}
	reset := c.takeDue()
	fe := c.pgx().PgConn().Frontend()
	fe.Send(&pgproto3.Query{String: strings.Join(reset.stmts, "; ")})
	fe.Send(&pgproto3.Query{String: query})
	if err := fe.Flush(); err != nil {
		return nil, c.carryLost(err)
	}
	_, resetErr, _, rows, err := c.readSimpleRows(ctx, reset.customAt)
	if err != nil {
		return nil, c.carryLost(err)
	}
	c.customDone(rows, resetErr)
	_, stmtErr, tag, err := c.readSimple(ctx)
	if err != nil {
		return nil, c.carryLost(err)
	}
	if resetErr != nil {
		// The block is open and failed: the text did not run.
		if err := c.Rollback(ctx); err != nil {
			return nil, c.carryLost(err)
		}
		return nil, c.carryFailed(resetErr)
	}
	c.carriedRan(reset)
	if stmtErr != nil {
		return nil, stmtErr
	}
	return driver.RowsAffected(tag.RowsAffected()), nil
}

// readSimple reads the replies to one Query message up to its
// ReadyForQuery: how many statements completed, the first error the server
// sent, and the last command's tag. err is a failure to read: the
// connection is out of step.
func (c *conn) readSimple(ctx context.Context) (completed int, firstErr error, tag pgconn.CommandTag, err error) {
	completed, firstErr, tag, _, err = c.readSimpleRows(ctx, -1)
	return completed, firstErr, tag, err
}

// readSimpleRows is readSimple that also returns the first column of the
// rows of the message's at-th statement.
func (c *conn) readSimpleRows(ctx context.Context, at int) (completed int, firstErr error, tag pgconn.CommandTag, rows []string, err error) {
	pc := c.pgx().PgConn()
	for {
		msg, err := pc.ReceiveMessage(ctx)
		if err != nil {
			return completed, firstErr, tag, nil, err
		}
		switch m := msg.(type) {
		case *pgproto3.DataRow:
			if completed == at && len(m.Values) > 0 {
				rows = append(rows, string(m.Values[0]))
			}
		case *pgproto3.CommandComplete:
			completed++
			tag = pgconn.NewCommandTag(string(m.CommandTag))
		case *pgproto3.ErrorResponse:
			if firstErr == nil {
				firstErr = pgconn.ErrorResponseToPgError(m)
			}
		case *pgproto3.ReadyForQuery:
			return completed, firstErr, tag, rows, nil
		}
	}
}

// carryLost marks the connection broken by a failure to write a carried
// reset or read its replies, and closes its socket: what ran is not known,
// and nothing more may run there. The error is not driver.ErrBadConn:
// the statement may have run, and must not run again elsewhere.
func (c *conn) carryLost(err error) error {
	c.carry.broken = fmt.Errorf("pooldriver: postgres: session reset: %w", err)
	if nc := c.pgx().PgConn().Conn(); nc != nil {
		_ = nc.Close()
	}
	return fmt.Errorf("%w (the connection was closed: the statement behind the reset may have run)", c.carry.broken)
}

// beforeDirect runs the waiting reset on its own where it cannot go with
// query's statement: see carriable and carries, and a statement not yet
// described, which is prepared (a round trip) before it runs.
func (c *conn) beforeDirect(ctx context.Context, query string) error {
	if !c.carry.due {
		return c.syncCustom(ctx)
	}
	if _, ok := c.direct.stmts[query]; ok && c.carriable() && carries(query) {
		return nil
	}
	return c.runDue(ctx)
}

// prepareRunFailed is the error of a statement prepareRun did not run,
// the statement dropped from the cache (as pgx drops one after any error)
// unless the connection broke.
func (c *conn) prepareRunFailed(query string, st *directStmt, err error) error {
	if errors.Is(err, driver.ErrBadConn) {
		return err
	}
	c.forget(query, st)
	if pgconn.SafeToRetry(err) {
		return driver.ErrBadConn
	}
	return err
}
