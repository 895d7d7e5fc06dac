package integration

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pooldriver/pooldriver/dialects"
	_ "github.com/pooldriver/pooldriver/dialects/mysql"
	_ "github.com/pooldriver/pooldriver/dialects/postgres"
)

// server is one database server the tests run against, with the SQL that
// differs between them.
type server struct {
	name string // dialect name, also the subtest name
	env  string // variable holding the DSN
	dsn  string

	placeholder func(n int) string // the n-th (1-based) argument placeholder
	setVar      string             // sets a session variable to '1'
	getVar      string             // reads it back; NULL or '' when unset
	setSetting  string             // changes a session setting
	getSetting  string             // reads it back
	settingVal  string             // what getSetting returns after setSetting
	lock        string             // takes an advisory lock named by the only argument
	lockIsFree  string             // from another session: 1/true if the lock is free
	unlock      string             // releases it
	prepare     string             // PREPARE %s ... (a server-side prepared statement)
	execute     string             // EXECUTE %s
	backendID   string             // the server's id of the session running it
	sleep       string             // sleeps %d seconds
	autoID      string             // the column type of an auto-incremented key
	lastID      string             // the key the session generated last; fails or 0 if none
}

var serverDefs = []server{
	{
		name: "postgres", env: "POOLDRIVER_POSTGRES_DSN",
		placeholder: func(n int) string { return fmt.Sprintf("$%d", n) },
		setVar:      "SELECT set_config('app.x', '1', false)",
		getVar:      "SELECT coalesce(current_setting('app.x', true), '')",
		setSetting:  "SET statement_timeout = '42s'",
		getSetting:  "SHOW statement_timeout",
		settingVal:  "42s",
		lock:        "SELECT pg_advisory_lock(hashtext($1))",
		lockIsFree:  "SELECT pg_try_advisory_lock(hashtext($1))",
		unlock:      "SELECT pg_advisory_unlock(hashtext($1))",
		prepare:     "PREPARE %s AS SELECT 1",
		execute:     "EXECUTE %s",
		backendID:   "SELECT pg_backend_pid()",
		sleep:       "SELECT pg_sleep(%d)",
		autoID:      "serial PRIMARY KEY",
		lastID:      "SELECT lastval()",
	},
	{
		name: "mysql", env: "POOLDRIVER_MYSQL_DSN",
		placeholder: func(int) string { return "?" },
		setVar:      "SET @v = '1'",
		getVar:      "SELECT coalesce(@v, '')",
		setSetting:  "SET SESSION sql_mode = 'ANSI_QUOTES'",
		getSetting:  "SELECT @@SESSION.sql_mode",
		settingVal:  "ANSI_QUOTES",
		lock:        "SELECT GET_LOCK(?, 0)",
		lockIsFree:  "SELECT IS_FREE_LOCK(?)",
		unlock:      "SELECT RELEASE_LOCK(?)",
		prepare:     "PREPARE %s FROM 'SELECT 1'",
		execute:     "EXECUTE %s",
		backendID:   "SELECT CONNECTION_ID()",
		sleep:       "SELECT SLEEP(%d)",
		autoID:      "int AUTO_INCREMENT PRIMARY KEY",
		lastID:      "SELECT LAST_INSERT_ID()",
	},
}

// examples show how to point the tests at a local server.
var examples = map[string]string{
	"POOLDRIVER_POSTGRES_DSN": "postgres://postgres@127.0.0.1:5432/test?sslmode=disable",
	"POOLDRIVER_MYSQL_DSN":    "mysql://root@tcp(127.0.0.1:3306)/test",
}

// dsns holds each server's DSN by variable name: the variable's value, or
// the address of a container TestMain started because it was unset (and,
// for the same server through ODBC, the container's ODBC DSN).
var dsns = map[string]string{}

// TestMain finds the servers: DSNs from the environment; otherwise, when a
// Docker engine answers, containers started here and removed at the end
// (containers_test.go); otherwise one line saying how to point the tests at
// a server, and every server test skips (fails under CI=true).
func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	var missing []string
	for _, s := range serverDefs {
		if v := os.Getenv(s.env); v != "" {
			dsns[s.env] = v
		} else {
			missing = append(missing, s.env)
		}
	}
	if len(missing) > 0 {
		if err := dockerAnswers(dockerCheckTimeout); err != nil {
			var how []string
			for _, env := range missing {
				how = append(how, fmt.Sprintf("%s='%s'", env, examples[env]))
			}
			why := strings.Join(strings.Fields(err.Error()), " ") // one line
			fmt.Fprintf(os.Stderr, "integration: %s unset and no Docker engine (%s); to run against servers: %s go test ./...\n",
				strings.Join(missing, ", "), why, strings.Join(how, " "))
			if os.Getenv("CI") == "true" {
				fmt.Fprintln(os.Stderr, "integration: CI=true: a missing server is a failure")
				return 1
			}
		} else {
			stop, err := startContainers(missing)
			defer stop()
			if err != nil {
				// Docker answered: the run was meant to use it.
				fmt.Fprintf(os.Stderr, "integration: starting containers: %v\n", err)
				fmt.Fprintln(os.Stderr, "integration: with no image registry, make test-docker builds the images and turns Ryuk off (README.md, Testing)")
				return 1
			}
		}
	}
	drop, err := ownDatabases()
	if err != nil {
		fmt.Fprintf(os.Stderr, "integration: %v\n", err)
		return 1
	}
	code := m.Run()
	closeAdmins()
	drop()
	return code
}

// forEachServer runs f against every server, as a subtest named after it.
// A server whose DSN variable is unset is skipped, unless CI=true, where
// that is a failure.
func forEachServer(t *testing.T, f func(t *testing.T, s server)) {
	t.Helper()
	for _, s := range serverDefs {
		runOn(t, s, f)
	}
}

// forServer is forEachServer for behaviour only the named server has.
func forServer(t *testing.T, name string, f func(t *testing.T, s server)) {
	t.Helper()
	for _, s := range serverDefs {
		if s.name == name {
			runOn(t, s, f)
		}
	}
}

func runOn(t *testing.T, s server, f func(t *testing.T, s server)) {
	t.Helper()
	t.Run(s.name, func(t *testing.T) {
		s.dsn = dsns[s.env]
		if s.dsn == "" {
			msg := fmt.Sprintf("%s is not set and no Docker engine answered; to run against a server: %s='%s' go test ./...", s.env, s.env, examples[s.env])
			if os.Getenv("CI") == "true" {
				t.Fatal(msg)
			}
			t.Skip(msg)
		}
		f(t, s)
	})
}

// template parses the server's DSN, with extra appended as query parameters.
func (s server) template(t *testing.T, extra string) dialects.Template {
	t.Helper()
	dsn := s.dsn
	if extra != "" {
		sep := "?"
		if containsQuery(dsn) {
			sep = "&"
		}
		dsn += sep + extra
	}
	scheme, ok := dialects.SchemeOf(dsn)
	require.True(t, ok, "no scheme in %s", s.env)
	d, err := dialects.Lookup(scheme)
	require.NoError(t, err)
	tmpl, _, err := d.Parse(dsn)
	require.NoError(t, err)
	return tmpl
}

func containsQuery(dsn string) bool {
	for i := len(dsn) - 1; i >= 0 && dsn[i] != '/'; i-- {
		if dsn[i] == '?' {
			return true
		}
	}
	return false
}

// open opens a physical connection that is closed when the test ends.
func open(t *testing.T, tmpl dialects.Template) dialects.Conn {
	t.Helper()
	c, err := tmpl.Open(ctx(t), tmpl.Credentials())
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// ctx returns a context for one call; it outlives the test, so that
// cleanups can use it.
func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

func namedValues(args []any) []driver.NamedValue {
	nv := make([]driver.NamedValue, len(args))
	for i, a := range args {
		nv[i] = driver.NamedValue{Ordinal: i + 1, Value: a}
	}
	return nv
}

// execErr runs a statement on the physical connection's driver conn, as
// pooldriver does.
func execErr(t *testing.T, c dialects.Conn, query string, args ...any) error {
	t.Helper()
	_, err := c.Driver().(driver.ExecerContext).ExecContext(ctx(t), query, namedValues(args))
	if errors.Is(err, driver.ErrSkip) { // go-sql-driver without interpolateParams
		var st driver.Stmt
		if st, err = c.Driver().(driver.ConnPrepareContext).PrepareContext(ctx(t), query); err != nil {
			return err
		}
		defer st.Close()
		_, err = st.(driver.StmtExecContext).ExecContext(ctx(t), namedValues(args))
	}
	return err
}

func exec(t *testing.T, c dialects.Conn, query string, args ...any) {
	t.Helper()
	require.NoError(t, execErr(t, c, query, args...), query)
}

// queryStringErr returns the first column of the first row as a string.
func queryStringErr(t *testing.T, c dialects.Conn, query string, args ...any) (string, error) {
	t.Helper()
	rows, err := c.Driver().(driver.QueryerContext).QueryContext(ctx(t), query, namedValues(args))
	if errors.Is(err, driver.ErrSkip) { // go-sql-driver without interpolateParams
		var st driver.Stmt
		if st, err = c.Driver().(driver.ConnPrepareContext).PrepareContext(ctx(t), query); err != nil {
			return "", err
		}
		defer st.Close()
		rows, err = st.(driver.StmtQueryContext).QueryContext(ctx(t), namedValues(args))
	}
	if err != nil {
		return "", err
	}
	defer rows.Close()
	dest := make([]driver.Value, len(rows.Columns()))
	if err := rows.Next(dest); err != nil {
		if errors.Is(err, io.EOF) {
			return "", fmt.Errorf("%s: no rows", query)
		}
		return "", err
	}
	switch v := dest[0].(type) {
	case []byte:
		return string(v), nil
	case nil:
		return "", nil
	default:
		return fmt.Sprint(v), nil
	}
}

func queryString(t *testing.T, c dialects.Conn, query string, args ...any) string {
	t.Helper()
	v, err := queryStringErr(t, c, query, args...)
	require.NoError(t, err, query)
	return v
}

// unique returns a name no other test run uses.
func unique(prefix string) string {
	return fmt.Sprintf("%s_%d_%d", prefix, time.Now().UnixNano()%1e9, rand.IntN(1e6))
}

func txStatus(t *testing.T, c dialects.Conn, lastQuery string) dialects.TxStatus {
	t.Helper()
	st, err := c.TxStatus(ctx(t), lastQuery)
	require.NoError(t, err)
	return st
}
