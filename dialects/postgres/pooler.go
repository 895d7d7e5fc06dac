package postgres

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/pooldriver/pooldriver/dialects"
)

// ErrPoolerFound is matched by the error of a connection attempt that
// reached a connection pooler (PgBouncer, or any proxy that hands out its
// own backend keys) while the DSN does not say one is there
// (pool_server_pooling unset). Behind a transaction pooler pgx's default
// statement cache fails at run time with "prepared statement ... does not
// exist"; this error says so at connect time instead.
var ErrPoolerFound = errors.New("pooldriver: postgres: a connection pooler (such as PgBouncer) answers at this address; " +
	"add pool_server_pooling=transaction to the DSN (PgBouncer pool_mode=transaction or statement) " +
	"or pool_server_pooling=session (pool_mode=session); pool_server_pooling=none skips this check")

// BehindPooler adapts the template to the pooler pool_server_pooling names.
//
//   - unset: every new connection checks that it talks to the server
//     itself: the backend process id the server announced at login must be
//     the one pg_backend_pid() reports. A pooler announces an id of its own
//     (PgBouncer a random one), so a difference means a pooler, and the
//     connection is refused with ErrPoolerFound. One round trip per new
//     connection; a server that cannot answer is not refused.
//   - none, session: nothing changes and nothing is checked. A session
//     pooler keeps one server session per client connection, so named
//     prepared statements and pgx's statement cache work.
//   - transaction: pgx's default exec mode becomes cache_describe (parse and
//     execute in one round trip with the unnamed statement; only the
//     description is cached, client-side), and pooldriver's own prepared
//     statements (a *sql.Stmt) are prepared unnamed, so the server never has
//     to remember a name across transactions. A default_query_exec_mode
//     set in the DSN that names a statement on the server or describes and
//     executes in separate round trips (cache_statement, describe_exec) is
//     an error; exec, simple_protocol and cache_describe are kept.
func (t *template) BehindPooler(p dialects.ServerPooling) (dialects.Template, error) {
	n := *t
	switch p {
	case dialects.ServerPoolingUnset:
		n.checkPooler = true
	case dialects.ServerPoolingTransaction:
		n.cfg = t.cfg.Copy()
		switch m := t.cfg.DefaultQueryExecMode; {
		case !t.execModeSet:
			n.cfg.DefaultQueryExecMode = pgx.QueryExecModeCacheDescribe
		case m == pgx.QueryExecModeCacheStatement || m == pgx.QueryExecModeDescribeExec:
			return nil, fmt.Errorf("pooldriver: postgres: %s=%s cannot work with pool_server_pooling=transaction: "+
				"it needs a statement to outlive a transaction on the server; drop it (pooldriver then uses cache_describe) or use cache_describe, exec or simple_protocol",
				execModeKey, execModeName(m))
		}
		n.unnamed = true
	}
	return &n, nil
}

// execModeName returns m as default_query_exec_mode spells it.
func execModeName(m pgx.QueryExecMode) string {
	return strings.ReplaceAll(m.String(), " ", "_")
}

// checkNoPooler returns ErrPoolerFound when the session behind pc is not
// the one whose process id the login announced. With withID it also
// returns the server's system identifier (see serverID), read in the same
// round trip: a new connection to a server whose catalog has no reading
// yet asks for both (OpenConfigured).
func checkNoPooler(ctx context.Context, pc *pgconn.PgConn, withID bool) (id string, err error) {
	announced := pc.PID()
	if announced == 0 {
		return idOf(ctx, pc, withID), nil // no BackendKeyData: cannot tell
	}
	q := "SELECT pg_catalog.pg_backend_pid()"
	if withID {
		q += ", (" + serverIDQuery + ")"
	}
	res := pc.ExecParams(ctx, q, nil, nil, nil, nil).Read()
	if res.Err != nil || len(res.Rows) != 1 || len(res.Rows[0]) < 1 {
		return idOf(ctx, pc, withID), nil // not PostgreSQL's functions: cannot tell
	}
	if withID && len(res.Rows[0]) > 1 {
		id = string(res.Rows[0][1])
	}
	pid, perr := strconv.ParseUint(string(res.Rows[0][0]), 10, 32)
	if perr != nil || uint32(pid) == announced {
		return id, nil
	}
	return "", fmt.Errorf("%w (the login announced backend %d, the session is backend %d)", ErrPoolerFound, announced, pid)
}

// idOf is serverID where withID asks for it.
func idOf(ctx context.Context, pc *pgconn.PgConn, withID bool) string {
	if !withID {
		return ""
	}
	return serverID(ctx, pc)
}

// PrepareContext prepares query as pgx's stdlib does (a named statement,
// cached by pgx under its text), or, behind a transaction pooler, as the
// unnamed statement: the server checks it and describes its parameters
// now, and each execution parses it again in the same round trip (pgx's
// cache_describe), so no name must survive from one transaction to the next.
func (c *conn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	if !c.unnamed {
		if err := c.runDue(ctx); err != nil {
			return nil, err
		}
		st, err := c.sc.PrepareContext(ctx, query)
		if err != nil {
			return nil, err
		}
		name := c.notePrepared(query)
		if s, ok := st.(*stdlib.Stmt); ok {
			return &namedStmt{Stmt: s, c: c, name: name, query: query, gen: c.dropGen}, nil
		}
		return st, nil
	}
	pc := c.pgx().PgConn()
	if pc.IsClosed() {
		return nil, driver.ErrBadConn
	}
	sd, err := pc.Prepare(ctx, "", query, nil)
	if err != nil {
		return nil, err
	}
	return &unnamedStmt{sc: c.sc, query: query, numInput: len(sd.ParamOIDs)}, nil
}

// namedStmt is a statement pgx's stdlib prepared under a name: it runs a
// reset waiting on its connection first (carry.go), is prepared again
// where a reset dropped every statement (dropAll), and its Close tells
// the reset that its name is gone by the driver's doing, not the
// session's (reconcile).
type namedStmt struct {
	*stdlib.Stmt
	c     *conn
	name  string
	query string
	gen   uint64 // c.dropGen when prepared
}

// ready runs a waiting reset and prepares s again if a reset dropped it.
func (s *namedStmt) ready(ctx context.Context) error {
	if err := s.c.runDue(ctx); err != nil {
		return err
	}
	if s.gen == s.c.dropGen {
		return nil
	}
	st, err := s.c.sc.PrepareContext(ctx, s.query)
	if err != nil {
		return err
	}
	s.c.notePrepared(s.query)
	s.Stmt, s.gen = st.(*stdlib.Stmt), s.c.dropGen //nolint:forcetypeassert // as when first prepared
	return nil
}

var (
	_ driver.StmtExecContext  = (*namedStmt)(nil)
	_ driver.StmtQueryContext = (*namedStmt)(nil)
)

func (s *namedStmt) Close() error {
	if s.gen != s.c.dropGen {
		return nil // gone with every other
	}
	delete(s.c.stdlibNames, s.name)
	return s.Stmt.Close()
}

// ExecContext and QueryContext run s as the connection runs its text
// where the statement is to bring its transaction's id (probes: in a
// transaction whose id is not known, a statement that may write): the
// connection's path carries the probe in the same write, the stdlib's
// cannot. It is the same text with the same arguments, prepared on the
// direct path under a name of its own.
func (s *namedStmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	if s.c.probes(s.c.pgx().PgConn(), s.query) {
		return s.c.ExecContext(ctx, s.query, args)
	}
	if err := s.ready(ctx); err != nil {
		return nil, err
	}
	return s.Stmt.ExecContext(ctx, args)
}

func (s *namedStmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	if s.c.probes(s.c.pgx().PgConn(), s.query) {
		return s.c.QueryContext(ctx, s.query, args)
	}
	if err := s.ready(ctx); err != nil {
		return nil, err
	}
	return s.Stmt.QueryContext(ctx, args)
}

// unnamedStmt is a statement prepared unnamed: it runs its text on the
// connection with the connection's exec mode.
type unnamedStmt struct {
	sc       *stdlib.Conn
	query    string
	numInput int
}

var (
	_ driver.StmtExecContext  = (*unnamedStmt)(nil)
	_ driver.StmtQueryContext = (*unnamedStmt)(nil)
)

func (s *unnamedStmt) Close() error  { return nil }
func (s *unnamedStmt) NumInput() int { return s.numInput }

func (s *unnamedStmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	return s.sc.ExecContext(ctx, s.query, args)
}

func (s *unnamedStmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	return s.sc.QueryContext(ctx, s.query, args)
}

// Exec and Query are never called: pooldriver (and database/sql) use the
// Context variants.
func (s *unnamedStmt) Exec([]driver.Value) (driver.Result, error) { return nil, errNoContext }
func (s *unnamedStmt) Query([]driver.Value) (driver.Rows, error)  { return nil, errNoContext }

var errNoContext = errors.New("pooldriver: postgres: use ExecContext or QueryContext")
