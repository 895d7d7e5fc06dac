package phys

import (
	"context"
	"time"
)

// A session reset carried with the next statement. Where the
// dialect can (dialects.ResetCarrier: PostgreSQL's direct path) and no
// other connection is to be had without waiting (pool.Resource.Spare), a
// hold that lets go of a connection whose session must be reset hands the
// reset to the dialect and gives the connection straight back to the
// pool: the reset goes out in the same write as the next statement run
// there, whoever runs it, and nobody waits for a connection while it
// resets. Where another connection is to be had, the reset runs off the
// callers' path as before, which costs a caller less: the reset's server
// work overlaps the caller's next statement, on another connection
// (docs/design.md has the numbers of both).
//
// What pooldriver runs on the connection by other means than the
// dialect's statements (Raw) runs the reset on its own first, and so does
// a connection that sits idle carryIdleBound: nothing dirty stays in the
// pool longer (an advisory lock a function took, say, is released within
// that bound).

// carryIdleBound is how long a connection with a carried reset may sit
// idle before the reset runs on its own, off the callers' paths.
const carryIdleBound = 100 * time.Millisecond

// carry hands pc's session reset to the dialect, if it takes it. Nobody
// else can reach pc (settle).
func (pc *Conn) carry() bool {
	_ = pc.sem.Lock(context.Background()) // free: nobody else can reach pc
	ok := pc.carrier.CarryReset(pc.carryDone)
	pc.sem.Unlock()
	if ok {
		pc.mu.Lock()
		pc.st.Session = sessionClean // as it will be before anything else runs there
		pc.mu.Unlock()
		// Counted now, as Stats has it once a hold let go (one that
		// fails replaces the connection).
		pc.Env.stats.sessionResets.Add(1)
	}
	return ok
}

// carriedDone counts and logs a carried reset once it ran (the dialect
// calls it): carried, in the write of a statement, or on its own.
func (pc *Conn) carriedDone(carried bool) {
	if carried {
		pc.Env.stats.carriedResets.Add(1)
	} else {
		pc.Env.stats.separateResets.Add(1)
	}
	pc.Env.debug("session reset")
}

// resetWhenIdle runs pc's carried reset on its own if pc is still idle,
// with the reset still waiting, carryIdleBound from now.
func (pc *Conn) resetWhenIdle() {
	pc.mu.Lock() // pc is back in the pool: another hold may have it already
	defer pc.mu.Unlock()
	if pc.idleReset == nil {
		pc.idleReset = time.AfterFunc(carryIdleBound, pc.resetIdle)
		return
	}
	pc.idleReset.Reset(carryIdleBound)
}

// resetIdle is resetWhenIdle's: the pool lends pc to it if it is idle.
func (pc *Conn) resetIdle() {
	pc.res.Tend(func(pc *Conn) error {
		_ = pc.sem.Lock(context.Background()) // free: the pool lent it to nobody else
		defer pc.sem.Unlock()
		if err := pc.resetCarriedNow(); err != nil {
			return err
		}
		if pc.Stale() {
			pc.closeReason = closeResetAll
			return ErrStale
		}
		return nil
	})
}

// resetCarriedNow runs pc's carried reset on its own, if one waits; on
// failure pc is lost. The caller holds sem.
func (pc *Conn) resetCarriedNow() error {
	if pc.carrier == nil || !pc.carrier.ResetPending() {
		return nil
	}
	if err := pc.resetSession(); err != nil {
		pc.closeReason = closeReset
		pc.Env.warn("session reset failed; the connection will be closed", err)
		return err
	}
	pc.carriedDone(false)
	return nil
}
