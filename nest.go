package pooldriver

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"time"

	"github.com/pooldriver/pooldriver/dialects"
	"github.com/pooldriver/pooldriver/internal/phys"
)

// A *sql.Tx begun in a task whose connection has a raw transaction open (a
// statement of the task ran BEGIN) nests inside that transaction instead of
// taking a connection of its own: it is an ORM's unit of work inside the
// task's transaction (GORM wraps every write in a *sql.Tx, bun's RunInTx,
// ent's Tx and sqlx's Beginx begin one), which must see the task's
// uncommitted rows and locks and be undone by the task's ROLLBACK. Its
// begin is a savepoint, its Commit releases it, its Rollback rolls back to
// it; the outer COMMIT or ROLLBACK, or the task's end, decides for all of
// it. One *sql.Tx nests at a time on a connection: a second waits for the
// first to end (nestBusyError).

// savepointName is the savepoint of the nested *sql.Tx. One name serves
// every nesting: one is open at a time on a connection, and a savepoint
// of the same name as an older one hides it (PostgreSQL, SQLite) or
// replaces it (MySQL), either of which leaves the newest to release or to
// roll back to. The name is an identifier every SQL database accepts.
const savepointName = "pooldriver_nested_tx"

// savepointTx is the driver.Tx of a nested *sql.Tx: its transaction is a
// savepoint inside the task's raw transaction on pc.
type savepointTx struct {
	pc   *phys.Conn
	ctx  context.Context // bounds Commit and Rollback; set by tx.endOn
	done chan struct{}   // closed when it ends, for a BeginTx waiting to nest
}

var _ driver.Tx = (*savepointTx)(nil)

// beginNested nests a *sql.Tx in the raw transaction open on pc: after
// checking that opts can hold there, it takes the savepoint. The caller
// holds pc's lock.
func beginNested(ctx context.Context, pc *phys.Conn, opts driver.TxOptions) (*savepointTx, error) {
	if err := checkNestedOptions(ctx, pc, opts); err != nil {
		return nil, err
	}
	if _, err := pc.Exec(ctx, "SAVEPOINT "+savepointName, nil); err != nil {
		return nil, fmt.Errorf("pooldriver: nesting the *sql.Tx in the task's open transaction (SAVEPOINT): %w", err)
	}
	return &savepointTx{pc: pc, ctx: ctx, done: make(chan struct{})}, nil
}

// Commit releases the savepoint: its work joins the task's transaction.
func (s *savepointTx) Commit() error { return s.run(nestedEnd(true)) }

// Rollback undoes the nested transaction's work, rolling back to the
// savepoint; the task's transaction goes on.
func (s *savepointTx) Rollback() error { return s.run(nestedEnd(false)) }

// nestedEnd is the statement that commits or rolls back a nested *sql.Tx.
func nestedEnd(commit bool) string {
	if commit {
		return "RELEASE SAVEPOINT " + savepointName
	}
	return "ROLLBACK TO SAVEPOINT " + savepointName
}

func (s *savepointTx) run(query string) error {
	if _, err := s.pc.Exec(s.ctx, query, nil); err != nil {
		return fmt.Errorf("pooldriver: ending the *sql.Tx nested in the task's transaction (%s): %w", query, err)
	}
	return nil
}

// nestedIn returns the savepointTx of owner, the transaction open on a
// connection, when it is a nested *sql.Tx.
func nestedIn(owner *phys.OpenTx) (*savepointTx, bool) {
	if owner == nil {
		return nil, false
	}
	s, ok := owner.Drv.(*savepointTx)
	return s, ok
}

// checkNestedOptions refuses options a savepoint cannot honour: an
// isolation level or a read-only access mode other than the open
// transaction's. Without options there is nothing to check, and no round
// trip.
func checkNestedOptions(ctx context.Context, pc *phys.Conn, opts driver.TxOptions) error {
	if opts.Isolation == driver.IsolationLevel(sql.LevelDefault) && !opts.ReadOnly {
		return nil
	}
	want := "read-only"
	if opts.Isolation != driver.IsolationLevel(sql.LevelDefault) {
		want = sql.IsolationLevel(opts.Isolation).String()
		if opts.ReadOnly {
			want += ", read-only"
		}
	}
	in, ok := pc.DC.(dialects.OpenTxInspector)
	if !ok {
		return fmt.Errorf("pooldriver: a *sql.Tx nested in the task's open transaction cannot be %s: this database cannot tell the open transaction's isolation level and access mode; begin it without TxOptions", want)
	}
	level, readOnly, err := in.OpenTx(ctx)
	if err != nil {
		return err
	}
	if opts.Isolation != driver.IsolationLevel(sql.LevelDefault) && opts.Isolation != level || opts.ReadOnly && !readOnly {
		return fmt.Errorf("pooldriver: a *sql.Tx nested in the task's open transaction cannot be %s: the open transaction is %s", want, describeTx(level, readOnly))
	}
	return nil
}

// describeTx names an isolation level and access mode for an error.
func describeTx(level driver.IsolationLevel, readOnly bool) string {
	mode := "read-write"
	if readOnly {
		mode = "read-only"
	}
	if level == driver.IsolationLevel(sql.LevelDefault) {
		return mode
	}
	return sql.IsolationLevel(level).String() + ", " + mode
}

// nestPoll is how often a BeginTx waiting to nest looks again, in case the
// nested transaction it waits for ended without closing done (its task's
// end rolled everything back).
const nestPoll = 50 * time.Millisecond

// nestBusyError says that a *sql.Tx is nested in the task's transaction
// already: a BeginTx of the task waits for it to end.
type nestBusyError struct {
	done chan struct{}
}

// errNestedTxOpen is what a BeginTx that waited to nest in its task's
// transaction returns when its context ended first, wrapped with the
// context's error.
var errNestedTxOpen = errors.New("pooldriver: another *sql.Tx is nested in the task's open transaction; BeginTx waited for it to end")

func (e *nestBusyError) Error() string { return errNestedTxOpen.Error() }
func (e *nestBusyError) Unwrap() error { return errNestedTxOpen }

// wait waits until the nested transaction ends, nestPoll passes, or ctx
// ends (then with an error that says what it waited for).
func (e *nestBusyError) wait(ctx context.Context) error {
	t := time.NewTimer(nestPoll)
	defer t.Stop()
	select {
	case <-e.done:
	case <-t.C:
	case <-ctx.Done():
		return fmt.Errorf("%w: %w", errNestedTxOpen, context.Cause(ctx))
	}
	return nil
}
