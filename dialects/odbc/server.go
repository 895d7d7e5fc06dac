package odbc

import (
	"database/sql"
	"database/sql/driver"
	"fmt"
	"strings"

	"github.com/pooldriver/pooldriver/dialects/internal/sqllex"
)

// server is the kind of database behind a driver, as far as the dialect
// needs to know: which SQL reads the transaction state, begins a
// transaction with options and resets a session.
type server int

const (
	// generic: any other database. Transactions are tracked from the
	// statements' keywords, isolation levels and read-only transactions
	// are refused, and a session is reset by replacing the connection.
	generic server = iota
	// postgres: PostgreSQL through psqlODBC.
	postgres
	// mysql: MariaDB or MySQL through MariaDB Connector/ODBC or MySQL
	// Connector/ODBC.
	mysql
)

func (s server) String() string {
	switch s {
	case postgres:
		return "PostgreSQL"
	case mysql:
		return "MariaDB/MySQL"
	}
	return "generic"
}

// flavor returns the SQL the lexer reads for the server: PostgreSQL's,
// MySQL's, or for a generic server both, with the rules of both.
func (s server) flavor() sqllex.Flavor {
	switch s {
	case postgres:
		return sqllex.Postgres
	case mysql:
		return sqllex.MySQL
	}
	return sqllex.Any
}

// serverOf guesses the server from a driver's name or library path
// ("PostgreSQL Unicode", "MariaDB Unicode", ".../psqlodbcw.so",
// "libmaodbc.so", "MySQL ODBC 8.0 Unicode Driver", "libmyodbc8w.so").
func serverOf(names ...string) server {
	for _, n := range names {
		n = strings.ToLower(n)
		switch {
		case strings.Contains(n, "postgres") || strings.Contains(n, "psqlodbc"):
			return postgres
		case strings.Contains(n, "mariadb") || strings.Contains(n, "mysql") ||
			strings.Contains(n, "maodbc") || strings.Contains(n, "myodbc"):
			return mysql
		}
	}
	return generic
}

// beginSQL returns the statements that begin a transaction with opts, run
// in order; nil for a generic server, which begins with the driver's own
// Begin. An option the server cannot honour is an error, returned before
// anything runs.
func (s server) beginSQL(opts driver.TxOptions) ([]string, error) {
	level := ""
	switch sql.IsolationLevel(opts.Isolation) {
	case sql.LevelDefault:
	case sql.LevelReadUncommitted:
		level = "READ UNCOMMITTED"
	case sql.LevelReadCommitted:
		level = "READ COMMITTED"
	case sql.LevelRepeatableRead:
		level = "REPEATABLE READ"
	case sql.LevelSerializable:
		level = "SERIALIZABLE"
	default:
		return nil, fmt.Errorf("pooldriver: odbc: isolation level %s is not supported (%s server)",
			sql.IsolationLevel(opts.Isolation), s)
	}
	switch s {
	case postgres:
		var modes []string
		if level != "" {
			modes = append(modes, "ISOLATION LEVEL "+level)
		}
		if opts.ReadOnly {
			modes = append(modes, "READ ONLY")
		}
		return []string{strings.TrimSpace("BEGIN " + strings.Join(modes, ", "))}, nil
	case mysql:
		var out []string
		if level != "" {
			// Without SESSION or GLOBAL: for the next transaction only.
			out = append(out, "SET TRANSACTION ISOLATION LEVEL "+level)
		}
		if opts.ReadOnly {
			return append(out, "START TRANSACTION READ ONLY"), nil
		}
		return append(out, "START TRANSACTION"), nil
	}
	if level != "" || opts.ReadOnly {
		return nil, fmt.Errorf("pooldriver: odbc: the driver is not known to be PostgreSQL's or MariaDB/MySQL's: "+
			"isolation levels and read-only transactions are not supported (asked for %s, read-only %t)",
			sql.IsolationLevel(opts.Isolation), opts.ReadOnly)
	}
	return nil, nil
}
