package phys

import (
	"errors"
	"fmt"
	"testing"
)

// allConnFacts calls fn with every connFacts there is.
func allConnFacts(fn func(connFacts)) {
	bools := [...]bool{false, true}
	for _, bound := range bools {
		for _, lost := range bools {
			for _, dirty := range bools {
				for _, rows := range bools {
					// none, a *sql.Tx's, a raw one (a *sql.Tx may nest in it)
					for _, tx := range [...][2]bool{{false, false}, {true, true}, {true, false}} {
						for _, otherTx := range bools {
							fn(connFacts{bound, lost, dirty, rows, tx[0], tx[1], otherTx})
						}
					}
				}
			}
		}
	}
}

// TestPlanShare: the task's rules for a hold's first operation on the
// task's connection.
func TestPlanShare(t *testing.T) {
	tm, sm := TransactionMode, SessionMode
	const exec, begin = false, true
	cases := []struct {
		begin bool
		mode  Mode
		c     connFacts
		want  shareVerdict
	}{
		{exec, tm, connFacts{bound: true}, shareOK},
		{exec, sm, connFacts{bound: true}, shareOK},
		{exec, tm, connFacts{}, shareGone},
		{exec, tm, connFacts{bound: true, lost: true}, shareGone},
		{exec, tm, connFacts{bound: true, tx: true, sqlTx: true, otherTx: true}, shareOwnerBusy},
		{begin, tm, connFacts{bound: true, tx: true, sqlTx: true, otherTx: true}, shareOwnerBusy},
		{begin, tm, connFacts{bound: true, tx: true, sqlTx: true}, shareSessionBusy},
		{begin, tm, connFacts{bound: true}, shareSeparate},
		{begin, sm, connFacts{bound: true}, shareOK},
		{begin, tm, connFacts{bound: true, tx: true}, shareOK},
		{begin, tm, connFacts{bound: true, tx: true, rows: true}, shareBusyConn},
		{exec, tm, connFacts{bound: true, tx: true, rows: true}, shareBusyConn},
		{exec, sm, connFacts{bound: true, rows: true}, shareBusySession},
		{exec, tm, connFacts{bound: true, rows: true, dirty: true}, shareBusySession},
		{exec, tm, connFacts{bound: true, rows: true}, shareSeparate},
		{exec, tm, connFacts{bound: true, dirty: true}, shareOK},
	}
	for _, c := range cases {
		if got := planShare(c.begin, c.mode, c.c); got != c.want {
			t.Errorf("planShare(begin %t, %v, %+v) = %d, want %d", c.begin, c.mode, c.c, got, c.want)
		}
	}
	// Every input: a connection that is not the task's, or lost, is never
	// used; another hold's *sql.Tx is never joined; a connection busy with
	// rows is never joined; BeginTx never joins a *sql.Tx's transaction.
	for _, begin := range [...]bool{false, true} {
		for _, mode := range [...]Mode{tm, sm} {
			allConnFacts(func(c connFacts) {
				got := planShare(begin, mode, c)
				what := fmt.Sprintf("planShare(begin %t, %v, %+v) = %d", begin, mode, c, got)
				switch {
				case !c.bound || c.lost:
					if got != shareGone {
						t.Errorf("%s: not the task's to share", what)
					}
				case got == shareOK && (c.otherTx || c.rows || begin && c.sqlTx):
					t.Errorf("%s: joined a connection it must not", what)
				case got == shareSeparate && (mode == SessionMode || c.tx):
					t.Errorf("%s: left the task's session or transaction for another connection", what)
				case got == shareLost:
					t.Errorf("%s: a new hold has no connection to lose", what)
				}
			})
		}
	}
}

// TestPlanShared: the task's rules for a later operation of a hold on the
// task's connection it shares.
func TestPlanShared(t *testing.T) {
	const exec, begin = false, true
	cases := []struct {
		begin bool
		rows  bool
		c     connFacts
		want  shareVerdict
	}{
		{exec, false, connFacts{bound: true}, shareOK},
		{exec, false, connFacts{bound: true, lost: true, otherTx: true}, shareLost},
		{exec, true, connFacts{bound: true, lost: true}, shareLost},
		{exec, false, connFacts{bound: true, tx: true, sqlTx: true, otherTx: true}, shareOwnerBusy},
		{exec, true, connFacts{bound: true, tx: true, sqlTx: true, otherTx: true}, shareOwnerBusy},
		{begin, false, connFacts{bound: true, tx: true, sqlTx: true}, shareSessionBusy},
		{begin, true, connFacts{bound: true, tx: true, sqlTx: true}, shareSessionBusy},
		{exec, false, connFacts{bound: true, tx: true, sqlTx: true}, shareOK}, // its own *sql.Tx
		{begin, false, connFacts{bound: true, tx: true}, shareOK},
		{exec, false, connFacts{bound: true, rows: true}, shareBusySession},
		{exec, false, connFacts{bound: true, rows: true, tx: true}, shareBusyConn},
		{exec, true, connFacts{bound: true, rows: true, tx: true}, shareOK}, // its own rows
		{exec, true, connFacts{bound: true, rows: true}, shareOK},
	}
	for _, c := range cases {
		if got := planShared(c.begin, c.rows, c.c); got != c.want {
			t.Errorf("planShared(begin %t, rows %t, %+v) = %d, want %d", c.begin, c.rows, c.c, got, c.want)
		}
	}
	// Every input: a lost connection always fails the operation; with the
	// hold's own rows open the only verdicts are those that do not wait.
	for _, begin := range [...]bool{false, true} {
		for _, rows := range [...]bool{false, true} {
			allConnFacts(func(c connFacts) {
				got := planShared(begin, rows, c)
				if c.lost && got != shareLost {
					t.Errorf("planShared(begin %t, %t, %+v) = %d: a lost connection runs nothing", begin, rows, c, got)
				}
				if rows && (got == shareBusyConn || got == shareBusySession) {
					t.Errorf("planShared(begin %t, %t, %+v) = %d: waited for its own rows", begin, rows, c, got)
				}
				if got == shareGone || got == shareSeparate {
					t.Errorf("planShared(begin %t, %t, %+v) = %d: a hold keeps its connection", begin, rows, c, got)
				}
			})
		}
	}
}

// TestFactsOf: what the task's rules read of a connection's state, for
// every transaction and session state and owner.
func TestFactsOf(t *testing.T) {
	own, other := &OpenTx{}, &OpenTx{}
	for _, tx := range []TxState{TxNone, TxBegun, TxRaw} {
		for _, sess := range []sessionState{sessionClean, SessionDirty, SessionLost} {
			for _, rows := range []int{0, 1, 2} {
				for _, owner := range []*OpenTx{nil, own, other} {
					st := ConnState{Tx: tx, Session: sess, Rows: rows, TxOwner: owner}
					want := connFacts{
						lost: sess == SessionLost, dirty: sess == SessionDirty, rows: rows > 0,
						tx: tx != TxNone, sqlTx: tx == TxBegun, otherTx: owner == other,
					}
					if got := factsOf(&st, own); got != want {
						t.Errorf("factsOf(%v, own) = %+v, want %+v", st, got, want)
					}
					if got, want := factsOf(&st, nil).otherTx, owner != nil; got != want {
						t.Errorf("factsOf(%v, nil).otherTx = %t, want %t: without a *sql.Tx of its own, every one is another's", st, got, want)
					}
				}
			}
		}
	}
}

// aTask is a task of the tests that may be told from another (boundTask's
// pointers, to a zero-sized type, need not differ).
type aTask struct{ n int }

func (*aTask) UnbindConn(*Conn)      {}
func (*aTask) LostConn(*Conn, error) {}

// binder is a TaskBinder of the tests: the task it binds, its mode, and
// whether it takes the connection.
type binder struct {
	t             TaskBinding
	session, take bool
	asked         int
}

func (b *binder) BindConn(*Conn) (TaskBinding, bool, bool) {
	b.asked++
	return b.t, b.session, b.take
}

// TestJoinCheckBind: what Bind, Join and Check change on a connection
// and return, for the verdicts of each kind.
func TestJoinCheckBind(t *testing.T) {
	tk, other := &aTask{1}, &aTask{2}
	pc := newConn(&Env{}, openFake(t))
	pc.st.Holds = 1
	if pc.Bind(&binder{t: tk, take: false}) || pc.st.task != nil {
		t.Fatalf("Bind refused by the task bound pc (%v)", pc.st)
	}
	b := &binder{t: tk, session: true, take: true}
	if !pc.Bind(b) || b.asked != 1 || pc.st.task != tk || pc.st.mode != SessionMode {
		t.Fatalf("Bind: %v, asked %d", pc.st, b.asked)
	}
	if joined, separate, owner, busy := pc.Join(other, false, true); joined || separate || owner != nil || busy != nil || pc.st.Holds != 1 {
		t.Errorf("Join of another task: %t %t %v %v, holds %d: want nothing", joined, separate, owner, busy, pc.st.Holds)
	}
	if joined, _, _, _ := pc.Join(tk, false, true); !joined || pc.st.Holds != 2 {
		t.Errorf("Join: joined %t, holds %d; want a second hold", joined, pc.st.Holds)
	}
	pc.st.Rows = 1
	if joined, _, owner, busy := pc.Join(tk, false, true); joined || owner != nil || !errors.Is(busy, ErrSessionBusy) || pc.st.Holds != 2 {
		t.Errorf("Join beside rows in a session task: %t %v %v, holds %d; want busy with ErrSessionBusy", joined, owner, busy, pc.st.Holds)
	}
	if lost, owner, busy := pc.Check(false, false, nil); lost || owner != nil || !errors.Is(busy, ErrSessionBusy) {
		t.Errorf("Check beside rows: %t %v %v; want busy with ErrSessionBusy", lost, owner, busy)
	}
	if lost, owner, busy := pc.Check(false, true, nil); lost || owner != nil || busy != nil {
		t.Errorf("Check with the hold's own rows: %t %v %v; want nothing", lost, owner, busy)
	}
	pc.st.Tx = TxRaw
	if _, _, _, busy := pc.Join(tk, false, false); !errors.Is(busy, ErrConnBusy) {
		t.Errorf("Join beside rows in a transaction: %v; want ErrConnBusy", busy)
	}
	pc.st.Rows = 0
	open, mine := &OpenTx{}, &OpenTx{}
	pc.st.Tx, pc.st.TxOwner = TxBegun, open
	if joined, _, owner, busy := pc.Join(tk, false, false); joined || owner != open || busy != nil {
		t.Errorf("Join beside another *sql.Tx: %t %v %v; want its owner", joined, owner, busy)
	}
	if lost, owner, busy := pc.Check(false, false, mine); lost || owner != open || busy != nil {
		t.Errorf("Check beside another *sql.Tx: %t %v %v; want its owner", lost, owner, busy)
	}
	if lost, owner, busy := pc.Check(false, false, open); lost || owner != nil || busy != nil {
		t.Errorf("Check of the *sql.Tx's own statement: %t %v %v; want nothing", lost, owner, busy)
	}
	if lost, owner, busy := pc.Check(true, false, open); lost || owner != open || busy != nil {
		t.Errorf("Check of BeginTx inside a *sql.Tx: %t %v %v; want its owner", lost, owner, busy)
	}
	pc.st.Tx, pc.st.TxOwner = TxNone, nil
	if joined, separate, _, _ := pc.Join(tk, true, false); joined || !separate {
		t.Errorf("Join of BeginTx with nothing to nest in: joined %t, separate %t; want separate", joined, separate)
	}
	pc.st.Session = SessionLost
	if lost, _, _ := pc.Check(false, true, nil); !lost {
		t.Error("Check on a lost connection: not lost")
	}
	if joined, separate, owner, busy := pc.Join(tk, false, true); joined || separate || owner != nil || busy != nil {
		t.Errorf("Join of a lost connection: %t %t %v %v; want nothing (look again)", joined, separate, owner, busy)
	}
}
