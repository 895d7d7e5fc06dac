// Package fakedb is a fake database/sql driver that models a database
// server, for pooldriver's own tests, stress tests and benchmarks.
//
// A [Server] holds committed tables, credentials, counters and failure
// switches; each [Conn] is one session on it with its own transaction,
// session variables and temporary tables. Plain database/sql use needs no
// DSN:
//
//	srv := fakedb.NewServer("t1")
//	defer srv.Close()
//	db := sql.OpenDB(srv.Connector())
//
// Importing the package also registers [Dialect] for the "fake" scheme, so
// that pooldriver can open "fake://bob:secret@t1?pool_max_conns=3".
//
// # Statements
//
// Keywords are case-insensitive; words are separated by spaces. Any operand
// written "?" takes the next argument.
//
//	SELECT <n>            n rows (n INT8, s TEXT), streamed lazily
//	MULTI                 two result sets: SELECT 2, then one row (x TEXT)
//	INSERT <table> <v>    add the int64 v to table (buffered in a transaction)
//	COUNT <table>         one row: rows of table visible to this session
//	SET <name> <value>    set a session variable (value is the rest of the line)
//	GET <name>            one row: the variable's value, or NULL
//	TEMP <name>           create a session temporary table
//	HASTEMP <name>        one row: 1 if the temporary table exists, else 0
//	BEGIN | START TRANSACTION, COMMIT, ROLLBACK
//	SLEEP <duration>      wait (a Go duration, or int64 nanoseconds as argument)
//	CONNID                one row: the connection's ID
//	ECHO <v>              one row: v as given
//	FAIL                  fail with [ErrFail]
//	PING                  same as Ping
//
// # Server rules
//
// The conn behaves like a PostgreSQL session seen through pgx: while a result
// set is open every other statement is refused with [ErrBusy]; an error
// inside a transaction fails it ([ErrTxAborted] until ROLLBACK; COMMIT then
// rolls back); COMMIT or ROLLBACK outside a transaction is a no-op; closing
// a conn rolls its transaction back. Session variables are not
// transactional.
//
// Every method that touches a conn marks it busy while it runs; a second
// method entering meanwhile is counted in [Stats].Overlaps, which must stay 0
// under any correct use. A conn never blocks or panics on overlap, so that a
// test can observe it.
package fakedb
