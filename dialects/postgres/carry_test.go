package postgres

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pooldriver/pooldriver/dialects"
)

// carried returns a connection with a reset waiting (CarryReset), and a
// counter of the resets it ran. Its first reset ran on its own, as
// pooldriver's does (it asks what the role may do).
func carried(t *testing.T, c *conn) *int {
	t.Helper()
	if err := c.ResetSession(t.Context()); err != nil {
		t.Fatal(err)
	}
	n := new(int)
	if !c.CarryReset(func(bool) { *n++ }) {
		t.Fatal("CarryReset refused an idle connection of the direct path")
	}
	return n
}

// seen runs query on c, then asks what it did to the session, as
// pooldriver does after every statement (Observe).
func seen(t *testing.T, c *conn, query string) {
	t.Helper()
	exec(t, c, query)
	c.ChangesSession(query)
}

func query1(t testing.TB, c *conn, query string, args ...any) (string, error) {
	t.Helper()
	nv := make([]driver.NamedValue, len(args))
	for i, a := range args {
		nv[i] = driver.NamedValue{Ordinal: i + 1, Value: a}
	}
	rows, err := c.QueryContext(t.Context(), query, nv)
	if err != nil {
		return "", err
	}
	defer rows.Close()
	dest := make([]driver.Value, len(rows.Columns()))
	if err := rows.Next(dest); err != nil {
		if err == io.EOF {
			return "", rows.Close()
		}
		return "", err
	}
	if err := rows.Next(dest); err != io.EOF {
		return "", fmt.Errorf("a second row, or %v", err)
	}
	return fmt.Sprint(dest[0]), rows.Close()
}

func execArgs(c *conn, query string, args ...any) (driver.Result, error) {
	nv := make([]driver.NamedValue, len(args))
	for i, a := range args {
		nv[i] = driver.NamedValue{Ordinal: i + 1, Value: a}
	}
	return c.ExecContext(context.Background(), query, nv)
}

// table creates a table on admin, dropped when the test ends.
func table(t *testing.T, admin *conn, columns string) string {
	t.Helper()
	name := fmt.Sprintf("pd_carry_%d", rand.Uint64())
	exec(t, admin, "CREATE TABLE "+name+" ("+columns+")")
	t.Cleanup(func() {
		_, _ = admin.Driver().(driver.ExecerContext).ExecContext(context.Background(), "DROP TABLE "+name, nil)
	})
	return name
}

func count(t *testing.T, admin *conn, query string) string {
	t.Helper()
	got, err := query1(t, admin, query)
	if err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return got
}

// carryPaths are the three ways a statement carries a reset: a query and
// a statement with arguments on the direct path, one without over the
// simple protocol.
var carryPaths = []string{"query", "exec", "simple"}

// prepareInsert runs both of insertOn's texts with arguments on c once, so
// that a reset can go behind them (carriable).
func prepareInsert(t *testing.T, c *conn, tbl string, v int) {
	t.Helper()
	for _, path := range carryPaths[:2] {
		if err := insertOn(t, c, path, tbl, v); err != nil {
			t.Fatal(err)
		}
	}
}

// insertOn inserts v into tbl on c by path.
func insertOn(t *testing.T, c *conn, path, tbl string, v int) error {
	t.Helper()
	insert := "INSERT INTO " + tbl + " VALUES ($1)"
	var err error
	switch path {
	case "query":
		_, err = query1(t, c, insert+" RETURNING v", v)
	case "exec":
		_, err = execArgs(c, insert, v)
	case "simple":
		_, err = execArgs(c, fmt.Sprintf("INSERT INTO %s VALUES (%d)", tbl, v))
	}
	return err
}

// TestCarriedResetFails: a carried reset that fails keeps the statement
// behind it from running, whichever path it took, and says so: an error
// matching dialects.ErrNotRun and driver.ErrBadConn (database/sql runs it
// on another connection), the connection invalid, no reset counted.
func TestCarriedResetFails(t *testing.T) {
	admin := wrapped(t)
	tbl := table(t, admin, "v int")
	for _, path := range carryPaths {
		t.Run(path, func(t *testing.T) {
			c := wrapped(t)
			prepareInsert(t, c, tbl, 0)
			n := carried(t, c)
			resetFault = `SELECT pg_catalog.int4(pg_catalog.now()::text)` // fails when it runs
			t.Cleanup(func() { resetFault = "" })
			err := insertOn(t, c, path, tbl, 1)
			resetFault = ""
			if !errors.Is(err, dialects.ErrNotRun) || !errors.Is(err, driver.ErrBadConn) {
				t.Fatalf("the statement behind a failing reset: %v, want ErrNotRun and ErrBadConn", err)
			}
			var pe *pgconn.PgError
			if !errors.As(err, &pe) || pe.Code != "22007" && pe.Code != "22P02" {
				t.Errorf("the error does not carry the reset's own: %v", err)
			}
			if c.IsValid() {
				t.Error("the connection is still valid after its reset failed")
			}
			if *n != 0 {
				t.Errorf("%d resets counted", *n)
			}
			if got := count(t, admin, "SELECT count(*) FROM "+tbl+" WHERE v = 1"); got != "0" {
				t.Errorf("the statement behind the failing reset ran: %s rows", got)
			}
		})
	}
}

// TestCarriedResetStatementFails: a statement that fails behind a carried
// reset does not undo it (the reset committed in a block of its own), and
// the connection stays.
func TestCarriedResetStatementFails(t *testing.T) {
	admin := wrapped(t)
	tbl := table(t, admin, "v int CHECK (v > 0)")
	for _, path := range carryPaths {
		t.Run(path, func(t *testing.T) {
			c := wrapped(t)
			prepareInsert(t, c, tbl, 1)
			base := count(t, c, "SELECT current_setting('search_path') || current_setting('statement_timeout')")
			n := carried(t, c)
			exec(t, c, "SET search_path = pg_catalog") // after CarryReset: as a function's would be, unseen
			*n = 0
			c.carry.due = true
			err := insertOn(t, c, path, tbl, -1)
			var pe *pgconn.PgError
			if !errors.As(err, &pe) || pe.Code != "23514" || errors.Is(err, dialects.ErrNotRun) {
				t.Fatalf("a failing statement behind a reset: %v, want its own check violation", err)
			}
			if !c.IsValid() || *n != 1 || c.ResetPending() {
				t.Fatalf("after a statement failed behind its reset: valid %v, %d resets, pending %v", c.IsValid(), *n, c.ResetPending())
			}
			if got := count(t, c, "SELECT current_setting('search_path') || current_setting('statement_timeout')"); got != base {
				t.Errorf("the session after the failed statement: %q, want %q (the reset undone?)", got, base)
			}
		})
	}
}

// TestCarriedResetGuard: where the session prepared a statement with SQL
// PREPARE, under a name of the driver's even, the carried reset refuses
// to go (the statement behind it did not run), runs on its own, which
// deallocates it, and the statement runs after it: the right one.
func TestCarriedResetGuard(t *testing.T) {
	c := wrapped(t)
	if got, err := query1(t, c, "SELECT $1::int + 1", 1); err != nil || got != "2" {
		t.Fatalf("%q, %v", got, err)
	}
	name := c.direct.stmts["SELECT $1::int + 1"].sd.Name
	n := carried(t, c)
	seen(t, c, "DEALLOCATE "+name)
	seen(t, c, "PREPARE "+name+"(int) AS SELECT 'hijacked ' || $1")
	seen(t, c, "PREPARE pd_users_own AS SELECT 1")
	c.carry.due = true
	if got, err := query1(t, c, "SELECT $1::int + 1", 41); err != nil || got != "42" {
		t.Fatalf("the statement behind the guard: %q, %v; want 42", got, err)
	}
	if *n != 1 || !c.IsValid() {
		t.Fatalf("%d resets, valid %v", *n, c.IsValid())
	}
	if got := count(t, c, "SELECT count(*) FROM pg_prepared_statements WHERE from_sql"); got != "0" {
		t.Errorf("%s statements prepared with SQL left", got)
	}
}

// TestCarriedResetTampered: where the session deallocated one of the
// driver's statements (not the one behind the reset), that statement
// runs, and every statement is dropped after it: the next ones prepare
// again, nothing fails.
func TestCarriedResetTampered(t *testing.T) {
	c := wrapped(t)
	for _, q := range []string{"SELECT $1::int + 1", "SELECT $1::int + 2"} {
		if _, err := query1(t, c, q, 1); err != nil {
			t.Fatal(err)
		}
	}
	other := c.direct.stmts["SELECT $1::int + 2"].sd.Name
	n := carried(t, c)
	seen(t, c, "DEALLOCATE "+other)
	c.carry.due = true
	if got, err := query1(t, c, "SELECT $1::int + 1", 1); err != nil || got != "2" {
		t.Fatalf("%q, %v", got, err)
	}
	if got, err := query1(t, c, "SELECT $1::int + 2", 1); err != nil || got != "3" {
		t.Fatalf("the deallocated statement's text after the reset: %q, %v", got, err)
	}
	if *n != 1 || !c.IsValid() {
		t.Fatalf("%d resets, valid %v", *n, c.IsValid())
	}
	// Its own statement gone: it did not run, runs again after the reset.
	if _, err := query1(t, c, "SELECT $1::int + 1", 1); err != nil {
		t.Fatal(err)
	}
	carried(t, c)
	seen(t, c, "DEALLOCATE "+c.direct.stmts["SELECT $1::int + 1"].sd.Name)
	c.carry.due = true
	if got, err := query1(t, c, "SELECT $1::int + 1", 5); err != nil || got != "6" {
		t.Fatalf("the statement whose own name the session deallocated: %q, %v", got, err)
	}
}

// TestCarriedResetUtility: statements that refuse to run in a
// transaction block run behind a carried reset as they do alone: the
// reset commits in a block of its own before them.
func TestCarriedResetUtility(t *testing.T) {
	admin := wrapped(t)
	tbl := table(t, admin, "v int")
	for _, q := range []string{"VACUUM " + tbl, "CREATE INDEX CONCURRENTLY " + tbl + "_i ON " + tbl + " (v)", "DROP INDEX CONCURRENTLY " + tbl + "_i"} {
		c := wrapped(t)
		n := carried(t, c)
		if _, err := execArgs(c, q); err != nil {
			t.Fatalf("%s behind a reset (simple protocol): %v", q, err)
		}
		if *n != 1 {
			t.Fatalf("%s: %d resets", q, *n)
		}
	}
	// On the direct path (a query: extended protocol, prepared first).
	c := wrapped(t)
	if _, err := query1(t, c, "VACUUM "+tbl); err != nil {
		t.Fatal(err)
	}
	n := carried(t, c)
	if _, err := query1(t, c, "VACUUM "+tbl); err != nil {
		t.Fatalf("VACUUM behind a reset (extended protocol): %v", err)
	}
	if *n != 1 {
		t.Fatalf("%d resets", *n)
	}
}

// TestCarriedResetErrorPosition: a statement's error behind a carried
// reset is the one it has alone, position included (the reset goes in a
// message of its own).
func TestCarriedResetErrorPosition(t *testing.T) {
	c := wrapped(t)
	q := "SELECT 1 FROM pd_no_such_table_46"
	_, alone := execArgs(c, q)
	carried(t, c)
	_, behind := execArgs(c, q)
	var a, b *pgconn.PgError
	if !errors.As(alone, &a) || !errors.As(behind, &b) {
		t.Fatalf("alone %v, behind a reset %v", alone, behind)
	}
	if a.Code != b.Code || a.Position != b.Position || a.Message != b.Message {
		t.Errorf("behind a reset: %s at %d %q; alone: %s at %d %q", b.Code, b.Position, b.Message, a.Code, a.Position, a.Message)
	}
}

// TestCarriedResetOtherPaths: what reaches the server other than the
// direct path's statements runs the waiting reset on its own first.
func TestCarriedResetOtherPaths(t *testing.T) {
	for name, run := range map[string]func(c *conn) error{
		"ping": func(c *conn) error { return c.Ping(context.Background()) },
		"begin": func(c *conn) error {
			tx, err := c.BeginTx(context.Background(), driver.TxOptions{})
			if err == nil {
				err = tx.Rollback()
			}
			return err
		},
		"prepare": func(c *conn) error {
			st, err := c.PrepareContext(context.Background(), "SELECT 1")
			if err == nil {
				err = st.Close()
			}
			return err
		},
		"catalog": func(c *conn) error { return c.RefreshCatalog(context.Background()) },
		"load": func(c *conn) error {
			_, err := c.ServerLoad(context.Background())
			return err
		},
	} {
		t.Run(name, func(t *testing.T) {
			c := wrapped(t)
			n := carried(t, c)
			if err := run(c); err != nil {
				t.Fatal(err)
			}
			if *n != 1 || c.ResetPending() {
				t.Errorf("%d resets, pending %v", *n, c.ResetPending())
			}
		})
	}
}

// TestCarries: only one statement of the kinds that run in any
// transaction shares one with a reset.
func TestCarries(t *testing.T) {
	for q, want := range map[string]bool{
		"SELECT f()":                              true,
		"  select 1;  ":                           true,
		"WITH x AS (SELECT 1) SELECT * FROM x":    true,
		"INSERT INTO t VALUES ($1)":               true,
		"update t set a = 1":                      true,
		"DELETE FROM t":                           true,
		"VALUES (1)":                              true,
		"TABLE t":                                 true,
		"MERGE INTO t USING s ON true DO NOTHING": true,
		"SELECT 1; ROLLBACK":                      false,
		"SELECT 1; SELECT 2":                      false,
		"VACUUM t":                                false,
		"CREATE INDEX CONCURRENTLY i ON t (a)":    false,
		"CALL p()":                                false,
		"BEGIN":                                   false,
		"ROLLBACK":                                false,
		"/* c */ SELECT 1":                        false,
		"-- c\nSELECT 1":                          false,
		"(SELECT 1)":                              false,
		"SELECTX":                                 false,
		"":                                        false,
		"SET search_path = x":                     false,
	} {
		if got := carries(q); got != want {
			t.Errorf("carries(%q) = %v, want %v", q, got, want)
		}
	}
}

// TestCarriedResetTransactionDefaults: the statement behind a carried
// reset runs in a transaction of the reset session's defaults, not the
// last session's (a transaction begun before RESET ALL keeps them).
func TestCarriedResetTransactionDefaults(t *testing.T) {
	admin := wrapped(t)
	tbl := table(t, admin, "v int")
	for _, path := range carryPaths {
		t.Run(path, func(t *testing.T) {
			c := wrapped(t)
			iso := "SELECT current_setting('transaction_isolation') || current_setting('transaction_read_only')"
			prepareInsert(t, c, tbl, 1)
			base := count(t, c, iso)
			n := carried(t, c)
			exec(t, c, "SET default_transaction_read_only = on")
			exec(t, c, "SET default_transaction_isolation = serializable")
			c.carry.due = true
			var err error
			switch path {
			case "query":
				var got string
				if got, err = query1(t, c, iso); err == nil && got != base {
					t.Errorf("the statement behind the reset ran in %q, want %q", got, base)
				}
			default:
				err = insertOn(t, c, path, tbl, 2)
			}
			if err != nil {
				t.Fatalf("behind the reset: %v", err)
			}
			if *n != 1 {
				t.Errorf("%d resets", *n)
			}
		})
	}
}

// TestCarriedResetRedescribed: a statement whose result DDL changed since
// it was prepared (a column renamed, its type changed) reads right behind
// a carried reset that deallocates every statement (the session prepared
// one of its own), which prepares it again, and after.
func TestCarriedResetRedescribed(t *testing.T) {
	admin := wrapped(t)
	tbl := table(t, admin, "a text")
	exec(t, admin, "INSERT INTO "+tbl+" VALUES ('1234')")
	c := wrapped(t)
	q := "SELECT * FROM " + tbl + " WHERE $1::int > 0"
	if got, err := query1(t, c, q, 1); err != nil || got != "1234" {
		t.Fatalf("%q, %v", got, err)
	}
	exec(t, admin, "ALTER TABLE "+tbl+" ALTER COLUMN a TYPE int4 USING a::int4")
	carried(t, c)
	seen(t, c, "PREPARE pd_users_own AS SELECT 1") // the reset deallocates all
	for i := range 3 {
		got, err := query1(t, c, q, 1)
		if err != nil || got != "1234" {
			t.Fatalf("run %d after the type changed: %q, %v", i, got, err)
		}
	}
	exec(t, admin, "ALTER TABLE "+tbl+" RENAME COLUMN a TO b")
	carried(t, c)
	seen(t, c, "PREPARE pd_users_own AS SELECT 1")
	for i := range 3 {
		if got, err := query1(t, c, q, 1); err != nil || got != "1234" {
			t.Fatalf("run %d after the column was renamed: %q, %v", i, got, err)
		}
	}
}

// TestCarriedResetKeepsPgxStatements: what pooldriver runs through pgx.Conn
// itself (the load reading, the open transaction's settings) prepares
// nothing a carried reset's DEALLOCATE ALL would take from under pgx.
func TestCarriedResetKeepsPgxStatements(t *testing.T) {
	c := wrapped(t)
	ctx := t.Context()
	if _, err := c.ServerLoad(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := query1(t, c, "SELECT $1::int", 1); err != nil {
		t.Fatal(err)
	}
	n := carried(t, c)
	if _, err := query1(t, c, "SELECT $1::int", 2); err != nil || *n != 1 {
		t.Fatalf("the carried reset: %v, %d resets", err, *n)
	}
	if _, err := c.ServerLoad(ctx); err != nil {
		t.Fatalf("the load reading after a carried reset: %v", err)
	}
	exec(t, c, "BEGIN")
	if _, _, err := c.OpenTx(ctx); err != nil {
		t.Fatalf("the open transaction's settings after a carried reset: %v", err)
	}
	exec(t, c, "ROLLBACK")
}

// TestCarriedResetKeepsStatements: after a call the catalog proves only
// sets a setting, the carried reset undoes the setting and keeps the
// direct path's statements prepared (the server's own, not prepared
// again). A function that deallocates them, or one whose body writes to a
// table whose trigger replaces them with its own, is no such proof: the
// reset deallocates every statement, and the one behind it is prepared
// again and runs as the next user wrote it.
func TestCarriedResetKeepsStatements(t *testing.T) {
	c, admin := wrapped(t), wrapped(t)
	u := fmt.Sprintf("pd_keep_%d_", rand.Uint64()) // names unique to this run, called unqualified
	for _, o := range []string{
		"TABLE " + u + "audited (a int)",
		"FUNCTION " + u + "hijack() RETURNS trigger LANGUAGE plpgsql AS $$ DECLARE r record; BEGIN " +
			"FOR r IN SELECT name FROM pg_prepared_statements WHERE name LIKE 'pooldriver\\_%' LOOP " +
			"EXECUTE format('DEALLOCATE %I', r.name); EXECUTE format('PREPARE %I(int4) AS SELECT 666 + $1', r.name); " +
			"END LOOP; RETURN NEW; END $$",
		"TRIGGER " + u + "trg BEFORE INSERT ON " + u + "audited FOR EACH ROW EXECUTE FUNCTION " + u + "hijack()",
		"FUNCTION " + u + "sets() RETURNS text LANGUAGE sql AS $$ SELECT set_config('work_mem', '7MB', false) $$",
		"FUNCTION " + u + "drops() RETURNS text LANGUAGE sql AS $$ DEALLOCATE ALL; SELECT set_config('work_mem', '7MB', false) $$",
		"FUNCTION " + u + "audits() RETURNS text LANGUAGE sql AS $$ INSERT INTO " + u + "audited VALUES (1); SELECT set_config('work_mem', '7MB', false) $$",
	} {
		exec(t, admin, "CREATE "+o)
	}
	t.Cleanup(func() {
		_, _ = admin.Driver().(driver.ExecerContext).ExecContext(context.Background(),
			"DROP TABLE "+u+"audited; DROP FUNCTION "+u+"hijack(), "+u+"sets(), "+u+"drops(), "+u+"audits()", nil)
	})
	ddl := "CREATE TEMP TABLE " + u + "here (a int)"
	exec(t, c, ddl)
	c.ChangesSession(ddl) // observed as pooldriver observes it: the catalog is due
	nextUser(t, c)        // and read
	const q = "SELECT $1::int + 1"
	if got, err := query1(t, c, q, 1); err != nil || got != "2" {
		t.Fatalf("%q, %v", got, err)
	}
	prepared := "SELECT prepare_time::text FROM pg_prepared_statements WHERE statement = '" + q + "'"
	base, work := count(t, c, prepared), count(t, c, "SELECT current_setting('work_mem')")

	n := carried(t, c)
	seen(t, c, "SELECT "+u+"sets()")
	if got, err := query1(t, c, q, 41); err != nil || got != "42" || *n != 1 {
		t.Fatalf("behind the reset after a setting's call: %q, %v, %d resets", got, err, *n)
	}
	if got := count(t, c, prepared); got != base {
		t.Errorf("the statement was prepared again at %s (first at %s): the reset deallocated it", got, base)
	}
	if got := count(t, c, "SELECT current_setting('work_mem')"); got != work {
		t.Errorf("work_mem after the reset: %s, want %s", got, work)
	}

	for _, fn := range []string{"drops", "audits"} {
		n = carried(t, c)
		seen(t, c, "SELECT "+u+fn+"()")
		if got, err := query1(t, c, q, 41); err != nil || got != "42" || *n != 1 {
			t.Fatalf("behind the reset after %s(): %q, %v, %d resets; want 42", fn, got, err, *n)
		}
		if got := count(t, c, prepared); got == base {
			t.Errorf("after %s(): the statement still prepared at %s", fn, got)
		}
		base = count(t, c, prepared)
	}

	c.ResetFully() // pool_reset_always: no proof spares a statement
	n = carried(t, c)
	seen(t, c, "SELECT "+u+"sets()")
	if got, err := query1(t, c, q, 41); err != nil || got != "42" || *n != 1 {
		t.Fatalf("behind a full reset: %q, %v, %d resets", got, err, *n)
	}
	if got := count(t, c, prepared); got == base {
		t.Errorf("with ResetFully the statement still prepared at %s after the reset", got)
	}
}

// TestCarriedResetKeptPlansAgain: a kept statement that the last session
// made the server parse again (ANALYZE invalidated its plan) holds a
// constant read under that session's TimeZone; the reset, carried or on
// its own, plans it again, and the next user reads it under their own.
func TestCarriedResetKeptPlansAgain(t *testing.T) {
	admin := wrapped(t)
	for _, how := range []string{"carried", "on its own"} {
		t.Run(how, func(t *testing.T) {
			u := fmt.Sprintf("pd_plans_%d_", rand.Uint64()) // a table of its own: its first ANALYZE
			exec(t, admin, "CREATE TABLE "+u+"t (a int); INSERT INTO "+u+"t VALUES (1)")
			exec(t, admin, "CREATE FUNCTION "+u+"tz() RETURNS text LANGUAGE sql AS $$ SELECT set_config('TimeZone', 'Asia/Tokyo', false) $$")
			t.Cleanup(func() {
				_, _ = admin.Driver().(driver.ExecerContext).ExecContext(context.Background(), "DROP TABLE "+u+"t; DROP FUNCTION "+u+"tz()", nil)
			})
			q := "SELECT extract(epoch from '2024-01-01 00:00'::timestamptz)::text FROM " + u + "t WHERE $1::int > 0"
			c := wrapped(t)
			ddl := "CREATE TEMP TABLE " + u + "here (a int)"
			exec(t, c, ddl)
			c.ChangesSession(ddl)
			nextUser(t, c)
			base := count(t, c, "SELECT extract(epoch from '2024-01-01 00:00'::timestamptz)::text")
			if got, err := query1(t, c, q, 1); err != nil || got != base {
				t.Fatalf("%q, %v; want %s", got, err, base)
			}
			n := carried(t, c)
			if _, err := query1(t, c, "SELECT $1::int", 1); err != nil || *n != 1 { // the reset goes with it
				t.Fatalf("%v, %d resets", err, *n)
			}
			seen(t, c, "SELECT "+u+"tz()") // static: the statements are kept
			exec(t, admin, "ANALYZE "+u+"t")
			if got, err := query1(t, c, q, 1); err != nil || got == base {
				t.Fatalf("under the last user's TimeZone: %q, %v; want other than %s", got, err, base)
			}
			if how == "carried" {
				if !c.CarryReset(func(bool) { *n++ }) {
					t.Fatal("CarryReset refused")
				}
			} else if err := c.ResetSession(t.Context()); err != nil {
				t.Fatal(err)
			}
			if got, err := query1(t, c, q, 1); err != nil || got != base {
				t.Errorf("the next user's run: %q, %v; want %s", got, err, base)
			}
		})
	}
}

// TestCarriedResetPreparedAgainChanged: a statement a carried reset
// deallocated, prepared again while the session is changed (here under
// another search_path, where its table is another one), is dropped by
// the next reset as one prepared for the first time would be: the next
// user's run reads their own table.
func TestCarriedResetPreparedAgainChanged(t *testing.T) {
	c, admin := wrapped(t), wrapped(t)
	u := fmt.Sprintf("pd_again_%d_", rand.Uint64())
	for _, o := range []string{
		"CREATE TABLE " + u + "t (a int)",
		"INSERT INTO " + u + "t VALUES (1)",
		"CREATE SCHEMA " + u + "s",
		"CREATE TABLE " + u + "s." + u + "t (b text)",
		"INSERT INTO " + u + "s." + u + "t VALUES ('other')",
		"CREATE FUNCTION " + u + "path() RETURNS text LANGUAGE sql AS $$ SELECT set_config('search_path', '" + u + "s, public', false) $$",
	} {
		exec(t, admin, o)
	}
	t.Cleanup(func() {
		_, _ = admin.Driver().(driver.ExecerContext).ExecContext(context.Background(),
			"DROP TABLE "+u+"t; DROP SCHEMA "+u+"s CASCADE; DROP FUNCTION "+u+"path()", nil)
	})
	ddl := "CREATE TEMP TABLE " + u + "here (a int)"
	exec(t, c, ddl)
	c.ChangesSession(ddl)
	nextUser(t, c)
	one, read := "SELECT $1::int + 1", "SELECT * FROM "+u+"t WHERE $1::int > 0"
	for _, q := range []string{one, read} {
		if _, err := query1(t, c, q, 1); err != nil {
			t.Fatal(err)
		}
	}
	n := carried(t, c)
	seen(t, c, "PREPARE pd_users_own AS SELECT 1") // the reset deallocates all
	if got, err := query1(t, c, one, 1); err != nil || got != "2" || *n != 1 {
		t.Fatalf("%q, %v, %d resets", got, err, *n)
	}
	seen(t, c, "SELECT "+u+"path()") // static: no DEALLOCATE for it
	if got, err := query1(t, c, read, 1); err != nil || got != "other" {
		t.Fatalf("under the changed search_path: %q, %v", got, err)
	}
	if !c.CarryReset(func(bool) { *n++ }) {
		t.Fatal("CarryReset refused")
	}
	if got, err := query1(t, c, read, 1); err != nil || got != "1" || *n != 2 {
		t.Errorf("the next user's run: %q, %v, %d resets; want 1", got, err, *n)
	}
}

// TestCarriedResetSettingsOnly: after a session changed nothing but its
// settings (SET, RESET, set_config, a LANGUAGE sql function the reading
// proves only sets one), the carried reset is the settings' alone, and
// leaves the session as the whole one does: the settings, the role and
// the random seed are a new session's, and the statements stay prepared.
// After one that changed anything else too (LISTEN, before or after), it
// is the whole one.
func TestCarriedResetSettingsOnly(t *testing.T) {
	c, admin := wrapped(t), wrapped(t)
	fn := fmt.Sprintf("pd_sets_%d", rand.Uint64())
	seen(t, c, "CREATE FUNCTION "+fn+"() RETURNS text LANGUAGE sql AS $$ SELECT set_config('work_mem', '7MB', false) $$")
	t.Cleanup(func() {
		_, _ = admin.Driver().(driver.ExecerContext).ExecContext(context.Background(), "DROP FUNCTION "+fn+"()", nil)
	})
	nextUser(t, c) // the catalog is due (seen) and read
	const q = "SELECT current_setting('work_mem') || ' ' || current_user || ' ' || " +
		"(SELECT count(*) FROM pg_catalog.pg_listening_channels()) || ' ' || " +
		"(SELECT count(*) FROM pg_catalog.pg_class WHERE relpersistence = 't') || ' ' || $1::text"
	fresh, err := query1(t, c, q, "x")
	if err != nil {
		t.Fatal(err)
	}
	prepared := "SELECT prepare_time::text FROM pg_prepared_statements WHERE statement = '" + strings.ReplaceAll(q, "'", "''") + "'"
	for _, tc := range []struct {
		name     string
		stmts    []string
		settings bool
		unseen   string // run first, its verdict not asked: what no text shows
		raw      bool   // the user's code had the connection (Raw)
	}{
		{name: "SET", stmts: []string{"SET work_mem = '7MB'", "SET seed = 0.5", "SET ROLE pg_read_all_settings"}, settings: true},
		{name: "set_config", stmts: []string{"SELECT set_config('work_mem', '7MB', false), set_config('role', 'pg_read_all_settings', false)"}, settings: true},
		{name: "function", stmts: []string{"SELECT " + fn + "()"}, settings: true},
		// A table made without TEMP where search_path names pg_temp is
		// a temporary one: the settings' reset drops it too.
		{name: "search_path pg_temp", stmts: []string{"SELECT set_config('search_path', 'pg_temp', false)", "CREATE TABLE pd_settings_t (a int)"}, settings: true},
		{name: "function, LISTEN", stmts: []string{"SELECT " + fn + "()", "LISTEN pd_settings_only"}},
		{name: "LISTEN, SET", stmts: []string{"LISTEN pd_settings_only", "SET work_mem = '7MB'"}},
		{name: "reported only", unseen: "SET work_mem = '7MB'; SET TimeZone = 'Asia/Tokyo'; LISTEN pd_settings_only", stmts: []string{"SELECT 1"}},
		{name: "SET, Raw", stmts: []string{"SET work_mem = '7MB'"}, raw: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nextUser(t, c)
			base := count(t, c, prepared)
			if tc.unseen != "" {
				exec(t, c, tc.unseen)
			}
			for _, s := range tc.stmts {
				seen(t, c, s)
			}
			if tc.raw {
				c.Raw()
				c.stdlibCached = false // as if it prepared nothing: the reset may still be carried
			}
			if got := c.settingsOnly(); got != tc.settings {
				t.Fatalf("settingsOnly after %q = %v, want %v", tc.stmts, got, tc.settings)
			}
			n := 0
			if !c.CarryReset(func(bool) { n++ }) {
				t.Fatal("CarryReset refused an idle connection of the direct path")
			}
			if got, err := query1(t, c, q, "x"); err != nil || got != fresh || n != 1 {
				t.Fatalf("behind the reset: %q, %v, %d resets; want %q", got, err, n, fresh)
			}
			if c.settingsOnly() {
				t.Error("settingsOnly still true after the reset")
			}
			if got := count(t, c, prepared); tc.settings && got != base {
				t.Errorf("the statement was prepared again at %s (first at %s): the settings' reset deallocated it", got, base)
			}
			// The seed is a new session's: not the one SET seed planted.
			exec(t, admin, "SELECT setseed(0.5)")
			if got, want := count(t, c, "SELECT random()::text"), count(t, admin, "SELECT random()::text"); got == want {
				t.Errorf("random() after the reset = %s, as after setseed(0.5)", got)
			}
		})
	}
}

// TestCarriedResetStatementsSettings: the settings' reset runs what
// undoes settings (and drops the temporary objects, which a search_path
// naming pg_temp makes of every table) and nothing else; the whole one,
// all of it.
func TestCarriedResetStatementsSettings(t *testing.T) {
	cat := &pgCatalog{dblink: `"ext"`, fdw: "public"}
	whole, _ := carriedReset(cat, originMay, "", false, false)
	narrow, _ := carriedReset(cat, originMay, "", false, true)
	for _, s := range []string{"SET SESSION AUTHORIZATION DEFAULT", "RESET ALL", "DISCARD PLANS", "DISCARD TEMP", "setseed("} {
		if !slices.ContainsFunc(narrow, func(n string) bool { return strings.Contains(n, s) }) {
			t.Errorf("the settings' reset %q lacks %s", narrow, s)
		}
	}
	for _, s := range []string{"CLOSE ALL", "UNLISTEN", "DISCARD SEQUENCES", "advisory", "dblink", "fdw", "origin"} {
		if slices.ContainsFunc(narrow, func(n string) bool { return strings.Contains(n, s) }) {
			t.Errorf("the settings' reset %q runs %s", narrow, s)
		}
		if !slices.ContainsFunc(whole, func(n string) bool { return strings.Contains(n, s) }) {
			t.Errorf("the whole reset %q lacks %s", whole, s)
		}
	}
	if stmts, at := resetStatements(cat, originMay, "SELECT 'custom'", listPrepared, true); at < 0 || stmts[at] != "SELECT 'custom'" ||
		slices.Contains(stmts, "CLOSE ALL") || stmts[len(stmts)-1] != listPrepared {
		t.Errorf("the settings' reset on its own: %q, custom at %d", stmts, at)
	}
}

// BenchmarkCarriedReset is what a carried reset adds to the statement it
// goes in front of, serial, on one connection: a point select with the
// whole reset in front of it, with the settings' (settingsOnly), and
// with none. Wall time as the caller sees it, the server's work included
// (client and server share this machine's cores):
//
//	go test -run '^$' -bench '^BenchmarkCarriedReset$' -count 5 ./dialects/postgres
func BenchmarkCarriedReset(b *testing.B) {
	for _, kind := range []string{"none", "whole", "settings"} {
		b.Run(kind, func(b *testing.B) {
			c := wrapped(b)
			if err := c.ResetSession(b.Context()); err != nil { // the first asks about origins
				b.Fatal(err)
			}
			const q = "SELECT relname FROM pg_catalog.pg_class WHERE oid = $1"
			b.ReportAllocs()
			for b.Loop() {
				if kind != "none" {
					c.setOnly, c.broad = true, kind == "whole"
					if !c.CarryReset(func(bool) {}) {
						b.Fatal("CarryReset refused an idle connection of the direct path")
					}
				}
				if got, err := query1(b, c, q, 1259); err != nil || got != "pg_class" {
					b.Fatalf("%q, %v", got, err)
				}
			}
		})
	}
}
