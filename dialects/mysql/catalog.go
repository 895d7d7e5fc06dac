package mysql

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/go-sql-driver/mysql"

	"github.com/pooldriver/pooldriver/dialects"
	"github.com/pooldriver/pooldriver/dialects/internal/sqllex"
)

// shadows is what the dialect reads from a server's catalog (see
// readShadows): what runs code that a statement's text does not show.
type shadows struct {
	// s: nil where the server refused the reading (every text that names
	// anything counts, see sqllex.Refs.Meets); else stored functions (their names: on MariaDB 10.11 some listed
	// names, regexp_like say, are no built-ins, and a call runs the
	// current database's function of that name), tables with triggers,
	// and views whose reading runs such code or a built-in that changes
	// the session.
	s *sqllex.Shadows
	// blind: the databases (lower case) whose triggers the user may not
	// see: information_schema.TRIGGERS lists a table's triggers only to a
	// user with the TRIGGER privilege on it. A write there may fire one.
	blind map[string]struct{}
	// procs: the procedures (names, lower case) all of whose bodies, in
	// every database, the reading proves harmless (see routines): a CALL
	// of one is no session change (see provedCall).
	procs map[string]struct{}
}

// provedCall reports a text that is one CALL of a procedure v proves
// harmless, whose arguments call only functions v proves harmless and
// name nothing that counts; f is what the lexers read in it. A text with
// a backslash is not read: where its strings end depends on the
// session's sql_mode.
func (v *shadows) provedCall(query string, f sqllex.Facts) bool {
	if len(v.procs) == 0 || f.ChangesSession || f.Calls == sqllex.CallsText || strings.IndexByte(query, '\\') >= 0 {
		return false
	}
	r := sqllex.ReadRoutine(query, sqllex.SQLMode{}, nil)
	if !r.Harmless || len(r.Procs) != 1 || r.Writes {
		return false
	}
	if _, ok := v.procs[r.Procs[0]]; !ok {
		return false
	}
	if len(r.Funcs) > 0 && !v.s.Vouched(r.Funcs) {
		return false
	}
	for _, w := range r.Words {
		if _, ok := v.s.Names[w]; ok {
			return false
		}
	}
	return true
}

// catalogSnap is one reading of a server's catalog.
type catalogSnap = dialects.CatalogSnapshot[shadows]

// writesBlind reports whether a text that writes (see textFacts.writes),
// run with db as the current database, may fire a trigger the catalog did
// not show: db is blind, or the text names a blind database (db.t).
func (v *shadows) writesBlind(db string, refs *sqllex.Refs) bool {
	if len(v.blind) == 0 {
		return false
	}
	if _, ok := v.blind[db]; ok {
		return true
	}
	if refs == nil {
		return true
	}
	for _, w := range refs.Words {
		if _, ok := v.blind[w]; ok {
			return true
		}
	}
	return false
}

// shadowsSQL reads, in one round trip, rows of (kind, schema, name, def,
// mode): every stored function ('f') and procedure ('p') the user may
// call, with its database, its body (NULL where the user may not read it)
// and the sql_mode it was created with, in which it runs; every MariaDB
// package ('k': pkg.f() calls a routine of the package that ROUTINES
// does not list, whatever the stored functions named f are); the parameters
// of each ('a': def the parameter's name, mode the routine's type); the
// tables with triggers ('t'); every view with its definition ('v': NULL
// or empty where the user may not read it); the databases the user sees
// where the TRIGGER privilege (global, or on the database, whose grant
// may be a LIKE pattern) is not the user's, so that TRIGGERS may miss
// some ('b'). Privileges of a role, or on single tables, are not looked
// for: such a database counts as blind. information_schema spans every
// database: the reading does not depend on the current one.
const shadowsSQL = `SELECT CASE ROUTINE_TYPE WHEN 'FUNCTION' THEN 'f' WHEN 'PROCEDURE' THEN 'p' ELSE 'k' END,` +
	` ROUTINE_SCHEMA, ROUTINE_NAME, CASE WHEN ROUTINE_BODY = 'SQL' THEN ROUTINE_DEFINITION END, SQL_MODE` +
	` FROM information_schema.ROUTINES` +
	` UNION ALL SELECT 'a', SPECIFIC_SCHEMA, SPECIFIC_NAME, PARAMETER_NAME, ROUTINE_TYPE FROM information_schema.PARAMETERS` +
	` WHERE PARAMETER_NAME IS NOT NULL` +
	` UNION ALL SELECT 't', NULL, EVENT_OBJECT_TABLE, NULL, NULL FROM information_schema.TRIGGERS` +
	` UNION ALL SELECT 'v', NULL, TABLE_NAME, VIEW_DEFINITION, NULL FROM information_schema.VIEWS` +
	` UNION ALL SELECT 'b', NULL, SCHEMA_NAME, NULL, NULL FROM information_schema.SCHEMATA` +
	` WHERE SCHEMA_NAME NOT IN ('information_schema', 'performance_schema')` +
	` AND NOT EXISTS (SELECT 1 FROM information_schema.USER_PRIVILEGES` +
	` WHERE PRIVILEGE_TYPE = 'TRIGGER' AND GRANTEE = ` + grantee + `)` +
	` AND NOT EXISTS (SELECT 1 FROM information_schema.SCHEMA_PRIVILEGES` +
	` WHERE PRIVILEGE_TYPE = 'TRIGGER' AND GRANTEE = ` + grantee + ` AND SCHEMA_NAME LIKE TABLE_SCHEMA)`

// grantee is the current account as the *_PRIVILEGES tables name it,
// 'user'@'host'. An account whose name holds an '@' is not found there,
// and every database then counts as blind (the safe side).
const grantee = `CONCAT('''', SUBSTRING_INDEX(CURRENT_USER(), '@', 1), '''@''', SUBSTRING_INDEX(CURRENT_USER(), '@', -1), '''')`

// readShadows reads the catalog (see shadowsSQL) and builds what it says.
func (c *conn) readShadows(ctx context.Context) (shadows, error) {
	rows, err := c.queryer.QueryContext(ctx, shadowsSQL, nil)
	if err != nil {
		return shadows{}, err
	}
	defer func() { _ = rows.Close() }()
	var rs []catalogRow
	dest := make([]driver.Value, 5)
	for {
		if err := rows.Next(dest); err == io.EOF {
			break
		} else if err != nil {
			return shadows{}, err
		}
		kind, _ := textOf(dest[0])
		schema, _ := textOf(dest[1])
		name, _ := textOf(dest[2])
		def, hasDef := textOf(dest[3])
		mode, _ := textOf(dest[4])
		rs = append(rs, catalogRow{kind: kind, schema: schema, name: name, def: def, hasDef: hasDef, mode: mode})
	}
	if err := rows.Close(); err != nil {
		return shadows{}, err
	}
	return buildShadows(rs), nil
}

// catalogRow is one row of shadowsSQL; hasDef is false for a NULL def.
type catalogRow struct {
	kind, schema, name, def string
	hasDef                  bool
	mode                    string
}

// buildShadows turns the catalog's rows into shadows. Every stored
// function's name counts, not only the listed ones it shadows: a name
// that is no listed built-in counts as a call by the text already, so
// the name of any stored function in a text is a call of user code (or
// a column that happens to share it: a reset too many, never one too
// few). A view counts when its definition changes the session or calls
// what the lists do not vouch for, as a statement's text would; when it
// names what counts already (a table with a trigger, a function, a view
// that counts: views over views, to the fixed point); or when the user
// may not read it. Then a name all of whose stored functions (one in each
// database that has one: a call resolves by the current database) the
// catalog proves harmless (see routines.harmless) moves from the names
// that count to the harmless ones (sqllex.Shadows.Vouched): a call of it
// is no session change. A view that names it still counts.
func buildShadows(rows []catalogRow) shadows {
	v := shadows{s: &sqllex.Shadows{Names: map[string]struct{}{}}}
	names := v.s.Names
	// counted: the names that count for a table or a view, whatever
	// the functions of the same name are.
	counted := map[string]struct{}{}
	var views []catalogRow
	rs := routines{defs: map[routineKey][]*routineDef{}, state: map[routineKey]proof{}, counted: counted,
		all: map[int][]*routineDef{}, odd: map[int][]*routineDef{}}
	// params: by the routine's type, and its database and name as the
	// catalog spells them (routineDef.id): databases whose names differ
	// in case only are two (lower_case_table_names=0), and one's
	// parameters are not the other's locals.
	params := map[paramsKey][]string{}
	for _, r := range rows {
		name := strings.ToLower(r.name)
		switch r.kind {
		case "f", "p":
			if r.kind == "f" {
				names[name] = struct{}{}
			}
			k := routineKey{proc: r.kind == "p", name: name}
			rs.defs[k] = append(rs.defs[k], &routineDef{schema: strings.ToLower(r.schema), id: paramsKey{proc: k.proc, schema: r.schema, name: r.name}, def: r.def, hasDef: r.hasDef, mode: r.mode})
		case "a":
			k := paramsKey{proc: !strings.EqualFold(r.mode, "FUNCTION"), schema: r.schema, name: r.name}
			params[k] = append(params[k], r.def)
		case "t", "k":
			names[name] = struct{}{}
			counted[name] = struct{}{}
		case "b":
			if v.blind == nil {
				v.blind = map[string]struct{}{}
			}
			v.blind[strings.ToLower(name)] = struct{}{}
		case "v":
			def := strings.ToLower(r.def)
			if strings.TrimSpace(def) == "" || viewChanges(def) {
				names[name] = struct{}{}
				counted[name] = struct{}{}
				continue
			}
			views = append(views, catalogRow{name: name, def: def})
		}
	}
	refs := make([]*sqllex.Refs, len(views))
	for i, w := range views {
		refs[i] = sqllex.RefsOf(w.def, sqllex.MySQL)
	}
	for added := true; added; {
		added = false
		for i, w := range views {
			if refs[i] == nil || !refs[i].Meets(v.s) {
				continue
			}
			names[w.name] = struct{}{}
			counted[w.name] = struct{}{}
			refs[i] = nil
			added = true
		}
	}
	for _, defs := range rs.defs {
		for _, d := range defs {
			d.params = params[d.id]
			n := nameLen(d.id.name)
			rs.all[n] = append(rs.all[n], d)
			if !isASCII(d.id.name) {
				rs.odd[n] = append(rs.odd[n], d)
			}
		}
	}
	rs.blind = v.blind
	// A stored function whose name is not all ASCII may be called under a
	// listed built-in's name the server takes for it (regexp_like() calls
	// a function named regexp_líke where MariaDB has no such built-in):
	// that name counts, as the function's own does.
	harmlessListed, _ := sqllex.Listed(sqllex.MySQL)
	for _, ds := range rs.odd {
		for _, d := range ds {
			if d.id.proc {
				continue
			}
			for _, l := range harmlessListed {
				if mayEqualNames(d.id.name, l) {
					names[l] = struct{}{}
				}
			}
		}
	}
	for k := range rs.defs {
		if !rs.harmless(k, 0) {
			continue
		}
		if k.proc {
			if v.procs == nil {
				v.procs = map[string]struct{}{}
			}
			v.procs[k.name] = struct{}{}
			continue
		}
		if v.s.Harmless == nil {
			v.s.Harmless = map[string]struct{}{}
		}
		v.s.Harmless[k.name] = struct{}{}
		if _, ok := counted[k.name]; !ok {
			delete(names, k.name)
		}
	}
	return v
}

// routineKey names the stored functions (proc false) or procedures of a
// name, in lower case, in every database: functions and procedures have
// names of their own.
type routineKey struct {
	proc bool
	name string
}

// paramsKey names one stored routine: its type, and its database and
// name as the catalog spells them (a name may hold a '.': a.`b.c` is not
// `a.b`.c).
type paramsKey struct {
	proc         bool
	schema, name string
}

// routineDef is one stored routine as the catalog shows it.
type routineDef struct {
	schema string // its database, lower case, where its unqualified names resolve
	id     paramsKey
	def    string
	hasDef bool
	mode   string   // the sql_mode it was created with, in which it runs
	params []string // the names of its parameters
}

// proof is where routines.harmless stands for a name.
type proof uint8

const (
	unproved proof = iota
	proving        // on the path being followed: a call back to it is a cycle
	proved
	refuted
)

// maxCallDepth bounds how deep routines.harmless follows routines through
// the routines they call: one deeper is not harmless.
const maxCallDepth = 8

// routines proves stored routines harmless through the routines they call.
type routines struct {
	defs    map[routineKey][]*routineDef
	state   map[routineKey]proof
	counted map[string]struct{} // tables with triggers, views that count
	// all: every routine, by its name's length in characters (see
	// nameLen); odd: those whose names are not all ASCII.
	all, odd map[int][]*routineDef
	blind    map[string]struct{} // databases whose triggers the user may not see
}

// harmless reports whether every routine of k (in every database: a call
// resolves by the current one, or the routine's own) has a body that,
// read in its sql_mode by sqllex.ReadRoutine, leaves the session alone;
// names no table with a trigger or view that counts; writes, if it does,
// where every trigger is in sight; and calls only functions and
// procedures that are harmless in turn, depth calls deep at most. A name
// the catalog lacks (a built-in's name before white space, a package's
// routine), a body the user may not read, and a cycle of calls are not
// harmless.
func (rs *routines) harmless(k routineKey, depth int) bool {
	switch rs.state[k] {
	case proving, refuted:
		return false
	case proved:
		return true
	}
	defs := rs.alike(k)
	if len(defs) == 0 || depth > maxCallDepth {
		return false
	}
	rs.state[k] = proving
	ok := true
	for _, d := range defs {
		if ok = rs.bodyHarmless(d, depth); !ok {
			break
		}
	}
	rs.state[k] = refuted
	if ok {
		rs.state[k] = proved
	}
	return ok
}

// alike returns the routines a call of k may run: those of k's name,
// and those whose names the server may take for it. It looks a routine
// up by its name in utf8mb3_general_ci, which folds accents and some
// letters (fk() calls a function named fķ) one character for one, and
// ignores trailing spaces; Go's case folding, which made the keys, keeps
// such names apart. Where a character of either name is not ASCII, the
// two may be equal wherever they have as many characters and their
// ASCII letters at the same places match.
func (rs *routines) alike(k routineKey) []*routineDef {
	defs := slices.Clip(rs.defs[k]) // appended to: a copy, not the map's
	n := nameLen(k.name)
	others := rs.odd[n] // a name all ASCII may equal only one that is not
	if !isASCII(k.name) {
		others = rs.all[n]
	}
	for _, d := range others {
		if d.id.proc == k.proc && strings.ToLower(d.id.name) != k.name && mayEqualNames(d.id.name, k.name) {
			defs = append(defs, d)
		}
	}
	return defs
}

// mayEqualNames reports whether the server may take routine names a and
// b for one (see routines.alike).
func mayEqualNames(a, b string) bool {
	ra, rb := []rune(strings.TrimRight(a, " ")), []rune(strings.TrimRight(b, " "))
	if len(ra) != len(rb) {
		return false
	}
	for i, c := range ra {
		if d := rb[i]; c < 0x80 && d < 0x80 && unicode.ToLower(c) != unicode.ToLower(d) {
			return false
		}
	}
	return true
}

// nameLen is a routine name's length in characters, trailing spaces
// left out (the server ignores them).
func nameLen(s string) int { return utf8.RuneCountInString(strings.TrimRight(s, " ")) }

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// bodyHarmless is harmless for one routine's body.
func (rs *routines) bodyHarmless(d *routineDef, depth int) bool {
	mode, known := sqllex.ParseSQLMode(d.mode)
	if !d.hasDef || !known {
		return false
	}
	b := sqllex.ReadRoutine(d.def, mode, d.params)
	if !b.Harmless {
		return false
	}
	if _, ok := rs.blind[d.schema]; ok && b.Writes {
		return false
	}
	for _, w := range b.Words {
		if _, ok := rs.counted[w]; ok {
			return false
		}
		if _, ok := rs.blind[w]; ok && b.Writes {
			return false
		}
		// A stored function of a listed built-in's name (or one the
		// server takes for it), called under it.
		if f := (routineKey{name: w}); len(rs.alike(f)) > 0 && !rs.harmless(f, depth+1) {
			return false
		}
	}
	for _, f := range b.Funcs {
		if !rs.harmless(routineKey{name: f}, depth+1) {
			return false
		}
	}
	for _, p := range b.Procs {
		if !rs.harmless(routineKey{proc: true, name: p}, depth+1) {
			return false
		}
	}
	return true
}

// viewChanges reports a view definition that, read as a statement's text,
// may change the session: the lexer's rules, or a call of anything not
// listed. It bypasses sqllex.Of's memo, which is for statements.
func viewChanges(def string) bool {
	f := sqllex.Facts{
		ChangesSession: sqllex.ChangesSession(def, sqllex.MySQL),
		Calls:          sqllex.CallsOf(def, sqllex.MySQL),
	}
	return f.Changes(false)
}

// catalogKey is the key of the Catalog a connection shares: the server
// (the socket's remote address where the dialect dialed it, else the
// DSN's) and the account, whose privileges decide what
// information_schema shows. It returns "" where neither is known.
func catalogKey(network, addr, user string) string {
	if addr == "" {
		return ""
	}
	return "mysql|" + network + "|" + addr + "|" + user
}

// useCatalog finds the conn's Catalog, and the database its session
// starts in, for a connection of the template (cfg) or of a wrapped
// connector (cfg nil: read from the driver's connection).
func (c *conn) useCatalog(cfg *mysql.Config) {
	if cfg == nil {
		cfg = driverConfig(c.dc)
		if cfg == nil {
			return // no key: no reading, every statement that names anything counts
		}
	}
	network, addr := cfg.Net, cfg.Addr
	if c.w != nil {
		if ra := c.w.RemoteAddr(); ra != nil {
			network, addr = ra.Network(), ra.String()
		}
	}
	if key := catalogKey(network, addr, cfg.User); key != "" {
		c.cat = dialects.CatalogFor[shadows](key)
		c.db = strings.ToLower(cfg.DBName)
	}
}

// driverConfig returns the DSN's network, address, user and database of a
// go-sql-driver connection, read from its unexported configuration (the
// driver offers no other way); nil if its layout is not the one known.
func driverConfig(dc driver.Conn) *mysql.Config {
	v := reflect.ValueOf(dc)
	if v.Kind() != reflect.Pointer || v.IsNil() {
		return nil
	}
	v = v.Elem()
	if v.Kind() != reflect.Struct {
		return nil
	}
	f := v.FieldByName("cfg")
	if !f.IsValid() || f.Type() != reflect.TypeFor[*mysql.Config]() || f.IsNil() {
		return nil
	}
	cfg := f.Elem()
	str := func(name string) string {
		if s := cfg.FieldByName(name); s.IsValid() && s.Kind() == reflect.String {
			return s.String()
		}
		return ""
	}
	return &mysql.Config{Net: str("Net"), Addr: str("Addr"), User: str("User"), DBName: str("DBName")}
}

// snapshot returns the catalog's current reading, nil if none.
func (c *conn) snapshot() *catalogSnap {
	if c.cat == nil {
		return nil
	}
	return c.cat.Current()
}

// loadCatalog reads the catalog if no reading exists or it is due and no
// other connection is reading it (and, unless now, none began a reading
// in the last second: see dialects.Catalog.Claim), and returns the
// reading then current.
// A server's refusal is stored as a reading that knows nothing (see
// shadows.s); an error of the connection is returned.
func (c *conn) loadCatalog(ctx context.Context, now bool) (*catalogSnap, error) {
	s := c.cat.Current()
	if s == nil {
		// None yet: read it, or wait for the connection reading it.
		mine, first := c.cat.ClaimFirst(ctx)
		if !mine {
			return first, nil
		}
		v, err := c.readOrRefused(ctx)
		if err != nil {
			c.cat.ReleaseFirst()
			return nil, err
		}
		return c.cat.StoreFirst(v), nil
	}
	if !s.Due() || !c.cat.Claim(now) {
		return s, nil
	}
	v, err := c.readOrRefused(ctx)
	if err != nil {
		c.cat.Release()
		return s, err
	}
	return c.cat.Store(v), nil
}

// readOrRefused reads the catalog. A server's refusal is a reading that
// says nothing: every statement that names anything counts, and the
// server is asked again after CatalogTTL, not after every statement. Any
// other error leaves the connection broken (the driver closed it, or the
// protocol stream is lost), so that it is never handed out again.
func (c *conn) readOrRefused(ctx context.Context) (shadows, error) {
	v, err := c.readShadows(ctx)
	if err != nil {
		var me *mysql.MySQLError
		if errors.As(err, &me) {
			return shadows{}, nil
		}
		c.broken = true
		return shadows{}, fmt.Errorf("pooldriver: mysql: reading the catalog: %w", err)
	}
	return v, nil
}

var (
	_ dialects.CatalogRefresher = (*conn)(nil)
	_ dialects.CatalogWatcher   = (*conn)(nil)
)

// CatalogWatch returns the connection's catalog (see
// dialects.CatalogWatcher), nil where RefreshCatalog never reads it: no
// key, or a session known to start with autocommit off (a pool's
// connections all start alike). A wrapped connection learns how its
// session starts at its first statement, after the pool asks: a wrapped
// pool whose sessions start with autocommit off waits on the catalog too,
// and tries a RefreshCatalog that reads nothing once a second while the
// reading is due and no other pool reads it.
func (c *conn) CatalogWatch() dialects.CatalogDue {
	if c.cat == nil || c.baseAuto == 0 {
		return nil
	}
	return c.cat
}

// RefreshCatalog reads the catalog again if its reading is due (see
// dialects.CatalogRefresher), where the session's autocommit is on and no
// transaction is open, as at connect.
func (c *conn) RefreshCatalog(ctx context.Context) error {
	if c.cat == nil || c.baseAuto != 1 {
		return nil
	}
	if s, ok := c.wired(); ok && (s&wireInTx != 0 || s&wireAutocommit == 0) {
		return nil
	}
	_, err := c.loadCatalog(ctx, false) // a failed reading keeps the last one
	return err
}
