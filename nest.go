package pooldriver

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// A *sql.Tx begun in a task whose connection has a raw transaction open (a
// statement of the task ran BEGIN) nests inside that transaction instead of
// taking a connection of its own: it is an ORM's unit of work inside the
// task's transaction (GORM wraps every write in a *sql.Tx, bun's RunInTx,
// ent's Tx and sqlx's Beginx begin one), which must see the task's
// uncommitted rows and locks and be undone by the task's ROLLBACK. Its
// begin is a savepoint, its Commit releases it, its Rollback rolls back to
// it (the physical connection runs them: phys.Conn.BeginTx, EndTx); the
// outer COMMIT or ROLLBACK, or the task's end, decides for all of it. One
// *sql.Tx nests at a time on a connection: a second waits for the first
// to end (nestBusyError).

// nestPoll is how often a BeginTx waiting to nest looks again, in case the
// nested transaction it waits for ended without closing done (its task's
// end rolled everything back).
const nestPoll = 50 * time.Millisecond

// nestBusyError says that a *sql.Tx is nested in the task's transaction
// already: a BeginTx of the task waits for it to end.
type nestBusyError struct {
	done <-chan struct{} // closed when the nested *sql.Tx ends (phys.OpenTx.Nested)
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
