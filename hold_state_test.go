package pooldriver

import "testing"

// TestStep: a hold's next state for every state × event. A row lists the
// state each event leads to; "-" where the event cannot happen in that
// state (step refuses it, and the state stays).
func TestStep(t *testing.T) {
	const x = numHoldStates // refused
	events := [numHoldEvents]holdEvent{evOwn, evShare, evSoloRows, evRowsLocked, evTaskTx, evBind, evDrop, evLose, evEnd, evClose}
	table := [numHoldStates][numHoldEvents]holdState{
		//              own      share       soloRows      rowsLocked taskTx         bind        drop      lose      end       close
		holdNone:      {holdOwn, holdShared, x, x, x, x, x, x, x, holdClosed},
		holdOwn:       {x, holdShared, holdSoloRows, x, holdReachable, holdShared, holdNone, holdLost, holdNone, x},
		holdSoloRows:  {x, x, x, holdOwn, x, x, x, holdLost, holdNone, x},
		holdReachable: {x, x, x, x, holdReachable, holdShared, x, holdLost, holdNone, x},
		holdShared:    {x, x, x, x, holdShared, x, x, holdLost, holdNone, x},
		holdLost:      {x, x, x, x, x, x, x, holdLost, holdNone, x},
		holdClosed:    {x, x, x, x, x, x, x, x, x, x},
	}
	for s := range numHoldStates {
		for i, e := range events {
			want := table[s][i]
			got, ok := step(s, e)
			switch {
			case want == x && (ok || got != s):
				t.Errorf("step(%v, %v) = %v, %t; want refused, state kept", s, e, got, ok)
			case want != x && (!ok || got != want):
				t.Errorf("step(%v, %v) = %v, %t; want %v", s, e, got, ok, want)
			}
			// The table the statement path reads says the same.
			if tab := holdNext[s][e]; tab != want {
				t.Errorf("holdNext[%v][%v] = %v; want %v", s, e, tab, want)
			}
		}
	}
}

// TestStepInvariants: what holds for every state and event, whatever the
// table says. Only Close ends in closed, and nothing leaves it; a hold that
// has no connection can take one only by its first operation; a hold that
// has one keeps it until it ends; the states where nothing else can reach
// the connection are entered only from states where nothing else could.
func TestStepInvariants(t *testing.T) {
	for s := range numHoldStates {
		for e := range numHoldEvents {
			next, ok := step(s, e)
			if !ok {
				continue
			}
			if (next == holdClosed) != (e == evClose) {
				t.Errorf("step(%v, %v) = %v: only Close closes", s, e, next)
			}
			if s == holdClosed {
				t.Errorf("step(closed, %v) = %v: closed is final", e, next)
			}
			if !s.held() && next.held() && e != evOwn && e != evShare {
				t.Errorf("step(%v, %v) = %v: a connection taken other than by a first operation", s, e, next)
			}
			if s.held() && !next.held() && e != evEnd && e != evDrop {
				t.Errorf("step(%v, %v) = %v: a connection let go other than by the hold's end", s, e, next)
			}
			if next.alone() && s.held() && !s.alone() {
				t.Errorf("step(%v, %v) = %v: others could reach the connection, and still can", s, e, next)
			}
		}
	}
}
