package dialects

import "context"

// A COMMIT whose reply is lost (the connection broke after the COMMIT was
// sent) leaves its outcome to be asked of the server. A dialect whose
// server can say what became of a transaction by its id (PostgreSQL's
// pg_xact_status) offers what follows: the id, learnt while the
// transaction runs, and the question, asked on another connection.

// TxRef is what a Conn learnt of the transaction open on it before its
// COMMIT was sent.
type TxRef struct {
	// ID is the server's id of the transaction; 0: none was learnt.
	ID uint64
	// Backend is the server process that runs it (PostgreSQL's pid), for
	// ending it where it is still in progress.
	Backend uint32
	// Timeline is the history of the server the id was learnt on
	// (PostgreSQL's timeline); 0: not known. A server promoted since
	// (another timeline) may have given the same id to a transaction of
	// its own.
	Timeline uint32
	// Clean: certain that the transaction has no id, so it wrote nothing
	// and its COMMIT and a rollback leave the same. False wherever a
	// statement ran since the last look at the id (one that the dialect
	// did not ask the id with, whatever it proved of its words).
	Clean bool
}

// TxOutcome is what became of a transaction, as its server says.
type TxOutcome int

const (
	TxOutcomeUnknown TxOutcome = iota // the server cannot say: the id is older than it keeps
	TxCommitted                       // committed
	TxAborted                         // rolled back, or never committed where the server (a promoted standby) has its history
	TxInProgress                      // still running: its server process has not ended it
	// TxOtherHistory: the server answering was promoted since the id was
	// learnt, and reports a transaction of that id committed: its own,
	// perhaps, which took the id again, where the transaction never
	// reached it.
	TxOtherHistory
)

// CommitResolver is implemented by a Conn that learns the id of its open
// transaction without a round trip of its own (with the statements that
// run in it) and can ask a server what became of such an id.
type CommitResolver interface {
	// OpenTxRef reports what the Conn learnt of its open transaction;
	// pooldriver calls it just before it sends the COMMIT.
	OpenTxRef() TxRef
	// TxOutcome asks the server this Conn, a connection other than the
	// transaction's, reaches what became of ref. Where ref is still in
	// progress it also ends ref's server process if that process still
	// runs ref (and the login role may), so that asking again soon gets
	// a final answer. An error says nothing of ref: the question did not
	// get its answer.
	TxOutcome(ctx context.Context, ref TxRef) (TxOutcome, error)
}
