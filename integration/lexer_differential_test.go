package integration

import (
	"context"
	"database/sql/driver"
	"fmt"
	"hash/fnv"
	"io"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pooldriver/pooldriver/dialects"
)

// Issue 35, "the lexer follows each server's lexical rules exactly": a
// differential test. Statements are built at random from comments, quotes,
// white space and a payload that changes the session (a setting, a
// variable, a temporary table, a lock) or does not, hidden or not inside
// comments and strings that end in tricky ways. Each runs on a connection of
// its own, whose session is read before and after; wherever the server's
// session changed, the dialect's reading of the text (ChangesSession of a
// connection that never ran it, so that nothing the server reports can
// stand in for the lexer) must say so. The converse, a change read where the
// server made none, is allowed (a reset too many) and only counted.
//
// The seed is fixed; POOLDRIVER_LEXER_SEED replays another one ("random"
// picks one, printed), POOLDRIVER_LEXER_N sets the number of statements
// per server and mode.

// lexDefaultSeed and lexDefaultN are make test-all's run: 150 statements
// per server and mode, 750 in all, a few seconds.
const (
	lexDefaultSeed = 35
	lexDefaultN    = 150
)

// lexMode is a server setting that decides where a string ends, set on the
// connection before the statement runs (a DSN or the server's
// configuration may set it from the start): the lexer, which is not told,
// must read every text right whatever it is.
type lexMode struct {
	name    string
	setup   string // run on each new connection; "" for none
	escapes bool   // a backslash escapes in '…' strings
	ansi    bool   // MySQL: "…" is an identifier
}

func lexModes(s server) []lexMode {
	if s.name == "postgres" {
		return []lexMode{
			{name: "standard strings"},
			{name: "standard_conforming_strings off", setup: "SET standard_conforming_strings = off", escapes: true},
		}
	}
	return []lexMode{
		{name: "backslash escapes", escapes: true},
		{name: "NO_BACKSLASH_ESCAPES", setup: "SET SESSION sql_mode = CONCAT(@@SESSION.sql_mode, ',NO_BACKSLASH_ESCAPES')"},
		{name: "ANSI_QUOTES", setup: "SET SESSION sql_mode = CONCAT(@@SESSION.sql_mode, ',ANSI_QUOTES')", escapes: true, ansi: true},
	}
}

func TestLexerDifferential(t *testing.T) {
	longTest(t)
	seed := lexSeed(t)
	n := lexDefaultN
	if v := os.Getenv("POOLDRIVER_LEXER_N"); v != "" {
		var err error
		n, err = strconv.Atoi(v)
		require.NoError(t, err, "POOLDRIVER_LEXER_N")
	}
	forEachServer(t, func(t *testing.T, s server) {
		tmpl := s.template(t, "")
		// Two connections that never run a statement: their ChangesSession
		// is the lexer's reading alone, by default and for a user who
		// trusts their functions (where only what the text shows counts).
		lexer := tracker(t, open(t, tmpl))
		trustingConn := open(t, tmpl)
		truster, ok := trustingConn.(dialects.FunctionTruster)
		require.True(t, ok, "%s's connection is no dialects.FunctionTruster", s.name)
		truster.TrustFunctions(true)
		trusting := tracker(t, trustingConn)
		require.False(t, lexer.ChangesSession("SELECT 1"), "the lexer's connection reads SELECT 1 as a change")
		require.True(t, trusting.ChangesSession("SET @pd_x = 1; SET pd.x = 1"), "the lexer's connection misses a SET")

		for _, m := range lexModes(s) {
			t.Run(m.name, func(t *testing.T) {
				g := newLexGen(s.name == "postgres", m, seed, s.name+"/"+m.name)
				d := &lexDiff{s: s, tmpl: tmpl, m: m, g: g}
				defer d.close()
				known := lexKnown[s.name]
				for i := 0; i < n; i++ {
					text := g.statement()
					if i < len(known) {
						text = strings.ReplaceAll(known[i], "{temp}", g.temp)
					}
					d.check(t, i, text, lexer, trusting)
				}
				t.Logf("%s, seed %d: %d statements, %d rejected by the server; %d changed the session, all read as changes; "+
					"of %d that changed nothing, %d read as changes (%d trusting functions): conservative, a reset too many",
					m.name, seed, n, d.rejected, d.changed, n-d.changed, d.falseAlarms, d.trustingFalseAlarms)
				// A guard on the generator: a run in which hardly anything
				// ran proves nothing.
				if d.changed < n/10 || n-d.rejected < n/4 {
					t.Errorf("seed %d: only %d of %d statements changed the session and %d ran: the generator builds too few that run", seed, d.changed, n, n-d.rejected)
				}
			})
		}
	})
}

// lexKnown are the first statements of each run: texts that lexers
// misread before (issue 35), {temp} standing for the temporary table's name.
var lexKnown = map[string][]string{
	"postgres": {
		"-- x\rSET application_name = 'pd_known'",
		"-- x\rCREATE TEMP TABLE {temp} (a int)",
		"-- x\rSELECT set_config('pd.marker', 'pd_known', false)",
		"/* /* */ SET application_name = 'pd_hidden' */ SELECT 1",
		"SELECT 'a\\' ; SET pd.marker = 'pd_known' ; SELECT '\\'",
		"SELECT $a$ $b$ $a$ ; SET pd.marker = 'pd_known' ; SELECT $b$ $b$",
		"SELECT E'a'\n'\\' ; SET pd.marker = ''pd_hidden'' ; SELECT '",
	},
	"mysql": {
		"/*!50000 SET @pd_marker = 'pd_known' */",
		"/*M!100100 CREATE TEMPORARY TABLE {temp} (a int) */",
		"# x\rSET @pd_marker = 'pd_hidden'",
		"--x\nSET @pd_marker = 'pd_known'",
		"SELECT 1 /*!, @pd_marker := 'pd_known' */",
		"SELECT '\\' , @pd_marker := 'pd_known' , '\\'",
		// A name under ANSI_QUOTES, a string otherwise: the backslash
		// escapes in one reading only.
		"SELECT 1 AS \"\\\" , '\\'' , @pd_marker := 1 , '' -- '\" -- \"\n",
	},
}

// lexSeed returns the run's seed: POOLDRIVER_LEXER_SEED, or the fixed one.
func lexSeed(t *testing.T) uint64 {
	t.Helper()
	v := os.Getenv("POOLDRIVER_LEXER_SEED")
	switch v {
	case "":
		return lexDefaultSeed
	case "random":
		seed := uint64(time.Now().UnixNano())
		t.Logf("POOLDRIVER_LEXER_SEED=random: seed %d", seed)
		return seed
	}
	seed, err := strconv.ParseUint(v, 10, 64)
	require.NoError(t, err, "POOLDRIVER_LEXER_SEED")
	return seed
}

func tracker(t *testing.T, c dialects.Conn) dialects.SessionTracker {
	t.Helper()
	st, ok := c.(dialects.SessionTracker)
	require.True(t, ok, "the connection is no dialects.SessionTracker")
	return st
}

// lexDiff runs statements of one server and mode and compares.
type lexDiff struct {
	s      server
	tmpl   dialects.Template
	m      lexMode
	g      *lexGen
	c      dialects.Conn // the connection statements run on; nil until needed
	cancel func()        // ends the context c was opened with

	rejected, changed, falseAlarms, trustingFalseAlarms int
}

func (d *lexDiff) close() {
	if d.c != nil {
		_ = d.c.Close()
		d.cancel()
		d.c = nil
	}
}

// conn returns the connection to run on, opened (and set to the mode) if
// need be.
func (d *lexDiff) conn(t *testing.T) dialects.Conn {
	t.Helper()
	if d.c == nil {
		ctx, cancel := context.WithTimeout(context.Background(), hangTimeout)
		c, err := d.tmpl.Open(ctx, d.tmpl.Credentials())
		if err != nil {
			cancel()
		}
		require.NoError(t, err)
		d.c, d.cancel = c, cancel
		if d.m.setup != "" {
			require.NoError(t, lexExec(c, d.m.setup), d.m.setup)
		}
	}
	return d.c
}

// check runs text and compares what the server did with the lexer's
// readings.
func (d *lexDiff) check(t *testing.T, i int, text string, lexer, trusting dialects.SessionTracker) {
	t.Helper()
	c := d.conn(t)
	before := d.state(t, c)
	err := lexExec(c, text)
	after := d.state(t, c)
	// What pooldriver would conclude on the connection that ran it: the
	// lexer and what the server reported. For the message only.
	wire := tracker(t, c).ChangesSession(text)
	read, readTrusting := lexer.ChangesSession(text), trusting.ChangesSession(text)
	if err != nil {
		d.rejected++
	}
	switch {
	case before != after:
		d.changed++
		if !read || !readTrusting {
			t.Errorf("%s, %s: statement %d (seed %d; POOLDRIVER_LEXER_SEED=%d replays it) changed the session, which the lexer does not read "+
				"(default: %v, trusting functions: %v; with what the server reported: %v)\n  text:   %q\n  ran:    %s\n  before: %s\n  after:  %s",
				d.s.name, d.m.name, i, d.g.seed, d.g.seed, read, readTrusting, wire, text, errText(err), before, after)
		}
	default:
		if read {
			d.falseAlarms++
		}
		if readTrusting {
			d.trustingFalseAlarms++
		}
	}
	if err != nil || before != after {
		// The next statement starts on a new session.
		d.close()
	}
}

func errText(err error) string {
	if err == nil {
		return "without error"
	}
	return "error: " + strings.Join(strings.Fields(err.Error()), " ")
}

// state reads what a payload can change in the session, as one string.
func (d *lexDiff) state(t *testing.T, c dialects.Conn) string {
	t.Helper()
	var parts []string
	for _, q := range d.stateQueries() {
		v, err := lexQuery(c, q)
		if err != nil {
			v = "error" // the temporary table's probe: no such table
			if !strings.Contains(q, d.g.temp) {
				require.NoError(t, err, q)
			}
		}
		parts = append(parts, v)
	}
	return strings.Join(parts, " | ")
}

func (d *lexDiff) stateQueries() []string {
	if d.s.name == "postgres" {
		return []string{
			"SELECT current_setting('application_name')",
			"SELECT coalesce(current_setting('pd.marker', true), '')",
			// Every setting the session changed, whatever the statement.
			"SELECT coalesce(string_agg(name || '=' || setting, ',' ORDER BY name), '') FROM pg_settings WHERE source = 'session'",
			"SELECT count(*)::text FROM pg_class WHERE relnamespace = pg_my_temp_schema()",
			"SELECT count(*)::text FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()",
		}
	}
	return []string{
		"SELECT coalesce(@pd_marker, '')",
		"SELECT @@SESSION.sql_mode",
		"SELECT coalesce(IS_USED_LOCK('" + d.g.lock + "') = CONNECTION_ID(), 0)",
		"SELECT count(*) FROM " + d.g.temp,
	}
}

// lexExec and lexQuery run one statement, bounded by waitLimit: a lock the
// generator takes never waits (the keys and names are the run's own), so
// that is a guard against a hang only.
func lexExec(c dialects.Conn, query string) error {
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	_, err := c.Driver().(driver.ExecerContext).ExecContext(ctx, query, nil)
	return err
}

func lexQuery(c dialects.Conn, query string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	rows, err := c.Driver().(driver.QueryerContext).QueryContext(ctx, query, nil)
	if err != nil {
		return "", err
	}
	defer rows.Close()
	dest := make([]driver.Value, len(rows.Columns()))
	if err := rows.Next(dest); err != nil {
		if err == io.EOF {
			return "", nil
		}
		return "", err
	}
	return fmt.Sprint(lexValue(dest[0])), nil
}

func lexValue(v driver.Value) any {
	if b, ok := v.([]byte); ok {
		return string(b)
	}
	return v
}

// lexGen builds the statements of one server.
type lexGen struct {
	r    *rand.Rand
	pg   bool
	mode lexMode // the server's reading, for the statements built valid
	seed uint64
	n    int    // the last marker value
	lock string // MySQL: the lock's name; PostgreSQL: the advisory keys' base
	temp string // the temporary table's name
}

func newLexGen(pg bool, mode lexMode, seed uint64, stream string) *lexGen {
	h := fnv.New64a()
	_, _ = h.Write([]byte(stream))
	r := rand.New(rand.NewPCG(seed, h.Sum64()))
	// Names of the run's own: tests beside this one take locks too.
	id := rand.Uint64() % 1e9
	return &lexGen{
		r: r, pg: pg, mode: mode, seed: seed,
		lock: fmt.Sprintf("pd_lexdiff_%d", id),
		temp: fmt.Sprintf("pd_lexdiff_%d", id),
	}
}

func (g *lexGen) pick(options ...string) string { return options[g.r.IntN(len(options))] }

func (g *lexGen) chance(p float64) bool { return g.r.Float64() < p }

// statement returns one text.
func (g *lexGen) statement() string {
	var b strings.Builder
	b.WriteString(g.gaps(3))
	switch k := g.r.IntN(100); {
	case k < 30: // a payload in plain sight, maybe after a tricky comment
		b.WriteString(g.payload())
	case k < 45: // a payload hidden, or not, in a comment or a string
		b.WriteString(g.hidden())
	case k < 60: // a trap before a payload: a comment or quote that may or may not end
		b.WriteString(g.trap())
		b.WriteString(g.gaps(1))
		b.WriteString(g.payload())
		b.WriteString(g.closer())
	case k < 70: // a call among strings that may end where a lexer thinks they do not
		b.WriteString(g.breakout())
	case k < 85: // a call among strings and names built valid, holding quotes and escapes
		b.WriteString(g.soup())
	default: // something harmless
		b.WriteString(g.harmless())
	}
	if g.chance(0.15) {
		b.WriteString(g.gaps(1))
		b.WriteString(";")
		if g.chance(0.5) {
			b.WriteString(g.gaps(2))
			if g.chance(0.5) {
				b.WriteString(g.payload())
			} else {
				b.WriteString(g.harmless())
			}
		}
	}
	b.WriteString(g.gaps(2))
	return b.String()
}

// gaps returns up to max pieces of white space or comments, as the server
// reads them.
func (g *lexGen) gaps(max int) string {
	var b strings.Builder
	for k := g.r.IntN(max + 1); k > 0; k-- {
		b.WriteString(g.gap())
	}
	return b.String()
}

// sep returns what goes between two tokens: white space, or a comment.
func (g *lexGen) sep() string {
	if g.chance(0.7) {
		return g.pick(" ", " ", "\t", "\n", "\r\n")
	}
	return g.gap()
}

func (g *lexGen) gap() string {
	ws := []string{" ", "\t", "\n", "\r\n", "\f"}
	if g.pg {
		ws = append(ws, "\r")
		return g.pick(append(ws,
			"-- "+g.commentText()+"\n",
			"-- "+g.commentText()+"\r",
			"--"+g.commentText()+"\r\n",
			"--\n", "--\r",
			"/* "+g.commentText()+" */",
			"/**/", "/*/ x */", "/***/",
			"/* a /* "+g.commentText()+" */ b */",
			"/*/**/*/",
		)...)
	}
	return g.pick(append(ws,
		"-- "+g.commentText()+"\n",
		"--\t"+g.commentText()+"\n",
		"-- "+g.commentText()+"\r\n",
		"--\n", "--\r\n", "--\x01x\n",
		"#"+g.commentText()+"\n",
		"#\n",
		"/* "+g.commentText()+" */",
		"/**/", "/***/", "/*/ x */",
		"/*+ "+g.commentText()+" */",
		"/*M!999999 SET @pd_marker = 1 */",
	)...)
}

// commentText is the inside of a comment: mostly plain, sometimes with
// what would open a string or another comment elsewhere.
func (g *lexGen) commentText() string {
	if g.chance(0.6) {
		return g.pick("x", "c", "SET x", "'", "\"", "$$", "$a$", "`", "E'", "-", "#", ";", "\\", "'\\'", "*", "/")
	}
	return g.pick("x", "SET", "'", "\"", "$$", "$a$", "`", "#", ";", "\\", "--", "/", "*") +
		g.pick("x", "'", "\"", "$", "`", ";", "\\", "--", "/*", "*/", "#")
}

// marker returns a new marker value, sometimes with characters that quote or
// comment elsewhere (the literal escapes them).
func (g *lexGen) marker() string {
	g.n++
	v := fmt.Sprintf("pd_%d", g.n)
	if g.chance(0.4) {
		v += g.pick("'", "\\", "\"", "--", "/*", "*/", "#", "$", "$$", ";", "\n", "\r", "`", "\\'", "''", "$a$")
		v += g.pick("", "x", "'", "\\")
	}
	return v
}

// lit renders v as a string literal of a random kind that means v.
func (g *lexGen) lit(v string) string {
	if g.pg {
		return g.pgLit(v)
	}
	return g.myLit(v)
}

func (g *lexGen) pgLit(v string) string {
	plain := func(v string) string { return "'" + strings.ReplaceAll(v, "'", "''") + "'" }
	escaped := func(v string) string {
		v = strings.ReplaceAll(v, `\`, `\\`)
		return strings.ReplaceAll(v, "'", g.pick(`\'`, "''"))
	}
	switch g.r.IntN(7) {
	case 0, 1:
		// With standard_conforming_strings off a backslash escapes here
		// too: the text then means another value, or runs on, which the
		// server decides.
		return plain(v)
	case 2:
		return g.pick("E", "e") + "'" + escaped(v) + "'"
	case 3:
		for _, tag := range []string{"", "a", "pd", "_x1", "A"} {
			d := "$" + tag + "$"
			if !strings.Contains(v+"$", d) && !strings.HasSuffix(v, "$"+tag) {
				return d + v + d
			}
		}
		return plain(v)
	case 4:
		// U&'…': a backslash is the escape; some letters as \hhhh (four hex digits).
		var b strings.Builder
		b.WriteString(g.pick("U&'", "u&'"))
		for _, c := range v {
			switch {
			case c == '\\':
				b.WriteString(`\\`)
			case c == '\'':
				b.WriteString("''")
			case c < 128 && g.chance(0.3):
				fmt.Fprintf(&b, `\%04x`, c)
			default:
				b.WriteRune(c)
			}
		}
		b.WriteString("'")
		return b.String()
	case 5:
		// Continued after a newline: 'a'\n'b' is 'ab', in the first
		// part's mode.
		k := g.r.IntN(len(v) + 1)
		nl := g.pick("\n", " \n ", "\r\n", "\n-- c\n")
		if g.chance(0.5) {
			return "E'" + escaped(v[:k]) + "'" + nl + "'" + escaped(v[k:]) + "'"
		}
		return plain(v[:k]) + nl + plain(v[k:])
	default:
		return plain(v)
	}
}

func (g *lexGen) myLit(v string) string {
	// Escaped for either backslash setting: only quotes doubled, and a
	// backslash written as it is (its meaning then depends on the mode,
	// which the server decides), or escaped the default mode's way.
	esc := func(v, q string) string {
		if g.chance(0.5) {
			v = strings.ReplaceAll(v, `\`, `\\`)
		}
		return strings.ReplaceAll(v, q, q+q)
	}
	switch g.r.IntN(6) {
	case 0, 1:
		return "'" + esc(v, "'") + "'"
	case 2:
		return `"` + esc(v, `"`) + `"`
	case 3:
		return g.pick("_utf8mb4", "_latin1 ", "N", "_binary") + "'" + esc(v, "'") + "'"
	case 4:
		k := g.r.IntN(len(v) + 1)
		return "'" + esc(v[:k], "'") + "'" + g.sep() + "'" + esc(v[k:], "'") + "'"
	default:
		return fmt.Sprintf("X'%x'", v)
	}
}

// join renders tokens with separators: at least white space between two
// words, sometimes a comment.
func (g *lexGen) join(all ...string) string {
	var tokens []string
	for _, tok := range all {
		if tok != "" {
			tokens = append(tokens, tok)
		}
	}
	var b strings.Builder
	for i, tok := range tokens {
		if i > 0 {
			prev := tokens[i-1]
			word := func(s string) bool {
				return s != "" && (isLexWordByte(s[0]) || s[0] == '@')
			}
			if word(prev[len(prev)-1:]) && word(tok) || g.chance(0.3) {
				b.WriteString(g.sep())
			}
		}
		b.WriteString(tok)
	}
	return b.String()
}

func isLexWordByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_'
}

// payload returns a statement that changes the session when it runs.
func (g *lexGen) payload() string {
	if g.pg {
		switch g.r.IntN(6) {
		case 0:
			return g.join("SET", g.pick("", "SESSION"), "application_name", g.pick("=", "TO"), g.lit(g.marker()))
		case 1:
			return g.join("SET", g.pick("", "SESSION"), "pd.marker", g.pick("=", "TO"), g.lit(g.marker()))
		case 2:
			return g.join("SELECT", g.pgExpr())
		case 3:
			return g.join("CREATE", g.pick("TEMP", "TEMPORARY", "LOCAL TEMP"), "TABLE", g.pick("IF NOT EXISTS ", "")+g.temp, "(", "a", "int", ")")
		case 4:
			return g.join("SELECT", "1", ",", g.pgExpr(), g.pick("", "AS x"))
		default:
			return g.join("SELECT", "*", "FROM", g.pgExpr())
		}
	}
	switch g.r.IntN(6) {
	case 0:
		return g.join("SET", g.pick("@pd_marker", "@`pd_marker`", "@'pd_marker'", `@"pd_marker"`), g.pick("=", ":="), g.lit(g.marker()))
	case 1:
		return g.join("SET", g.pick("SESSION sql_mode", "@@SESSION.sql_mode", "sql_mode", "@@sql_mode", "LOCAL sql_mode"), "=", g.lit(g.pick("ANSI_QUOTES", "NO_BACKSLASH_ESCAPES", "", "PIPES_AS_CONCAT")))
	case 2:
		return g.join("SELECT", g.myExpr())
	case 3:
		return g.join("CREATE", "TEMPORARY", "TABLE", g.pick("IF NOT EXISTS ", "")+g.temp, "(", "a", "int", ")")
	case 4:
		return g.join("SELECT", "1", ",", g.myExpr(), g.pick("", "AS x", "FROM DUAL"))
	default:
		return g.join("DO", g.myExpr())
	}
}

// pgExpr and myExpr return a call or assignment that changes the session.
func (g *lexGen) pgExpr() string {
	switch g.r.IntN(3) {
	case 0:
		return g.join("set_config", "(", g.lit("pd.marker"), ",", g.lit(g.marker()), ",", g.pick("false", "'f'", "FALSE"), ")")
	case 1:
		return g.join(g.pick("pg_advisory_lock", "pg_try_advisory_lock", "pg_catalog.pg_advisory_lock"), "(", fmt.Sprint(g.pgKey()), ")")
	default:
		return g.join("pg_advisory_lock_shared", "(", fmt.Sprint(g.pgKey()), ")")
	}
}

func (g *lexGen) pgKey() uint64 {
	// The run's own keys (see newLexGen): the lock name's number.
	id, _ := strconv.ParseUint(strings.TrimPrefix(g.lock, "pd_lexdiff_"), 10, 64)
	return 35e12 + id
}

func (g *lexGen) myExpr() string {
	if g.chance(0.5) {
		return g.join("GET_LOCK", "(", g.lit(g.lock), ",", "0", ")")
	}
	return g.join("@pd_marker", ":=", g.lit(g.marker()))
}

// harmless returns a statement that changes nothing, with what would change
// the session in its strings and comments.
func (g *lexGen) harmless() string {
	inner := strings.ReplaceAll(g.payload(), "'", "''")
	switch g.r.IntN(4) {
	case 0:
		return "SELECT 1"
	case 1:
		return g.join("SELECT", "'"+inner+"'")
	case 2:
		return g.join("SELECT", "1", "AS", g.pick(`"SET"`, `"set_config("`, "`GET_LOCK(`"))
	default:
		return g.join("SELECT", "1", "/* "+strings.ReplaceAll(inner, "*/", "")+" */")
	}
}

// hidden returns a payload wrapped in a comment or a string: escaped for
// it (the server runs nothing) or not (the payload's own quotes may end the
// wrapper early, and the server decides).
func (g *lexGen) hidden() string {
	p := g.payload()
	escape := g.chance(0.5)
	q := func(s, quote string) string {
		if escape {
			return strings.ReplaceAll(s, quote, quote+quote)
		}
		return s
	}
	if g.pg {
		switch g.r.IntN(8) {
		case 0:
			return "/* " + p + " */"
		case 1:
			return "/* /* */ " + p + " */"
		case 2:
			return "-- " + p
		case 3:
			return "SELECT '" + q(p, "'") + "'"
		case 4:
			return "SELECT $x$" + p + "$x$"
		case 5:
			return "SELECT E'\\' ; " + p + " ; '"
		case 6:
			return `SELECT 1 AS "` + q(p, `"`) + `"`
		default:
			return "SELECT $a$ $b$ $a$ ; " + p + " ; SELECT $b$ $b$"
		}
	}
	switch g.r.IntN(9) {
	case 0:
		return "/* " + p + " */"
	case 1:
		return "# " + p
	case 2:
		return "-- " + p
	case 3:
		return "SELECT '" + q(p, "'") + "'"
	case 4:
		return `SELECT "` + q(p, `"`) + `"`
	case 5:
		return "SELECT 1 AS `" + q(p, "`") + "`"
	case 6:
		return g.pick("/*!", "/*!50000 ", "/*!100100 ", "/*M!100100 ", "/*M!999999 ", "/*!99999 ") + p + " */"
	case 7:
		return "SELECT 1 " + g.pick("/*!", "/*!50000 ", "/*M!100100 ", "/*M!999999 ") + ", " + g.myExpr() + " */"
	default:
		return "--" + g.pick("x", "\x01", "\r", "-") + p
	}
}

// trap returns a piece after which the server may or may not read what
// follows as statement text.
func (g *lexGen) trap() string {
	if g.pg {
		return g.pick(
			"-- x\r", "--\r", "-- x\f", "-- x\v", "-- x\r\n", "-- x",
			"/* /* */", "/* /* */ */", "/*/*/", "/* */ */", "/*",
			"'", "'\\'", "'\\'' ;", "E'\\'", "E'\\'' ;", "E'\\\\' ;", "$a$", "$a$ $b$ $a$ ;", "$$ $a$ $$ ;", "$1", "1$a$",
			"U&'\\' ;", "B'\\' ;", "X'\\' ;", "'a'\n'\\' ;", "E'a'\n'\\' ;", "E'a' '\\' ;",
			"#", "\"", "\"\\\" ;", "--*/",
		)
	}
	return g.pick(
		"# x\r", "-- x\r", "--x\n", "--\r", "-- x", "--\v", "--\x00", "#",
		"/* /* */", "/* /* */ */", "/*", "*/", "/*!", "/*!*/", "/*!50000", "/*M!100100", "/*M!999999", "/*!99999",
		"'", "'\\'", "'\\'' ,", "\"\\\"", "\"\\\"\" ,", "`", "`\\` ,", "N'\\'", "X'\\'", "_utf8mb4'\\'",
		"SELECT 1 -- x\r", "SELECT 1 # x\r", "SELECT 1 -- x\\\n", "SELECT 1/*", "SELECT 1 */",
	)
}

// closer returns what may end the trap after the payload.
func (g *lexGen) closer() string {
	if g.pg {
		return g.pick("", "", "\n", "\r", " */", " ' ", " $a$ ", " $b$ ", " \" ", " $$ ")
	}
	return g.pick("", "", "\n", " */", " ' ", ` " `, " ` ", "\\'", "\n */")
}

// breakout returns a statement whose calls sit among strings that end where
// one reading of backslashes says and not the other.
func (g *lexGen) breakout() string {
	frags := func() string {
		if g.pg {
			return g.pick("'a\\'", "'\\'", "'\\\\'", "E'\\''", "E'\\\\'", "'a'", "''''", "$$\\$$", "$a$'$a$", "'\\''", "E'\\'''", "'x'\n'y\\'")
		}
		return g.pick("'a\\'", "'\\'", "'\\\\'", "'\\''", "'a'", "''''", `"\"`, `"\""`, `'\''''`, `"'"`, `'"'`, "`'`")
	}
	expr := g.pgExpr
	if !g.pg {
		expr = g.myExpr
	}
	if g.pg && g.chance(0.4) {
		// As statements: PostgreSQL runs several in one text.
		return "SELECT " + frags() + " ; SELECT " + expr() + " ; SELECT " + frags()
	}
	parts := []string{frags()}
	for k := 1 + g.r.IntN(2); k > 0; k-- {
		parts = append(parts, g.pick(" , ", ",", " ,\n"))
		if g.chance(0.5) {
			parts = append(parts, expr())
		} else {
			parts = append(parts, frags())
		}
	}
	parts = append(parts, g.pick(" , ", ","), frags())
	return "SELECT " + strings.Join(parts, "")
}

// soup returns a SELECT whose strings, names and comments hold quotes,
// backslashes and comment marks, written as the server reads them in this
// mode (so that it runs): a lexer that reads another mode, or a mix of two,
// ends them elsewhere.
func (g *lexGen) soup() string {
	var items []string
	for k := 2 + g.r.IntN(3); k > 0; k-- {
		switch g.r.IntN(4) {
		case 0:
			if g.pg {
				items = append(items, g.pgExpr())
			} else {
				items = append(items, g.myExpr())
			}
		case 1:
			items = append(items, "1 AS "+g.soupName(g.junk()))
		default:
			items = append(items, g.soupString(g.junk()))
		}
	}
	text := "SELECT " + strings.Join(items, g.pick(" , ", ",", " ,\n"))
	if g.chance(0.5) {
		text += g.pick(" -- ", "--\t", " /* ") + strings.NewReplacer("\n", "", "\r", "", "*/", "").Replace(g.junk())
		if strings.HasSuffix(text, "/* ") || strings.Contains(text[strings.LastIndex(text, "/*")+1:], "/* ") {
			text += " */"
		}
		text += "\n"
	}
	return text
}

// junk returns text for inside a quote or comment.
func (g *lexGen) junk() string {
	var b strings.Builder
	for k := 1 + g.r.IntN(4); k > 0; k-- {
		b.WriteString(g.pick("'", `"`, `\`, `\'`, `\"`, "''", `""`, "--", "-- ", "#", "/*", "*/", ";", ",", " ", "$$", "$a$", "`", "x",
			" , @pd_marker := 1 , ", " , GET_LOCK('x', 0) , ", " ; SET application_name = 'x' ; ", " , set_config('a.b', 'c', false) , "))
	}
	return b.String()
}

// soupString writes v as a string literal the server reads as v.
func (g *lexGen) soupString(v string) string {
	if g.pg {
		switch g.r.IntN(3) {
		case 0:
			return g.pgLit(v) // E'…', $$…$$, U&'…', continued: the same in both modes
		case 1:
			if g.mode.escapes {
				v = strings.ReplaceAll(v, `\`, `\\`)
			}
			return "'" + strings.ReplaceAll(v, "'", "''") + "'"
		}
		v = strings.ReplaceAll(v, `\`, `\\`)
		return "E'" + strings.ReplaceAll(v, "'", g.pick(`\'`, "''")) + "'"
	}
	q := "'"
	if !g.mode.ansi && g.chance(0.3) {
		q = `"`
	}
	if g.mode.escapes {
		v = strings.ReplaceAll(v, `\`, `\\`)
		return q + strings.ReplaceAll(v, q, g.pick(`\`+q, q+q)) + q
	}
	return q + strings.ReplaceAll(v, q, q+q) + q
}

// soupName writes v as a quoted identifier the server reads as v.
func (g *lexGen) soupName(v string) string {
	v = strings.ReplaceAll(v, "\n", "")
	q := `"`
	if !g.pg && (!g.mode.ansi || g.chance(0.3)) {
		q = "`"
	}
	return q + strings.ReplaceAll(v, q, q+q) + q
}
