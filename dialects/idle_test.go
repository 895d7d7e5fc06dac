package dialects

import (
	"errors"
	"io"
	"net"
	"testing"
	"time"
)

func TestCheckSocket(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			accepted <- c
		}
	}()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	server := <-accepted

	if err := CheckSocket(client); err != nil {
		t.Fatalf("quiet idle socket: %v", err)
	}
	if _, err := server.Write([]byte("E")); err != nil {
		t.Fatal(err)
	}
	waitErr := func(want error) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for {
			err := CheckSocket(client)
			if errors.Is(err, want) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("CheckSocket = %v, want %v", err, want)
			}
			time.Sleep(time.Millisecond)
		}
	}
	// A SocketCheck set up once says the same, and allocates nothing
	// per check (it runs every time an idle connection is handed out).
	var sc SocketCheck
	sc.Init(client)
	if allocs := testing.AllocsPerRun(100, func() {
		if err := sc.Check(); !errors.Is(err, ErrUnexpectedData) && err != nil {
			t.Errorf("SocketCheck.Check = %v", err)
		}
	}); allocs != 0 {
		t.Errorf("SocketCheck.Check allocated %v times per check, want 0", allocs)
	}
	waitErr(ErrUnexpectedData)
	if err := sc.Check(); !errors.Is(err, ErrUnexpectedData) {
		t.Fatalf("SocketCheck.Check = %v, want %v", err, ErrUnexpectedData)
	}
	// Peeking consumed nothing.
	buf := make([]byte, 1)
	if _, err := io.ReadFull(client, buf); err != nil || buf[0] != 'E' {
		t.Fatalf("the peeked byte was consumed: %q %v", buf, err)
	}
	server.Close()
	waitErr(io.EOF)
	if err := sc.Check(); !errors.Is(err, io.EOF) {
		t.Fatalf("SocketCheck.Check = %v, want %v", err, io.EOF)
	}

	if err := CheckSocket(nil); err != nil {
		t.Fatalf("not a socket: %v", err)
	}
}

// TestCheckSocketDoesNotWaitForAReader: a driver's reader goroutine blocked
// in Read on the connection must not block the check.
func TestCheckSocketDoesNotWaitForAReader(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err == nil {
			defer c.Close()
			time.Sleep(10 * time.Second) // silent server
		}
	}()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	go func() { _, _ = client.Read(make([]byte, 1)) }() // holds the read lock until the conn closes
	time.Sleep(20 * time.Millisecond)
	done := make(chan error, 1)
	go func() { done <- CheckSocket(client) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("quiet socket: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("CheckSocket waited for the blocked reader")
	}
	client.Close()
}
