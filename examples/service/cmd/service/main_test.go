package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pooldriver/pooldriver"
)

// TestRunNoServer: with nothing listening at the DSN's port, run fails
// with an error that says how to point the service at a server, and main
// prints it with "service: " once.
func TestRunNoServer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	_ = ln.Close()
	var stdout, stderr bytes.Buffer
	err = run(context.Background(), []string{"-dsn", "postgres://postgres@" + closed + "/test?sslmode=disable", "-addr", "127.0.0.1:0"}, &stdout, &stderr)
	if err == nil {
		t.Fatal("run succeeded with no server")
	}
	line := errorLine(err)
	if !strings.HasPrefix(line, "service: ") || strings.Count(line, "service: ") != 1 {
		t.Errorf("%q: want \"service: \" once, in front", line)
	}
	for _, want := range []string{"-dsn", "POOLDRIVER_POSTGRES_DSN", closed} {
		if !strings.Contains(line, want) {
			t.Errorf("%q: does not say %s", line, want)
		}
	}
	if !errors.Is(err, pooldriver.ErrServerRefused) {
		t.Errorf("%v: does not match ErrServerRefused", err)
	}
}

// TestRun runs the command as its README does, on a port of its own and in
// a schema of the test's own, until its context ends as a signal would end
// it: /metrics has both exporters' series, the API answers, the logs are
// JSON, the spans reach stderr, and run returns nil once shut down.
func TestRun(t *testing.T) {
	dsn := os.Getenv("POOLDRIVER_POSTGRES_DSN")
	if dsn == "" {
		msg := "POOLDRIVER_POSTGRES_DSN is not set; to run against a server: POOLDRIVER_POSTGRES_DSN='postgres://postgres@127.0.0.1:5432/test?sslmode=disable' go test ./..."
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	admin, err := pooldriver.Open(dsn, pooldriver.WithPoolName("service-main-test-admin"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = admin.Close() }()
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	schema := "pdsvc_main_" + hex.EncodeToString(b)
	mustExec(t, admin, "CREATE SCHEMA "+schema)
	defer mustExec(t, admin, "DROP SCHEMA "+schema+" CASCADE")
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()

	var stdout, stderr syncBuffer
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"-dsn", u.String(), "-addr", "127.0.0.1:0", "-pool-name", "main-test"}, &stdout, &stderr)
	}()

	// The address it listens on, from its log.
	var addr string
	deadline := time.Now().Add(30 * time.Second)
	for addr == "" {
		for line := range strings.Lines(stdout.String()) {
			var r struct{ Msg, Addr string }
			if err := json.Unmarshal([]byte(line), &r); err != nil {
				t.Fatalf("a log line that is not JSON: %q", line)
			}
			if r.Msg == "listening" {
				addr = r.Addr
			}
		}
		select {
		case err := <-done:
			t.Fatalf("run returned %v before listening; stdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
		default:
		}
		if addr == "" && time.Now().After(deadline) {
			t.Fatalf("not listening after 30s; stdout:\n%s", stdout.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	base := "http://" + addr
	client := &http.Client{Transport: &http.Transport{}, Timeout: time.Minute}
	defer client.CloseIdleConnections()

	resp, err := client.Post(base+"/notes", "text/plain", strings.NewReader("from main"))
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("POST /notes: %s", resp.Status)
	}
	resp, err = client.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	// promcollector's series, and otelpool's through OpenTelemetry's
	// Prometheus exporter, both of the pool main-test; the runtime's.
	for _, want := range []string{
		`pooldriver_connections{pool="main-test",state="idle"}`,
		`pooldriver_circuit_breaker_state{pool="main-test",state="limited"} 0`,
		`db_client_connection_count{db_client_connection_pool_name="main-test",db_client_connection_state="used"`,
		`db_client_connection_max{db_client_connection_pool_name="main-test"`,
		"go_goroutines ",
	} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("/metrics has no %s", want)
		}
	}

	stop() // as SIGINT does
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("run still running 30s after its context ended")
	}
	out := stdout.String()
	for _, want := range []string{`"msg":"pooldriver: pool opened","pool":"main-test"`, `"msg":"request","method":"POST","route":"/notes"`, `"msg":"shutting down"`} {
		if !strings.Contains(out, want) {
			t.Errorf("the log has no %s:\n%s", want, out)
		}
	}
	// The request's span, flushed to stderr at shutdown.
	if !strings.Contains(stderr.String(), `"Name":"POST /notes"`) {
		t.Errorf("no span of POST /notes on stderr:\n%s", stderr.String())
	}
}

func mustExec(t *testing.T, db *sql.DB, stmt string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := db.ExecContext(ctx, stmt); err != nil {
		t.Fatal(fmt.Errorf("%s: %w", stmt, err))
	}
}

// syncBuffer is a bytes.Buffer run may write while the test reads it.
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
