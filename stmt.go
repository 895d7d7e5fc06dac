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

// ranOn records that s runs on pc, where it is prepared (or about to be),
// and forgets the connections that are gone since (phys.Conn.Gone): a
// statement prepared once and run for the life of a service would
// otherwise keep every physical connection it ever ran on, closed ones
// included, as database/sql's own Stmt does not. They are looked at only
// when a connection is added, so a statement running on connections it
// knows pays nothing.
func (s *stmt) ranOn(pc *phys.Conn) {
	for _, p := range s.on {
		if p == pc {
			return
		}
	}
	kept := s.on[:0]
	for _, p := range s.on {
		if !p.Gone() {
			kept = append(kept, p)
		}
	}
	clear(s.on[len(kept):]) // let the forgotten ones go
	s.on = append(kept, pc)
}

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

// execOn runs s on pc, where it is prepared the first time.
func (s *stmt) execOn(ctx context.Context, pc *phys.Conn, args []driver.NamedValue) (driver.Result, error) {
	s.ranOn(pc)
	return pc.ExecStmt(ctx, s.query, args)
}

func (s *stmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	return s.l.query(ctx, s.query, args, s)
}

// queryOn is execOn for QueryContext.
func (s *stmt) queryOn(ctx context.Context, pc *phys.Conn, args []driver.NamedValue) (driver.Rows, error) {
	s.ranOn(pc)
	return pc.QueryStmt(ctx, s.query, args)
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
