package postgres

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pooldriver/pooldriver/dialects"
	"github.com/pooldriver/pooldriver/dialects/internal/sqllex"
)

var _ dialects.CatalogRefresher = (*conn)(nil)

// catalogTimeout bounds one reading of the catalog.
const catalogTimeout = 5 * time.Second

// freshWait bounds how long a connection just opened waits for another's
// reading of a catalog whose last reading vouches for nothing any more
// (freshen): some tens of times a reading's usual few milliseconds.
const freshWait = 250 * time.Millisecond

// serverID returns the system identifier of pc's server, "" where the
// role may not read it: a reading of another server is borrowed only
// from one with the same (hostOrder.sibling).
func serverID(ctx context.Context, pc *pgconn.PgConn) string {
	res, err := pc.Exec(ctx, "SELECT ("+serverIDQuery+")").ReadAll()
	if err != nil || len(res) != 1 || len(res[0].Rows) != 1 || len(res[0].Rows[0]) != 1 {
		return ""
	}
	return string(res[0].Rows[0][0])
}

// serverIDQuery reads the system identifier, or nothing where the role may
// not call pg_control_system (the gate is a one-time filter: the function
// does not run then).
const serverIDQuery = `SELECT system_identifier::text FROM pg_catalog.pg_control_system()
	WHERE pg_catalog.has_function_privilege('pg_catalog.pg_control_system()', 'EXECUTE')`

// catalogKey names the server and database pc is connected to: the
// address it reached (of a multi-host DSN's, the one it reached) and the
// database.
func catalogKey(pc *pgconn.PgConn, database string) string {
	addr := ""
	if nc := pc.Conn(); nc != nil {
		addr = nc.RemoteAddr().String()
	}
	return "postgres|" + addr + "|" + database
}

// shadows returns what the catalog says, reading it first where that is
// due (now: the caller ran DDL; see dialects.Catalog.Claim) and c can: idle, no
// transaction open, and a session that nothing changed since its last
// reset (or a new one), which no user can have bent the reading in (see
// readable). A reading that fails keeps the last one; with none, nil:
// every statement that names anything counts as a change (see
// sqllex.Refs.Meets).
func (c *conn) shadows(pc *pgconn.PgConn, now bool) *dialects.CatalogSnapshot[*pgCatalog] {
	c.catalogOf(pc)
	snap := c.catalog.Current()
	if !c.readable(pc) {
		return snap
	}
	if snap == nil {
		ctx, cancel := context.WithTimeout(context.Background(), catalogTimeout)
		defer cancel()
		mine, snap := c.catalog.ClaimFirst(ctx)
		if !mine {
			return snap
		}
		s, err := c.read(ctx, pc)
		if err != nil {
			c.catalog.ReleaseFirst()
			return c.catalog.Current()
		}
		return c.catalog.StoreFirst(s)
	}
	if !snap.Due() {
		return snap
	}
	ctx, cancel := context.WithTimeout(context.Background(), catalogTimeout)
	defer cancel()
	if now && c.catalog.ClaimNow(ctx) || !now && c.catalog.Claim(false) {
		s, err := c.read(ctx, pc)
		if err != nil {
			c.catalog.Release()
		} else {
			snap = c.catalog.Store(s)
		}
	}
	return snap
}

// freshen reads the catalog on pc, a connection just opened, where the
// latest reading is no longer Fresh, no other connection is reading it
// and no reading failed lately. A process that opens a pool again after
// a pause longer than dialects.CatalogMaxAge has such a reading, which
// vouches for nothing: the new pool's connections would count their
// first statements as changes, and each call of a user's function as
// code that may have run DDL, until the catalog's watcher found a
// connection to read on (with every connection busy, the next one a
// caller lets go). Where another connection is reading it, it waits for
// that reading, within the connect's context and freshWait at most,
// then goes on without it. It reads within the connect's own context: a
// server that stops answering fails this connect as it fails any, and
// holds another at most freshWait. An error is the connection's, closed
// by the failed reading; a server's refusal keeps the last reading, as a
// due reading's does.
func (c *conn) freshen(ctx context.Context, pc *pgconn.PgConn) error {
	c.catalogOf(pc)
	if c.catalog.Failing() {
		return nil
	}
	wait, stop := context.WithTimeout(ctx, freshWait)
	mine, _ := c.catalog.ClaimFresh(wait)
	stop()
	if !mine {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, catalogTimeout)
	defer cancel()
	s, err := c.read(ctx, pc)
	if err != nil {
		c.catalog.Release()
		if pc.IsClosed() {
			return fmt.Errorf("pooldriver: postgres: reading the catalog at connect: %w", err)
		}
		return nil
	}
	c.catalog.Store(s)
	return nil
}

// read reads the catalog on pc (readCatalog), and adds the custom
// settings' names its functions' SET clauses name to what every
// connection to the server and database defines (custom.go): a call of
// one defines its name in the session, and the next user's session must
// answer as a new one.
func (c *conn) read(ctx context.Context, pc *pgconn.PgConn) (*pgCatalog, error) {
	s, err := readCatalog(ctx, pc)
	if err == nil && len(s.custom) > 0 {
		c.attachCustom().add(s.custom)
	}
	return s, err
}

// readable reports whether the catalog may be read on pc now: idle, no
// transaction open, and a session that no statement changed since it was
// last reset (a temporary view named pg_proc, a search_path, a setting
// that the reading would run under). The reading names everything with
// its schema and pins its search_path besides (catalogSQL).
func (c *conn) readable(pc *pgconn.PgConn) bool {
	return c.dirtySeq == 0 && !c.carry.due && !pc.IsBusy() && pc.TxStatus() == 'I'
}

// catalogOf finds the connection's catalog where it has none yet.
func (c *conn) catalogOf(pc *pgconn.PgConn) {
	if c.catalog == nil {
		c.catalog = dialects.CatalogFor[*pgCatalog](catalogKey(pc, c.pgx().Config().Database))
	}
}

// current returns the catalog's latest reading, reading it first only if
// there is none yet and the statement just run (f) left the session as
// the last reset did (see dialects.CatalogRefresher: a due reading is
// read again off the callers' paths).
func (c *conn) current(pc *pgconn.PgConn, f sqllex.Facts) *dialects.CatalogSnapshot[*pgCatalog] {
	c.catalogOf(pc)
	if snap := c.catalog.Current(); snap != nil || !leavesSession(f) {
		return snap
	}
	return c.shadows(pc, true)
}

// readSince returns a reading that sees the change numbered gen: the
// current one where it does; otherwise one read on pc now, where c can
// (readable) and no reading failed lately (dialects.Catalog.Failing: a
// lock held on a catalog table makes every reading wait until it times
// out); otherwise the current one. Where another connection is reading,
// it waits for that reading within wait at most (none where wait is 0),
// takes it where it began after the change and otherwise reads in its
// place (dialects.Catalog.ClaimSince): connections that all ran a user's
// code share readings, rather than each give up on the one in progress,
// run the code again unvouched and make the next reading out of date
// for itself in turn.
func (c *conn) readSince(pc *pgconn.PgConn, gen uint64, wait time.Duration) *dialects.CatalogSnapshot[*pgCatalog] {
	c.catalogOf(pc)
	snap := c.catalog.Current()
	if snap != nil && snap.Sees(gen) || !c.readable(pc) || c.catalog.Failing() {
		return snap
	}
	if wait == 0 {
		if !c.catalog.Claim(true) {
			return snap
		}
	} else {
		wctx, stop := context.WithTimeout(context.Background(), wait)
		mine, s := c.catalog.ClaimSince(wctx, gen)
		stop()
		if !mine {
			return s
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), catalogTimeout)
	defer cancel()
	s, err := c.read(ctx, pc)
	if err != nil {
		c.catalog.Release()
		return c.catalog.Current()
	}
	return c.catalog.Store(s)
}

// owesReading reports a session that ran a user's code no reading since
// vouches for (codeSee), while readings do not fail: until one does, none
// of its statements is vouched for, and its reset reads one at once
// (readAfterReset). A reset carried with the next statement reads none,
// and that statement, a call of the same function say, would run
// unvouched and owe a reading again: such a reset runs on its own
// (CarryReset).
func (c *conn) owesReading() bool {
	if c.trust || c.catalog == nil || c.codeSee == 0 || c.catalog.Failing() {
		return false
	}
	snap := c.catalog.Current()
	return snap == nil || !snap.Sees(c.codeSee)
}

// leavesSession reports a statement whose text shows no change to the
// session and no code run that the text does not show.
func leavesSession(f sqllex.Facts) bool {
	return !f.ChangesSession && f.Calls == sqllex.CallsKnown && (f.Refs == nil || !f.Refs.Code)
}

// vouching returns what snap says for this connection's statements: nil
// (nothing is vouched for) where there is no reading, the reading began
// more than dialects.CatalogMaxAge ago (a reading since failed, or found
// no connection to read on: a proof that could not be read is none), or
// it began before the session's last change that may have changed the
// catalog (mustSee) or before DDL any of the process's connections ran
// (dialects.Catalog.ExpireAll).
func (c *conn) vouching(snap *dialects.CatalogSnapshot[*pgCatalog]) *sqllex.Shadows {
	if snap == nil || !snap.Fresh() || !snap.Sees(max(c.mustSee, c.catalog.Changed())) {
		return nil
	}
	return snap.Value.shadows
}

// ranCode reports a statement that ran code no reading of the catalog
// vouches for, which may have run DDL that its text does not show: a DO
// block, SQL run from a string, a call of a user's function the catalog
// proves neither harmless nor static (one that may set a setting, but
// runs no DDL: Shadows.Static), a relation, operator or cast whose use
// runs a user's code.
func ranCode(f sqllex.Facts, shadows *sqllex.Shadows) bool {
	return f.Calls == sqllex.CallsText || f.Refs != nil && f.Refs.Code ||
		f.Calls == sqllex.CallsUnknown && !shadows.Vouched(f.Unknown) && !shadows.RunsStatic(f.Unknown) ||
		shadows != nil && f.Refs.Meets(shadows)
}

// mayPrepare reports a statement after which the session may hold a
// statement prepared with SQL PREPARE: its text may change the session
// (PREPARE is among the words that do), or it may run code no reading
// proves runs no SQL of its own (ranCode; a function the reading proves
// static runs none: no PREPARE, EXECUTE or DO in its body), or, where no
// reading vouches (shadows nil), it names anything whose use may run code.
func mayPrepare(f sqllex.Facts, shadows *sqllex.Shadows) bool {
	return f.ChangesSession && !f.OnlySettings || ranCode(f, shadows) || shadows == nil && (f.Refs != nil || f.Calls != sqllex.CallsKnown)
}

// onlySettings reports a text all of whose changes to the session are to
// its settings, judged with shadows (nil where no reading vouches): its
// words change nothing else (sqllex.Facts.OnlySettings), it runs no SQL
// from a string, names nothing whose use runs a user's code, and calls
// only built-ins and functions the reading proves change nothing but
// settings (sqllex.Shadows.SetsOnly). Whoever vouches for what, the
// proof is the reading's: a user who trusts their functions gets the
// whole reset after a call of one.
func onlySettings(f sqllex.Facts, shadows *sqllex.Shadows) bool {
	return f.OnlySettings && f.Calls != sqllex.CallsText && !f.Refs.Meets(shadows) &&
		(f.Calls == sqllex.CallsKnown || shadows.SetsOnly(f.Unknown))
}

// lastReading returns the catalog's latest reading, nil before the first:
// a session due a reset is no place to read it (see readable).
func (c *conn) lastReading(pc *pgconn.PgConn) *pgCatalog {
	c.catalogOf(pc)
	if snap := c.catalog.Current(); snap != nil {
		return snap.Value
	}
	return nil
}

// readAfterReset reads the catalog, where due, on the session just reset,
// and closes what the new reading shows the reset did not know to close
// (cat: the reading the reset ran with): dblink's or postgres_fdw's
// connections where the extension came since. Where the session ran a
// user's code that may have changed the catalog (codeSee), it gets a
// reading since at once (readSince), waiting freshWait at most for one
// another connection is taking: until then none of its statements is
// vouched for.
func (c *conn) readAfterReset(ctx context.Context, pc *pgconn.PgConn, cat *pgCatalog) error {
	snap := c.shadows(pc, false)
	if snap != nil && !snap.Sees(c.codeSee) {
		snap = c.readSince(pc, c.codeSee, freshWait)
	}
	if snap == nil {
		return nil
	}
	fresh := snap.Value
	var stmts []string
	if fresh.dblink != "" && (cat == nil || cat.dblink != fresh.dblink) {
		stmts = append(stmts, dblinkClose(fresh.dblink)...)
	}
	if fresh.fdw != "" && (cat == nil || cat.fdw != fresh.fdw) {
		stmts = append(stmts, fdwClose(fresh.fdw))
	}
	if len(stmts) == 0 {
		return nil
	}
	if _, err := pc.Exec(ctx, strings.Join(stmts, "; ")).ReadAll(); err != nil {
		return fmt.Errorf("pooldriver: postgres: reset session: closing remote connections: %w", err)
	}
	return nil
}

// dblinkClose returns the statements that close dblink's connections
// (schema: dblink's, quoted). The unnamed connection has no name to ask
// about: closing it when there is none is an error, which the block
// swallows. So is a dblink dropped since the reading that named its
// schema (undefined_function, invalid_schema_name): there is nothing to
// close, and a reading older than the DROP must not fail every reset.
func dblinkClose(schema string) []string {
	return []string{fmt.Sprintf(`DO $pd$BEGIN
	BEGIN PERFORM %[1]s.dblink_disconnect(n) FROM pg_catalog.unnest(%[1]s.dblink_get_connections()) n;
	EXCEPTION WHEN undefined_function OR invalid_schema_name THEN NULL; END;
	BEGIN PERFORM %[1]s.dblink_disconnect(); EXCEPTION WHEN OTHERS THEN NULL; END;
END$pd$`, schema)}
}

// fdwClose returns the statement that closes postgres_fdw's connections
// (schema: postgres_fdw_disconnect_all's, quoted), nothing where the
// function was dropped since the reading that named its schema.
func fdwClose(schema string) string {
	return fmt.Sprintf(`DO $pd$BEGIN PERFORM %s.postgres_fdw_disconnect_all();
	EXCEPTION WHEN undefined_function OR invalid_schema_name THEN NULL; END$pd$`, schema)
}

var _ dialects.CatalogWatcher = (*conn)(nil)

// CatalogWatch returns the connection's catalog (see
// dialects.CatalogWatcher).
func (c *conn) CatalogWatch() dialects.CatalogDue {
	c.catalogOf(c.pgx().PgConn())
	return c.catalog
}

// RefreshCatalog reads the catalog again if its reading is due (see
// dialects.CatalogRefresher).
func (c *conn) RefreshCatalog(ctx context.Context) error {
	if err := c.runDue(ctx); err != nil {
		return err
	}
	pc := c.pgx().PgConn()
	c.shadows(pc, false)
	if pc.IsClosed() {
		return fmt.Errorf("pooldriver: postgres: reading the catalog: the connection closed")
	}
	return nil
}
