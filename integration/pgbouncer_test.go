package integration

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
)

// This file starts a PgBouncer for a test, with the helpers of
// localproc_test.go.

// pgBouncer is a PgBouncer started for one test, in front of the test's
// PostgreSQL server, with two databases: pooldriver_tx (pool_mode
// transaction) and pooldriver_session (pool_mode session).
type pgBouncer struct {
	addr     string
	user     string
	poolSize int // default_pool_size: server connections per database and user
}

const (
	bouncerTx      = "pooldriver_tx"
	bouncerSession = "pooldriver_session"
)

// pgbouncerPath returns the pgbouncer binary. Without one the test is
// skipped, saying how to install it, unless CI=true: then it fails.
func pgbouncerPath(t testing.TB) string {
	t.Helper()
	for _, p := range []string{"pgbouncer", "/usr/sbin/pgbouncer"} {
		if path, err := osexec.LookPath(p); err == nil {
			return path
		}
	}
	msg := "pgbouncer is not installed (Debian: apt-get install pgbouncer)"
	if os.Getenv("CI") == "true" {
		t.Fatal(msg + "; CI=true: .ci/run installs it")
	}
	t.Skip(msg)
	return ""
}

// startPgBouncer starts a PgBouncer with testdata/pgbouncer.ini on a free
// loopback port, in front of the server and database of s.dsn, with
// default_pool_size poolSize. It is stopped when the test ends.
func startPgBouncer(t testing.TB, s server, poolSize int) *pgBouncer {
	t.Helper()
	path := pgbouncerPath(t)
	cfg, err := pgx.ParseConfig(s.dsn)
	if err != nil {
		t.Fatalf("%s: %v", s.env, err)
	}
	tmpl, err := os.ReadFile(filepath.Join("testdata", "pgbouncer.ini"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	// PgBouncer refuses to run as root; -u makes it switch to another user
	// once it has read its files.
	var args []string
	if os.Geteuid() == 0 {
		args = append(args, "-u", "nobody")
	}
	port := freePort(t)
	ini := strings.NewReplacer(
		"@PGHOST@", cfg.Host, "@PGPORT@", strconv.Itoa(int(cfg.Port)), "@DBNAME@", cfg.Database,
		"@PORT@", strconv.Itoa(port), "@POOL_SIZE@", strconv.Itoa(poolSize), "@DIR@", dir, "@USER@", cfg.User,
	).Replace(string(tmpl))
	iniPath := filepath.Join(dir, "pgbouncer.ini")
	if err := os.WriteFile(iniPath, []byte(ini), 0o644); err != nil {
		t.Fatal(err)
	}
	users := fmt.Sprintf("%q %q\n", cfg.User, cfg.Password)
	if err := os.WriteFile(filepath.Join(dir, "userlist.txt"), []byte(users), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	startLocalProcess(t, addr, path, append(args, iniPath)...)
	return &pgBouncer{addr: addr, user: cfg.User, poolSize: poolSize}
}

// dsn returns a DSN of database (bouncerTx or bouncerSession) through the
// bouncer, with params appended.
func (b *pgBouncer) dsn(database string, params ...string) string {
	return withParams(fmt.Sprintf("postgres://%s@%s/%s?sslmode=disable", b.user, b.addr, database), params...)
}

// serverConns returns how many server connections PgBouncer has open for
// database, from SHOW POOLS on its admin console.
func (b *pgBouncer) serverConns(ctx context.Context, database string) (int, error) {
	cfg, err := pgx.ParseConfig(b.dsn("pgbouncer"))
	if err != nil {
		return 0, err
	}
	cfg.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol // all the admin console speaks
	c, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return 0, err
	}
	defer c.Close(ctx)
	rows, err := c.Query(ctx, "SHOW POOLS")
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		vals, err := rows.Values()
		if err != nil {
			return 0, err
		}
		rec := map[string]any{}
		for i, f := range rows.FieldDescriptions() {
			rec[f.Name] = vals[i]
		}
		if rec["database"] != database {
			continue
		}
		for _, k := range []string{"sv_active", "sv_idle", "sv_used", "sv_tested", "sv_login"} {
			switch v := rec[k].(type) {
			case int64:
				n += int(v)
			case int32:
				n += int(v)
			case string:
				i, _ := strconv.Atoi(v)
				n += i
			}
		}
	}
	if err := rows.Err(); err != nil {
		return 0, err
	}
	return n, nil
}

// errorTally counts the errors of concurrent workers and keeps the first.
type errorTally struct {
	mu    sync.Mutex
	n     int
	first error
}

func (e *errorTally) add(err error) {
	if err == nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.n++
	if e.first == nil {
		e.first = err
	}
}

func (e *errorTally) count() (int, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.n, e.first
}

var errWrongAnswer = errors.New("wrong answer")
