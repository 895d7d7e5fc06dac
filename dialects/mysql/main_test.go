package mysql

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/pooldriver/pooldriver/internal/owndb"
)

// TestMain runs the package's tests in a database of their own (see
// owndb): they make stored functions, triggers and tables, which other
// packages' tests, run beside them, must not judge by.
func TestMain(m *testing.M) { os.Exit(ownDatabase(m)) }

func ownDatabase(m *testing.M) int {
	dsn := strings.TrimPrefix(os.Getenv("POOLDRIVER_MYSQL_DSN"), "mysql://")
	if dsn == "" {
		dsn = "root@tcp(127.0.0.1:3306)/test"
	}
	own, drop, err := owndb.MySQL(dsn, owndb.Name("pdmy"))
	if err != nil {
		// No server: the tests that need one skip, or fail under CI.
		fmt.Fprintf(os.Stderr, "dialects/mysql: no database of its own: %v\n", err)
		return m.Run()
	}
	defer drop()
	_ = os.Setenv("POOLDRIVER_MYSQL_DSN", "mysql://"+own)
	return m.Run()
}
