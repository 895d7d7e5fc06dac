package phys

import "testing"

// TestDecide: the fate of a physical connection for every state it can be
// in when something lets go of it.
func TestDecide(t *testing.T) {
	tk := &boundTask{}
	cases := []struct {
		name string
		st   ConnState
		mode Mode
		want Fate
	}{
		{"clean, unbound", ConnState{}, TransactionMode, fateRelease},
		{"raw tx left open, unbound", ConnState{Tx: TxRaw}, TransactionMode, fateRollback},
		{"BeginTx tx left open, unbound", ConnState{Tx: TxBegun}, TransactionMode, fateRollback},
		{"dirty session, unbound", ConnState{Session: SessionDirty}, TransactionMode, fateReset},
		{"raw tx and dirty session, unbound", ConnState{Tx: TxRaw, Session: SessionDirty}, TransactionMode, fateRollbackReset},
		{"lost, unbound", ConnState{Session: SessionLost}, TransactionMode, fateDestroy},
		{"lost with a tx, unbound", ConnState{Tx: TxRaw, Session: SessionLost}, TransactionMode, fateDestroy},
		{"held", ConnState{Holds: 1, Tx: TxRaw}, TransactionMode, fateInUse},
		{"held and lost", ConnState{Holds: 2, Session: SessionLost}, TransactionMode, fateInUse},
		{"rows open", ConnState{Rows: 1}, TransactionMode, fateInUse},
		{"transaction task, clean", ConnState{task: tk}, TransactionMode, fateRelease},
		{"transaction task, raw tx", ConnState{task: tk, Tx: TxRaw}, TransactionMode, fateKeepForTask},
		{"transaction task, dirty", ConnState{task: tk, Session: SessionDirty}, TransactionMode, fateKeepForTask},
		{"transaction task, lost", ConnState{task: tk, Tx: TxRaw, Session: SessionLost}, TransactionMode, fateDestroy},
		{"session task, clean", ConnState{task: tk}, SessionMode, fateKeepForTask},
		{"session task, dirty", ConnState{task: tk, Session: SessionDirty}, SessionMode, fateKeepForTask},
		{"session task, raw tx", ConnState{task: tk, Tx: TxRaw}, SessionMode, fateKeepForTask},
		{"session task, lost", ConnState{task: tk, Session: SessionLost}, SessionMode, fateDestroy},
		{"session task, held", ConnState{task: tk, Holds: 1}, SessionMode, fateInUse},

		// WithResetAlways: whatever was seen, reset before the pool has it.
		{"reset always, clean, unbound", ConnState{resetAlways: true}, TransactionMode, fateReset},
		{"reset always, raw tx, unbound", ConnState{resetAlways: true, Tx: TxRaw}, TransactionMode, fateRollbackReset},
		{"reset always, BeginTx tx, unbound", ConnState{resetAlways: true, Tx: TxBegun}, TransactionMode, fateRollbackReset},
		{"reset always, dirty, unbound", ConnState{resetAlways: true, Session: SessionDirty}, TransactionMode, fateReset},
		{"reset always, lost", ConnState{resetAlways: true, Session: SessionLost}, TransactionMode, fateDestroy},
		{"reset always, held", ConnState{resetAlways: true, Holds: 1}, TransactionMode, fateInUse},
		{"reset always, rows open", ConnState{resetAlways: true, Rows: 1}, TransactionMode, fateInUse},
		{"reset always, transaction task, clean", ConnState{resetAlways: true, task: tk}, TransactionMode, fateReset},
		{"reset always, transaction task, raw tx", ConnState{resetAlways: true, task: tk, Tx: TxRaw}, TransactionMode, fateKeepForTask},
		{"reset always, session task", ConnState{resetAlways: true, task: tk}, SessionMode, fateKeepForTask},

		// Parkable: nothing is told of the release, so a clean connection
		// is parked; anything to settle first is settled as without.
		{"parkable, clean, unbound", ConnState{parkable: true}, TransactionMode, fatePark},
		{"parkable, raw tx, unbound", ConnState{parkable: true, Tx: TxRaw}, TransactionMode, fateRollback},
		{"parkable, dirty, unbound", ConnState{parkable: true, Session: SessionDirty}, TransactionMode, fateReset},
		{"parkable, reset always", ConnState{parkable: true, resetAlways: true}, TransactionMode, fateReset},
		{"parkable, held", ConnState{parkable: true, Holds: 1}, TransactionMode, fateInUse},
		{"parkable, transaction task, clean", ConnState{parkable: true, task: tk}, TransactionMode, fatePark},

		// Stale (opened before Reset): closed when it would go back to
		// the pool, whatever it carries; a task keeps it until it ends.
		{"stale, clean, unbound", ConnState{Stale: true}, TransactionMode, fateDestroy},
		{"stale, raw tx, unbound", ConnState{Stale: true, Tx: TxRaw}, TransactionMode, fateDestroy},
		{"stale, parkable", ConnState{Stale: true, parkable: true}, TransactionMode, fateDestroy},
		{"stale, held", ConnState{Stale: true, Holds: 1}, TransactionMode, fateInUse},
		{"stale, transaction task, raw tx", ConnState{Stale: true, task: tk, Tx: TxRaw}, TransactionMode, fateKeepForTask},
		{"stale, transaction task, clean", ConnState{Stale: true, task: tk}, TransactionMode, fateDestroy},
		{"stale, session task", ConnState{Stale: true, task: tk}, SessionMode, fateKeepForTask},

		// Rejected (the AfterRelease hook said no, asked of a settled
		// connection): closed rather than released.
		{"rejected, clean, unbound", ConnState{rejected: true}, TransactionMode, fateDestroy},
		{"rejected and stale", ConnState{rejected: true, Stale: true}, TransactionMode, fateDestroy},
		{"rejected, held", ConnState{rejected: true, Holds: 1}, TransactionMode, fateInUse},
		{"rejected, session task", ConnState{rejected: true, task: tk}, SessionMode, fateKeepForTask},

		// What the share and the carried reset want: a way back to the
		// pool for a connection that goes back, nothing else.
		{"look due, clean", ConnState{lookDue: true}, TransactionMode, fateLook},
		{"look due, parkable", ConnState{lookDue: true, parkable: true}, TransactionMode, fateLook},
		{"look due, dirty", ConnState{lookDue: true, Session: SessionDirty}, TransactionMode, fateReset},
		{"look due, raw tx", ConnState{lookDue: true, Tx: TxRaw}, TransactionMode, fateRollback},
		{"look due, held", ConnState{lookDue: true, Holds: 1}, TransactionMode, fateInUse},
		{"look due, stale", ConnState{lookDue: true, Stale: true}, TransactionMode, fateDestroy},
		{"look due, session task", ConnState{lookDue: true, task: tk}, SessionMode, fateKeepForTask},
		{"carries, dirty", ConnState{carries: true, Session: SessionDirty}, TransactionMode, fateCarry},
		{"carries, reset always", ConnState{carries: true, resetAlways: true}, TransactionMode, fateCarry},
		{"carries, dirty, raw tx", ConnState{carries: true, Session: SessionDirty, Tx: TxRaw}, TransactionMode, fateRollbackReset},
		{"carries, clean", ConnState{carries: true}, TransactionMode, fateRelease},
		{"carries, dirty, look due", ConnState{carries: true, Session: SessionDirty, lookDue: true}, TransactionMode, fateCarry},
		{"carries, dirty, transaction task", ConnState{carries: true, Session: SessionDirty, task: tk}, TransactionMode, fateKeepForTask},
		{"reset waits, clean", ConnState{carries: true, resetWaits: true}, TransactionMode, fateReleaseCarry},
		{"reset waits, parkable", ConnState{carries: true, resetWaits: true, parkable: true}, TransactionMode, fateReleaseCarry},
		{"reset waits, look due", ConnState{carries: true, resetWaits: true, lookDue: true}, TransactionMode, fateLook},
		{"reset waits, dirty again", ConnState{carries: true, resetWaits: true, Session: SessionDirty}, TransactionMode, fateCarry},
		{"reset waits, lost", ConnState{carries: true, resetWaits: true, Session: SessionLost}, TransactionMode, fateDestroy},
	}
	for _, c := range cases {
		if got := decide(&c.st, c.mode); got != c.want {
			t.Errorf("%s (%v, %v): %v, want %v", c.name, c.st, c.mode, got, c.want)
		}
	}
}

// TestDecideInvariants checks every combination of the state's values
// against the rules that must hold whatever else is true.
func TestDecideInvariants(t *testing.T) {
	tk := &boundTask{}
	for _, tx := range []TxState{TxNone, TxBegun, TxRaw} {
		for _, sess := range []sessionState{sessionClean, SessionDirty, SessionLost} {
			for _, use := range []struct{ holds, rows int }{{0, 0}, {1, 0}, {0, 1}, {2, 3}} {
				for _, bound := range []TaskBinding{nil, tk} {
					for _, mode := range []Mode{TransactionMode, SessionMode} {
						for i := range 128 {
							always, parkable, stale, rejected := i&1 != 0, i&2 != 0, i&4 != 0, i&8 != 0
							look, carries, waits := i&16 != 0, i&32 != 0, i&64 != 0
							st := ConnState{Tx: tx, Session: sess, Holds: use.holds, Rows: use.rows, task: bound, resetAlways: always, parkable: parkable, Stale: stale, rejected: rejected,
								lookDue: look, carries: carries, resetWaits: waits}
							f := decide(&st, mode)
							plain := st
							plain.lookDue, plain.carries, plain.resetWaits = false, false, false
							without := decide(&plain, mode)
							inUse := use.holds > 0 || use.rows > 0
							switch {
							case f != without && without != fateRelease && without != fatePark && without != fateReset:
								t.Errorf("%v: %v where the state alone says %v: only a way back to the pool may change", st, f, without)
							case (f == fateLook || f == fateReleaseCarry) && without != fateRelease && without != fatePark:
								t.Errorf("%v: %v for a connection that is not clean (%v)", st, f, without)
							case f == fateLook && !look, f == fateCarry && !carries, f == fateReleaseCarry && !waits:
								t.Errorf("%v: %v that nothing asked for", st, f)
							case f == fateCarry && without != fateReset:
								t.Errorf("%v: a reset carried where %v was due", st, without)
							case without == fateReset && f != fateReset && f != fateCarry:
								t.Errorf("%v: a reset due, and %v", st, f)
							case inUse && f != fateInUse:
								t.Errorf("%v: %v while in use", st, f)
							case !inUse && f == fateInUse:
								t.Errorf("%v: in use while nothing uses it", st)
							case !inUse && sess == SessionLost && f != fateDestroy:
								t.Errorf("%v: a lost connection is not destroyed (%v)", st, f)
							case f == fateKeepForTask && bound == nil:
								t.Errorf("%v: kept for no task", st)
							case (f == fateRelease || f == fatePark) && (tx != TxNone || sess != sessionClean):
								t.Errorf("%v: released dirty", st)
							case (f == fateReset || f == fateRollback) && sess == SessionDirty && tx != TxNone:
								t.Errorf("%v: %v leaves part of the state", st, f)
							case !inUse && bound != nil && mode == SessionMode && sess != SessionLost && f != fateKeepForTask:
								t.Errorf("%v: a session task's connection left its task (%v)", st, f)
							case always && (f == fateRelease || f == fateRollback):
								t.Errorf("%v: back to the pool without a reset (%v)", st, f)
							case always && f == fateKeepForTask && decide(&ConnState{Tx: tx, Session: sess, task: bound}, mode) != fateKeepForTask:
								t.Errorf("%v: resetAlways made the task keep its connection", st)
							case f == fatePark && (!parkable || tx != TxNone || sess != sessionClean || always):
								t.Errorf("%v: parked without being parkable and clean", st)
							case stale && (f == fateRelease || f == fatePark || f == fateRollback || f == fateReset || f == fateRollbackReset):
								t.Errorf("%v: stale, back to the pool (%v)", st, f)
							case rejected && (f == fateRelease || f == fatePark || f == fateRollback || f == fateReset || f == fateRollbackReset):
								t.Errorf("%v: rejected by the hook, back to the pool (%v)", st, f)
							}
						}
					}
				}
			}
		}
	}
}

// boundTask is a task a connection is bound to, for the deciders, which
// ask only whether there is one.
type boundTask struct{}

func (*boundTask) UnbindConn(*Conn)      {}
func (*boundTask) LostConn(*Conn, error) {}
