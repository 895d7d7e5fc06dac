//go:build docker

package integration

// Containers that stand in for the servers whose DSN variables are unset,
// when a Docker engine answers: started by TestMain through testcontainers,
// removed when the run ends, whether its tests pass or fail. Only with the
// docker build tag (make test-docker, and make test where a local server
// does not answer): testcontainers and Docker's client are some 95
// packages to compile under -race, which a run against local servers does
// not need (containers_off_test.go stands in without the tag).

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/wait"

	"github.com/pooldriver/pooldriver/dialects"
)

// container describes the container that stands in for one server.
type container struct {
	imageEnv string            // variable naming the image to run
	image    string            // the image when it is unset: the official one
	port     string            // the server's port inside the container
	env      map[string]string // the official image's settings (empty root password, database test)
	// ready matches the log line of a server that accepts connections on
	// its port. The official images first run a server for their set-up
	// that listens on no TCP port; the wait for the port as well tells the
	// two apart.
	ready   string
	dsn     func(hostPort string) string
	odbcEnv string // the ODBC variable that the same server can stand in for
	odbcDSN func(host, port string) string
}

var containers = map[string]container{
	"POOLDRIVER_POSTGRES_DSN": {
		imageEnv: "POOLDRIVER_TEST_POSTGRES_IMAGE", image: "postgres:15", port: "5432/tcp",
		env:   map[string]string{"POSTGRES_HOST_AUTH_METHOD": "trust", "POSTGRES_DB": "test"},
		ready: `database system is ready to accept connections`,
		dsn:   func(hp string) string { return "postgres://postgres@" + hp + "/test?sslmode=disable" },

		odbcEnv: "POOLDRIVER_ODBC_POSTGRES_DSN",
		odbcDSN: func(host, port string) string {
			return "odbc://Driver={PostgreSQL Unicode};Server=" + host + ";Port=" + port + ";Database=test;UID=postgres;"
		},
	},
	"POOLDRIVER_MYSQL_DSN": {
		imageEnv: "POOLDRIVER_TEST_MYSQL_IMAGE", image: "mariadb:10.11", port: "3306/tcp",
		env: map[string]string{"MARIADB_ALLOW_EMPTY_ROOT_PASSWORD": "1", "MARIADB_DATABASE": "test"},
		// "Version: '…'  socket: '…'  port: 3306  <build>"; the set-up
		// server says port: 0.
		ready: `port: 3306\s`,
		dsn:   func(hp string) string { return "mysql://root@tcp(" + hp + ")/test" },

		odbcEnv: "POOLDRIVER_ODBC_MYSQL_DSN",
		odbcDSN: func(host, port string) string {
			return "odbc://Driver={MariaDB Unicode};Server=" + host + ";Port=" + port + ";Database=test;UID=root;"
		},
	},
}

// The labels of every container: containerLabel; runLabel, the value of
// POOLDRIVER_TEST_RUN (make test-docker checks by it that none is left);
// and the host and process that started it, by which a later run removes
// the containers of a process that died without removing them.
const (
	containerLabel = "pooldriver.test"
	runLabel       = "pooldriver.test.run"
	hostLabel      = "pooldriver.test.host"
	pidLabel       = "pooldriver.test.pid"
)

// removeOrphans removes the containers that runs on this host left behind
// because their process died first (a panicking test, -timeout, SIGKILL):
// without Ryuk, testcontainers' reaper, nothing else would.
func removeOrphans(ctx context.Context) {
	host, _ := os.Hostname()
	cli, err := testcontainers.NewDockerClientWithOpts(ctx)
	if err != nil {
		return // the containers then fail to start, and say why
	}
	defer cli.Close()
	list, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true,
		Filters: make(client.Filters).Add("label", containerLabel).Add("label", hostLabel+"="+host)})
	if err != nil {
		return
	}
	for _, c := range list.Items {
		pid, err := strconv.Atoi(c.Labels[pidLabel])
		if err != nil || !errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) {
			continue // not ours to judge, or its process lives
		}
		_, err = cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
		fmt.Fprintf(os.Stderr, "integration: removing container %.12s (%s), left by process %d: %v\n", c.ID, c.Image, pid, errOrDone(err))
	}
}

func errOrDone(err error) any {
	if err != nil {
		return err
	}
	return "done"
}

// dockerCheckTimeout bounds the search for a Docker engine, so that a
// machine without one does not wait for it.
const dockerCheckTimeout = 1500 * time.Millisecond

// dockerAnswers asks testcontainers whether a Docker engine is reachable,
// giving up after timeout (its client may otherwise wait on a dead host).
func dockerAnswers(timeout time.Duration) error {
	done := make(chan error, 1)
	go func() {
		defer func() {
			if r := recover(); r != nil { // testcontainers panics on some setups
				done <- fmt.Errorf("%v", r)
			}
		}()
		p, err := testcontainers.NewDockerProvider()
		if err != nil {
			done <- err
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		done <- p.Health(ctx) // closes p
	}()
	select {
	case err := <-done:
		return err
	case <-time.After(timeout):
		return fmt.Errorf("no answer within %v", timeout)
	}
}

// containerSet is the containers of the run.
type containerSet struct {
	mu      sync.Mutex // protects started and stopped
	started []*testcontainers.DockerContainer
	stopped bool
}

// add records a container to remove; after stop it removes it at once.
func (cs *containerSet) add(c *testcontainers.DockerContainer) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.stopped {
		terminate(c)
		return
	}
	cs.started = append(cs.started, c)
}

// stop removes every container started so far, once.
func (cs *containerSet) stop() {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.stopped {
		return
	}
	cs.stopped = true
	for _, c := range cs.started {
		terminate(c)
	}
}

func terminate(c *testcontainers.DockerContainer) {
	// Nothing in it is kept: no need to wait for the server to shut down.
	if err := testcontainers.TerminateContainer(c, testcontainers.StopTimeout(0)); err != nil {
		fmt.Fprintf(os.Stderr, "integration: removing container %.12s: %v\n", c.GetContainerID(), err)
	} else {
		fmt.Fprintf(os.Stderr, "integration: removed container %.12s (%s)\n", c.GetContainerID(), c.Image)
	}
}

// startContainers starts a container for each of envs, at the same time,
// and records each server's DSN (and its ODBC DSN, where that variable is
// unset) once it answers. stop removes them all; it also runs, and the
// process exits, on SIGINT or SIGTERM.
func startContainers(envs []string) (stop func(), err error) {
	cs := &containerSet{}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	quit := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		select {
		case s := <-sig:
			fmt.Fprintf(os.Stderr, "integration: %v: removing the containers\n", s)
			cs.stop()
			os.Exit(1)
		case <-quit:
		}
	}()
	stop = func() {
		signal.Stop(sig)
		close(quit)
		wg.Wait()
		cs.stop()
	}

	host, _ := os.Hostname()
	labels := map[string]string{
		containerLabel: "integration",
		runLabel:       os.Getenv("POOLDRIVER_TEST_RUN"),
		hostLabel:      host,
		pidLabel:       strconv.Itoa(os.Getpid()),
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	removeOrphans(ctx)
	var (
		mu   sync.Mutex // protects errs and dsns while starting
		errs []error
		all  sync.WaitGroup
	)
	for _, env := range envs {
		all.Add(1)
		go func() {
			defer all.Done()
			got, err := startContainer(ctx, cs, env, labels)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			dsns[env] = got[0]
			if os.Getenv(containers[env].odbcEnv) == "" {
				dsns[containers[env].odbcEnv] = got[1]
			}
		}()
	}
	all.Wait()
	return stop, errors.Join(errs...)
}

// startContainer starts one container and returns its server's DSN and ODBC
// DSN once the server answers a ping.
func startContainer(ctx context.Context, cs *containerSet, env string, labels map[string]string) ([2]string, error) {
	def := containers[env]
	ref := os.Getenv(def.imageEnv)
	if ref == "" {
		ref = def.image
	}
	c, err := testcontainers.Run(ctx, ref,
		testcontainers.WithEnv(def.env),
		testcontainers.WithExposedPorts(def.port),
		testcontainers.WithLabels(labels),
		testcontainers.WithWaitStrategy(wait.ForAll(
			wait.ForLog(def.ready).AsRegexp(),
			wait.ForListeningPort(def.port),
		).WithDeadline(3*time.Minute)),
	)
	if c != nil {
		cs.add(c)
	}
	if err != nil {
		return [2]string{}, fmt.Errorf("%s: %w%s", ref, err, logTail(c))
	}
	host, err := c.Host(ctx)
	if err != nil {
		return [2]string{}, fmt.Errorf("%s: %w", ref, err)
	}
	// MariaDB's clients take localhost to mean the Unix socket.
	if host == "localhost" {
		host = "127.0.0.1"
	}
	port, err := c.MappedPort(ctx, def.port)
	if err != nil {
		return [2]string{}, fmt.Errorf("%s: %w", ref, err)
	}
	dsn := def.dsn(net.JoinHostPort(host, port.Port()))
	if err := pingUntilReady(ctx, dsn); err != nil {
		return [2]string{}, fmt.Errorf("%s: %w%s", ref, err, logTail(c))
	}
	fmt.Fprintf(os.Stderr, "integration: %s: container %.12s of %s at %s:%s\n", env, c.GetContainerID(), ref, host, port.Port())
	return [2]string{dsn, def.odbcDSN(host, port.Port())}, nil
}

// logTail returns the last lines the container logged, to explain why it
// did not start.
func logTail(c *testcontainers.DockerContainer) string {
	if c == nil {
		return ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := c.Logs(ctx)
	if err != nil {
		return ""
	}
	defer r.Close()
	var lines []string
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) > 15 {
			lines = lines[1:]
		}
	}
	if len(lines) == 0 {
		return ""
	}
	return "; the container's last lines:\n\t" + strings.Join(lines, "\n\t")
}

// pingUntilReady opens a connection to dsn until one answers a ping or ctx
// ends.
func pingUntilReady(ctx context.Context, dsn string) error {
	scheme, _ := dialects.SchemeOf(dsn)
	d, err := dialects.Lookup(scheme)
	if err != nil {
		return err
	}
	tmpl, _, err := d.Parse(dsn)
	if err != nil {
		return err
	}
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		c, err := tmpl.Open(ctx, tmpl.Credentials())
		if err == nil {
			err = c.Ping(ctx)
			_ = c.Close()
			if err == nil {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("server not ready: %w", err)
		case <-tick.C:
		}
	}
}
