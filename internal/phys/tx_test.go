package phys

import (
	"context"
	"database/sql/driver"
	"errors"
	"testing"
	"time"

	"github.com/pooldriver/pooldriver/dialects"
	"github.com/pooldriver/pooldriver/internal/fakedb"
)

// claim is a TaskClaim of a test: it admits, or refuses with refuse, and
// says whether its task is ending.
type claim struct {
	refuse   error
	ending   bool
	admitted int
	commits  int
}

func (c *claim) Admit() error { c.admitted++; return c.refuse }

func (c *claim) CommitOn(_ context.Context, _ *Conn, drv driver.Tx, _ uint64) error {
	c.commits++
	return drv.Commit()
}

func (c *claim) TaskEnding() bool { return c.ending }

func (c *claim) ClaimedByTask() (context.Context, bool) { return nil, false }

// fakeConn is a physical connection of its own Env to a fake server of
// the test's own; both are closed with the test.
func fakeConn(t *testing.T) (*Conn, *fakedb.Server) {
	t.Helper()
	dc, srv := openFakeServer(t)
	return newConn(&Env{cleanupTimeout: time.Second}, dc), srv
}

// TestBeginTxRefused: a transaction its *sql.Tx refuses (its task ended
// as it began) is rolled back, as the task's rollback, and BeginTx returns
// the refusal; nothing is left open, on the server or as pc knows it.
func TestBeginTxRefused(t *testing.T) {
	pc, srv := fakeConn(t)
	errRefused := errors.New("refused")
	c := &claim{refuse: errRefused}
	var open OpenTx
	if err := pc.BeginTx(t.Context(), driver.TxOptions{}, true, c, &open); !errors.Is(err, errRefused) {
		t.Fatalf("BeginTx: %v, want the refusal", err)
	}
	if c.admitted != 1 {
		t.Fatalf("Admit asked %d times, want once", c.admitted)
	}
	if auto, taskEnd, _, _, _ := pc.Env.Counts(); auto != 1 || taskEnd != 1 {
		t.Errorf("counted %d rollbacks, %d at a task's end; want 1, 1", auto, taskEnd)
	}
	if pc.st.Tx != TxNone || pc.st.TxOwner != nil {
		t.Errorf("after the refusal: %v, owner %p; want no transaction", pc.st.Tx, pc.st.TxOwner)
	}
	if s := srv.Stats(); s.OpenTx != 0 || s.Rollbacks != 1 {
		t.Errorf("server: %d open, %d rolled back; want 0, 1", s.OpenTx, s.Rollbacks)
	}
}

// TestBeginTxWithoutOwner: a transaction is not begun without the *sql.Tx
// that is to end it.
func TestBeginTxWithoutOwner(t *testing.T) {
	pc, srv := fakeConn(t)
	if err := pc.BeginTx(t.Context(), driver.TxOptions{}, false, nil, &OpenTx{}); !errors.Is(err, errNoTxOwner) {
		t.Fatalf("BeginTx without its *sql.Tx: %v, want errNoTxOwner", err)
	}
	if err := pc.BeginTx(t.Context(), driver.TxOptions{}, false, &claim{}, nil); !errors.Is(err, errNoTxOwner) {
		t.Fatalf("BeginTx without a record: %v, want errNoTxOwner", err)
	}
	if pc.st.Tx != TxNone || srv.Stats().OpenTx != 0 {
		t.Errorf("after the refusals: %v, %d open on the server; want none", pc.st.Tx, srv.Stats().OpenTx)
	}
}

// TestEndTx: a *sql.Tx's transaction is recorded as it begins and as it
// ends; its commit is the *sql.Tx's to run; a rollback counts as its
// task's only while the task is ending.
func TestEndTx(t *testing.T) {
	for _, tc := range []struct {
		name           string
		commit, ending bool
		counted        int64
	}{
		{"commit", true, false, 0},
		{"commit as the task ends", true, true, 0},
		{"rollback", false, false, 0},
		{"rollback as the task ends", false, true, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pc, srv := fakeConn(t)
			c := &claim{ending: tc.ending}
			var open OpenTx
			if err := pc.BeginTx(t.Context(), driver.TxOptions{}, true, c, &open); err != nil {
				t.Fatal(err)
			}
			if pc.st.Tx != TxBegun || pc.st.TxOwner != &open {
				t.Fatalf("begun: %v, owner %p; want begun, owned by %p", pc.st.Tx, pc.st.TxOwner, &open)
			}
			if _, nested := open.Nested(); nested {
				t.Fatal("a transaction begun outside a raw one reports itself nested")
			}
			interrupted, err := pc.EndTx(t.Context(), &open, tc.commit)
			if err != nil || interrupted {
				t.Fatalf("EndTx: %v, interrupted %t", err, interrupted)
			}
			if want := map[bool]int{true: 1}[tc.commit]; c.commits != want {
				t.Errorf("CommitOn asked %d times, want %d", c.commits, want)
			}
			if pc.st.Tx != TxNone || pc.st.TxOwner != nil {
				t.Errorf("ended: %v, owner %p; want no transaction", pc.st.Tx, pc.st.TxOwner)
			}
			if auto, taskEnd, _, _, _ := pc.Env.Counts(); auto != tc.counted || taskEnd != tc.counted {
				t.Errorf("counted %d rollbacks, %d at a task's end; want %d", auto, taskEnd, tc.counted)
			}
			if s := srv.Stats(); s.OpenTx != 0 {
				t.Errorf("server: %d transactions open", s.OpenTx)
			}
		})
	}
}

// TestNestedTx: in a task whose raw transaction is open on pc, a *sql.Tx
// nests there as a savepoint; its end leaves the raw transaction open and
// closes the channel a BeginTx waiting to nest waits on.
func TestNestedTx(t *testing.T) {
	for _, commit := range []bool{true, false} {
		t.Run(map[bool]string{true: "commit", false: "rollback"}[commit], func(t *testing.T) {
			testNestedTx(t, commit)
		})
	}
	var none *OpenTx
	if _, nested := none.Nested(); nested {
		t.Error("a nil OpenTx reports itself nested")
	}
}

// testNestedTx is TestNestedTx for a nested *sql.Tx that commits, or not.
func testNestedTx(t *testing.T, commit bool) {
	pc, srv := fakeConn(t)
	if _, err := pc.Exec(t.Context(), "BEGIN", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := pc.Observe(t.Context(), "BEGIN", false); err != nil || pc.st.Tx != TxRaw {
		t.Fatalf("after BEGIN: %v, transaction %v", err, pc.st.Tx)
	}
	var open OpenTx
	if err := pc.BeginTx(t.Context(), driver.TxOptions{}, true, &claim{}, &open); err != nil {
		t.Fatal(err)
	}
	done, nested := open.Nested()
	if !nested || pc.st.TxOwner != &open {
		t.Fatalf("nested %t, owner %p: want nested, owned by %p", nested, pc.st.TxOwner, &open)
	}
	if _, err := pc.EndTx(t.Context(), &open, commit); err != nil {
		t.Fatalf("EndTx(commit %t): %v", commit, err)
	}
	select {
	case <-done:
	default:
		t.Errorf("EndTx(commit %t) left the nested transaction's channel open", commit)
	}
	if pc.st.Tx != TxRaw || pc.st.TxOwner != nil {
		t.Errorf("after the nested end (commit %t): %v, owner %p; want the raw transaction, unowned", commit, pc.st.Tx, pc.st.TxOwner)
	}
	if s := srv.Stats(); s.OpenTx != 1 {
		t.Errorf("server: %d transactions open, want the raw one", s.OpenTx)
	}
}

// sayChanged is a dialect conn whose session tracker says the statements
// of asks changed the session, and records what it was asked.
type sayChanged struct {
	dialects.Conn
	asked []string
}

func (c *sayChanged) ChangesSession(query string) bool {
	c.asked = append(c.asked, query)
	return true
}

// TestEndTxObserves: a *sql.Tx's end that succeeded asks whether the
// session changed during it, with COMMIT or ROLLBACK for the statement,
// and records the answer; one that failed, or that finds result sets open
// on the connection (the driver is mid-protocol), asks nothing.
func TestEndTxObserves(t *testing.T) {
	errCommit := errors.New("commit failed")
	for _, tc := range []struct {
		name      string
		commit    bool
		rows      bool
		commitErr error
		want      string // asked; "": nothing
	}{
		{"commit", true, false, nil, "COMMIT"},
		{"rollback", false, false, nil, "ROLLBACK"},
		{"rows open", true, true, nil, ""},
		{"failed", true, false, errCommit, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base, _ := fakeConn(t)
			dc := &sayChanged{Conn: base.DC}
			pc := newConn(base.Env, dc)
			var open OpenTx
			c := &claim{}
			if err := pc.BeginTx(t.Context(), driver.TxOptions{}, false, c, &open); err != nil {
				t.Fatal(err)
			}
			if tc.rows {
				pc.AddRows(1, true)
			}
			if tc.commitErr != nil {
				open.of = &failCommit{claim: c, err: tc.commitErr}
			}
			if _, err := pc.EndTx(t.Context(), &open, tc.commit); !errors.Is(err, tc.commitErr) {
				t.Fatalf("EndTx: %v, want %v", err, tc.commitErr)
			}
			asked := ""
			if len(dc.asked) > 0 {
				asked = dc.asked[0]
			}
			if len(dc.asked) > 1 || asked != tc.want {
				t.Errorf("asked %q, want %q", dc.asked, tc.want)
			}
			if dirty := pc.st.Session == SessionDirty; dirty != (tc.want != "") {
				t.Errorf("session %v after the end", pc.st.Session)
			}
			if tc.commitErr != nil {
				_ = open.drv.Rollback()
			}
		})
	}
}

// failCommit is a claim whose commit fails with err, running nothing.
type failCommit struct {
	*claim
	err error
}

func (c *failCommit) CommitOn(context.Context, *Conn, driver.Tx, uint64) error { return c.err }
