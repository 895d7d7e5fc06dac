package mysql

import (
	"context"
	"strings"
	"testing"
	"time"
)

// openCataloged opens a connection through the dialect, as openWired
// does, that keeps the server's catalog (shared, read again when due or
// after DDL), as a pool's connections do.
func openCataloged(ctx context.Context, t *testing.T) *conn {
	t.Helper()
	tmpl, _, err := Dialect.Parse("mysql://" + serverDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	dc, err := tmpl.Open(ctx, tmpl.Credentials())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dc.Close() })
	wc, ok := dc.(*wiredConn)
	if !ok {
		t.Fatalf("Open returned %T, want *wiredConn", dc)
	}
	if wc.cat == nil || wc.cat.Current() == nil {
		t.Fatal("no reading of the catalog after Open")
	}
	return wc.conn
}

// dropBeforeAndAfter runs the DROP statements drop now and when the test
// ends, each observed, so that the shared reading of the catalog expires.
func dropBeforeAndAfter(t *testing.T, drop []string) {
	t.Helper()
	cleanup := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		o := openCataloged(ctx, t)
		for _, q := range drop {
			if _, err := o.execer.ExecContext(ctx, q, nil); err != nil {
				t.Errorf("cleanup: %s: %v", q, err)
			}
			if _, _, err := o.Observe(ctx, q, true); err != nil { // the DDL expires the shared reading
				t.Errorf("cleanup: %s: %v", q, err)
			}
		}
	}
	cleanup()
	t.Cleanup(cleanup)
}

// TestCatalogServer (issue 45): on the real server, a listed name that
// a stored function shadows, a write to a table with a trigger and a
// read of a view that takes a lock count as changes; without the
// function, the same text, a write to a table without a trigger and a
// plain view do not. The dialect's own DDL makes every connection's
// reading due, and its connection reads the catalog again at once.
func TestCatalogServer(t *testing.T) {
	c := openCataloged(t.Context(), t)
	ctx := t.Context()
	drop := []string{
		"DROP FUNCTION IF EXISTS regexp_like",
		"DROP VIEW IF EXISTS pd_cat_vv, pd_cat_lockv, pd_cat_plainv, pd_cat_trigv",
		"DROP TABLE IF EXISTS pd_cat_trig, pd_cat_plain",
	}
	dropBeforeAndAfter(t, drop)

	// exec runs q through the driver and reports what Observe says of it.
	exec := func(q string, wantErr bool) bool {
		t.Helper()
		err := drain(ctx, c, q)
		if (err != nil) != wantErr {
			t.Fatalf("%s: error %v, want one: %v", q, err, wantErr)
		}
		changed, _, oerr := c.Observe(ctx, q, true)
		if oerr != nil {
			t.Fatalf("Observe(%q): %v", q, oerr)
		}
		return changed
	}
	// counts reports whether the catalog alone makes q count: the text
	// against the current reading, whatever the server's flags say.
	counts := func(q string) bool { return c.read(q, c.snapshot()).changesSession() }

	const shadowed = "SELECT regexp_like('a', 'a')"
	if counts(shadowed) {
		t.Errorf("%s counts without a stored function of that name", shadowed)
	}
	// On MariaDB 10.11 regexp_like is no built-in: the statement fails,
	// and since it ran nothing but listed names, a failure is no change.
	if err := drain(ctx, c, shadowed); err == nil {
		t.Log("the server has a built-in regexp_like: the stored function will not run")
	}
	if changed, _, _ := c.Observe(ctx, shadowed, true); changed {
		t.Errorf("%s changes the session without a stored function of that name", shadowed)
	}

	// The grantee the privilege tables are read with is the account's:
	// root has the TRIGGER privilege everywhere, and sees every trigger.
	if v, err := c.queryRow(ctx, "SELECT CURRENT_USER()"); err == nil {
		if u, _ := textOf(v[0]); strings.HasPrefix(u, "root@") && len(c.snapshot().Value.blind) != 0 {
			t.Errorf("%s reads as blind to the triggers of %v", u, c.snapshot().Value.blind)
		}
	}

	before := c.snapshot()
	exec("CREATE FUNCTION regexp_like(a TEXT, b TEXT) RETURNS INT NO SQL BEGIN SET @pd_v = 'leaked'; RETURN 1; END", false)
	if c.snapshot() == before {
		t.Fatal("the catalog was not read again after CREATE FUNCTION")
	}
	if !counts(shadowed) || !exec(shadowed, false) {
		t.Errorf("%s runs a stored function, and does not count", shadowed)
	}
	if v, err := c.queryRow(ctx, "SELECT @pd_v"); err == nil {
		if s, _ := textOf(v[0]); s != "leaked" {
			t.Logf("@pd_v = %q: the server ran its built-in", s)
		}
	}

	// Triggers.
	exec("CREATE TABLE pd_cat_trig (a int PRIMARY KEY)", false)
	exec("CREATE TABLE pd_cat_plain (a int PRIMARY KEY)", false)
	exec("CREATE TRIGGER pd_cat_trig_bi BEFORE INSERT ON pd_cat_trig FOR EACH ROW BEGIN IF NEW.a < 0 THEN SIGNAL SQLSTATE '45000'; END IF; DO GET_LOCK('pd_cat_trig', 0); END", false)
	if !counts("INSERT INTO pd_cat_trig VALUES (1)") || !exec("INSERT INTO pd_cat_trig VALUES (1)", false) {
		t.Error("an INSERT into a table with a trigger does not count")
	}
	if exec("INSERT INTO pd_cat_plain VALUES (1)", false) {
		t.Error("an INSERT into a table without a trigger counts")
	}
	// A read of it counts too: the catalog's names do not tell a read
	// from a write (see sqllex.Shadows).

	// Views.
	exec("CREATE VIEW pd_cat_lockv AS SELECT GET_LOCK('pd_cat_view', 0) AS l", false)
	exec("CREATE VIEW pd_cat_vv AS SELECT * FROM pd_cat_lockv", false)
	exec("CREATE VIEW pd_cat_plainv AS SELECT a FROM pd_cat_plain", false)
	exec("CREATE VIEW pd_cat_trigv AS SELECT a FROM pd_cat_trig", false)
	if !counts("SELECT * FROM pd_cat_vv") {
		t.Error("a view over a view that takes a lock does not count by the catalog")
	}
	for q, want := range map[string]bool{
		"SELECT * FROM pd_cat_lockv":          true,
		"SELECT * FROM pd_cat_vv":             true,
		"INSERT INTO pd_cat_trigv VALUES (2)": true,
		"SELECT * FROM pd_cat_plainv":         false,
	} {
		if got := exec(q, false); got != want {
			t.Errorf("%s: changes the session %v, want %v", q, got, want)
		}
	}

	// A failed statement that may write counts (its ERR carries no
	// flags, and what may have run is the catalog's to know), trusted or
	// not; a failed read of built-ins does not.
	for _, trust := range []bool{true, false} {
		c.TrustFunctions(trust)
		if !exec("INSERT INTO pd_cat_trig VALUES (-1)", true) {
			t.Errorf("trust %v: an INSERT whose trigger failed does not count", trust)
		}
		if !exec("INSERT INTO pd_cat_plain VALUES (1)", true) {
			t.Errorf("trust %v: a failed INSERT does not count", trust)
		}
		if exec("SELECT nosuchcolumn FROM pd_cat_plain", true) {
			t.Errorf("trust %v: a failed SELECT of no call counts", trust)
		}
	}
	c.TrustFunctions(false)

	// Dropped, the function no longer counts: the DROP made the reading
	// due, and this connection read it again.
	exec("DROP FUNCTION regexp_like", false)
	if counts(shadowed) {
		t.Errorf("%s still counts after DROP FUNCTION", shadowed)
	}
}

// TestCatalogWrapped: a connection of a wrapped connector finds the
// catalog of its DSN's server and account, and reads a due reading again
// when the pool's health check asks it to.
func TestCatalogWrapped(t *testing.T) {
	c := wrapped(t)
	if c.cat == nil {
		t.Fatal("no catalog for a wrapped connection")
	}
	if !strings.Contains(serverDSN(t), "/"+c.db) {
		t.Errorf("database %q, not the DSN's", c.db)
	}
	// A statement first: the session's autocommit is then known.
	if _, err := c.queryRow(t.Context(), "SELECT 1"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Observe(t.Context(), "SELECT 1", true); err != nil {
		t.Fatalf("SELECT 1: %v", err)
	}
	c.cat.Expire()
	// Another connection's reading may have begun less than a second
	// ago (dialects.Catalog.Claim spaces them): statements until one
	// reads, within seconds.
	deadline := time.Now().Add(5 * time.Second)
	for {
		if err := c.RefreshCatalog(t.Context()); err != nil { // as the pool's health check does
			t.Fatal(err)
		}
		if s := c.cat.Current(); s != nil && !s.Due() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the wrapped connection did not read the catalog")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestCatalogServerHarmlessFunction: on the real server, a call of a
// stored function whose body the rules read as harmless (one RETURN, or a
// block of statements) is no change of the session, so pooldriver resets
// nothing after it; one that sets a user variable counts. So does the
// harmless one's name once another database holds a function of the same
// name that changes the session (a call resolves by the current
// database): the catalog is read again after the DDL.
func TestCatalogServerHarmlessFunction(t *testing.T) {
	c := openCataloged(t.Context(), t)
	ctx := t.Context()
	drop := []string{
		"DROP FUNCTION IF EXISTS pd_cat_ret",
		"DROP FUNCTION IF EXISTS pd_cat_block",
		"DROP FUNCTION IF EXISTS pd_cat_setter",
		"DROP DATABASE IF EXISTS pd_cat_other",
	}
	dropBeforeAndAfter(t, drop)
	exec := func(q string) bool {
		t.Helper()
		if err := drain(ctx, c, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		changed, _, err := c.Observe(ctx, q, true)
		if err != nil {
			t.Fatalf("Observe(%q): %v", q, err)
		}
		return changed
	}
	exec("CREATE FUNCTION pd_cat_ret(x INT) RETURNS INT DETERMINISTIC RETURN x + LENGTH('a;b')")
	exec("CREATE FUNCTION pd_cat_block(x INT) RETURNS INT DETERMINISTIC BEGIN DECLARE y INT DEFAULT 1; SET x = x + y; RETURN x; END")
	exec("CREATE FUNCTION pd_cat_setter(x INT) RETURNS INT DETERMINISTIC BEGIN SET @pd_v = x; RETURN x; END")
	for q, want := range map[string]bool{
		"SELECT pd_cat_ret(1)":                   false,
		"SELECT PD_CAT_RET(2), `pd_cat_ret`(3)":  false,
		"SELECT " + c.db + ".pd_cat_ret(4)":      false,
		"SELECT pd_cat_block(1)":                 false,
		"SELECT pd_cat_ret(1), pd_cat_block(1)":  false,
		"SELECT pd_cat_setter(1)":                true,
		"SELECT pd_cat_ret(1), pd_cat_setter(1)": true,
	} {
		if got := exec(q); got != want {
			t.Errorf("%s: changes the session %v, want %v", q, got, want)
		}
	}
	exec("CREATE DATABASE pd_cat_other")
	exec("CREATE FUNCTION pd_cat_other.pd_cat_ret(x INT) RETURNS INT NO SQL BEGIN SET @pd_v = 'leaked'; RETURN x; END")
	if !exec("SELECT pd_cat_ret(1)") {
		t.Error("a name that another database's harmful function shares still reads as harmless")
	}
}
