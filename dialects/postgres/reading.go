package postgres

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pooldriver/pooldriver/dialects/internal/sqllex"
)

// What the server will run, not what a name says: a name on sqllex's list
// is the built-in only where PostgreSQL resolves it to the built-in, and
// operators, casts, triggers, rules, policies, defaults, checks and views
// run code that no call in a statement's text names. The catalog says
// which; catalogSQL reads it into a sqllex.Shadows, shared by every
// connection to one server and database (dialects.Catalog) and read again
// every dialects.CatalogTTL, or at once after a statement of DDL, and only
// on a session that no statement changed since its last reset (readable).
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
//   - a relation or type from which the server's dependency graph
//     reaches code (bad, a closure over pg_depend): the seeds are a
//     user's function (neither initdb's nor an extension's), an unsafe
//     operator or cast, a trigger (any, but the internal ones of foreign
//     keys), a rule other than a view's, a foreign table (postgres_fdw
//     keeps a connection per session), and a stored expression that
//     calls an unsafe built-in (see below); an object reaches what it
//     depends on normally (a view's rule the relations, types, functions
//     and operators its query names; a default, check, policy, index or
//     partition key its functions; a type its I/O, typmod, analyze and
//     subscripting functions, its base type; a range its canonical and
//     subtype_diff functions) and runs its parts, what depends on it
//     automatically or internally (a table its rules, triggers, defaults,
//     checks, policies, indexes and partitions; a view its rule; a domain
//     its checks). Beside pg_depend: an array or multirange type reaches
//     its element or range, a composite type its columns' types, a
//     table its inheritance children and the tables that reference it by
//     a foreign key (a cascade writes to them; a referencing table does
//     not reach the referenced one, whose code the check does not run),
//     a type its cast to json or jsonb by a function (the JSON built-ins
//     call it: to_json, json_agg, ...) and its default btree or hash
//     operator class (ORDER BY, GROUP BY, DISTINCT, joins), an operator
//     class its family, whose parts are its support functions and
//     operators. TestClosureKinds asks the server which kinds of object
//     can reference a function or hold an expression, and fails for one
//     this does not place;
//   - a user's function whose first argument is of a row type (or a
//     pseudo-type, or a domain: one over a row type is one too), and the
//     only one without a default: t.f calls it where the text names no
//     call;
//   - a user's cast with a function (any :: or CAST may be it; an
//     implicit or assignment one runs where nothing is written: every
//     statement counts then);
//   - an enabled event trigger: every DDL statement counts.
//
// It also finds what the session reset must undo beyond what DISCARD
// does (see resetSQL): dblink's connections and postgres_fdw's; and the
// relations a standby answers differently from the primary
// (Shadows.Standby, for reads on standbys), by their properties: not
// WAL-logged (unlogged or temporary), a sequence, a foreign table, a view
// or a table with a policy whose stored query calls a user's function or
// a VOLATILE built-in, and every view, policy or parent table that
// reaches one of those through pg_depend or pg_inherits (dedge).
//
// Expressions (a view's query, a rule's, a default, a check, a policy, an
// index's, a partition key's, a domain's default, a trigger's WHEN) are
// read from the trees
// the server stores, since PostgreSQL records no dependency on a
// built-in (a view that calls pg_advisory_lock depends on nothing): a
// function called by name must be safe (an extension's is not: pg_trgm's
// set_limit sets a setting, dblink_connect opens a connection that
// outlives the statement), a cast's function, an aggregate or a window
// function a built-in or an extension's, an operator not a user's unsafe
// one. Objects of initdb's (oids under 16384: pg_catalog's
// and information_schema's views) are the server's.
//
// The rows are (kind, name): 'n' a name, 'r' a relation a standby
// answers differently, 'o' an operator, 'c' an explicit
// cast, 'a' an implicit or assignment cast, 'e' an event trigger, 'x'
// dblink's schema, 'f' the schema of postgres_fdw_disconnect_all (each
// quoted), 's' the system identifier, 'g' a custom setting's name a
// function's SET clause names (in lower case). $1 is
// the list's harmless names, $2 the names the session rules read, $3 the
// words the call rules read as syntax before '(' (sqllex.SyntaxNames):
// one a user's function is named is a name too, wherever it stands.
// SET LOCAL jit: the query's estimated cost would start the JIT compiler,
// which costs a second where the query takes milliseconds.
const catalogSQL = `SET LOCAL jit = off; SET LOCAL search_path = pg_catalog, pg_temp; WITH RECURSIVE
listed AS (SELECT pg_catalog.unnest('%s'::pg_catalog.text[]) AS name),
ruled AS (SELECT pg_catalog.unnest('%s'::pg_catalog.text[]) AS name),
syntax AS (SELECT pg_catalog.unnest('%s'::pg_catalog.text[]) AS name),
ext AS (SELECT objid FROM pg_catalog.pg_depend WHERE deptype = 'e' AND classid = 'pg_catalog.pg_proc'::pg_catalog.regclass),
safe AS (
	SELECT p.oid FROM pg_catalog.pg_proc p JOIN listed l ON l.name = p.proname
	WHERE p.pronamespace = 'pg_catalog'::pg_catalog.regnamespace AND p.oid < 16384
),
user_fn AS (
	SELECT p.oid FROM pg_catalog.pg_proc p WHERE p.oid >= 16384 AND p.oid NOT IN (SELECT objid FROM ext)
),
unsafe_op AS (
	SELECT o.oid, o.oprname FROM pg_catalog.pg_operator o
	WHERE o.oid >= 16384 AND o.oprcode::pg_catalog.oid NOT IN (SELECT oid FROM safe)
	AND NOT (o.oprcode::pg_catalog.oid IN (SELECT objid FROM ext) AND EXISTS (SELECT 1 FROM pg_catalog.pg_depend d
		WHERE d.deptype = 'e' AND d.classid = 'pg_catalog.pg_operator'::pg_catalog.regclass AND d.objid = o.oid))
),
unsafe_cast AS (
	SELECT ca.oid, ca.castcontext FROM pg_catalog.pg_cast ca
	WHERE ca.oid >= 16384 AND ca.castmethod = 'f' AND ca.castfunc NOT IN (SELECT oid FROM safe)
	AND NOT (ca.castfunc IN (SELECT objid FROM ext) AND EXISTS (SELECT 1 FROM pg_catalog.pg_depend d
		WHERE d.deptype = 'e' AND d.classid = 'pg_catalog.pg_cast'::pg_catalog.regclass AND d.objid = ca.oid))
),
k AS (SELECT
	'pg_catalog.pg_rewrite'::pg_catalog.regclass::pg_catalog.oid AS pg_rewrite,
	'pg_catalog.pg_attrdef'::pg_catalog.regclass::pg_catalog.oid AS pg_attrdef,
	'pg_catalog.pg_constraint'::pg_catalog.regclass::pg_catalog.oid AS pg_constraint,
	'pg_catalog.pg_policy'::pg_catalog.regclass::pg_catalog.oid AS pg_policy,
	'pg_catalog.pg_class'::pg_catalog.regclass::pg_catalog.oid AS pg_class,
	'pg_catalog.pg_type'::pg_catalog.regclass::pg_catalog.oid AS pg_type,
	'pg_catalog.pg_trigger'::pg_catalog.regclass::pg_catalog.oid AS pg_trigger,
	'pg_catalog.pg_proc'::pg_catalog.regclass::pg_catalog.oid AS pg_proc,
	'pg_catalog.pg_operator'::pg_catalog.regclass::pg_catalog.oid AS pg_operator,
	'pg_catalog.pg_cast'::pg_catalog.regclass::pg_catalog.oid AS pg_cast,
	'pg_catalog.pg_opclass'::pg_catalog.regclass::pg_catalog.oid AS pg_opclass,
	'pg_catalog.pg_opfamily'::pg_catalog.regclass::pg_catalog.oid AS pg_opfamily),
tree AS (
	SELECT k.pg_rewrite AS cls, r.oid AS obj, r.ev_action::pg_catalog.text || coalesce(r.ev_qual::pg_catalog.text, '') AS t
		FROM k, pg_catalog.pg_rewrite r WHERE r.oid >= 16384
	UNION ALL SELECT k.pg_attrdef, ad.oid, ad.adbin::pg_catalog.text FROM k, pg_catalog.pg_attrdef ad WHERE ad.oid >= 16384
	UNION ALL SELECT k.pg_constraint, co.oid, co.conbin::pg_catalog.text FROM k, pg_catalog.pg_constraint co
		WHERE co.conbin IS NOT NULL AND co.oid >= 16384
	UNION ALL SELECT k.pg_policy, po.oid, coalesce(po.polqual::pg_catalog.text, '') || coalesce(po.polwithcheck::pg_catalog.text, '') FROM k, pg_catalog.pg_policy po
	UNION ALL SELECT k.pg_class, i.indexrelid, coalesce(i.indexprs::pg_catalog.text, '') || coalesce(i.indpred::pg_catalog.text, '') FROM k, pg_catalog.pg_index i
		WHERE i.indexrelid >= 16384 AND (i.indexprs IS NOT NULL OR i.indpred IS NOT NULL)
	UNION ALL SELECT k.pg_class, pt.partrelid, pt.partexprs::pg_catalog.text FROM k, pg_catalog.pg_partitioned_table pt
		WHERE pt.partrelid >= 16384 AND pt.partexprs IS NOT NULL
	UNION ALL SELECT k.pg_type, t.oid, t.typdefaultbin::pg_catalog.text FROM k, pg_catalog.pg_type t WHERE t.typdefaultbin IS NOT NULL AND t.oid >= 16384
	UNION ALL SELECT k.pg_trigger, tg.oid, tg.tgqual::pg_catalog.text FROM k, pg_catalog.pg_trigger tg WHERE tg.tgqual IS NOT NULL
),
code AS (
	SELECT DISTINCT tr.cls, tr.obj FROM tree tr, pg_catalog.regexp_matches(tr.t,
		E'\\{(FUNCEXPR|AGGREF|WINDOWFUNC|OPEXPR|DISTINCTEXPR|NULLIFEXPR|SCALARARRAYOPEXPR) :[a-z]+ (\\d+)(?: :funcresulttype \\d+ :funcretset \\w+ :funcvariadic \\w+ :funcformat (\\d))?', 'g') m
	WHERE CASE
		WHEN m[1] = 'FUNCEXPR' AND coalesce(m[3], '0') IN ('0', '3')
			THEN m[2]::pg_catalog.oid NOT IN (SELECT oid FROM safe)
		WHEN m[1] IN ('FUNCEXPR', 'AGGREF', 'WINDOWFUNC') THEN m[2]::pg_catalog.oid >= 16384 AND m[2]::pg_catalog.oid NOT IN (SELECT objid FROM ext)
		ELSE m[2]::pg_catalog.oid IN (SELECT oid FROM unsafe_op) END
),
seed AS (
	SELECT cls, obj FROM code
	UNION ALL SELECT k.pg_proc, oid FROM k, user_fn
	UNION ALL SELECT k.pg_operator, oid FROM k, unsafe_op
	UNION ALL SELECT k.pg_cast, oid FROM k, unsafe_cast
	UNION ALL SELECT k.pg_trigger, tg.oid FROM k, pg_catalog.pg_trigger tg WHERE NOT tg.tgisinternal
	UNION ALL SELECT k.pg_rewrite, r.oid FROM k, pg_catalog.pg_rewrite r WHERE r.rulename <> '_RETURN' AND r.oid >= 16384
	UNION ALL SELECT k.pg_class, c.oid FROM k, pg_catalog.pg_class c WHERE c.relkind = 'f'
),
uses AS (
	SELECT d.classid AS sc, d.objid AS so, d.refclassid AS dc, d.refobjid AS dobj FROM k, pg_catalog.pg_depend d
	WHERE d.deptype = 'n' AND d.objid >= 16384 AND d.refobjid >= 16384
		AND NOT (d.classid = k.pg_class AND d.refclassid = k.pg_class)
		AND NOT (d.classid = k.pg_constraint AND d.refclassid = k.pg_class
			AND EXISTS (SELECT 1 FROM pg_catalog.pg_constraint fk WHERE fk.oid = d.objid AND fk.contype = 'f'))
	UNION ALL SELECT d.refclassid, d.refobjid, d.classid, d.objid FROM pg_catalog.pg_depend d
		WHERE d.deptype IN ('a', 'i') AND d.objid >= 16384
	UNION ALL SELECT d.classid, d.objid, d.refclassid, d.refobjid FROM k, pg_catalog.pg_depend d
		WHERE d.deptype = 'i' AND d.classid = k.pg_type AND d.refclassid = k.pg_type AND d.objid >= 16384
	UNION ALL SELECT k.pg_type, c.reltype, d.refclassid, d.refobjid FROM k CROSS JOIN pg_catalog.pg_class c
		JOIN pg_catalog.pg_depend d ON d.classid = k.pg_class AND d.objid = c.oid AND d.objsubid > 0 AND d.deptype = 'n'
		WHERE c.oid >= 16384 AND c.reltype <> 0
	UNION ALL SELECT k.pg_class, co.confrelid, k.pg_class, co.conrelid FROM k, pg_catalog.pg_constraint co WHERE co.contype = 'f'
	UNION ALL SELECT k.pg_class, inh.inhparent, k.pg_class, inh.inhrelid FROM k, pg_catalog.pg_inherits inh
	UNION ALL SELECT k.pg_type, ca.castsource, k.pg_cast, ca.oid FROM k, pg_catalog.pg_cast ca
		WHERE ca.casttarget IN ('pg_catalog.json'::pg_catalog.regtype, 'pg_catalog.jsonb'::pg_catalog.regtype)
		AND ca.castsource >= 16384 AND ca.castmethod = 'f'
	UNION ALL SELECT k.pg_type, oc.opcintype, k.pg_opclass, oc.oid FROM k, pg_catalog.pg_opclass oc
		JOIN pg_catalog.pg_am am ON am.oid = oc.opcmethod WHERE oc.opcdefault AND am.amname IN ('btree', 'hash') AND oc.oid >= 16384
	UNION ALL SELECT k.pg_opclass, oc.oid, k.pg_opfamily, oc.opcfamily FROM k, pg_catalog.pg_opclass oc WHERE oc.oid >= 16384
),
bad AS (
	SELECT cls, obj FROM seed
	UNION
	SELECT u.sc, u.so FROM bad b JOIN uses u ON u.dc = b.cls AND u.dobj = b.obj
),
dedge AS (
	SELECT d.refobjid AS src, coalesce(r.ev_class, po.polrelid) AS dst FROM pg_catalog.pg_depend d
	LEFT JOIN pg_catalog.pg_rewrite r ON d.classid = 'pg_catalog.pg_rewrite'::pg_catalog.regclass AND r.oid = d.objid
	LEFT JOIN pg_catalog.pg_policy po ON d.classid = 'pg_catalog.pg_policy'::pg_catalog.regclass AND po.oid = d.objid
	WHERE d.refclassid = 'pg_catalog.pg_class'::pg_catalog.regclass
		AND d.classid IN ('pg_catalog.pg_rewrite'::pg_catalog.regclass, 'pg_catalog.pg_policy'::pg_catalog.regclass)
		AND d.objid >= 16384
	UNION ALL SELECT inhrelid, inhparent FROM pg_catalog.pg_inherits
),
rtree AS (
	SELECT r.ev_class AS rel, r.ev_action::pg_catalog.text || coalesce(r.ev_qual::pg_catalog.text, '') AS t
		FROM pg_catalog.pg_rewrite r WHERE r.oid >= 16384
	UNION ALL SELECT po.polrelid, coalesce(po.polqual::pg_catalog.text, '') FROM pg_catalog.pg_policy po
),
differs AS (
	SELECT c.oid AS rel FROM pg_catalog.pg_class c WHERE c.relpersistence <> 'p' OR c.relkind IN ('S', 'f')
	UNION SELECT tr.rel FROM rtree tr, pg_catalog.regexp_matches(tr.t,
		E'\\{(?:FUNCEXPR|AGGREF|WINDOWFUNC) :[a-z]+ (\\d+)', 'g') m
		JOIN pg_catalog.pg_proc p ON p.oid = m[1]::pg_catalog.oid
		WHERE p.provolatile = 'v' OR p.oid >= 16384
),
sreach AS (
	SELECT rel FROM differs
	UNION
	SELECT e.dst FROM sreach m JOIN dedge e ON e.src = m.rel
)
SELECT 'n', l.name FROM (SELECT name FROM listed UNION SELECT name FROM ruled) l
WHERE EXISTS (SELECT 1 FROM pg_catalog.pg_proc p WHERE p.proname = l.name AND (p.pronamespace <> 'pg_catalog'::pg_catalog.regnamespace OR p.oid >= 16384))
	OR NOT EXISTS (SELECT 1 FROM pg_catalog.pg_proc p WHERE p.proname = l.name AND p.pronamespace = 'pg_catalog'::pg_catalog.regnamespace)
	AND l.name NOT IN (SELECT word FROM pg_catalog.pg_get_keywords() WHERE catcode <> 'U')
UNION SELECT 'n', sy.name FROM syntax sy WHERE EXISTS (SELECT 1 FROM pg_catalog.pg_proc p WHERE p.proname = sy.name
	AND (p.pronamespace <> 'pg_catalog'::pg_catalog.regnamespace OR p.oid >= 16384))
UNION SELECT 'n', pg_catalog.lower(c.relname) FROM bad JOIN pg_catalog.pg_class c ON bad.cls = 'pg_catalog.pg_class'::pg_catalog.regclass AND c.oid = bad.obj
UNION SELECT 'r', pg_catalog.lower(c.relname) FROM sreach JOIN pg_catalog.pg_class c ON c.oid = sreach.rel
	WHERE c.relkind NOT IN ('i', 'I', 'c', 't')
UNION SELECT 'n', pg_catalog.lower(t.typname) FROM bad JOIN pg_catalog.pg_type t ON bad.cls = 'pg_catalog.pg_type'::pg_catalog.regclass AND t.oid = bad.obj
UNION SELECT 'n', pg_catalog.lower(p.proname) FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_type t ON t.oid = p.proargtypes[0]
	WHERE p.pronargs >= 1 AND (p.pronargs - p.pronargdefaults <= 1 OR p.provariadic <> 0)
	AND (t.typrelid <> 0 OR t.typtype IN ('p', 'd')) AND p.oid >= 16384
	AND p.oid NOT IN (SELECT objid FROM ext)
UNION SELECT 'o', oprname FROM unsafe_op
UNION SELECT CASE WHEN uc.castcontext = 'e' THEN 'c' ELSE 'a' END, '' FROM unsafe_cast uc
UNION SELECT 'e', '' FROM pg_catalog.pg_event_trigger WHERE evtenabled <> 'D'
UNION SELECT 'x', pg_catalog.quote_ident(n.nspname) FROM pg_catalog.pg_extension e JOIN pg_catalog.pg_namespace n ON n.oid = e.extnamespace
	WHERE e.extname = 'dblink'
UNION SELECT 'f', pg_catalog.quote_ident(n.nspname) FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
	WHERE p.proname = 'postgres_fdw_disconnect_all' AND p.pronargs = 0
UNION SELECT 's', (SELECT system_identifier::text FROM pg_catalog.pg_control_system())
	WHERE pg_catalog.has_function_privilege('pg_catalog.pg_control_system()', 'EXECUTE')
UNION SELECT 'g', pg_catalog.lower(pg_catalog.split_part(c, '=', 1)) FROM pg_catalog.pg_proc p, pg_catalog.unnest(p.proconfig) c
	WHERE p.oid >= 16384 AND p.proconfig IS NOT NULL AND pg_catalog.strpos(pg_catalog.split_part(c, '=', 1), '.') > 0;
` + functionsSQL

// functionsSQL reads, for every name under which a user made a LANGUAGE
// sql or PL/pgSQL function, every function of that name in any schema
// (the server's too): its body where it is a plain LANGUAGE sql function
// or a PL/pgSQL one without SET clauses (the language of the server's
// plpgsql extension), NULL for any other (another language, a procedure,
// an aggregate) and for one whose call runs code its body does not hold:
// an argument's default (evaluated where it is called) or an argument or
// result of a user's type (a domain's check runs on the way in and out);
// whether it is PL/pgSQL; and its volatility (provolatile: 's' STABLE,
// 'i' IMMUTABLE, 'v' VOLATILE). A name is harmless (sqllex.Shadows.Harmless)
// only where every body is there and reads as harmless: whichever of them
// a call resolves to, by schema or overload, leaves the session alone.
// A harmless name is also a read (sqllex.Shadows.Reads) where every
// function of it is STABLE or IMMUTABLE, whose statements the server runs
// read-only (it refuses an INSERT, an UPDATE, a SELECT FOR UPDATE in
// them, and runs them under the calling statement's snapshot), names no
// built-in that writes or answers for the session (sqllex.NamesWriter:
// nextval, currval, set_config, the advisory locks, ..., which a
// read-only statement may still call), and calls only names that are
// reads in turn (a VOLATILE function it calls runs its statements as
// any). Names are compared as the server stores them (a call's name
// folded as the server folds it: sqllex.UnknownCalls).
const functionsSQL = `SELECT p.proname, CASE WHEN (p.prolang = l.oid OR p.prolang = pl.oid AND p.proconfig IS NULL)
	AND p.prokind = 'f' AND p.proargdefaults IS NULL
	AND p.prorettype < 16384 AND NOT EXISTS (SELECT 1 FROM pg_catalog.unnest(coalesce(p.proallargtypes, p.proargtypes::pg_catalog.oid[])) a WHERE a >= 16384)
	THEN p.prosrc END, p.prolang = pl.oid, p.provolatile
FROM pg_catalog.pg_proc p, (SELECT oid FROM pg_catalog.pg_language WHERE lanname = 'sql') l,
	(SELECT coalesce((SELECT la.oid FROM pg_catalog.pg_language la
		JOIN pg_catalog.pg_depend d ON d.classid = 'pg_catalog.pg_language'::pg_catalog.regclass AND d.objid = la.oid AND d.deptype = 'e'
		JOIN pg_catalog.pg_extension e ON e.oid = d.refobjid AND e.extname = 'plpgsql'
		WHERE la.lanname = 'plpgsql'), 0) AS oid) pl
WHERE p.proname IN (SELECT u.proname FROM pg_catalog.pg_proc u WHERE u.oid >= 16384 AND u.prolang IN (l.oid, pl.oid))`

// catalogQuery is catalogSQL with the lists filled in: the names are
// sqllex's, lower-case words, so an array literal carries them as they
// are.
var catalogQuery = func() string {
	harmless, ruled := sqllex.Listed(sqllex.Postgres)
	return fmt.Sprintf(catalogSQL, "{"+strings.Join(harmless, ",")+"}", "{"+strings.Join(ruled, ",")+"}",
		"{"+strings.Join(sqllex.SyntaxNames(), ",")+"}")
}()

// ddlWords are the words an enabled event trigger adds to the names:
// every DDL statement may run it.
var ddlWords = []string{"create", "alter", "drop", "comment", "grant", "revoke", "import", "security", "refresh", "reindex", "truncate"}

// pgCatalog is one reading of a database's catalog.
type pgCatalog struct {
	shadows *sqllex.Shadows
	// The schemas, quoted, of dblink and of postgres_fdw_disconnect_all
	// where the database has them: the reset closes their connections.
	dblink, fdw string
	// The server's system identifier, where the role may read it (see
	// serverID): a physical standby's is its primary's.
	sysid string
	// custom: the custom settings' names the functions' SET clauses
	// name (pg_proc.proconfig), which a call defines in the session
	// (custom.go).
	custom []string
}

// readCatalog reads the catalog on pc, which must be idle outside a
// transaction (the reading's SET LOCAL would otherwise outlive it).
func readCatalog(ctx context.Context, pc *pgconn.PgConn) (*pgCatalog, error) {
	res, err := pc.Exec(ctx, catalogQuery).ReadAll()
	if err != nil {
		return nil, fmt.Errorf("pooldriver: postgres: reading the catalog: %w", err)
	}
	if len(res) != 4 {
		return nil, fmt.Errorf("pooldriver: postgres: reading the catalog: %d results, want 4", len(res))
	}
	s := &sqllex.Shadows{Names: make(map[string]struct{}), Standby: make(map[string]struct{})}
	cat := &pgCatalog{shadows: s}
	for _, row := range res[2].Rows {
		if len(row) != 2 || len(row[0]) != 1 {
			return nil, fmt.Errorf("pooldriver: postgres: reading the catalog: a row of %d columns", len(row))
		}
		name := string(row[1])
		switch row[0][0] {
		case 'n':
			s.Names[name] = struct{}{}
		case 'r':
			s.Standby[name] = struct{}{}
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
		case 's':
			cat.sysid = name
		case 'g':
			cat.custom = append(cat.custom, name)
		}
	}
	s.Harmless, s.Reads, s.Settings = functionProofs(res[3].Rows, s)
	s.Static = staticFunctions(res[3].Rows, s)
	return cat, nil
}

// harmlessFunctions returns the names all of whose functions (rows of
// functionsSQL: a name, a body, NULL where not one read, whether it is
// PL/pgSQL, and its volatility; the last two may be left off) read as
// harmless against s, and call only names that are harmless in turn (see
// provedFunctions).
func harmlessFunctions(rows [][][]byte, s *sqllex.Shadows) map[string]struct{} {
	harmless, _, _ := functionProofs(rows, s)
	return harmless
}

// functionProofs returns, of the names of rows (see harmlessFunctions),
// those proved harmless and, of those, the ones proved reads (see
// functionsSQL): every function of the name STABLE or IMMUTABLE, its body
// naming no writer, calling only names proved reads in turn. A row
// without its volatility proves no read. And settings: those proved to
// change nothing but settings (Shadows.Settings): harmless, but that a
// LANGUAGE sql body may set settings (sqllex.SQLSettingsBody), calling
// only names proved so in turn. Each body is read once for all three, but
// a LANGUAGE sql one that is not harmless, twice.
func functionProofs(rows [][][]byte, s *sqllex.Shadows) (harmless, reads, settings map[string]struct{}) {
	bodies := make(map[string]*fnBodies)
	readBodies := make(map[string]*fnBodies)
	setBodies := make(map[string]*fnBodies)
	for _, row := range rows {
		if len(row) < 1 {
			continue
		}
		name := string(row[0])
		b, r, st := bodies[name], readBodies[name], setBodies[name]
		if b == nil {
			b, r, st = &fnBodies{ok: true}, &fnBodies{ok: true}, &fnBodies{ok: true}
			bodies[name], readBodies[name], setBodies[name] = b, r, st
		}
		if len(row) < 2 || len(row) > 4 || row[1] == nil {
			b.ok, r.ok, st.ok = false, false, false // a row not read proves nothing of its name
			continue
		}
		if !b.ok && !st.ok {
			continue
		}
		var calls []string
		ok, plpgsql := false, len(row) >= 3 && string(row[2]) == "t"
		if plpgsql {
			calls, ok = sqllex.PLpgSQLBody(string(row[1]), s)
		} else {
			calls, ok = sqllex.SQLBody(string(row[1]), s)
		}
		if b.ok {
			b.ok = ok
			b.calls = append(b.calls, calls...)
			// A read is a harmless body first: the same calls, followed
			// through the read bodies, so that a read calls only reads.
			r.ok = r.ok && b.ok && len(row) == 4 && (string(row[3]) == "s" || string(row[3]) == "i") &&
				!sqllex.NamesWriter(string(row[1])) && !sqllex.RefsOf(string(row[1]), sqllex.Postgres).NamesAny(s.Standby)
			r.calls = b.calls
		}
		if st.ok {
			// A settings body is a harmless one, or a LANGUAGE sql one
			// that changes only settings (PL/pgSQL's must be harmless).
			if !ok && !plpgsql {
				calls, ok = sqllex.SQLSettingsBody(string(row[1]), s)
			}
			st.ok = ok
			st.calls = append(st.calls, calls...)
		}
	}
	return provedFunctions(bodies), provedFunctions(readBodies), provedFunctions(setBodies)
}

// catalogWords are the words whose statements may change the catalog or
// run what no text shows: DDL (ddlWords) and what runs SQL built at run
// time or elsewhere (EXECUTE, DO, CALL, PREPARE, LOAD); and what may drop
// a prepared statement (DEALLOCATE, DISCARD), which a carried reset keeps
// after a static call (mayPrepare). A body with one anywhere, as a word
// (a string's text is no word), is no static one.
var catalogWords = append([]string{"execute", "do", "call", "prepare", "deallocate", "discard", "load"}, ddlWords...)

// staticFunctions returns the names of rows (see harmlessFunctions) under
// which every function is one whose body is read (a LANGUAGE sql or
// PL/pgSQL one without SET clauses, argument defaults or user's types:
// functionsSQL), runs nothing that may change the catalog or the prepared
// statements (no word of catalogWords, no SQL from a string:
// sqllex.CallsText, query_to_xml, dblink, ...), names nothing whose use
// runs a user's code by s (a table with a trigger, a view, an operator,
// a cast: sqllex.Refs.Meets), and calls only built-ins on the list or
// names static in turn (provedFunctions). Such a call may change the
// session (a set_config): it is reset after, but the catalog reading
// before it still vouches for what follows (sqllex.Shadows.Static), and
// is not read again for it.
func staticFunctions(rows [][][]byte, s *sqllex.Shadows) map[string]struct{} {
	bodies := make(map[string]*fnBodies)
	for _, row := range rows {
		if len(row) < 1 {
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
		if len(row) < 2 || row[1] == nil {
			b.ok = false
			continue
		}
		body := string(row[1])
		refs := sqllex.RefsOf(body, sqllex.Postgres)
		if sqllex.CallsOf(body, sqllex.Postgres) == sqllex.CallsText || namesAny(refs.Words, catalogWords) || refs.Meets(s) {
			b.ok = false
			continue
		}
		calls, ok := sqllex.UnknownCalls(body)
		if !ok {
			b.ok = false
			continue
		}
		b.calls = append(b.calls, calls...)
	}
	return provedFunctions(bodies)
}

// namesAny reports whether words holds any of names.
func namesAny(words, names []string) bool {
	for _, w := range words {
		for _, n := range names {
			if w == n {
				return true
			}
		}
	}
	return false
}
