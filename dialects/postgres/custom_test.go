package postgres

import (
	"context"
	"database/sql/driver"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/pooldriver/pooldriver/dialects/internal/sqllex"
)

func TestCustomNamesIn(t *testing.T) {
	for _, tc := range []struct {
		query string
		want  []string
	}{
		{`SET LOCAL app.tenant = '42'`, []string{"app.tenant"}},
		{`set app.Tenant to 1`, []string{"app.tenant"}},
		{`SET SESSION "App"."tenant" = 1`, []string{"app.tenant"}},
		{`RESET app.tenant`, []string{"app.tenant"}},
		{`SET app."Tenant" = 1`, []string{"app.tenant"}},
		{`SET app . tenant = 1`, []string{"app.tenant"}},
		{`SET LOCAL app.tenant.`, nil},
		{`SELECT set_config('app.tenant', '42', true)`, []string{"app.tenant"}},
		{`SELECT pg_catalog.SET_CONFIG ( E'a.b.c', $1, false)`, []string{"a.b.c"}},
		{`SELECT 1; /* SET x.y = 1 */ SET LOCAL a.b = 2 -- SET c.d`, []string{"a.b"}},
		{`CREATE FUNCTION f() RETURNS int LANGUAGE sql SET app.fn = '42' AS $$ SELECT 1 $$`, []string{"app.fn"}},
		{`CREATE FUNCTION f() RETURNS void LANGUAGE plpgsql AS $f$ BEGIN SET LOCAL app.body = 1; END $f$`, []string{"app.body"}},
		{`SELECT set_config($1, $2, true)`, nil},
		{`SET search_path = a, b`, nil},
		{`SET LOCAL ROLE r`, nil},
		{`SET SESSION AUTHORIZATION DEFAULT`, nil},
		{`SELECT 'SET a.b = 1', t.a FROM t`, nil},
		{`SELECT set_config('search_path', '', false)`, nil},
		{`SET app."bad name" = 1`, nil},
		{`SELECT set_config('1a.b', '', true)`, nil},
		{`SELECT $1::int, $tag$SET a.b; $tag$`, []string{"a.b"}},
	} {
		if got := appendCustomNames(nil, tc.query); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %q, want %q", tc.query, got, tc.want)
		}
	}
}

// TestNoteCustomAllocs: the RLS pattern's SET LOCAL of a name learnt
// already costs no allocation.
func TestNoteCustomAllocs(t *testing.T) {
	c := &conn{}
	c.custom.reg = customFor(fmt.Sprintf("test|%d", rand.Uint64()))
	c.custom.reg.add([]string{"app.tenant"})
	texts := []string{`SET LOCAL app.tenant = '1'`, `SET LOCAL app.tenant = '2'`}
	i := 0
	if n := testing.AllocsPerRun(100, func() { i++; c.noteCustom(texts[i%2]) }); n != 0 {
		t.Errorf("%v allocations", n)
	}
}

func TestCustomName(t *testing.T) {
	for n, want := range map[string]bool{
		"app.tenant": true, "a.b.c": true, "_a.b$1": true, "a1.b_2": true,
		"app": false, "app.": false, ".a": false, "a..b": false, "1a.b": false, "a.1b": false,
		"a.b c": false, "A.b": false, "a.b,c": false, "a.b}": false, "a.b'": false,
	} {
		if customName(n) != want {
			t.Errorf("customName(%q) = %v", n, !want)
		}
	}
}

// asks returns current_setting(name, true) on c, "<NULL>" for NULL.
func asks(t *testing.T, c *conn, name string) string {
	t.Helper()
	got, err := query1(t, c, "SELECT coalesce(pg_catalog.current_setting($1, true), '<NULL>')", name)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// ran runs query on c without arguments, and lets c read it as pooldriver
// does after a statement (Observe).
func ran(t *testing.T, c *conn, query string) {
	t.Helper()
	if _, err := c.ExecContext(t.Context(), query, nil); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	if _, _, err := c.Observe(t.Context(), query, true); err != nil {
		t.Fatal(err)
	}
}

// TestCustomSettingsAlike: a name one connection defined (SET LOCAL in a
// transaction) reads the empty string on every connection to the server and database
// from their next statement on, a new one's first included, and through
// each way a reset runs.
func TestCustomSettingsAlike(t *testing.T) {
	name := fmt.Sprintf("pdcs%d.tenant", rand.Uint64())
	before := wrapped(t)
	if got := asks(t, before, name); got != "<NULL>" {
		t.Fatalf("before anyone set it: %q", got)
	}
	first := wrapped(t)
	ran(t, first, "BEGIN")
	ran(t, first, "SET LOCAL "+name+" = '42'")
	ran(t, first, "COMMIT")
	for what, c := range map[string]*conn{"the connection that set it": first, "one open before": before, "a new one": wrapped(t)} {
		if got := asks(t, c, name); got != "" {
			t.Errorf("%s: %q, want ''", what, got)
		}
	}

	// Through a reset on its own and the carried ones: each defines what
	// the session lacks before the statement behind it.
	for _, path := range append([]string{"own"}, carryPaths...) {
		t.Run(path, func(t *testing.T) {
			c := wrapped(t)
			tbl := table(t, c, "v int")
			prepareInsert(t, c, tbl, 0)
			other := fmt.Sprintf("pdcs%d.%s", rand.Uint64(), path)
			if path == "own" {
				ran(t, first, "SELECT set_config('"+other+"', 'x', true)")
				if err := c.ResetSession(t.Context()); err != nil {
					t.Fatal(err)
				}
			} else {
				carried(t, c)
				ran(t, first, "SELECT set_config('"+other+"', 'x', true)")
				if err := insertOn(t, c, path, tbl, 1); err != nil {
					t.Fatal(err)
				}
			}
			if c.custom.have != int(c.custom.reg.n.Load()) {
				t.Errorf("the reset defined %d of %d names", c.custom.have, c.custom.reg.n.Load())
			}
			if got := asks(t, c, other); got != "" {
				t.Errorf("%q, want ''", got)
			}
		})
	}
}

// TestCustomSettingsFunctions: a name only a function's SET clause
// defines is read from the catalog with the reset of a session that ran a
// user's code, and defined on the others from then on.
func TestCustomSettingsFunctions(t *testing.T) {
	admin := wrapped(t)
	name := fmt.Sprintf("pdcs%d.fn", rand.Uint64())
	fn := fmt.Sprintf("pd_custom_%d", rand.Uint64())
	exec(t, admin, "CREATE FUNCTION "+fn+"() RETURNS text LANGUAGE sql SET "+name+" = '42' AS $$ SELECT pg_catalog.current_setting('"+name+"') $$")
	t.Cleanup(func() {
		_, _ = admin.Driver().(driver.ExecerContext).ExecContext(context.Background(), "DROP FUNCTION "+fn, nil)
	})
	c := wrapped(t)
	ran(t, c, "SELECT "+fn+"()")
	if err := c.ResetSession(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := asks(t, wrapped(t), name); got != "" {
		t.Errorf("a new connection: %q, want ''", got)
	}
	if got := asks(t, c, name); got != "" {
		t.Errorf("the connection that called it: %q, want ''", got)
	}
}

// TestCustomSettingsReadWithCatalog: the catalog's reading carries the
// names the functions' SET clauses name (a quoted one in lower case
// too), and a connection that reads it adds them to what every
// connection of the server and database defines: a harmless function's
// call, which costs no reset, leaves the next user a session that
// answers as a new one, and a reset after a call of a function the
// reading read does not read the SET clauses again.
func TestCustomSettingsReadWithCatalog(t *testing.T) {
	admin := wrapped(t)
	prefix := fmt.Sprintf("pdcr%d", rand.Uint64())
	fn := fmt.Sprintf("pd_custom_rd_%d", rand.Uint64())
	exec(t, admin, "CREATE FUNCTION "+fn+"() RETURNS int LANGUAGE sql SET "+prefix+".a = '1' SET \"Mixed\".b = '2' AS $$ SELECT 1 $$")
	t.Cleanup(func() {
		_, _ = admin.Driver().(driver.ExecerContext).ExecContext(context.Background(), "DROP FUNCTION "+fn, nil)
	})
	c := wrapped(t)
	cat, err := c.read(t.Context(), c.pgx().PgConn())
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{prefix + ".a", "mixed.b"} {
		if !slices.Contains(cat.custom, want) {
			t.Errorf("the reading's names %q lack %q", cat.custom, want)
		}
		if !c.attachCustom().has(want) {
			t.Errorf("%q was not added to the connections' names", want)
		}
	}
	if _, ok := cat.shadows.Harmless[fn]; !ok {
		t.Fatalf("%s is not harmless by the reading", fn)
	}
	f := sqllex.Of("SELECT "+fn+"()", sqllex.Postgres)
	c.custom.scanned = c.mustSee
	c.customScanAfter(f, cat.shadows)
	if c.customScanDue() {
		t.Error("a call of a function the reading read makes the next reset read the SET clauses")
	}
	c.customScanAfter(sqllex.Of("SELECT pd_custom_unknown_fn()", sqllex.Postgres), cat.shadows)
	if !c.customScanDue() {
		t.Error("a call of a function no reading read leaves the SET clauses unread")
	}
}

// BenchmarkNoteCustom is what the custom settings' names add to a
// statement on the client: the RLS pattern's SET LOCAL of a name learnt
// already (a text of its own per tenant), and a SELECT with a dot.
func BenchmarkNoteCustom(b *testing.B) {
	c := &conn{}
	c.custom.reg = customFor(fmt.Sprintf("bench|%d", rand.Uint64()))
	c.custom.reg.add([]string{"app.tenant"})
	c.custom.have = 1
	texts := make([]string, 1000)
	for i := range texts {
		texts[i] = fmt.Sprintf("SET LOCAL app.tenant = '%d'", i)
	}
	b.Run("set-local", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			i++
			c.noteCustom(texts[i%len(texts)])
			_ = c.customDue()
		}
	})
	b.Run("select", func(b *testing.B) {
		b.ReportAllocs()
		q := []string{"SELECT t.a, t.b FROM public.t WHERE t.id = $1", "SELECT u.a FROM public.u WHERE u.id = $1"}
		i := 0
		for b.Loop() {
			i++
			c.noteCustom(q[i%2])
			_ = c.customDue()
		}
	})
}
