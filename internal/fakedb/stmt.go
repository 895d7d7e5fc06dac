package fakedb

import (
	"context"
	"database/sql/driver"
)

// stmt is a prepared statement: the parsed statement, run on its conn.
type stmt struct {
	c      *Conn
	cmd    command
	closed bool
}

var (
	_ driver.Stmt             = (*stmt)(nil)
	_ driver.StmtExecContext  = (*stmt)(nil)
	_ driver.StmtQueryContext = (*stmt)(nil)
)

// errStmtClosed: use of a closed statement.
var errStmtClosed = errString("fakedb: statement is closed")

func (s *stmt) Close() error {
	s.c.enter()
	defer s.c.exit()
	if !s.closed {
		s.closed = true
		s.c.srv.stats.stmtCloses.Add(1)
	}
	return nil
}

// NumInput returns -1: the statement checks its arguments when it runs.
func (s *stmt) NumInput() int { return -1 }

func (s *stmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	s.c.enter()
	defer s.c.exit()
	if s.closed {
		return nil, errStmtClosed
	}
	res, _, err := s.c.run(ctx, s.cmd, nil, args, false)
	return res, err
}

func (s *stmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	s.c.enter()
	defer s.c.exit()
	if s.closed {
		return nil, errStmtClosed
	}
	_, r, err := s.c.run(ctx, s.cmd, nil, args, true)
	return r, err
}

func (s *stmt) Exec(args []driver.Value) (driver.Result, error) {
	return s.ExecContext(context.Background(), named(args))
}

func (s *stmt) Query(args []driver.Value) (driver.Rows, error) {
	return s.QueryContext(context.Background(), named(args))
}

func named(args []driver.Value) []driver.NamedValue {
	out := make([]driver.NamedValue, len(args))
	for i, v := range args {
		out[i] = driver.NamedValue{Ordinal: i + 1, Value: v}
	}
	return out
}
