package pooldriver

import (
	"context"
	"database/sql/driver"

	"github.com/pooldriver/pooldriver/internal/phys"
)

// stmt is a prepared statement of a logical conn. It is not tied to one
// physical connection: each execution prepares it on the physical
// connection it runs on, once, and reuses it from that connection's cache.
type stmt struct {
	l        *conn
	query    string
	numInput int
	on       []*phys.Conn // the physical connections it was prepared on
}

var (
	_ driver.Stmt             = (*stmt)(nil)
	_ driver.StmtExecContext  = (*stmt)(nil)
	_ driver.StmtQueryContext = (*stmt)(nil)
)

// ranOn records that s is prepared on pc, and forgets the connections
// that are gone since (see gone): a statement prepared once and run for the
// life of a service would otherwise keep every physical connection it ever
// ran on, closed ones included, as database/sql's own Stmt does not. They
// are looked at only when a connection is added, so a statement running on
// connections it knows pays nothing.
func (s *stmt) ranOn(pc *phys.Conn) {
	for _, p := range s.on {
		if p == pc {
			return
		}
	}
	kept := s.on[:0]
	for _, p := range s.on {
		if !gone(p) {
			kept = append(kept, p)
		}
	}
	clear(s.on[len(kept):]) // let the forgotten ones go
	s.on = append(kept, pc)
}

// gone reports whether pc is destroyed (for whatever reason: its lifetime
// or idle time ran out, an idle check found it dead, the pool closed), or
// will be as soon as its current use ends: lost (broken, or its state
// unknown) or stale (opened before its Connector's last Reset; never
// handed out again).
func gone(pc *phys.Conn) bool { return pc.Closed.Load() || pc.Stale() || pc.IsLost() }

// Close drops the statement from the caches of the physical connections it
// was prepared on (at their next use: they may be busy now), which closes
// it on the server, so that preparing the same text again prepares it
// afresh (after DDL changed what it returns, say).
func (s *stmt) Close() error {
	for _, pc := range s.on {
		pc.EvictLater(s.query)
	}
	s.on = nil
	return nil
}

func (s *stmt) NumInput() int { return s.numInput }

func (s *stmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	return s.l.exec(ctx, s.query, args, s)
}

// execOn runs s on pc (see readyOn).
func (s *stmt) execOn(ctx context.Context, pc *phys.Conn, args []driver.NamedValue) (driver.Result, error) {
	ds, args, err := s.readyOn(ctx, pc, args)
	if err != nil {
		return nil, err
	}
	return pc.StmtExec(ctx, ds, s.query, args)
}

func (s *stmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	return s.l.query(ctx, s.query, args, s)
}

// queryOn runs s on pc (see readyOn).
func (s *stmt) queryOn(ctx context.Context, pc *phys.Conn, args []driver.NamedValue) (driver.Rows, error) {
	ds, args, err := s.readyOn(ctx, pc, args)
	if err != nil {
		return nil, err
	}
	return pc.StmtQuery(ctx, ds, s.query, args)
}

// readyOn readies s to run on pc with args: prepared there (the first time, then
// from pc's cache), recorded as prepared there, and args converted for pc's
// driver.
func (s *stmt) readyOn(ctx context.Context, pc *phys.Conn, args []driver.NamedValue) (driver.Stmt, []driver.NamedValue, error) {
	ds, err := pc.Prepared(ctx, s.query)
	if err != nil {
		return nil, nil, err
	}
	s.ranOn(pc)
	if args, err = pc.Convert(args); err != nil {
		return nil, nil, err
	}
	return ds, args, nil
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
