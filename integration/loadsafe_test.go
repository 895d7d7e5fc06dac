package integration

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// What keeps the suite honest on a busy machine (CI runs it beside other
// work, at a load of 20 on 2 cores): which tests make test leaves to make
// test-all, bounds in seconds, and waits for what a loaded machine does a
// time slice later instead of sleeps that guess how long that is.

// longTest skips t under go test -short. `make test` runs with -short: the
// contract and dialect tests in a few minutes. `make test-all` (CI,
// .ci/run) runs without it, and with them the suites this marks: those
// that take minutes of their own or start servers and poolers (faults,
// PgBouncer, ORMs, migrations).
func longTest(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("long test, skipped by -short: make test-all runs it")
	}
}

// hangTimeout bounds a scenario, or a load of many calls (thousands of
// statements from goroutines): a guard against a hang, not a measure of
// speed, so generous enough for a machine at load 20 under -race, where
// the parallel tests share 2 cores with other work and take ten times as
// long as on an idle one. timeout(t, hangTimeout) is its context.
const hangTimeout = 5 * time.Minute

// waitLimit bounds a wait for a condition (waitFor, settle): a guard
// against a hang, generous enough for a machine at load 20.
const waitLimit = 30 * time.Second

// settle waits up to waitLimit for cond: for what a loaded machine does a time
// slice later (a rollback in database/sql's goroutine, a counter updated
// after a close the server has already seen). It does not fail the test:
// the assertions after it say what is wrong if cond never holds.
func settle(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for !cond() && time.Now().Before(deadline) {
		time.Sleep(2 * time.Millisecond)
	}
}

// clientSockets are this machine's ends of a tenant's server sessions, to
// wait for the server's close of them to arrive (waitClosed).
type clientSockets struct {
	server int          // the server's port
	ports  map[int]bool // the client ports the server reports, found here ESTABLISHED
}

// sockets returns the client ends of the tenant's server sessions that are
// on this machine: the client ports the server reports for them (pg_stat_activity,
// PROCESSLIST), that this machine's TCP table holds as connections to the
// server's port. Only sessions the server sees coming from loopback count:
// behind a proxy (Docker's docker-proxy) the server reports the proxy's
// own port to the container, which is no socket of the client's, and may
// be the number of another connection's port to the published one (Linux
// hands out the same ephemeral port to connections to different
// addresses), which stays ESTABLISHED: then it finds none, as it does
// without /proc.
func (tn *tenant) sockets(t *testing.T) *clientSockets {
	t.Helper()
	q := `SELECT coalesce(client_port, -1)::text FROM pg_stat_activity WHERE application_name = $1
		AND client_addr IN ('127.0.0.1', '::1')`
	if tn.s.name == "mysql" {
		q = "SELECT HOST FROM information_schema.PROCESSLIST WHERE USER = ? AND (HOST LIKE '127.0.0.1:%' OR HOST LIKE 'localhost:%' OR HOST LIKE '::1:%')"
	}
	rows, err := tn.s.admin(t).QueryContext(ctx(t), q, tn.name)
	require.NoError(t, err)
	defer rows.Close()
	reported := map[int]bool{}
	for rows.Next() {
		var v string
		require.NoError(t, rows.Scan(&v))
		if port, err := strconv.Atoi(v[strings.LastIndex(v, ":")+1:]); err == nil && port > 0 {
			reported[port] = true
		}
	}
	require.NoError(t, rows.Err())
	_, sp, _ := strings.Cut(serverAddr(t, tn.s), ":")
	server, _ := strconv.Atoi(sp)
	cs := &clientSockets{server: server, ports: map[int]bool{}}
	for port := range established(server) {
		if reported[port] {
			cs.ports[port] = true
		}
	}
	return cs
}

// waitClosed waits until the server's close of every socket of cs has
// reached this machine's kernel (the socket is no longer ESTABLISHED: in
// CLOSE_WAIT, or gone), which is what a client's look at an idle
// connection can see. The server lists a session as gone when its process
// ends; the close travels over loopback, whose delivery a loaded machine
// defers to a kernel thread, so it can arrive after. Where sockets found
// none to watch it waits a second instead.
func (cs *clientSockets) waitClosed(t *testing.T) {
	t.Helper()
	if len(cs.ports) == 0 {
		time.Sleep(time.Second)
		return
	}
	deadline := time.Now().Add(waitLimit)
	for {
		open := 0
		for port := range established(cs.server) {
			if cs.ports[port] {
				open++
			}
		}
		if open == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v, %d of %d killed sessions' sockets still ESTABLISHED here", waitLimit, open, len(cs.ports))
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// established returns the local ports of this machine's ESTABLISHED TCP
// connections to remote port server (/proc/net/tcp and tcp6); none where
// those cannot be read.
func established(server int) map[int]bool {
	ports := map[int]bool{}
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		file, err := os.Open(f)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(file)
		for sc.Scan() {
			// sl local_address rem_address st ...; addresses are HEX:PORT.
			fields := strings.Fields(sc.Text())
			if len(fields) < 4 || fields[3] != "01" { // 01: ESTABLISHED
				continue
			}
			local, remote := hexPort(fields[1]), hexPort(fields[2])
			if remote == server && local > 0 {
				ports[local] = true
			}
		}
		_ = file.Close()
	}
	return ports
}

func hexPort(addr string) int {
	i := strings.LastIndex(addr, ":")
	if i < 0 {
		return -1
	}
	p, err := strconv.ParseInt(addr[i+1:], 16, 32)
	if err != nil {
		return -1
	}
	return int(p)
}
