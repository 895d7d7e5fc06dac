package fakedb

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"testing"

	"github.com/pooldriver/pooldriver/dialects"
)

func TestTxVisibility(t *testing.T) {
	s := newServer(t)
	a, b := connect(t, s), connect(t, s)
	exec(t, a, "INSERT t 1") // outside a tx: visible at once
	if queryOne(t, b, "COUNT t") != int64(1) {
		t.Fatal("autocommit insert not visible")
	}
	tx, err := a.BeginTx(context.Background(), driver.TxOptions{})
	if err != nil {
		t.Fatal(err)
	}
	exec(t, a, "INSERT t ?", int64(2))
	if queryOne(t, a, "COUNT t") != int64(2) {
		t.Fatal("own uncommitted row not visible")
	}
	if queryOne(t, b, "COUNT t") != int64(1) || len(s.Table("t")) != 1 {
		t.Fatal("uncommitted row visible to others")
	}
	if a.TxStatus() != dialects.TxActive || s.OpenTxCount() != 1 {
		t.Fatal("tx not open")
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if got := s.Table("t"); len(got) != 2 || got[1] != 2 {
		t.Fatalf("table after commit %v", got)
	}
	wantErr(t, tx.Commit(), ErrTxDone)

	tx, _ = a.BeginTx(context.Background(), driver.TxOptions{})
	exec(t, a, "INSERT t 3")
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if len(s.Table("t")) != 2 || a.TxStatus() != dialects.TxIdle || s.OpenTxCount() != 0 {
		t.Fatal("rollback kept the row or the tx")
	}
	if st := s.Stats(); st.Begins != 2 || st.Commits != 1 || st.Rollbacks != 1 || st.OpenTx != 0 {
		t.Fatalf("stats %+v", st)
	}
}

func TestRawTx(t *testing.T) {
	s := newServer(t)
	c := connect(t, s)
	exec(t, c, "COMMIT")   // no tx: no-op
	exec(t, c, "ROLLBACK") // no tx: no-op
	exec(t, c, "begin")
	wantErr(t, execErr(c, "BEGIN"), ErrInTx)
	if c.TxStatus() != dialects.TxFailed {
		t.Fatal("an error inside a tx did not fail it")
	}
	exec(t, c, "ROLLBACK")

	exec(t, c, "BEGIN")
	_, err := c.BeginTx(context.Background(), driver.TxOptions{})
	wantErr(t, err, ErrInTx)
	exec(t, c, "ROLLBACK")

	exec(t, c, "BEGIN")
	exec(t, c, "INSERT t 1")
	exec(t, c, "COMMIT")
	if len(s.Table("t")) != 1 || c.TxStatus() != dialects.TxIdle {
		t.Fatal("raw commit")
	}
	// A raw COMMIT ends a BeginTx transaction too; its Tx is then done.
	tx, _ := c.BeginTx(context.Background(), driver.TxOptions{})
	exec(t, c, "COMMIT")
	wantErr(t, tx.Rollback(), ErrTxDone)
	if st := s.Stats(); st.RawBegins != 3 || st.Begins != 1 || st.Commits != 2 || st.Rollbacks != 2 || st.OpenTx != 0 {
		t.Fatalf("stats %+v", st)
	}
}

func TestFailedTx(t *testing.T) {
	s := newServer(t)
	c := connect(t, s)
	exec(t, c, "BEGIN")
	exec(t, c, "INSERT t 1")
	wantErr(t, execErr(c, "FAIL"), ErrFail)
	if c.TxStatus() != dialects.TxFailed {
		t.Fatal("FAIL did not fail the tx")
	}
	wantErr(t, execErr(c, "SELECT 1"), ErrTxAborted)
	_, err := c.QueryContext(context.Background(), "CONNID", nil)
	wantErr(t, err, ErrTxAborted)
	exec(t, c, "COMMIT") // rolls back, no error (PostgreSQL)
	if len(s.Table("t")) != 0 || c.TxStatus() != dialects.TxIdle {
		t.Fatal("COMMIT of a failed tx committed")
	}

	// Through a driver.Tx, Commit reports the rollback. A syntax error fails
	// the tx like any server error.
	tx, _ := c.BeginTx(context.Background(), driver.TxOptions{})
	exec(t, c, "INSERT t 1")
	if execErr(c, "OOPS") == nil {
		t.Fatal("syntax error accepted")
	}
	wantErr(t, tx.Commit(), ErrTxRolledBack)
	if len(s.Table("t")) != 0 || s.OpenTxCount() != 0 {
		t.Fatal("failed tx committed")
	}
	// A refused statement (busy) does not fail the tx.
	exec(t, c, "BEGIN")
	r, _ := c.QueryContext(context.Background(), "SELECT 2", nil)
	wantErr(t, execErr(c, "SELECT 1"), ErrBusy)
	r.Close()
	if c.TxStatus() != dialects.TxActive {
		t.Fatal("a refused statement failed the tx")
	}
	exec(t, c, "ROLLBACK")
	if st := s.Stats(); st.Rollbacks != 3 || st.Commits != 0 {
		t.Fatalf("stats %+v", st)
	}
}

func TestTxOptions(t *testing.T) {
	s := newServer(t)
	c := connect(t, s)
	tx, err := c.BeginTx(context.Background(), driver.TxOptions{ReadOnly: true, Isolation: driver.IsolationLevel(sql.LevelSerializable)})
	if err != nil {
		t.Fatal(err)
	}
	wantErr(t, execErr(c, "INSERT t 1"), ErrReadOnly)
	tx.Rollback()
	for _, l := range []sql.IsolationLevel{sql.LevelReadUncommitted, sql.LevelRepeatableRead, sql.LevelSnapshot, sql.LevelLinearizable} {
		if _, err := c.BeginTx(context.Background(), driver.TxOptions{Isolation: driver.IsolationLevel(l)}); err == nil {
			t.Errorf("isolation %v accepted", l)
		}
	}
	if s.OpenTxCount() != 0 {
		t.Fatal("rejected BeginTx left a tx open")
	}
}

func TestCloseRollsBack(t *testing.T) {
	s := newServer(t)
	c := connect(t, s)
	exec(t, c, "BEGIN")
	exec(t, c, "INSERT t 1")
	c.Close()
	if len(s.Table("t")) != 0 || s.OpenTxCount() != 0 {
		t.Fatal("close did not roll back")
	}
	if st := s.Stats(); st.DisconnectRollbacks != 1 || st.Rollbacks != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// TestSavepoints: SAVEPOINT, RELEASE SAVEPOINT and ROLLBACK TO SAVEPOINT
// keep and drop the rows a transaction buffered, as PostgreSQL does.
func TestSavepoints(t *testing.T) {
	s := newServer(t)
	c := connect(t, s)
	wantErr(t, execErr(c, "SAVEPOINT a"), ErrNoTx)
	exec(t, c, "BEGIN")
	exec(t, c, "INSERT sp 1")
	exec(t, c, "SAVEPOINT a")
	exec(t, c, "INSERT sp 2")
	exec(t, c, "ROLLBACK TO SAVEPOINT a")
	exec(t, c, "INSERT sp 3")
	exec(t, c, "SAVEPOINT b")
	exec(t, c, "INSERT sp 4")
	exec(t, c, "RELEASE SAVEPOINT b")
	if err := execErr(c, "RELEASE SAVEPOINT b"); err == nil {
		t.Fatal("RELEASE of a released savepoint succeeded")
	}
	exec(t, c, "ROLLBACK TO SAVEPOINT a") // ends the failure, drops 3 and 4
	exec(t, c, "INSERT sp 5")
	exec(t, c, "COMMIT")
	if got := s.Table("sp"); len(got) != 2 || got[0] != 1 || got[1] != 5 {
		t.Fatalf("committed %v, want rows 1 and 5", got)
	}
}
