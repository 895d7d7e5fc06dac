package pooldriver

import (
	"context"
	"errors"
	"time"

	"github.com/pooldriver/pooldriver/dialects"
	"github.com/pooldriver/pooldriver/internal/phys"
)

// A COMMIT whose reply was lost, on a dialect that learns its open
// transaction's id with the statements that run in it
// (dialects.CommitResolver): a *sql.Tx's Commit (tx.go) and a raw
// COMMIT of a transaction a raw BEGIN opened (hold.go's exec) note what
// the dialect knows before they send it (watchCommit), and where the
// connection broke under it (lost) ask the server what became of the
// transaction (resolveCommit): committed, not, or, only where the server
// cannot say, unknown.

// lostCommit is what a COMMIT knew before it was sent, and whether bytes
// of it left for the server once its connection broke. A value, kept on
// the stack of the COMMIT's caller: every commit makes one.
type lostCommit struct {
	ref     dialects.TxRef
	before  uint64 // the connection's bytes written before the COMMIT (see phys.Conn.Wrote)
	watched bool   // the dialect can ask what became of the transaction
	sent    bool   // bytes of the COMMIT left for the server
}

// watchCommit notes what pc's dialect learnt of its open transaction,
// just before its COMMIT is sent, pc having written before bytes; the
// zero lostCommit, not watched, where the dialect cannot ask what became
// of it.
func watchCommit(pc *phys.Conn, before uint64) lostCommit {
	cr, ok := pc.DC.(dialects.CommitResolver)
	if !ok {
		return lostCommit{}
	}
	return lostCommit{ref: cr.OpenTxRef(), before: before, watched: true}
}

// lost reports whether the COMMIT watched by lc lost its connection: err,
// its error, is the connection's end, and not ctx's, which bounds it.
// Small enough to be inlined: every statement asks, few COMMITs fail.
func (lc *lostCommit) lost(ctx context.Context, pc *phys.Conn, err error) bool {
	return lc.watched && err != nil && lc.broke(ctx, pc, err)
}

// broke is lost for a watched COMMIT that failed. Whether bytes of the
// COMMIT left is phys.Conn.Wrote's answer where the dialect counts them
// (dialects.WriteCounter); where it does not, the COMMIT counts as sent
// whatever the driver's error, so that the server is asked: "not
// committed" is said only of a COMMIT that provably never left.
func (lc *lostCommit) broke(ctx context.Context, pc *phys.Conn, err error) bool {
	if ctx.Err() != nil {
		return false
	}
	broke, sent := pc.Wrote(lc.before, err)
	_, counted := pc.DC.(dialects.WriteCounter)
	lc.sent = sent || !counted
	return broke
}

var (
	errNoTxID  = errors.New("pooldriver: the transaction's id was not learnt (a statement that may have written ran where the dialect does not ask it)")
	errTooOld  = errors.New("pooldriver: the server no longer keeps the transaction's status")
	errNoAsker = errors.New("pooldriver: the dialect cannot ask what became of a transaction")
	errReused  = errors.New("pooldriver: the server was promoted since, and reports the transaction's id committed, which may be a transaction of its own that took the id")
)

// resolveBound bounds the questions about a lost COMMIT where the
// context that bounds the COMMIT (a *sql.Tx's BeginTx's, a raw COMMIT's
// statement's) has no deadline: a failover that promotes a
// standby takes seconds, an unreachable server may never answer.
const resolveBound = 30 * time.Second

// resolveCommit turns the error of a COMMIT whose connection broke
// (cause) into what the server says became of the transaction: nil where
// it committed, ErrNotCommitted where it did not, ErrCommitUnknown where
// the server could not say within ctx, the COMMIT's. A transaction known
// to have no id wrote nothing: its COMMIT leaves what a rollback would, so
// it returns nil.
func (c *Connector) resolveCommit(ctx context.Context, lc *lostCommit, cause error) error {
	if !lc.sent {
		return &commitError{outcome: ErrNotCommitted, cause: cause}
	}
	if lc.ref.ID == 0 {
		if lc.ref.Clean {
			return nil
		}
		return &commitError{outcome: ErrCommitUnknown, cause: cause, why: errNoTxID}
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, resolveBound)
		defer cancel()
	}
	wait := 2 * time.Millisecond
	var why error
	for {
		out, err := c.askCommit(ctx, lc.ref)
		switch {
		case err != nil:
			why = err
			if errors.Is(err, ErrClosed) || errors.Is(err, ErrServerRefused) || errors.Is(err, errNoAsker) {
				return &commitError{outcome: ErrCommitUnknown, cause: cause, why: why}
			}
		case out == dialects.TxCommitted:
			return nil
		case out == dialects.TxAborted:
			return &commitError{outcome: ErrNotCommitted, cause: cause}
		case out == dialects.TxOutcomeUnknown:
			return &commitError{outcome: ErrCommitUnknown, cause: cause, why: errTooOld}
		case out == dialects.TxOtherHistory:
			return &commitError{outcome: ErrCommitUnknown, cause: cause, why: errReused}
		}
		// In progress (its server process is being ended), or the
		// question failed: again, after a pause.
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			if why == nil {
				why = ctx.Err()
			}
			return &commitError{outcome: ErrCommitUnknown, cause: cause, why: why}
		case <-t.C:
		}
		wait = min(2*wait, 100*time.Millisecond)
	}
}

// askCommit asks, on a new connection c opens as its pool would (the
// primary, as the DSN finds it: after a failover, the promoted standby),
// what became of the transaction ref. Not one of the pool's: the lost
// connection still counts against its size until the COMMIT returns, and
// a pool of one would wait for itself. The question's connection is
// closed after it.
func (c *Connector) askCommit(ctx context.Context, ref dialects.TxRef) (dialects.TxOutcome, error) {
	dc, err := c.dial(ctx)
	if err != nil {
		return dialects.TxOutcomeUnknown, err
	}
	defer func() { _ = dc.Close() }()
	cr, ok := dc.(dialects.CommitResolver)
	if !ok {
		return dialects.TxOutcomeUnknown, errNoAsker
	}
	return cr.TxOutcome(ctx, ref)
}
