package pooldriver

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"testing"

	"github.com/pooldriver/pooldriver/internal/fakedb"
)

// stmtRecorder is a Connector whose logical conns keep the statements they
// prepare, so that a test can look into them.
type stmtRecorder struct {
	*Connector
	stmts []*stmt // guarded by database/sql: one logical conn (SetMaxOpenConns(1))
}

func (r *stmtRecorder) Connect(ctx context.Context) (driver.Conn, error) {
	dc, err := r.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &recordingConn{conn: dc.(*conn), r: r}, nil
}

type recordingConn struct {
	*conn
	r *stmtRecorder
}

func (c *recordingConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	ds, err := c.conn.PrepareContext(ctx, query)
	if err == nil {
		c.r.stmts = append(c.r.stmts, ds.(*stmt))
	}
	return ds, err
}

// openStmtRecorder opens a database on a fake server of its own through a
// stmtRecorder, with one logical conn, and prepares query on it.
func openStmtRecorder(t *testing.T, query string) (*fakedb.Server, *stmtRecorder, *sql.DB, *sql.Stmt) {
	t.Helper()
	srv := fakedb.NewServer(t.Name())
	t.Cleanup(srv.Close)
	c := New("fake://" + srv.Name())
	if err := c.Err(); err != nil {
		t.Fatal(err)
	}
	r := &stmtRecorder{Connector: c}
	db := sql.OpenDB(r)
	t.Cleanup(func() { db.Close() })
	db.SetMaxOpenConns(1)
	st, err := db.Prepare(query)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.stmts) != 1 {
		t.Fatalf("%d logical statements prepared, want 1", len(r.stmts))
	}
	return srv, r, db, st
}

// TestStmtForgetsResetConns: a statement prepared once and run after each
// of 200 Connector.Resets runs on 201 physical connections, one at a
// time; it keeps only the live one, not every connection it ever ran on.
func TestStmtForgetsResetConns(t *testing.T) {
	srv, r, _, st := openStmtRecorder(t, "ECHO ?")
	for i := range 200 {
		r.Reset()
		if _, err := st.Exec(i); err != nil {
			t.Fatalf("exec %d: %v", i, err)
		}
	}
	if n := srv.Stats().Connects; n < 201 {
		t.Fatalf("%d server connections opened, want 201: the test no longer changes connections", n)
	}
	if on := len(r.stmts[0].on); on != 1 {
		t.Fatalf("the statement remembers %d physical connections after 200 resets, want 1 (the live one)", on)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestStmtForgetsLostConns: the server kills the connection of a
// transaction using the statement, 200 times; the statement keeps none
// of the killed connections.
func TestStmtForgetsLostConns(t *testing.T) {
	srv, r, db, st := openStmtRecorder(t, "ECHO ?")
	for i := range 200 {
		tx, err := db.Begin()
		if err != nil {
			t.Fatalf("begin %d: %v", i, err)
		}
		ts := tx.Stmt(st)
		if _, err := ts.Exec(i); err != nil {
			t.Fatalf("exec %d: %v", i, err)
		}
		srv.KillAll()
		if _, err := ts.Exec(i); err == nil {
			t.Fatalf("exec %d on a killed connection succeeded", i)
		}
		_ = tx.Rollback() // fails: the connection is gone
	}
	if _, err := st.Exec(0); err != nil {
		t.Fatal(err)
	}
	if on := len(r.stmts[0].on); on != 1 {
		t.Fatalf("the statement remembers %d physical connections after 200 were killed, want 1 (the live one)", on)
	}
}
