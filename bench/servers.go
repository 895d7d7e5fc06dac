// Package bench compares pooldriver with the alternatives: the generic pool
// against puddle (pool_test.go), and, against real servers, pooldriver under
// database/sql against database/sql with pgx stdlib or go-sql-driver/mysql
// and against pgxpool (realserver_test.go and the cmd/loadtest harness,
// which share the contenders defined here).
package bench

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
)

// The servers the real-server benchmarks use when the environment names
// none: the local ones of a development machine (see README.md, Testing).
const (
	DefaultPostgresDSN = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	DefaultMySQLDSN    = "mysql://root@tcp(127.0.0.1:3306)/test"
)

// PostgresDSN returns $POOLDRIVER_POSTGRES_DSN, or DefaultPostgresDSN.
func PostgresDSN() string { return envOr("POOLDRIVER_POSTGRES_DSN", DefaultPostgresDSN) }

// MySQLDSN returns $POOLDRIVER_MYSQL_DSN, or DefaultMySQLDSN. It is in
// pooldriver's form: "mysql://" followed by a go-sql-driver DSN.
func MySQLDSN() string { return envOr("POOLDRIVER_MYSQL_DSN", DefaultMySQLDSN) }

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// Table is the table every workload reads and updates; Rows is how many
// rows it holds, with ids 1..Rows.
const (
	Table = "pdbench_items"
	Rows  = 10000
)

// Server is one database server the benchmarks run against.
type Server struct {
	Name string // "postgres" or "mysql"
	DSN  string // in pooldriver's form

	// The statements of the workloads, in the server's placeholder syntax.
	PointSelect string // one row by primary key; one argument: the id
	Update      string // increments n of one row; one argument: the id
	SelectN     string // n of one row; one argument: the id
}

// Postgres returns the PostgreSQL server at dsn.
func Postgres(dsn string) Server {
	return Server{
		Name:        "postgres",
		DSN:         dsn,
		PointSelect: "SELECT name, n FROM " + Table + " WHERE id = $1",
		Update:      "UPDATE " + Table + " SET n = n + 1 WHERE id = $1",
		SelectN:     "SELECT n FROM " + Table + " WHERE id = $1",
	}
}

// MySQL returns the MySQL/MariaDB server at dsn (pooldriver's form).
func MySQL(dsn string) Server {
	return Server{
		Name:        "mysql",
		DSN:         dsn,
		PointSelect: "SELECT name, n FROM " + Table + " WHERE id = ?",
		Update:      "UPDATE " + Table + " SET n = n + 1 WHERE id = ?",
		SelectN:     "SELECT n FROM " + Table + " WHERE id = ?",
	}
}

// pgConfig parses the DSN for pgx and names the connections appName, so
// that pg_stat_activity tells the contenders apart.
func (s Server) pgConfig(appName string) (*pgx.ConnConfig, error) {
	cfg, err := pgx.ParseConfig(s.DSN)
	if err != nil {
		return nil, fmt.Errorf("postgres DSN: %w", err)
	}
	cfg.RuntimeParams["application_name"] = appName
	return cfg, nil
}

// mysqlConfig parses the DSN for go-sql-driver/mysql.
func (s Server) mysqlConfig() (*mysql.Config, error) {
	dsn, ok := strings.CutPrefix(s.DSN, "mysql://")
	if !ok {
		return nil, fmt.Errorf("mysql DSN must start with mysql://")
	}
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("mysql DSN: %w", err)
	}
	return cfg, nil
}

// withParams appends key=value parameters to a DSN: URL query parameters
// for a URL (postgres://…, mysql://…), words for a key=value PostgreSQL
// string.
func withParams(dsn string, kv ...string) string {
	var b strings.Builder
	b.WriteString(dsn)
	isURL := strings.Contains(dsn, "://")
	sep := "?"
	if strings.Contains(dsn, "?") {
		sep = "&"
	}
	for i := 0; i+1 < len(kv); i += 2 {
		if isURL {
			b.WriteString(sep + url.QueryEscape(kv[i]) + "=" + url.QueryEscape(kv[i+1]))
			sep = "&"
		} else {
			b.WriteString(" " + kv[i] + "=" + kv[i+1])
		}
	}
	return b.String()
}

// Prepare checks that the server answers within timeout and creates and
// fills Table if needed. Every error says which server failed, so that a
// caller can skip with it.
func (s Server) Prepare(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	db, err := s.admin()
	if err != nil {
		return err
	}
	defer func() { _ = db.Close() }()
	if err := db.PingContext(ctx); err != nil {
		return fmt.Errorf("%s unreachable: %w", s.Name, err)
	}
	create := "CREATE TABLE IF NOT EXISTS " + Table + " (id integer PRIMARY KEY, name text NOT NULL, n bigint NOT NULL DEFAULT 0)"
	if s.Name == "mysql" {
		create = "CREATE TABLE IF NOT EXISTS " + Table + " (id int PRIMARY KEY, name varchar(64) NOT NULL, n bigint NOT NULL DEFAULT 0) ENGINE=InnoDB"
	}
	if _, err := db.ExecContext(ctx, create); err != nil {
		return fmt.Errorf("%s: %w", s.Name, err)
	}
	var n int
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM "+Table).Scan(&n); err != nil {
		return fmt.Errorf("%s: %w", s.Name, err)
	}
	if n == Rows {
		return nil
	}
	if _, err := db.ExecContext(ctx, "DELETE FROM "+Table); err != nil {
		return fmt.Errorf("%s: %w", s.Name, err)
	}
	const batch = 1000
	for lo := 1; lo <= Rows; lo += batch {
		var q strings.Builder
		q.WriteString("INSERT INTO " + Table + " (id, name, n) VALUES ")
		for id := lo; id < lo+batch && id <= Rows; id++ {
			if id > lo {
				q.WriteString(", ")
			}
			fmt.Fprintf(&q, "(%d, 'item-%d', 0)", id, id)
		}
		if _, err := db.ExecContext(ctx, q.String()); err != nil {
			return fmt.Errorf("%s: filling %s: %w", s.Name, Table, err)
		}
	}
	return nil
}

// admin opens a one-connection *sql.DB for setup and monitoring, outside
// every contender.
// Admin opens a connection pool of one to the server as the DSN's user, for
// setting up (the faults workload's limited identities).
func (s Server) Admin() (*sql.DB, error) { return s.admin() }

func (s Server) admin() (*sql.DB, error) {
	var db *sql.DB
	switch s.Name {
	case "postgres":
		cfg, err := s.pgConfig("pdbench-monitor")
		if err != nil {
			return nil, err
		}
		db = stdlib.OpenDB(*cfg)
	default:
		cfg, err := s.mysqlConfig()
		if err != nil {
			return nil, err
		}
		c, err := mysql.NewConnector(cfg)
		if err != nil {
			return nil, err
		}
		db = sql.OpenDB(c)
	}
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	return db, nil
}

// Monitor counts a server's connections by contender, from outside the
// contenders, over a connection of its own.
type Monitor struct {
	s  Server
	db *sql.DB
}

// NewMonitor opens a Monitor on s.
func NewMonitor(s Server) (*Monitor, error) {
	db, err := s.admin()
	if err != nil {
		return nil, err
	}
	return &Monitor{s: s, db: db}, nil
}

// Close closes the monitor's connection.
func (m *Monitor) Close() error { return m.db.Close() }

// ServerConns returns how many server connections the contender named
// name has now, as the server sees them (PostgreSQL's pg_stat_activity, by
// application_name), and whether the server can tell: MySQL cannot tell
// one client of the same user from another, so ok is false there.
func (m *Monitor) ServerConns(ctx context.Context, name string) (n int, ok bool, err error) {
	if m.s.Name != "postgres" {
		return 0, false, nil
	}
	err = m.db.QueryRowContext(ctx,
		"SELECT count(*) FROM pg_stat_activity WHERE application_name = $1", AppName(name)).Scan(&n)
	return n, err == nil, err
}

// AppName is the PostgreSQL application_name of a contender's connections.
func AppName(contender string) string { return "pdbench-" + contender }

// ServerInfo returns the server's version and its connection limit
// (max_connections), or empty strings if it does not say.
func (m *Monitor) ServerInfo(ctx context.Context) (version, maxConns string) {
	q := "SELECT version(), current_setting('max_connections')"
	if m.s.Name == "mysql" {
		q = "SELECT version(), @@max_connections"
	}
	_ = m.db.QueryRowContext(ctx, q).Scan(&version, &maxConns)
	return version, maxConns
}
