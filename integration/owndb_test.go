package integration

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"
)

// The package's own databases: the tests here create functions, tables,
// routines and roles on the servers they are given, and other packages
// (dialects/postgres, dialects/mysql), which make test runs beside them,
// judge the same names in the DSN's database (a public.lower overload
// made here made lower('x') a session change there). So before any test
// runs, TestMain makes a database of the run's own on each server whose
// DSN it was given, points the DSNs at it (the ODBC DSNs too, where they
// name the same server), and drops it at the end. The servers a test
// starts for itself (localPG) are its own already.

// ownDatabaseName is the run's database on every server: unique per run,
// so that runs side by side share nothing either.
// (Not "pooldriver": an error naming the database would name it twice.)
var ownDatabaseName = fmt.Sprintf("pdit_%d_%d", os.Getpid(), time.Now().UnixNano()%1_000_000)

// ownDatabases makes the run's database on the PostgreSQL and MySQL
// servers of dsns, points their DSNs (and the ODBC DSNs of the same
// servers) at it, and returns the function that drops them.
func ownDatabases() (drop func(), err error) {
	var drops []func()
	drop = func() {
		for _, d := range drops {
			d()
		}
	}
	defer func() {
		if err != nil {
			drop()
		}
	}()
	if dsn := dsns["POOLDRIVER_POSTGRES_DSN"]; dsn != "" {
		own, hostPort, d, err := ownPostgres(dsn)
		if err != nil {
			return drop, err
		}
		drops = append(drops, d)
		dsns["POOLDRIVER_POSTGRES_DSN"] = own
		pointODBC("POOLDRIVER_ODBC_POSTGRES_DSN", hostPort)
	}
	if dsn := dsns["POOLDRIVER_MYSQL_DSN"]; dsn != "" {
		own, hostPort, d, err := ownMySQL(dsn)
		if err != nil {
			return drop, err
		}
		drops = append(drops, d)
		dsns["POOLDRIVER_MYSQL_DSN"] = own
		pointODBC("POOLDRIVER_ODBC_MYSQL_DSN", hostPort)
	}
	return drop, nil
}

// ownPostgres makes the run's database on dsn's server and returns dsn
// naming it, the server's host:port, and what drops it.
func ownPostgres(dsn string) (own, hostPort string, drop func(), err error) {
	u, err := url.Parse(dsn)
	if err != nil || u.Scheme != "postgres" && u.Scheme != "postgresql" {
		return "", "", nil, fmt.Errorf("POOLDRIVER_POSTGRES_DSN: want a postgres:// URL to make the run's database: %q", redactedDSN(dsn))
	}
	if drop, err = makeDatabase("pgx", dsn, "PostgreSQL", " WITH (FORCE)"); err != nil {
		return "", "", nil, err
	}
	u.Path = "/" + ownDatabaseName
	port := u.Port()
	if port == "" {
		port = "5432"
	}
	return u.String(), net.JoinHostPort(u.Hostname(), port), drop, nil
}

// ownMySQL makes the run's database on dsn's server (mysql://, then
// go-sql-driver's form) and returns dsn naming it, the server's
// host:port, and what drops it.
func ownMySQL(dsn string) (own, hostPort string, drop func(), err error) {
	cfg, err := mysql.ParseDSN(strings.TrimPrefix(dsn, "mysql://"))
	if err != nil {
		return "", "", nil, fmt.Errorf("POOLDRIVER_MYSQL_DSN: %w", err)
	}
	admin := cfg.Clone()
	admin.DBName = ""
	if drop, err = makeDatabase("mysql", admin.FormatDSN(), "MySQL", ""); err != nil {
		return "", "", nil, err
	}
	// The DSN's own text, with the database's name replaced: the path
	// after the last '/' before the parameters.
	rest, params, _ := strings.Cut(dsn, "?")
	slash := strings.LastIndex(rest, "/")
	own = rest[:slash+1] + ownDatabaseName
	if params != "" {
		own += "?" + params
	}
	return own, cfg.Addr, drop, nil
}

// serverDatabase returns the database s's DSN names (the run's own).
func serverDatabase(t *testing.T, s server) string {
	t.Helper()
	if s.name == "postgres" {
		u, err := url.Parse(s.dsn)
		require.NoError(t, err)
		return strings.TrimPrefix(u.Path, "/")
	}
	cfg, err := mysql.ParseDSN(strings.TrimPrefix(s.dsn, "mysql://"))
	require.NoError(t, err)
	return cfg.DBName
}

// odbcServerWord and odbcPortWord read an ODBC DSN's Server= and Port=.
var (
	odbcServerWord = regexp.MustCompile(`(?i)(?:^|;|://)Server=([^;]*)`)
	odbcPortWord   = regexp.MustCompile(`(?i)(?:^|;)Port=([^;]*)`)
	odbcDatabase   = regexp.MustCompile(`(?i)((?:^|;)Database=)[^;]*`)
)

// makeDatabase makes the run's database through driver on dsn's server
// (named server in messages) and returns what drops it, with the DROP
// statement's suffix dropOpts.
func makeDatabase(driver, dsn, server, dropOpts string) (drop func(), err error) {
	db, err := sql.Open(driver, dsn)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := db.ExecContext(ctx, "CREATE DATABASE "+ownDatabaseName); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("making the run's database %s on %s: %w", ownDatabaseName, server, err)
	}
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := db.ExecContext(ctx, "DROP DATABASE IF EXISTS "+ownDatabaseName+dropOpts); err != nil {
			fmt.Fprintf(os.Stderr, "integration: dropping the run's database %s on %s: %v\n", ownDatabaseName, server, err)
		}
		_ = db.Close()
	}, nil
}

// odbcDSNDatabase returns the database an ODBC DSN names (Database=).
func odbcDSNDatabase(dsn string) string {
	if m := odbcDatabaseValue.FindStringSubmatch(dsn); m != nil {
		return m[1]
	}
	return ""
}

var odbcDatabaseValue = regexp.MustCompile(`(?i)(?:^|;)Database=([^;]*)`)

// pointODBC points the ODBC DSN of env (the environment's, or a
// container's) at the run's database where it names the server at
// hostPort; one of another server is left as it is.
func pointODBC(env, hostPort string) {
	dsn := dsns[env]
	if dsn == "" {
		dsn = os.Getenv(env)
	}
	s, p := odbcServerWord.FindStringSubmatch(dsn), odbcPortWord.FindStringSubmatch(dsn)
	if s == nil || p == nil || net.JoinHostPort(s[1], p[1]) != hostPort || !odbcDatabase.MatchString(dsn) {
		return
	}
	dsns[env] = odbcDatabase.ReplaceAllString(dsn, "${1}"+ownDatabaseName)
}

// redactedDSN is dsn without its password, for a message.
func redactedDSN(dsn string) string {
	if u, err := url.Parse(dsn); err == nil {
		return u.Redacted()
	}
	return "(a DSN that is not a URL)"
}
