package postgres

import (
	"context"
	"database/sql/driver"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// TestResetPrepared: the rows resetSQL's last statement returns become the
// statements the server has, and those a user prepared in SQL become
// DEALLOCATE statements with each name quoted as the server would read it
// back; no name, no statement; results that are not the reset's are an
// error rather than a reset that deallocates nothing.
func TestResetPrepared(t *testing.T) {
	rows := func(ns ...string) []*pgconn.Result {
		last := &pgconn.Result{CommandTag: pgconn.NewCommandTag(fmt.Sprintf("SELECT %d", len(ns)))}
		for _, n := range ns {
			last.Rows = append(last.Rows, [][]byte{[]byte(n), []byte("t")})
		}
		return []*pgconn.Result{{}, {}, last}
	}
	for _, tc := range []struct {
		name string
		res  []*pgconn.Result
		want string
	}{
		{"none", rows(), ""},
		{"one", rows("s1"), `DEALLOCATE "s1"`},
		{"case and quotes kept", rows(`Mixed"Case`, "a b; DROP TABLE t"), `DEALLOCATE "Mixed""Case"; DEALLOCATE "a b; DROP TABLE t"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := resetPrepared(tc.res)
			var names []string
			for _, p := range got {
				if !p.fromSQL {
					t.Fatalf("%q: read as not from SQL", p.name)
				}
				names = append(names, p.name)
			}
			if err != nil || deallocateSQL(names) != tc.want {
				t.Fatalf("resetPrepared = %v, %v; want %q", got, err, tc.want)
			}
		})
	}
	oneColumn := rows("a")
	oneColumn[2].Rows[0] = oneColumn[2].Rows[0][:1]
	notSelect := []*pgconn.Result{{}, {CommandTag: pgconn.NewCommandTag("DISCARD SEQUENCES")}}
	for _, bad := range [][]*pgconn.Result{nil, rows()[2:], oneColumn, notSelect} {
		if got, err := resetPrepared(bad); err == nil {
			t.Errorf("resetPrepared(%d results) = %v, nil; want an error", len(bad), got)
		}
	}
}

// TestResetSQL: the reset draws a fresh seed each time, in setseed's
// range, and closes dblink's and postgres_fdw's connections only where
// the database has them, in their schemas.
func TestResetSQL(t *testing.T) {
	seen := map[float64]bool{}
	for range 1000 {
		s := freshSeed()
		if s < -1 || s >= 1 || math.IsNaN(s) {
			t.Fatalf("seed %v out of [-1, 1)", s)
		}
		seen[s] = true
	}
	if len(seen) < 990 {
		t.Fatalf("%d distinct seeds of 1000", len(seen))
	}
	if a, b := resetSQL(nil, originUnknown), resetSQL(nil, originUnknown); a == b || !strings.Contains(a, "setseed(") {
		t.Fatalf("two resets with the same text, or no setseed: %q", a)
	}
	plain := resetSQL(&pgCatalog{}, originMayNot)
	if strings.Contains(plain, "dblink") || strings.Contains(plain, "fdw") {
		t.Fatalf("without the extensions: %q", plain)
	}
	with := resetSQL(&pgCatalog{dblink: `"ext"`, fdw: "public"}, originMay)
	for _, want := range []string{`"ext".dblink_disconnect(n)`, `"ext".dblink_get_connections()`, `PERFORM "ext".dblink_disconnect()`, "public.postgres_fdw_disconnect_all()"} {
		if !strings.Contains(with, want) {
			t.Errorf("with the extensions: %q lacks %q", with, want)
		}
	}
	if strings.Contains(plain, "replication_origin") || !strings.Contains(with, originResetSQL) ||
		!strings.Contains(resetSQL(nil, originUnknown), "has_function_privilege") {
		t.Error("the replication origin: asked once, then reset only where the role may")
	}
	if !strings.HasSuffix(with, "FROM pg_catalog.pg_prepared_statements") {
		t.Errorf("the statements' list is not last: %q", with)
	}
	if !slices.ContainsFunc([]string{"stmt_1a", "stmtcache_ff", "pooldriver_3"}, driverName) || driverName("mine") {
		t.Error("driverName")
	}
}

// TestResetReconcilesStatements (issue 45): after a user's DEALLOCATE ALL,
// a DEALLOCATE and PREPARE under the direct path's name, or a DEALLOCATE
// of a statement pgx's stdlib prepared, the reset drops every statement
// the driver prepared (and says so), and the next query runs its own text;
// a reset after nothing of the kind keeps them; what the direct path
// prepared while the session was changed is dropped.
func TestResetReconcilesStatements(t *testing.T) {
	c := wrapped(t)
	ctx := t.Context()
	query := func(arg string) string {
		t.Helper()
		rows, err := c.QueryContext(ctx, "SELECT $1::text", []driver.NamedValue{{Ordinal: 1, Value: arg}})
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		v := make([]driver.Value, 1)
		if err := rows.Next(v); err != nil {
			t.Fatal(err)
		}
		return fmt.Sprint(v[0])
	}
	reset := func(wantDropped bool) {
		t.Helper()
		if err := c.ResetSession(ctx); err != nil {
			t.Fatal(err)
		}
		if c.ResetDroppedStatements() != wantDropped {
			t.Fatalf("ResetDroppedStatements = %v, want %v", !wantDropped, wantDropped)
		}
	}
	name := func() string {
		t.Helper()
		for _, st := range c.direct.stmts {
			return st.sd.Name
		}
		t.Fatal("nothing in the direct path's cache")
		return ""
	}
	query("a")
	reset(false)
	if got := query("b"); got != "b" {
		t.Fatalf("after a plain reset: %q", got)
	}
	exec(t, c, "DEALLOCATE ALL")
	reset(true)
	if got := query("c"); got != "c" {
		t.Fatalf("after DEALLOCATE ALL: %q", got)
	}
	n := name()
	exec(t, c, `DEALLOCATE "`+n+`"; PREPARE "`+n+`"(text) AS SELECT 'hijacked:' || $1`)
	reset(true)
	if got := query("d"); got != "d" {
		t.Fatalf("after a PREPARE under %s: %q", n, got)
	}
	if _, err := c.PrepareContext(ctx, "SELECT 2"); err != nil {
		t.Fatal(err)
	}
	reset(false)
	exec(t, c, "SELECT 1") // a statement that is not the stdlib's
	var stdlibName string
	for k := range c.stdlibNames {
		stdlibName = k
	}
	exec(t, c, `DEALLOCATE "`+stdlibName+`"`)
	reset(true)
	// Prepared while the session was changed: dropped, the rest kept.
	query("e")
	kept := name()
	if !c.ChangesSession("SET search_path = pg_catalog") {
		t.Fatal("SET search_path is a change")
	}
	exec(t, c, "SET search_path = pg_catalog")
	rows, err := c.QueryContext(ctx, "SELECT $1::int", []driver.NamedValue{{Ordinal: 1, Value: 1}})
	if err != nil {
		t.Fatal(err)
	}
	rows.Close()
	if len(c.direct.stmts) != 2 {
		t.Fatalf("%d statements cached, want 2", len(c.direct.stmts))
	}
	reset(false)
	if len(c.direct.stmts) != 1 || name() != kept {
		t.Fatalf("after the reset: %d statements cached, want the one prepared before the change (%s)", len(c.direct.stmts), kept)
	}
}

// TestResetAfterDroppedExtensions: a reading taken while dblink and
// postgres_fdw were there, and the extensions dropped since by another
// client (nothing this process ran expired the reading): the reset's
// statements that close their connections find nothing to close, and the
// reset succeeds, where it failed every time until a new reading came.
func TestResetAfterDroppedExtensions(t *testing.T) {
	admin := wrapped(t)
	schema := fmt.Sprintf("pd_ext_%d", rand.Uint64())
	exec(t, admin, "CREATE SCHEMA "+schema)
	t.Cleanup(func() {
		if _, err := admin.Driver().(driver.ExecerContext).ExecContext(context.Background(), "DROP SCHEMA "+schema+" CASCADE", nil); err != nil {
			t.Error(err)
		}
	})
	for _, ext := range []string{"dblink", "postgres_fdw"} {
		if _, err := admin.Driver().(driver.ExecerContext).ExecContext(t.Context(), "CREATE EXTENSION IF NOT EXISTS "+ext+" SCHEMA "+schema, nil); err != nil {
			t.Skipf("%s is not installed on this server: %v", ext, err)
		}
	}
	c := wrapped(t)
	cat, err := readCatalog(t.Context(), c.pgx().PgConn())
	if err != nil {
		t.Fatal(err)
	}
	if cat.dblink == "" || cat.fdw == "" {
		t.Fatalf("the reading names no dblink (%q) or postgres_fdw (%q)", cat.dblink, cat.fdw)
	}
	exec(t, admin, "DROP EXTENSION dblink")
	exec(t, admin, "DROP EXTENSION postgres_fdw")
	if _, err := c.pgx().PgConn().Exec(t.Context(), resetSQL(cat, originMayNot)).ReadAll(); err != nil {
		t.Fatalf("the reset with a reading older than the DROP: %v", err)
	}
}
