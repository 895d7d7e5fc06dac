package pooldriver

import "testing"

var allOpKinds = [...]opKind{opExec, opStmt, opOpenRows, opCloseRows, opBegin, opEndTx, opPrepare, opPing, opRaw}

// allOpFacts calls fn with every opFacts there is.
func allOpFacts(fn func(opFacts)) {
	bools := [...]bool{false, true}
	for s := range numHoldStates {
		for _, k := range allOpKinds {
			for _, conn := range bools {
				for _, rows := range bools {
					for _, tx := range bools {
						for _, txEnded := range bools {
							for _, task := range bools {
								for _, taskErr := range bools {
									for _, mode := range [...]Mode{TransactionMode, SessionMode} {
										fn(opFacts{s, k, conn, rows, tx, txEnded, task, taskErr, mode})
									}
								}
							}
						}
					}
				}
			}
		}
	}
}

// TestPlanStart: the start of an operation for the states it is asked
// in, one row each.
func TestPlanStart(t *testing.T) {
	cases := []struct {
		name string
		f    opFacts
		want startPlan
	}{
		{"closed", opFacts{state: holdClosed}, startPlan{refuse: refuseClosed, pick: true, lock: true}},
		{"lost", opFacts{state: holdLost, conn: true}, startPlan{refuse: refuseLost, lock: true}},
		{"lost, tx claimed by its task", opFacts{state: holdLost, conn: true, tx: true, txEnded: true}, startPlan{refuse: refuseLost, lock: true}},
		{"tx claimed by its task", opFacts{state: holdOwn, conn: true, tx: true, txEnded: true}, startPlan{refuse: refuseTaskEnded, lock: true}},
		{"tx claimed, task misused", opFacts{state: holdReachable, conn: true, tx: true, txEnded: true, task: true, taskErr: true}, startPlan{refuse: refuseTaskEnded, lock: true}},
		{"task misused", opFacts{task: true, taskErr: true}, startPlan{refuse: refuseTaskErr, pick: true, lock: true}},
		{"first operation in a task", opFacts{task: true}, startPlan{pick: true, lock: true}},
		{"first operation, lock taken on the fast path", opFacts{state: holdOwn, conn: true}, startPlan{lock: true}},
		{"own", opFacts{state: holdOwn, conn: true, task: true}, startPlan{lock: true}},
		{"reachable", opFacts{state: holdReachable, conn: true, tx: true, task: true}, startPlan{lock: true}},
		{"shared", opFacts{state: holdShared, conn: true, task: true}, startPlan{checkShared: true, lock: true}},
		{"shared, own rows open", opFacts{state: holdShared, conn: true, rows: true, task: true}, startPlan{checkShared: true}},
		{"own rows open", opFacts{state: holdOwn, conn: true, rows: true}, startPlan{}},
		{"solo rows open", opFacts{state: holdSoloRows, conn: true, rows: true}, startPlan{lockRows: true}},
		{"solo rows open, in a task", opFacts{state: holdSoloRows, conn: true, rows: true, task: true}, startPlan{lockRows: true}},
	}
	for _, c := range cases {
		if got := planStart(c.f); got != c.want {
			t.Errorf("%s: planStart(%+v) = %+v, want %+v", c.name, c.f, got, c.want)
		}
	}
}

// TestPlanStartInvariants: what holds of the plan for every input.
func TestPlanStartInvariants(t *testing.T) {
	allOpFacts(func(f opFacts) {
		p := planStart(f)
		var want refusal
		switch {
		case f.state == holdClosed:
			want = refuseClosed
		case f.state == holdLost:
			want = refuseLost
		case f.tx && f.txEnded:
			want = refuseTaskEnded
		case f.task && f.taskErr:
			want = refuseTaskErr
		}
		if f.txEnded && !f.tx || f.taskErr && !f.task {
			return // cannot be: a claimed tx is a tx, a misused task a task
		}
		if p.refuse != want {
			t.Errorf("planStart(%+v).refuse = %v, want %v", f, p.refuse, want)
		}
		if p.pick == f.conn {
			t.Errorf("planStart(%+v): pick %t: a connection is picked exactly when the operation has none", f, p.pick)
		}
		if p.checkShared != (f.conn && f.state == holdShared) {
			t.Errorf("planStart(%+v): checkShared %t: the task's rules are checked on a shared connection only, and always", f, p.checkShared)
		}
		if p.lock == f.rows {
			t.Errorf("planStart(%+v): lock %t: an operation takes the lock exactly when no rows of its hold have it", f, p.lock)
		}
		if p.lockRows != (f.rows && f.state == holdSoloRows) {
			t.Errorf("planStart(%+v): lockRows %t: only solo rows lack the lock, and get it", f, p.lockRows)
		}
	})
}

// TestWatchesTaskState: only a transaction-mode task's operation outside a
// *sql.Tx, on a connection not bound to the task, can leave state the task
// must keep.
func TestWatchesTaskState(t *testing.T) {
	allOpFacts(func(f opFacts) {
		want := f.task && f.mode == TransactionMode && !f.tx && f.state != holdShared
		if got := watchesTaskState(f); got != want {
			t.Errorf("watchesTaskState(%+v) = %t, want %t", f, got, want)
		}
	})
}

// TestPlanObserve: what finish asks of the connection for every operation,
// with the hold's rows open or not. (A *sql.Tx's end asks as it ends:
// phys's TestEndTxObserves.)
func TestPlanObserve(t *testing.T) {
	// For each kind: the observation without rows open. With rows open,
	// nothing is ever asked.
	table := map[opKind]observation{
		opExec:      observeStatement,
		opStmt:      observeStatement,
		opOpenRows:  observeNothing,
		opCloseRows: observeRows,
		opBegin:     observeNothing,
		opEndTx:     observeNothing,
		opPrepare:   observeNothing,
		opPing:      observeNothing,
		opRaw:       observeStatement,
	}
	for _, k := range allOpKinds {
		if got, want := planObserve(k, false), table[k]; got != want {
			t.Errorf("planObserve(%d, no rows) = %d, want %d", k, got, want)
		}
		if got := planObserve(k, true); got != observeNothing {
			t.Errorf("planObserve(%d, rows open) = %d: nothing can be asked mid-protocol", k, got)
		}
	}
}
