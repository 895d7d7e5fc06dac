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
	pg := c.pgx().PgConn()
	lost = pg.ParameterStatus("in_hot_standby") == "on" ||
		c.role == roleReadWrite && pg.ParameterStatus("default_transaction_read_only") == "on"
	if lost && pg.Conn() != nil {
		server = pg.Conn().RemoteAddr().String()
	}
	return server, lost
}
