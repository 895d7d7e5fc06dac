package fakedb

import (
	"context"
	"database/sql/driver"
	"errors"
	"testing"
	"time"
)

func TestRegistry(t *testing.T) {
	name := t.Name()
	s1 := NewServer(name)
	if got, _ := lookupServer(name); got != s1 {
		t.Fatal("NewServer did not register")
	}
	s2 := NewServer(name)
	if got, _ := lookupServer(name); got != s2 {
		t.Fatal("second NewServer did not replace the first")
	}
	s1.Close() // no longer registered: must not unregister s2
	if got, _ := lookupServer(name); got != s2 {
		t.Fatal("closing a replaced server unregistered its successor")
	}
	c, err := Driver{}.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	if c.(*Conn).Server() != s2 || s2.Name() != name {
		t.Fatal("Driver.Open reached the wrong server")
	}
	c.Close()
	s2.Close()
	_, err = Driver{}.Open(name)
	wantErr(t, err, ErrNoServer)
	if want := `fakedb: no such server "` + name + `"`; err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}
}

func TestConnectCounters(t *testing.T) {
	s := newServer(t)
	a, b := connect(t, s), connect(t, s)
	if a.ID() == b.ID() {
		t.Fatal("conn IDs are not unique")
	}
	if got := s.Conns(); len(got) != 2 || got[0] != a || got[1] != b {
		t.Fatalf("Conns() = %v", got)
	}
	a.Close()
	a.Close() // no-op
	st := s.Stats()
	if st.Connects != 2 || st.Closes != 1 || st.Open != 1 || st.MaxOpen != 2 {
		t.Fatalf("stats %+v", st)
	}
	if got := s.Conns(); len(got) != 1 || got[0] != b {
		t.Fatalf("Conns() after close = %v", got)
	}
	wantErr(t, execErr(a, "SELECT 1"), ErrClosed)
}

func TestFailConnects(t *testing.T) {
	s := newServer(t)
	boom := errors.New("boom")
	s.FailConnects(2, boom)
	for range 2 {
		_, err := s.Connector().Connect(context.Background())
		wantErr(t, err, boom)
	}
	connect(t, s)
	if st := s.Stats(); st.ConnectFailures != 2 || st.Connects != 1 || st.Open != 1 {
		t.Fatalf("stats %+v", st)
	}
}

func TestConnectDelay(t *testing.T) {
	s := newServer(t)
	s.SetConnectDelay(time.Hour)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	_, err := s.Connector().Connect(ctx)
	wantErr(t, err, context.DeadlineExceeded)

	s.SetConnectDelay(time.Millisecond)
	start := time.Now()
	connect(t, s)
	if time.Since(start) < time.Millisecond {
		t.Fatal("connect did not wait")
	}
	if st := s.Stats(); st.ConnectFailures != 1 || st.Connects != 1 {
		t.Fatalf("stats %+v", st)
	}
}

func TestBreakAll(t *testing.T) {
	s := newServer(t)
	c := connect(t, s)
	exec(t, c, "BEGIN")
	exec(t, c, "INSERT t 1")
	s.BreakAll()
	later := connect(t, s) // opened after the break: unaffected
	before := s.Stats().Statements

	wantErr(t, execErr(c, "INSERT t 2"), driver.ErrBadConn)
	if s.Stats().Statements != before {
		t.Fatal("a broken conn ran a statement")
	}
	if c.IsValid() {
		t.Fatal("IsValid true after the break was found")
	}
	wantErr(t, c.Ping(context.Background()), driver.ErrBadConn)
	wantErr(t, c.ResetSession(context.Background()), driver.ErrBadConn)
	if s.OpenTxCount() != 0 || len(s.Table("t")) != 0 {
		t.Fatal("the broken conn's transaction was not rolled back")
	}
	if st := s.Stats(); st.DisconnectRollbacks != 1 || st.Open != 2 {
		t.Fatalf("stats %+v", st)
	}
	exec(t, later, "SELECT 1")
}

func TestKillAll(t *testing.T) {
	s := newServer(t)
	c := connect(t, s)
	exec(t, c, "SET a 1")
	s.KillAll()
	if !c.IsValid() {
		t.Fatal("a killed conn knows before its next statement")
	}
	err := execErr(c, "SELECT 1")
	wantErr(t, err, ErrKilled)
	if errors.Is(err, driver.ErrBadConn) {
		t.Fatal("a kill must not look like ErrBadConn")
	}
	if c.IsValid() {
		t.Fatal("IsValid true after the kill")
	}
	wantErr(t, execErr(c, "SELECT 1"), driver.ErrBadConn)

	// Killed mid result set.
	c2 := connect(t, s)
	r, err := c2.QueryContext(context.Background(), "SELECT 10", nil)
	if err != nil {
		t.Fatal(err)
	}
	s.KillAll()
	wantErr(t, r.Next(make([]driver.Value, 2)), ErrKilled)
	r.Close()

	// Ping finds a killed conn dead.
	c3 := connect(t, s)
	s.KillAll()
	wantErr(t, c3.Ping(context.Background()), driver.ErrBadConn)
}

func TestRunning(t *testing.T) {
	s := newServer(t)
	a, b := connect(t, s), connect(t, s)
	if n := s.Running(); n != 0 {
		t.Fatalf("Running() = %d on a new server", n)
	}

	// A SLEEP counts for as long as it sleeps, on either conn.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 2)
	for _, c := range []*Conn{a, b} {
		go func() {
			_, err := c.ExecContext(ctx, "SLEEP 1h", nil)
			done <- err
		}()
	}
	waitFor(t, "both SLEEPs to run", func() bool { return s.Running() == 2 })

	// A query on a third conn counts until it returns its rows, not while
	// they are read.
	c := connect(t, s)
	r, err := c.QueryContext(context.Background(), "SELECT 3", nil)
	if err != nil {
		t.Fatal(err)
	}
	if n := s.Running(); n != 2 {
		t.Fatalf("Running() = %d with a result set open, want 2 (the SLEEPs)", n)
	}
	r.Close()

	cancel()
	for range 2 {
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("SLEEP: %v", err)
		}
	}
	if n := s.Running(); n != 0 {
		t.Fatalf("Running() = %d after the SLEEPs returned, want 0", n)
	}

	// Statements that fail, at the server or before it, count no longer.
	wantErr(t, execErr(c, "FAIL"), ErrFail)
	if err := execErr(c, "NOPE"); err == nil {
		t.Fatal("NOPE ran")
	}
	c.Close()
	wantErr(t, execErr(c, "SELECT 1"), ErrClosed)
	if n := s.Running(); n != 0 {
		t.Fatalf("Running() = %d after failed statements, want 0", n)
	}
}
