package integration

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	osexec "os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Generic helpers for tests that start their own processes on loopback: a
// free port, a helper process started, waited for and stopped, and a
// PostgreSQL cluster of the test's own, which it may stop
// and restart (the shared servers must never be).

// freePort returns a loopback port that was free a moment ago.
func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := ln.Addr().(*net.TCPAddr).Port
	require.NoError(t, ln.Close())
	return port
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
// than startLimit), and stops it when the test ends: SIGTERM, then SIGKILL after
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
	deadline := time.Now().Add(startLimit)
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
			t.Fatalf("%s does not listen on %s after %v: %v\n%s", p.name, addr, startLimit, err, p.out)
		}
	}
}

// startLimit bounds how long a helper server takes to listen, and
// pgCtlLimit one of PostgreSQL's programs (initdb, pg_ctl): guards against
// a hang, generous enough for a machine at load 20, where initdb takes ten
// times its few seconds.
const (
	startLimit = time.Minute
	pgCtlLimit = 3 * time.Minute
)

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

// pgBinDirs are where Debian and other distributions put PostgreSQL's
// server programs.
var pgBinDirs = []string{"/usr/lib/postgresql/15/bin", "/usr/lib/postgresql/16/bin", "/usr/lib/postgresql/17/bin", "/usr/local/pgsql/bin"}

// localPG is a PostgreSQL cluster in a temporary directory, listening on a
// free loopback port, with trust authentication for the user postgres.
type localPG struct {
	bin, dir string
	port     int
	cred     *syscall.Credential // run as this user (initdb refuses root); nil: as ourselves
}

// startLocalPG creates and starts a cluster, stopped and removed when the
// test ends. Without PostgreSQL's server programs it skips the test, or
// fails it when CI is set.
func startLocalPG(t *testing.T) *localPG {
	t.Helper()
	pg := &localPG{}
	for _, d := range pgBinDirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			pg.bin = d
			break
		}
	}
	if pg.bin == "" {
		msg := fmt.Sprintf("no PostgreSQL server programs in %v (Debian: apt-get install postgresql)", pgBinDirs)
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	dir, err := os.MkdirTemp("", "pooldriver-pg-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	pg.dir = dir
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		require.NoError(t, err, "running as root, initdb needs another user")
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		pg.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		require.NoError(t, os.Chown(dir, uid, gid))
	}
	pg.port = freePort(t)
	pg.run(t, pgCtlLimit, "initdb", "-D", pg.data(), "-U", "postgres", "-A", "trust", "--no-sync", "-E", "UTF8")
	conf := fmt.Sprintf("port = %d\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = '%s'\nfsync = off\nmax_connections = 50\n", pg.port, dir)
	f, err := os.OpenFile(filepath.Join(pg.data(), "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteString(conf)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	pg.start(t)
	t.Cleanup(func() { _ = pg.runErr(pgCtlLimit, "pg_ctl", "-D", pg.data(), "-w", "stop", "-m", "immediate") })
	return pg
}

func (pg *localPG) data() string { return filepath.Join(pg.dir, "data") }

// dsn returns a pooldriver DSN for the cluster's postgres database.
func (pg *localPG) dsn() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", pg.port)
}

func (pg *localPG) start(t *testing.T) {
	pg.ctl(t, "start", "-l", filepath.Join(pg.dir, "log"))
}

// stop stops the server at once: every session is cut, as in a crash.
func (pg *localPG) stop(t *testing.T) { pg.ctl(t, "stop", "-m", "immediate") }

func (pg *localPG) ctl(t *testing.T, args ...string) {
	t.Helper()
	pg.run(t, pgCtlLimit, "pg_ctl", append([]string{"-D", pg.data(), "-w", "-t", strconv.Itoa(int((pgCtlLimit - 10*time.Second).Seconds()))}, args...)...)
}

// run runs one of PostgreSQL's programs as the cluster's user, bounded by
// timeout; a failure fails the test.
func (pg *localPG) run(t *testing.T, timeout time.Duration, prog string, args ...string) {
	t.Helper()
	if err := pg.runErr(timeout, prog, args...); err != nil {
		t.Fatal(err)
	}
}

// runErr is run's work; its error shows the program's output and the
// server log, if any.
func (pg *localPG) runErr(timeout time.Duration, prog string, args ...string) error {
	c, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := osexec.CommandContext(c, filepath.Join(pg.bin, prog), args...)
	if pg.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: pg.cred}
	}
	cmd.Dir = pg.dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		log, _ := os.ReadFile(filepath.Join(pg.dir, "log"))
		return fmt.Errorf("%s %v: %w\n%s\nserver log:\n%s", prog, args, err, out.Bytes(), log)
	}
	return nil
}
