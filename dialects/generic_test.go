package dialects

import (
	"context"
	"database/sql/driver"
	"errors"
	"testing"
)

// stubConn is a driver.Conn that runs nothing: the generic dialect only
// reads statement text.
type stubConn struct{ closed bool }

func (c *stubConn) Prepare(string) (driver.Stmt, error) { return nil, errors.New("stub") }
func (c *stubConn) Close() error                        { c.closed = true; return nil }
func (c *stubConn) Begin() (driver.Tx, error)           { return nil, errors.New("stub") }

type stubConnector struct{ conn driver.Conn }

func (s stubConnector) Connect(context.Context) (driver.Conn, error) { return s.conn, nil }
func (s stubConnector) Driver() driver.Driver                        { return nil }

func openGeneric(t *testing.T, dc driver.Conn) Conn {
	t.Helper()
	c, err := Wrap(stubConnector{dc}).Open(t.Context(), Credentials{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestGenericTxTracking(t *testing.T) {
	c := openGeneric(t, &stubConn{})
	if _, ok := c.(*genericConn); !ok {
		t.Fatalf("Open returned %T, want *genericConn", c)
	}
	obs := openGeneric(t, &stubConn{}).(StatementObserver)
	// Each step: the statement run outside BeginTx, and the state after it.
	for i, step := range []struct {
		query string
		want  TxStatus
	}{
		{"SELECT 1", TxIdle},
		{"BEGIN", TxActive},
		{"INSERT INTO t VALUES (1)", TxActive},
		{"", TxActive}, // RawConn: no text, no change
		{"SAVEPOINT a", TxActive},
		{"ROLLBACK TO SAVEPOINT a", TxActive},
		{"COMMIT", TxIdle},
		{"start transaction", TxActive},
		{"rollback", TxIdle},
		{"BEGIN; SELECT 1", TxActive},
		{"END", TxIdle},
		{"CALL p()", TxActive}, // may have begun one: assume so
		{"ROLLBACK", TxIdle},
		{"BEGIN; INSERT INTO t VALUES (1); COMMIT", TxActive}, // may have stopped before COMMIT
		{"ABORT", TxIdle},
		{"SET autocommit = 0", TxActive},
		{"COMMIT", TxIdle},
		{"/*!40101 BEGIN */", TxActive},
		{"COMMIT", TxIdle},
		{"SELECT 'BEGIN'", TxIdle},
		{"-- BEGIN\nSELECT 1", TxIdle},

		// SQLite: SAVEPOINT outside a transaction opens one; RELEASE of
		// the outermost commits it, but the rules cannot tell which one
		// that is.
		{"SAVEPOINT a", TxActive},
		{"INSERT INTO t VALUES (1)", TxActive},
		{"SAVEPOINT b", TxActive},
		{"RELEASE b", TxActive},
		{"ROLLBACK TO a", TxActive},
		{"RELEASE SAVEPOINT a", TxActive},
		{"ROLLBACK", TxIdle},
		{"SAVEPOINT a; INSERT INTO t VALUES (1); RELEASE a", TxActive},
		{"COMMIT", TxIdle},

		// Several statements, one of which the rules cannot classify.
		{"SELECT 1; IF @x = 1 BEGIN TRAN", TxActive},
		{"ROLLBACK", TxIdle},
		{"INSERT INTO t VALUES (1); EXEC p", TxActive},
		{"ROLLBACK", TxIdle},
		{"CREATE TABLE t (a int); INSERT INTO t VALUES (1)", TxIdle},
		{"SET TRANSACTION READ ONLY", TxActive},
		{"ROLLBACK", TxIdle},
	} {
		got, err := c.TxStatus(t.Context(), step.query)
		if err != nil || got != step.want {
			t.Fatalf("step %d: TxStatus after %q = %v, %v; want %v", i, step.query, got, err, step.want)
		}
		// Observe answers both questions as the two methods do, on a
		// connection of its own that saw the same statements.
		changed, got, err := obs.Observe(t.Context(), step.query, true)
		if err != nil || got != step.want || changed != c.(SessionTracker).ChangesSession(step.query) {
			t.Fatalf("step %d: Observe(%q) = %t, %v, %v; want %t, %v", i, step.query, changed, got, err, !changed, step.want)
		}
	}
	// Without askTx, Observe leaves the transaction belief alone.
	if _, _, err := obs.Observe(t.Context(), "BEGIN", false); err != nil {
		t.Fatal(err)
	}
	if _, got, _ := obs.Observe(t.Context(), "SELECT 1", true); got != TxIdle {
		t.Fatalf("Observe(BEGIN, askTx=false) changed the belief: %v", got)
	}
	if err := c.Rollback(t.Context()); !errors.Is(err, ErrUnsupported) {
		t.Errorf("Rollback = %v, want ErrUnsupported", err)
	}
}

func TestGenericChangesSession(t *testing.T) {
	st, ok := openGeneric(t, &stubConn{}).(SessionTracker)
	if !ok {
		t.Fatal("the generic conn is no SessionTracker")
	}
	for _, tc := range []struct {
		query string
		want  bool
	}{
		{"SELECT a FROM t WHERE id = $1", false},
		{"INSERT INTO t VALUES (?)", false},
		{"SELECT 'SET x = 1'", false},
		{"SET search_path = a", true},
		{"SET LOCAL x.y = 1", true}, // MySQL's rules count every SET
		{"SELECT pg_advisory_lock(1)", true},
		{"SELECT pg_advisory_xact_lock(1)", false},
		{"SELECT set_config('a.b', 'c', false)", true},
		{"SELECT GET_LOCK('x', 1)", true},
		{"CREATE TEMPORARY TABLE t (a int)", true},
		{"LOCK TABLES t WRITE", true},
		{"USE db", true},
		{"PRAGMA foreign_keys = ON", true},
	} {
		if got := st.ChangesSession(tc.query); got != tc.want {
			t.Errorf("ChangesSession(%q) = %v, want %v", tc.query, got, tc.want)
		}
	}
}

// TestGenericDefaultDeny (issue 35): through Wrap nothing reports what a
// function did, so an unknown call counts unless the user trusts their
// functions; SQL run from a string counts either way.
func TestGenericDefaultDeny(t *testing.T) {
	c := openGeneric(t, &stubConn{})
	st := c.(SessionTracker)
	for _, tc := range []struct {
		query            string
		untrusted, trust bool
	}{
		{"SELECT a FROM t WHERE id = ?", false, false},
		{`INSERT INTO "t" ("a") VALUES ($1) RETURNING "id"`, false, false},
		{"SELECT count(*), lower(a) FROM t", false, false},
		{"SELECT f()", true, false},
		{"CALL p()", true, false},
		{"EXEC sp_who", true, true},
		{"EXECUTE IMMEDIATE 'SET @a = 1'", true, true},
	} {
		for _, trust := range []bool{false, true} {
			c.(FunctionTruster).TrustFunctions(trust)
			want := tc.untrusted
			if trust {
				want = tc.trust
			}
			if got := st.ChangesSession(tc.query); got != want {
				t.Errorf("trust %v: ChangesSession(%q) = %v, want %v", trust, tc.query, got, want)
			}
			if got, _, _ := c.(StatementObserver).Observe(t.Context(), tc.query, false); got != want {
				t.Errorf("trust %v: Observe(%q) = %v, want %v", trust, tc.query, got, want)
			}
		}
	}
}

// adaptedConn stands for a connection of a driver some dialect knows.
type adaptedConn struct{ stubConn }

type adapterDialectConn struct {
	genericConn
	from driver.Conn
}

func TestGenericOpenAdapts(t *testing.T) {
	RegisterConnAdapter(nil) // ignored
	RegisterConnAdapter(func(dc driver.Conn) (Conn, bool) {
		if ac, ok := dc.(*adaptedConn); ok {
			return &adapterDialectConn{genericConn: genericConn{c: ac}, from: ac}, true
		}
		return nil, false
	})
	ac := &adaptedConn{}
	c := openGeneric(t, ac)
	dc, ok := c.(*adapterDialectConn)
	if !ok || dc.from != ac {
		t.Fatalf("Open returned %T, want the adapter's conn", c)
	}
	if _, ok := openGeneric(t, &stubConn{}).(*genericConn); !ok {
		t.Error("an unknown connection must stay generic")
	}
}

func BenchmarkGenericStatement(b *testing.B) {
	c := &genericConn{c: &stubConn{}}
	ctx := context.Background()
	const q = "SELECT a FROM t WHERE id = $1"
	b.ReportAllocs()
	for b.Loop() {
		if c.ChangesSession(q) {
			b.Fatal("changes")
		}
		if s, _ := c.TxStatus(ctx, q); s != TxIdle {
			b.Fatal("tx")
		}
	}
}
