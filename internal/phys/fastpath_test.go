package phys

import "testing"

// TestParksAsIs checks park's shortcut against decide over every
// combination of the state's values: where parksAsIs says yes and the
// connection is not stale, decide says fatePark, whatever the task's mode.
func TestParksAsIs(t *testing.T) {
	tk := &boundTask{}
	yes := 0
	for _, tx := range []TxState{TxNone, TxBegun, TxRaw} {
		for _, sess := range []sessionState{sessionClean, SessionDirty, SessionLost} {
			for _, use := range []struct{ holds, rows int }{{0, 0}, {1, 0}, {0, 1}, {2, 3}, {-1, 0}} {
				for _, bound := range []TaskBinding{nil, tk} {
					for _, mode := range []Mode{TransactionMode, SessionMode} {
						for i := range 16 {
							always, parkable, stale, rejected := i&1 != 0, i&2 != 0, i&4 != 0, i&8 != 0
							st := ConnState{Tx: tx, Session: sess, Holds: use.holds, Rows: use.rows, task: bound, mode: mode, resetAlways: always, parkable: parkable, Stale: stale, rejected: rejected}
							if !parksAsIs(&st) || stale {
								continue
							}
							yes++
							if f := decide(&st, mode); f != fatePark {
								t.Errorf("%v: parksAsIs, but decide says %v", st, f)
							}
						}
					}
				}
			}
		}
	}
	if yes == 0 {
		t.Error("parksAsIs never says yes")
	}
}
