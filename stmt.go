package pooldriver

import (
	"context"
	"database/sql/driver"
)

// stmt is a prepared statement of a logical conn. It is not tied to one
// physical connection: each execution prepares it on the physical
// connection it runs on, once, and reuses it from that connection's cache.
type stmt struct {
	l        *conn
	query    string
	numInput int
}

var (
	_ driver.Stmt             = (*stmt)(nil)
	_ driver.StmtExecContext  = (*stmt)(nil)
	_ driver.StmtQueryContext = (*stmt)(nil)
)

// Close does nothing: the prepared statements belong to the physical
// connections' caches, which close them when they evict them, reset the
// session or close.
func (s *stmt) Close() error { return nil }

func (s *stmt) NumInput() int { return s.numInput }

func (s *stmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	l := s.l
	le, err := l.acquire(ctx)
	if err != nil {
		return nil, err
	}
	pc := le.pc
	var res driver.Result
	ds, err := pc.prepared(ctx, s.query)
	if err == nil {
		if args, err = pc.convert(args); err == nil {
			res, err = stmtExec(ctx, ds, args)
		}
	}
	pc.checkErr(err)
	pc.observe(ctx, s.query)
	if ferr := l.finish(le); err == nil {
		err = ferr
	}
	return res, lostSession(le, err)
}

func (s *stmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	l := s.l
	le, err := l.acquire(ctx)
	if err != nil {
		return nil, err
	}
	pc := le.pc
	var rows driver.Rows
	ds, err := pc.prepared(ctx, s.query)
	if err == nil {
		if args, err = pc.convert(args); err == nil {
			rows, err = stmtQuery(ctx, ds, args)
		}
	}
	return l.openRows(ctx, le, rows, s.query, err)
}

func (s *stmt) Exec(args []driver.Value) (driver.Result, error) {
	return s.ExecContext(context.Background(), named(args))
}

func (s *stmt) Query(args []driver.Value) (driver.Rows, error) {
	return s.QueryContext(context.Background(), named(args))
}

func named(args []driver.Value) []driver.NamedValue {
	nv := make([]driver.NamedValue, len(args))
	for i, v := range args {
		nv[i] = driver.NamedValue{Ordinal: i + 1, Value: v}
	}
	return nv
}
