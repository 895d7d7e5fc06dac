package fakedb

import (
	"context"
	"database/sql/driver"
	"errors"
	"io"
	"testing"
	"time"
)

// newServer returns a server named after the test, closed at cleanup.
func newServer(t testing.TB) *Server {
	t.Helper()
	s := NewServer(t.Name())
	t.Cleanup(s.Close)
	return s
}

// connect opens a raw conn on s, closed at cleanup.
func connect(t testing.TB, s *Server) *Conn {
	t.Helper()
	dc, err := s.Connector().Connect(context.Background())
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	c := dc.(*Conn)
	t.Cleanup(func() { c.Close() })
	return c
}

func exec(t testing.TB, c *Conn, query string, args ...any) {
	t.Helper()
	if _, err := c.ExecContext(context.Background(), query, nv(args...)); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

func execErr(c *Conn, query string, args ...any) error {
	_, err := c.ExecContext(context.Background(), query, nv(args...))
	return err
}

// queryAll runs query and returns every row of its first result set.
func queryAll(t testing.TB, c *Conn, query string, args ...any) [][]driver.Value {
	t.Helper()
	r, err := c.QueryContext(context.Background(), query, nv(args...))
	if err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	defer r.Close()
	var out [][]driver.Value
	for {
		dest := make([]driver.Value, len(r.Columns()))
		err := r.Next(dest)
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("%s: next: %v", query, err)
		}
		out = append(out, dest)
	}
}

// queryOne returns the single value of a one-row, one-column query.
func queryOne(t testing.TB, c *Conn, query string, args ...any) driver.Value {
	t.Helper()
	rows := queryAll(t, c, query, args...)
	if len(rows) != 1 || len(rows[0]) != 1 {
		t.Fatalf("%s: got %v, want one value", query, rows)
	}
	return rows[0][0]
}

func nv(args ...any) []driver.NamedValue {
	out := make([]driver.NamedValue, len(args))
	for i, a := range args {
		out[i] = driver.NamedValue{Ordinal: i + 1, Value: a}
	}
	return out
}

// waitFor waits until cond holds, failing the test after a deadline.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func wantErr(t testing.TB, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("got error %v, want %v", err, want)
	}
}
