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

// What the server will run, not what a name says: a name on sqllex's list
// is the built-in only where PostgreSQL resolves it to the built-in, and
// operators, casts, triggers, rules, policies, defaults, checks and views
// run code that no call in a statement's text names. The catalog says
// which; catalogSQL reads it into a sqllex.Shadows, shared by every
// connection to one server and database (dialects.Catalog) and read again
// every dialects.CatalogTTL, or at once after a statement of DDL.
//
// "Safe" below is a function the list vouches for, resolved: in
// pg_catalog, made by initdb (an oid under FirstNormalObjectId, 16384),
// with a listed name. Functions and operators of an extension count as
// the server's when the extension owns both the operator (or cast) and
// its function: an administrator installed them, and no role without
// superuser can make a C function. Everything else is user code:
//
//   - a listed name that a function outside pg_catalog or made by a user
//     overloads or shadows, or that the server lacks (a listed name then
//     resolves only to a user's function) and does not read as syntax (a
//     keyword that is not unreserved: COALESCE, CURRENT_DATE, TRIM, ...,
//     which only a quoted name can make a call of a user's function);
//   - a user's operator whose function is not safe;
//   - a relation whose reads or writes run code that is not safe: a
//     trigger (any, but the internal ones of foreign keys), a rule other
//     than a view's, a policy, default, generated column, check or index
//     expression calling such a function or operator, a column of a
//     domain whose check or default does; a foreign table (postgres_fdw
//     keeps a connection per session); and, however deep, every view or
//     policy that reads such a relation, every table it is a partition or
//     child of (a row routed to it fires its triggers), every table it
//     references by a foreign key (a cascade writes to it);
//   - a domain whose check or default calls such code (a cast to it runs
//     it);
//   - a user's function of one argument of a row type (or a pseudo-type):
//     t.f calls it where the text names no call;
//   - a user's cast with a function (any :: or CAST may be it; an
//     implicit or assignment one runs where nothing is written: every
//     statement counts then);
//   - an enabled event trigger: every DDL statement counts.
//
// It also finds what the session reset must undo beyond what DISCARD
// does (see resetSQL): dblink's connections and postgres_fdw's.
//
// Expressions (a view's query, a rule's, a default, a check, a policy, an
// index's, a domain's default, a trigger's WHEN) are read from the trees
// the server stores, since PostgreSQL records no dependency on a
// built-in (a view that calls pg_advisory_lock depends on nothing): a
// function called by name must be safe, a cast's function, an aggregate
// or a window function a built-in or an extension's, an operator not a
// user's unsafe one. Objects of initdb's (oids under 16384: pg_catalog's
// and information_schema's views) are the server's.
//
// The rows are (kind, name): 'n' a name, 'o' an operator, 'c' an explicit
// cast, 'a' an implicit or assignment cast, 'e' an event trigger, 'x'
// dblink's schema, 'f' the schema of postgres_fdw_disconnect_all (each
// quoted). $1 is
// the list's harmless names, $2 the names the session rules read.
// SET LOCAL jit: the query's estimated cost would start the JIT compiler,
// which costs a second where the query takes milliseconds.
const catalogSQL = `SET LOCAL jit = off; WITH RECURSIVE
listed AS (SELECT unnest('%s'::text[]) AS name),
ruled AS (SELECT unnest('%s'::text[]) AS name),
ext AS (SELECT objid FROM pg_depend WHERE deptype = 'e' AND classid = 'pg_proc'::regclass),
safe AS (
	SELECT p.oid FROM pg_proc p JOIN listed l ON l.name = p.proname
	WHERE p.pronamespace = 'pg_catalog'::regnamespace AND p.oid < 16384
),
unsafe_op AS (
	SELECT o.oid, o.oprname FROM pg_operator o
	WHERE o.oid >= 16384 AND o.oprcode::oid NOT IN (SELECT oid FROM safe)
	AND NOT (o.oprcode::oid IN (SELECT objid FROM ext) AND EXISTS (SELECT 1 FROM pg_depend d
		WHERE d.deptype = 'e' AND d.classid = 'pg_operator'::regclass AND d.objid = o.oid))
),
tree AS (
	SELECT r.ev_class AS rel, 0::oid AS typ, r.ev_action::text || coalesce(r.ev_qual::text, '') AS t
		FROM pg_rewrite r WHERE r.oid >= 16384
	UNION ALL SELECT ad.adrelid, 0, ad.adbin::text FROM pg_attrdef ad WHERE ad.oid >= 16384
	UNION ALL SELECT co.conrelid, co.contypid, co.conbin::text FROM pg_constraint co
		WHERE co.conbin IS NOT NULL AND co.oid >= 16384
	UNION ALL SELECT po.polrelid, 0, coalesce(po.polqual::text, '') || coalesce(po.polwithcheck::text, '') FROM pg_policy po
	UNION ALL SELECT i.indrelid, 0, coalesce(i.indexprs::text, '') || coalesce(i.indpred::text, '') FROM pg_index i
		WHERE i.indexrelid >= 16384 AND (i.indexprs IS NOT NULL OR i.indpred IS NOT NULL)
	UNION ALL SELECT 0, t.oid, t.typdefaultbin::text FROM pg_type t WHERE t.typdefaultbin IS NOT NULL AND t.oid >= 16384
	UNION ALL SELECT tg.tgrelid, 0, tg.tgqual::text FROM pg_trigger tg WHERE tg.tgqual IS NOT NULL
),
code AS (
	SELECT DISTINCT tr.rel, tr.typ FROM tree tr, regexp_matches(tr.t,
		'\{(FUNCEXPR|AGGREF|WINDOWFUNC|OPEXPR|DISTINCTEXPR|NULLIFEXPR|SCALARARRAYOPEXPR) :[a-z]+ (\d+)(?: :funcresulttype \d+ :funcretset \w+ :funcvariadic \w+ :funcformat (\d))?', 'g') m
	WHERE CASE
		WHEN m[1] = 'FUNCEXPR' AND coalesce(m[3], '0') IN ('0', '3')
			THEN m[2]::oid NOT IN (SELECT oid FROM safe) AND m[2]::oid NOT IN (SELECT objid FROM ext)
		WHEN m[1] IN ('FUNCEXPR', 'AGGREF', 'WINDOWFUNC') THEN m[2]::oid >= 16384 AND m[2]::oid NOT IN (SELECT objid FROM ext)
		ELSE m[2]::oid IN (SELECT oid FROM unsafe_op) END
),
dom AS (
	SELECT typ FROM code WHERE typ <> 0
	UNION
	SELECT t.oid FROM pg_type t JOIN dom ON t.typbasetype = dom.typ OR t.typelem = dom.typ
),
marked AS (
	SELECT rel FROM code WHERE rel <> 0
	UNION SELECT r.ev_class FROM pg_rewrite r WHERE r.rulename <> '_RETURN' AND r.oid >= 16384
	UNION SELECT tg.tgrelid FROM pg_trigger tg WHERE NOT tg.tgisinternal
	UNION SELECT a.attrelid FROM dom JOIN pg_attribute a ON a.atttypid = dom.typ WHERE a.attnum > 0 AND NOT a.attisdropped
	UNION SELECT c.oid FROM pg_class c WHERE c.relkind = 'f'
),
edge AS (
	SELECT d.refobjid AS src, coalesce(r.ev_class, po.polrelid) AS dst FROM pg_depend d
	LEFT JOIN pg_rewrite r ON d.classid = 'pg_rewrite'::regclass AND r.oid = d.objid
	LEFT JOIN pg_policy po ON d.classid = 'pg_policy'::regclass AND po.oid = d.objid
	WHERE d.refclassid = 'pg_class'::regclass AND d.classid IN ('pg_rewrite'::regclass, 'pg_policy'::regclass)
		AND d.objid >= 16384
	UNION ALL SELECT inhrelid, inhparent FROM pg_inherits
	UNION ALL SELECT conrelid, confrelid FROM pg_constraint WHERE contype = 'f'
),
reach AS (
	SELECT rel FROM marked
	UNION
	SELECT e.dst FROM reach m JOIN edge e ON e.src = m.rel
)
SELECT 'n', l.name FROM (SELECT name FROM listed UNION SELECT name FROM ruled) l
WHERE EXISTS (SELECT 1 FROM pg_proc p WHERE p.proname = l.name AND (p.pronamespace <> 'pg_catalog'::regnamespace OR p.oid >= 16384))
	OR NOT EXISTS (SELECT 1 FROM pg_proc p WHERE p.proname = l.name AND p.pronamespace = 'pg_catalog'::regnamespace)
	AND l.name NOT IN (SELECT word FROM pg_get_keywords() WHERE catcode <> 'U')
UNION SELECT 'n', lower(c.relname) FROM reach JOIN pg_class c ON c.oid = reach.rel
UNION SELECT 'n', lower(t.typname) FROM dom JOIN pg_type t ON t.oid = dom.typ
UNION SELECT 'n', lower(p.proname) FROM pg_proc p JOIN pg_type t ON t.oid = p.proargtypes[0]
	WHERE p.pronargs = 1 AND (t.typrelid <> 0 OR t.typtype = 'p') AND p.oid >= 16384
	AND p.oid NOT IN (SELECT objid FROM ext)
UNION SELECT 'o', oprname FROM unsafe_op
UNION SELECT CASE WHEN ca.castcontext = 'e' THEN 'c' ELSE 'a' END, '' FROM pg_cast ca
	WHERE ca.oid >= 16384 AND ca.castmethod = 'f' AND ca.castfunc NOT IN (SELECT oid FROM safe)
	AND NOT (ca.castfunc IN (SELECT objid FROM ext) AND EXISTS (SELECT 1 FROM pg_depend d
		WHERE d.deptype = 'e' AND d.classid = 'pg_cast'::regclass AND d.objid = ca.oid))
UNION SELECT 'e', '' FROM pg_event_trigger WHERE evtenabled <> 'D'
UNION SELECT 'x', quote_ident(n.nspname) FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace
	WHERE e.extname = 'dblink'
UNION SELECT 'f', quote_ident(n.nspname) FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
	WHERE p.proname = 'postgres_fdw_disconnect_all' AND p.pronargs = 0;
` + functionsSQL

// functionsSQL reads, for every name under which a user made a LANGUAGE
// sql or PL/pgSQL function, every function of that name in any schema
// (the server's too): its body where it is a plain LANGUAGE sql function
// or a PL/pgSQL one without SET clauses (the language of the server's
// plpgsql extension), NULL for any other (another language, a procedure,
// an aggregate) and for one whose call runs code its body does not hold:
// an argument's default (evaluated where it is called) or an argument or
// result of a user's type (a domain's check runs on the way in and out);
// and whether it is PL/pgSQL. A name is harmless (sqllex.Shadows.Harmless)
// only where every body is there and reads as harmless: whichever of them
// a call resolves to, by schema or overload, leaves the session alone.
// Names are compared as the server stores them (a call's name folded as
// the server folds it: sqllex.UnknownCalls).
const functionsSQL = `SELECT p.proname, CASE WHEN (p.prolang = l.oid OR p.prolang = pl.oid AND p.proconfig IS NULL)
	AND p.prokind = 'f' AND p.proargdefaults IS NULL
	AND p.prorettype < 16384 AND NOT EXISTS (SELECT 1 FROM unnest(coalesce(p.proallargtypes, p.proargtypes::oid[])) a WHERE a >= 16384)
	THEN p.prosrc END, p.prolang = pl.oid
FROM pg_proc p, (SELECT oid FROM pg_language WHERE lanname = 'sql') l,
	(SELECT coalesce((SELECT la.oid FROM pg_language la
		JOIN pg_depend d ON d.classid = 'pg_language'::regclass AND d.objid = la.oid AND d.deptype = 'e'
		JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'plpgsql'
		WHERE la.lanname = 'plpgsql'), 0) AS oid) pl
WHERE p.proname IN (SELECT u.proname FROM pg_proc u WHERE u.oid >= 16384 AND u.prolang IN (l.oid, pl.oid))`

// catalogQuery is catalogSQL with the lists filled in: the names are
// sqllex's, lower-case words, so an array literal carries them as they
// are.
var catalogQuery = func() string {
	harmless, ruled := sqllex.Listed(sqllex.Postgres)
	return fmt.Sprintf(catalogSQL, "{"+strings.Join(harmless, ",")+"}", "{"+strings.Join(ruled, ",")+"}")
}()

// ddlWords are the words an enabled event trigger adds to the names:
// every DDL statement may run it.
var _ dialects.CatalogRefresher = (*conn)(nil)

var ddlWords = []string{"create", "alter", "drop", "comment", "grant", "revoke", "import", "security", "refresh", "reindex", "truncate"}

// catalogTimeout bounds one reading of the catalog.
const catalogTimeout = 5 * time.Second

// pgCatalog is one reading of a database's catalog.
type pgCatalog struct {
	shadows *sqllex.Shadows
	// The schemas, quoted, of dblink and of postgres_fdw_disconnect_all
	// where the database has them: the reset closes their connections.
	dblink, fdw string
}

// readCatalog reads the catalog on pc, which must be idle outside a
// transaction (the reading's SET LOCAL would otherwise outlive it).
func readCatalog(ctx context.Context, pc *pgconn.PgConn) (*pgCatalog, error) {
	res, err := pc.Exec(ctx, catalogQuery).ReadAll()
	if err != nil {
		return nil, fmt.Errorf("pooldriver: postgres: reading the catalog: %w", err)
	}
	if len(res) != 3 {
		return nil, fmt.Errorf("pooldriver: postgres: reading the catalog: %d results, want 3", len(res))
	}
	s := &sqllex.Shadows{Names: make(map[string]struct{})}
	cat := &pgCatalog{shadows: s}
	for _, row := range res[1].Rows {
		if len(row) != 2 || len(row[0]) != 1 {
			return nil, fmt.Errorf("pooldriver: postgres: reading the catalog: a row of %d columns", len(row))
		}
		name := string(row[1])
		switch row[0][0] {
		case 'n':
			s.Names[name] = struct{}{}
		case 'o':
			s.Ops = append(s.Ops, name)
		case 'c':
			s.Casts = true
		case 'a':
			s.All = true
		case 'e':
			for _, w := range ddlWords {
				s.Names[w] = struct{}{}
			}
		case 'x':
			cat.dblink = name
		case 'f':
			cat.fdw = name
		}
	}
	s.Harmless = harmlessFunctions(res[2].Rows, s)
	return cat, nil
}

// harmlessFunctions returns the names all of whose functions (rows of
// functionsSQL: a name, a body, NULL where not one read, and whether it
// is PL/pgSQL) read as harmless against s, and call only names that are
// harmless in turn (see provedFunctions).
func harmlessFunctions(rows [][][]byte, s *sqllex.Shadows) map[string]struct{} {
	bodies := make(map[string]*fnBodies)
	for _, row := range rows {
		if len(row) != 2 && len(row) != 3 {
			continue
		}
		name := string(row[0])
		b := bodies[name]
		if b == nil {
			b = &fnBodies{ok: true}
			bodies[name] = b
		}
		if !b.ok {
			continue
		}
		var calls []string
		switch {
		case row[1] == nil:
			b.ok = false
		case len(row) == 3 && string(row[2]) == "t":
			calls, b.ok = sqllex.PLpgSQLBody(string(row[1]), s)
		default:
			calls, b.ok = sqllex.SQLBody(string(row[1]), s)
		}
		b.calls = append(b.calls, calls...)
	}
	return provedFunctions(bodies)
}

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
// due (now: the caller ran DDL; see dialects.Catalog.Claim) and c can (idle, no transaction open, not a connection behind a
// transaction pooler, where the next statement may reach another server
// connection but the same catalog). A reading that fails keeps the last
// one; with none, nil: every statement that names anything counts as a
// change (see sqllex.Refs.Meets).
func (c *conn) shadows(pc *pgconn.PgConn, now bool) *dialects.CatalogSnapshot[*pgCatalog] {
	if c.catalog == nil {
		c.catalog = dialects.CatalogFor[*pgCatalog](catalogKey(pc, c.pgx().Config().Database))
	}
	snap := c.catalog.Current()
	if snap == nil && !pc.IsBusy() && pc.TxStatus() == 'I' {
		ctx, cancel := context.WithTimeout(context.Background(), catalogTimeout)
		defer cancel()
		mine, snap := c.catalog.ClaimFirst(ctx)
		if !mine {
			return snap
		}
		s, err := readCatalog(ctx, pc)
		if err != nil {
			c.catalog.ReleaseFirst()
			return c.catalog.Current()
		}
		return c.catalog.StoreFirst(s)
	}
	if snap != nil && snap.Due() && !pc.IsBusy() && pc.TxStatus() == 'I' && c.catalog.Claim(now) {
		ctx, cancel := context.WithTimeout(context.Background(), catalogTimeout)
		s, err := readCatalog(ctx, pc)
		cancel()
		if err != nil {
			c.catalog.Release()
		} else {
			snap = c.catalog.Store(s)
		}
	}
	return snap
}

// current returns the catalog's latest reading, reading it first only if
// there is none yet (see dialects.CatalogRefresher: a due reading is read
// again off the callers' paths).
func (c *conn) current(pc *pgconn.PgConn) *dialects.CatalogSnapshot[*pgCatalog] {
	if c.catalog == nil {
		c.catalog = dialects.CatalogFor[*pgCatalog](catalogKey(pc, c.pgx().Config().Database))
	}
	if snap := c.catalog.Current(); snap != nil {
		return snap
	}
	return c.shadows(pc, true)
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
