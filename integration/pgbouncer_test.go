package integration

import (
	"bytes"
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
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// This file starts a PgBouncer for a test. Its first part is generic: a
// helper process on a free loopback port, started, waited for and stopped.

// freeLoopbackPort returns a TCP port of 127.0.0.1 that nothing listened on
// a moment ago.
func freeLoopbackPort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("free port: %v", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// localProcess is a helper server a test started.
type localProcess struct {
	name   string
	cmd    *osexec.Cmd
	out    *syncBuffer
	exited chan struct{} // closed when the process has exited and been reaped
}

// syncBuffer collects a process's output while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// startLocalProcess runs path with args, waits until addr accepts TCP
// connections (failing the test if the process exits first or takes longer
// than 15s), and stops it when the test ends: SIGTERM, then SIGKILL after
// 5s, and the test fails if it is still not gone. Its output is logged when
// the test fails.
func startLocalProcess(t testing.TB, addr, path string, args ...string) *localProcess {
	t.Helper()
	p := &localProcess{name: filepath.Base(path), out: &syncBuffer{}, exited: make(chan struct{})}
	p.cmd = osexec.Command(path, args...)
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", p.name, err)
	}
	go func() {
		_ = p.cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		p.stop(t)
		if t.Failed() {
			t.Logf("%s output:\n%s", p.name, p.out)
		}
	})
	deadline := time.Now().Add(15 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return p
		}
		select {
		case <-p.exited:
			t.Fatalf("%s exited before listening on %s: %v\n%s", p.name, addr, p.cmd.ProcessState, p.out)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s does not listen on %s after 15s: %v\n%s", p.name, addr, err, p.out)
		}
	}
}

// stop ends the process and reaps it; calling it again does nothing.
func (p *localProcess) stop(t testing.TB) {
	select {
	case <-p.exited:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
		return
	case <-time.After(5 * time.Second):
	}
	_ = p.cmd.Process.Kill()
	select {
	case <-p.exited:
		t.Errorf("%s ignored SIGTERM for 5s and was killed", p.name)
	case <-time.After(5 * time.Second):
		t.Errorf("%s (pid %d) survived SIGKILL", p.name, p.cmd.Process.Pid)
	}
}

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
	port := freeLoopbackPort(t)
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
