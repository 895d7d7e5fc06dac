package main

import (
	"context"
	"net"
	"strings"
	"testing"
)

// TestOpenNoServer: with nothing listening at the DSN's port, open fails
// with an error that names the DSN and says how to point the example at a
// server.
func TestOpenNoServer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	_ = ln.Close()
	_, _, err = open(context.Background(), "postgres://postgres@"+closed+"/test?sslmode=disable")
	if err == nil {
		t.Fatal("open succeeded with no server")
	}
	for _, want := range []string{closed, "-dsn", "POOLDRIVER_POSTGRES_DSN"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q: does not say %s", err, want)
		}
	}
}
