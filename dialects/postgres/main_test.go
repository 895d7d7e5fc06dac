package postgres

import (
	"fmt"
	"os"
	"testing"

	"github.com/pooldriver/pooldriver/internal/owndb"
)

// TestMain runs the package's tests in a database of their own (see
// owndb): they make functions, operators, tables and schemas, which other
// packages' tests, run beside them, must not judge by.
func TestMain(m *testing.M) { os.Exit(ownDatabase(m)) }

func ownDatabase(m *testing.M) int {
	dsn := os.Getenv("POOLDRIVER_POSTGRES_DSN")
	if dsn == "" {
		dsn = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	}
	own, drop, err := owndb.Postgres(dsn, owndb.Name("pdpg"))
	if err != nil {
		// No server: the tests that need one skip, or fail under CI.
		fmt.Fprintf(os.Stderr, "dialects/postgres: no database of its own: %v\n", err)
		return m.Run()
	}
	defer drop()
	_ = os.Setenv("POOLDRIVER_POSTGRES_DSN", own)
	return m.Run()
}
