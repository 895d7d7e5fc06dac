package postgres

import (
	"errors"
	"reflect"

	"github.com/jackc/pgx/v5/pgconn"
)

// role is what a DSN's target_session_attrs asks of a server, where it
// asks for a writable one: the pool follows the primary (LostRole).
type role uint8

const (
	roleAny       role = iota // no role asked for, or a standby, or any
	roleReadWrite             // read-write: a server that accepts writes
	rolePrimary               // primary: a server not in recovery
)

// roleOf reads the role from the check pgx runs on each new connection,
// which is how pgx keeps target_session_attrs (from the DSN or
// PGTARGETSESSIONATTRS).
func roleOf(validate pgconn.ValidateConnectFunc) role {
	if validate == nil {
		return roleAny
	}
	switch reflect.ValueOf(validate).Pointer() {
	case reflect.ValueOf(pgconn.ValidateConnectTargetSessionAttrsReadWrite).Pointer():
		return roleReadWrite
	case reflect.ValueOf(pgconn.ValidateConnectTargetSessionAttrsPrimary).Pointer():
		return rolePrimary
	}
	return roleAny
}

// readOnlyTransaction is SQLSTATE 25006, read_only_sql_transaction: a
// write refused by a read-only transaction or server.
const readOnlyTransaction = "25006"

// LostRole reports, for a connection whose DSN asks for a writable server,
// that err refused a write because the server as a whole no longer takes
// them (see dialects.RoleLossDetector): the server says, in the parameters
// it reports on every change (PostgreSQL 14 and later), that it is a
// standby (in_hot_standby), or, for read-write, that every transaction is
// read-only (default_transaction_read_only, as after a fencing reload). A
// write refused in a transaction begun READ ONLY is not a lost role. A
// session that set default_transaction_read_only itself is taken for one:
// the pool's connections are replaced, which costs new connections and
// loses nothing.
func (c *conn) LostRole(err error) (server string, lost bool) {
	if c.role == roleAny {
		return "", false
	}
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != readOnlyTransaction {
		return "", false
	}
	server = reportsLost(c.pgx().PgConn(), c.role)
	return server, server != ""
}

// reportsLost returns the address of pg's server if the parameters it
// reports say it left role r: a standby (in_hot_standby, PostgreSQL 14
// and later), or, for read-write, read-only for every transaction
// (default_transaction_read_only, which a reload of a fenced primary
// reports to every session with its next statement); "" otherwise. A
// session may set the latter itself: only where it outlived a reset is it
// the server's (afterReset).
func reportsLost(pg *pgconn.PgConn, r role) string {
	if pg.ParameterStatus("in_hot_standby") != "on" &&
		(r != roleReadWrite || pg.ParameterStatus("default_transaction_read_only") != "on") {
		return ""
	}
	return serverOf(pg)
}

// serverOf returns the address pg reached.
func serverOf(pg *pgconn.PgConn) string {
	if pg.Conn() == nil {
		return "?"
	}
	return pg.Conn().RemoteAddr().String()
}

// afterReset is what every reset does once it returned the session to the
// server's defaults: it empties what the client keeps of the session
// (clearClient), and notes a server that left the DSN's role: Observe
// says so with the next statement (dialects.RoleLostError), and the pool
// follows the primary though no write was refused.
func (c *conn) afterReset() {
	c.clearClient()
	if c.role != roleAny && c.roleGone == "" {
		c.roleGone = reportsLost(c.pgx().PgConn(), c.role)
	}
}
