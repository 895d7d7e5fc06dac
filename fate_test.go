package pooldriver

import "testing"

// TestDecide: the fate of a physical connection for every state it can be
// in when something lets go of it.
func TestDecide(t *testing.T) {
	tk := &task{}
	cases := []struct {
		name string
		st   connState
		mode Mode
		want fate
	}{
		{"clean, unbound", connState{}, TransactionMode, fateRelease},
		{"raw tx left open, unbound", connState{tx: txRaw}, TransactionMode, fateRollback},
		{"BeginTx tx left open, unbound", connState{tx: txBegun}, TransactionMode, fateRollback},
		{"dirty session, unbound", connState{session: sessionDirty}, TransactionMode, fateReset},
		{"raw tx and dirty session, unbound", connState{tx: txRaw, session: sessionDirty}, TransactionMode, fateRollbackReset},
		{"lost, unbound", connState{session: sessionLost}, TransactionMode, fateDestroy},
		{"lost with a tx, unbound", connState{tx: txRaw, session: sessionLost}, TransactionMode, fateDestroy},
		{"held", connState{holds: 1, tx: txRaw}, TransactionMode, fateInUse},
		{"held and lost", connState{holds: 2, session: sessionLost}, TransactionMode, fateInUse},
		{"rows open", connState{rows: 1}, TransactionMode, fateInUse},
		{"transaction task, clean", connState{task: tk}, TransactionMode, fateRelease},
		{"transaction task, raw tx", connState{task: tk, tx: txRaw}, TransactionMode, fateKeepForTask},
		{"transaction task, dirty", connState{task: tk, session: sessionDirty}, TransactionMode, fateKeepForTask},
		{"transaction task, lost", connState{task: tk, tx: txRaw, session: sessionLost}, TransactionMode, fateDestroy},
		{"session task, clean", connState{task: tk}, SessionMode, fateKeepForTask},
		{"session task, dirty", connState{task: tk, session: sessionDirty}, SessionMode, fateKeepForTask},
		{"session task, raw tx", connState{task: tk, tx: txRaw}, SessionMode, fateKeepForTask},
		{"session task, lost", connState{task: tk, session: sessionLost}, SessionMode, fateDestroy},
		{"session task, held", connState{task: tk, holds: 1}, SessionMode, fateInUse},

		// WithResetAlways: whatever was seen, reset before the pool has it.
		{"reset always, clean, unbound", connState{resetAlways: true}, TransactionMode, fateReset},
		{"reset always, raw tx, unbound", connState{resetAlways: true, tx: txRaw}, TransactionMode, fateRollbackReset},
		{"reset always, BeginTx tx, unbound", connState{resetAlways: true, tx: txBegun}, TransactionMode, fateRollbackReset},
		{"reset always, dirty, unbound", connState{resetAlways: true, session: sessionDirty}, TransactionMode, fateReset},
		{"reset always, lost", connState{resetAlways: true, session: sessionLost}, TransactionMode, fateDestroy},
		{"reset always, held", connState{resetAlways: true, holds: 1}, TransactionMode, fateInUse},
		{"reset always, rows open", connState{resetAlways: true, rows: 1}, TransactionMode, fateInUse},
		{"reset always, transaction task, clean", connState{resetAlways: true, task: tk}, TransactionMode, fateReset},
		{"reset always, transaction task, raw tx", connState{resetAlways: true, task: tk, tx: txRaw}, TransactionMode, fateKeepForTask},
		{"reset always, session task", connState{resetAlways: true, task: tk}, SessionMode, fateKeepForTask},

		// Parkable: nothing is told of the release, so a clean connection
		// is parked; anything to settle first is settled as without.
		{"parkable, clean, unbound", connState{parkable: true}, TransactionMode, fatePark},
		{"parkable, raw tx, unbound", connState{parkable: true, tx: txRaw}, TransactionMode, fateRollback},
		{"parkable, dirty, unbound", connState{parkable: true, session: sessionDirty}, TransactionMode, fateReset},
		{"parkable, reset always", connState{parkable: true, resetAlways: true}, TransactionMode, fateReset},
		{"parkable, held", connState{parkable: true, holds: 1}, TransactionMode, fateInUse},
		{"parkable, transaction task, clean", connState{parkable: true, task: tk}, TransactionMode, fatePark},

		// Stale (opened before Reset): closed when it would go back to
		// the pool, whatever it carries; a task keeps it until it ends.
		{"stale, clean, unbound", connState{stale: true}, TransactionMode, fateDestroy},
		{"stale, raw tx, unbound", connState{stale: true, tx: txRaw}, TransactionMode, fateDestroy},
		{"stale, parkable", connState{stale: true, parkable: true}, TransactionMode, fateDestroy},
		{"stale, held", connState{stale: true, holds: 1}, TransactionMode, fateInUse},
		{"stale, transaction task, raw tx", connState{stale: true, task: tk, tx: txRaw}, TransactionMode, fateKeepForTask},
		{"stale, transaction task, clean", connState{stale: true, task: tk}, TransactionMode, fateDestroy},
		{"stale, session task", connState{stale: true, task: tk}, SessionMode, fateKeepForTask},

		// Rejected (the AfterRelease hook said no, asked of a settled
		// connection): closed rather than released.
		{"rejected, clean, unbound", connState{rejected: true}, TransactionMode, fateDestroy},
		{"rejected and stale", connState{rejected: true, stale: true}, TransactionMode, fateDestroy},
		{"rejected, held", connState{rejected: true, holds: 1}, TransactionMode, fateInUse},
		{"rejected, session task", connState{rejected: true, task: tk}, SessionMode, fateKeepForTask},

		// What the share and the carried reset want: a way back to the
		// pool for a connection that goes back, nothing else.
		{"look due, clean", connState{lookDue: true}, TransactionMode, fateLook},
		{"look due, parkable", connState{lookDue: true, parkable: true}, TransactionMode, fateLook},
		{"look due, dirty", connState{lookDue: true, session: sessionDirty}, TransactionMode, fateReset},
		{"look due, raw tx", connState{lookDue: true, tx: txRaw}, TransactionMode, fateRollback},
		{"look due, held", connState{lookDue: true, holds: 1}, TransactionMode, fateInUse},
		{"look due, stale", connState{lookDue: true, stale: true}, TransactionMode, fateDestroy},
		{"look due, session task", connState{lookDue: true, task: tk}, SessionMode, fateKeepForTask},
		{"carries, dirty", connState{carries: true, session: sessionDirty}, TransactionMode, fateCarry},
		{"carries, reset always", connState{carries: true, resetAlways: true}, TransactionMode, fateCarry},
		{"carries, dirty, raw tx", connState{carries: true, session: sessionDirty, tx: txRaw}, TransactionMode, fateRollbackReset},
		{"carries, clean", connState{carries: true}, TransactionMode, fateRelease},
		{"carries, dirty, look due", connState{carries: true, session: sessionDirty, lookDue: true}, TransactionMode, fateCarry},
		{"carries, dirty, transaction task", connState{carries: true, session: sessionDirty, task: tk}, TransactionMode, fateKeepForTask},
		{"reset waits, clean", connState{carries: true, resetWaits: true}, TransactionMode, fateReleaseCarry},
		{"reset waits, parkable", connState{carries: true, resetWaits: true, parkable: true}, TransactionMode, fateReleaseCarry},
		{"reset waits, look due", connState{carries: true, resetWaits: true, lookDue: true}, TransactionMode, fateLook},
		{"reset waits, dirty again", connState{carries: true, resetWaits: true, session: sessionDirty}, TransactionMode, fateCarry},
		{"reset waits, lost", connState{carries: true, resetWaits: true, session: sessionLost}, TransactionMode, fateDestroy},
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
	tk := &task{}
	for _, tx := range []txState{txNone, txBegun, txRaw} {
		for _, sess := range []sessionState{sessionClean, sessionDirty, sessionLost} {
			for _, use := range []struct{ holds, rows int }{{0, 0}, {1, 0}, {0, 1}, {2, 3}} {
				for _, bound := range []taskBinding{nil, tk} {
					for _, mode := range []Mode{TransactionMode, SessionMode} {
						for i := range 128 {
							always, parkable, stale, rejected := i&1 != 0, i&2 != 0, i&4 != 0, i&8 != 0
							look, carries, waits := i&16 != 0, i&32 != 0, i&64 != 0
							st := connState{tx: tx, session: sess, holds: use.holds, rows: use.rows, task: bound, resetAlways: always, parkable: parkable, stale: stale, rejected: rejected,
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
							case !inUse && sess == sessionLost && f != fateDestroy:
								t.Errorf("%v: a lost connection is not destroyed (%v)", st, f)
							case f == fateKeepForTask && bound == nil:
								t.Errorf("%v: kept for no task", st)
							case (f == fateRelease || f == fatePark) && (tx != txNone || sess != sessionClean):
								t.Errorf("%v: released dirty", st)
							case (f == fateReset || f == fateRollback) && sess == sessionDirty && tx != txNone:
								t.Errorf("%v: %v leaves part of the state", st, f)
							case !inUse && bound != nil && mode == SessionMode && sess != sessionLost && f != fateKeepForTask:
								t.Errorf("%v: a session task's connection left its task (%v)", st, f)
							case always && (f == fateRelease || f == fateRollback):
								t.Errorf("%v: back to the pool without a reset (%v)", st, f)
							case always && f == fateKeepForTask && decide(&connState{tx: tx, session: sess, task: bound}, mode) != fateKeepForTask:
								t.Errorf("%v: resetAlways made the task keep its connection", st)
							case f == fatePark && (!parkable || tx != txNone || sess != sessionClean || always):
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
