package pooldriver_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"testing"
	"time"

	"github.com/pooldriver/pooldriver"
	"github.com/pooldriver/pooldriver/internal/fakedb"
)

// Regression: a BeginTx transaction whose statement is still running when
// the task ends and outlives the cleanup timeout. The task's cleanup gives
// up (the connection is marked lost); the transaction is claimed as ended
// by the task, so database/sql's Rollback does nothing. The hold that lets
// the conn go last must have it destroyed (decide: lost), which ends the
// transaction on the server; it used to be kept forever, its transaction
// open.
func TestTaskEndGivesUpWaitingLastHolderRollsBack(t *testing.T) {
	srv := newServer(t)
	c := pooldriver.New("fake://"+srv.Name()+"?pool_max_conns=2",
		pooldriver.WithCleanupTimeout(20*time.Millisecond))
	if err := c.Err(); err != nil {
		t.Fatal(err)
	}
	db := sql.OpenDB(c)
	defer db.Close()

	ctx, end := pooldriver.WithTask(context.Background())
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		// A slow statement that does not stop when the task's context ends.
		_, _ = tx.ExecContext(context.WithoutCancel(ctx), "SLEEP 200ms")
	}()
	waitFor(t, "the SLEEP to run", func() bool { return srv.Running() == 1 })
	end()
	<-done
	tx.Rollback()

	waitFor(t, "the physical connection released and its transaction ended on the server", func() bool {
		return c.Stats().Active == 0 && srv.OpenTxCount() == 0
	})
}

// hookConn is a fakedb conn whose "HOOK" statement signals running when it
// starts, blocks until hook is closed and then reports driver.ErrBadConn, as
// a dropped connection would.
type hookConn struct {
	*fakedb.Conn
	hook    chan struct{}
	running chan struct{} // buffered; receives once a HOOK runs
}

func (h *hookConn) ExecContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Result, error) {
	if q == "HOOK" {
		select {
		case h.running <- struct{}{}:
		default:
		}
		<-h.hook
		return nil, driver.ErrBadConn
	}
	return h.Conn.ExecContext(ctx, q, args)
}

type hookConnector struct {
	base    driver.Connector
	hook    chan struct{}
	running chan struct{}
}

func (h hookConnector) Connect(ctx context.Context) (driver.Conn, error) {
	c, err := h.base.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &hookConn{Conn: c.(*fakedb.Conn), hook: h.hook, running: h.running}, nil
}

func (h hookConnector) Driver() driver.Driver { return h.base.Driver() }

// Regression: task end claims the BeginTx transaction, then an in-flight
// statement of that transaction fails with ErrBadConn, and database/sql's
// Rollback finds the transaction claimed: the hold letting the conn go must
// have it destroyed. It used to be kept forever.
func TestTaskEndConnBrokenMidStatementIsDestroyed(t *testing.T) {
	srv := newServer(t)
	hook, running := make(chan struct{}), make(chan struct{}, 1)
	c := pooldriver.Wrap(hookConnector{base: srv.Connector(), hook: hook, running: running})
	if err := c.Err(); err != nil {
		t.Fatal(err)
	}
	db := sql.OpenDB(c)
	defer db.Close()

	ctx, end := pooldriver.WithTask(context.Background())
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	execDone := make(chan error, 1)
	go func() {
		_, err := tx.ExecContext(ctx, "HOOK")
		execDone <- err
	}()
	select {
	case <-running: // HOOK is running, holding the conn
	case <-time.After(10 * time.Second):
		t.Fatal("timed out waiting for HOOK to run")
	}
	endDone := make(chan struct{})
	go func() { end(); close(endDone) }()
	// end claims the transaction before it cancels the context.
	waitFor(t, "the task context cancelled", func() bool { return ctx.Err() != nil })
	close(hook) // the statement now fails: connection lost
	if err := <-execDone; err == nil {
		t.Error("the statement succeeded on a lost connection")
	}
	<-endDone
	tx.Rollback()

	waitFor(t, "the broken physical connection released/destroyed", func() bool { return c.Stats().Active == 0 })
}
