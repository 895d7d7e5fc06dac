package faultproxy

import (
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// TestProxy: the proxy itself, against an echo server: forward passes
// bytes, delay holds them back, a black hole passes nothing and closes
// nothing until it ends, reset cuts connections with an RST.
func TestProxy(t *testing.T) {
	echo, err := net.Listen("tcp", "127.0.0.1:0")
	noErr(t, err, "")
	defer echo.Close()
	go func() {
		for {
			c, err := echo.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(c, c); _ = c.Close() }()
		}
	}()
	p, err := New(echo.Addr().String())
	noErr(t, err, "")
	defer p.Close()
	c, err := net.Dial("tcp", p.Addr())
	noErr(t, err, "")
	defer c.Close()
	roundTrip := func(deadline time.Duration) (time.Duration, error) {
		start := time.Now()
		_ = c.SetDeadline(start.Add(deadline))
		if _, err := c.Write([]byte("ping")); err != nil {
			return 0, err
		}
		buf := make([]byte, 4)
		_, err := io.ReadFull(c, buf)
		if err == nil && string(buf) != "ping" {
			err = errors.New("wrong bytes: " + string(buf))
		}
		return time.Since(start), err
	}
	_, err = roundTrip(5 * time.Second)
	noErr(t, err, "forward")

	p.Set(Delay, 100*time.Millisecond)
	d, err := roundTrip(5 * time.Second)
	noErr(t, err, "delay")
	check(t, d >= 200*time.Millisecond, "two chunks held back 100ms each")

	p.Set(BlackHole, 0)
	_, err = roundTrip(300 * time.Millisecond)
	var ne net.Error
	check(t, errors.As(err, &ne) && ne.Timeout(), "black hole: %v", err)
	p.Set(Forward, 0) // what was swallowed is delivered now
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 4)
	_, err = io.ReadFull(c, buf)
	noErr(t, err, "after the black hole")

	p.Set(Reset, 0)
	_, err = roundTrip(5 * time.Second)
	check(t, err != nil, "reset")
	c2, err := net.Dial("tcp", p.Addr()) // accepted, then reset: the dial may see it already
	if err == nil {
		_ = c2.SetDeadline(time.Now().Add(5 * time.Second))
		_, err = c2.Read(buf)
		c2.Close()
	}
	check(t, err != nil, "a new connection while resetting")
	check(t, !(errors.As(err, &ne) && ne.Timeout()), "a new connection while resetting was not reset: %v", err)
}

func noErr(t *testing.T, err error, what string) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func check(t *testing.T, ok bool, format string, args ...any) {
	t.Helper()
	if !ok {
		t.Fatalf(format, args...)
	}
}

func TestProxyFilter(t *testing.T) {
	// A server that answers "ok:" and what it read.
	ln := serve(t, func(c net.Conn) {
		buf := make([]byte, 64)
		for {
			n, err := c.Read(buf)
			if err != nil {
				return
			}
			if _, err := c.Write(append([]byte("ok:"), buf[:n]...)); err != nil {
				return
			}
		}
	})
	p, err := New(ln.Addr().String())
	noErr(t, err, "proxy")
	defer p.Close()

	exchange := func(c net.Conn, msg string) (string, error) {
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Write([]byte(msg)); err != nil {
			return "", err
		}
		buf := make([]byte, 64)
		n, err := c.Read(buf)
		return string(buf[:n]), err
	}

	p.SetFilter(func(dir Direction, b []byte) Verdict {
		switch {
		case dir == ToClient && strings.Contains(string(b), "drop"):
			return DropAndCut
		case dir == ToClient && strings.Contains(string(b), "last"):
			return PassThenCut
		}
		return Pass
	})

	c, err := net.Dial("tcp", p.Addr())
	noErr(t, err, "dial")
	got, err := exchange(c, "a")
	check(t, err == nil && got == "ok:a", "passed: got %q, %v", got, err)
	got, err = exchange(c, "drop")
	check(t, err != nil && got == "", "dropped reply: got %q, %v; want an error and nothing", got, err)
	_ = c.Close()

	c, err = net.Dial("tcp", p.Addr())
	noErr(t, err, "dial")
	got, err = exchange(c, "last")
	check(t, err == nil && got == "ok:last", "delivered before the cut: got %q, %v", got, err)
	buf := make([]byte, 8)
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, err := c.Read(buf)
	check(t, n == 0 && err != nil, "after the cut: read %d bytes, %v; want the end", n, err)
	_ = c.Close()

	p.SetFilter(nil)
	c, err = net.Dial("tcp", p.Addr())
	noErr(t, err, "dial")
	got, err = exchange(c, "drop")
	check(t, err == nil && got == "ok:drop", "no filter: got %q, %v", got, err)
	_ = c.Close()
}

// TestBlackHoleLosesAbandonedConnects: a connection made during a black
// hole reaches the server once it ends, with what it sent meanwhile, unless
// its client closed it first: then the server never sees it, as a network
// that lost the connect's packets would leave it.
func TestBlackHoleLosesAbandonedConnects(t *testing.T) {
	accepted := make(chan string, 4) // what each accepted connection sent first
	ln := serve(t, func(c net.Conn) {
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		buf := make([]byte, 64)
		n, _ := c.Read(buf)
		accepted <- string(buf[:n])
		_, _ = c.Write([]byte("ok"))
	})
	p, err := New(ln.Addr().String())
	noErr(t, err, "proxy")
	defer p.Close()

	p.Set(BlackHole, 0)
	gone, err := net.Dial("tcp", p.Addr())
	noErr(t, err, "dial the one that gives up")
	_, err = gone.Write([]byte("abandoned"))
	noErr(t, err, "write")
	kept, err := net.Dial("tcp", p.Addr())
	noErr(t, err, "dial the one that waits")
	_, err = kept.Write([]byte("kept"))
	noErr(t, err, "write")
	time.Sleep(50 * time.Millisecond) // the proxy holds both
	_ = gone.Close()
	time.Sleep(50 * time.Millisecond) // and sees the first one go
	p.Set(Forward, 0)

	_ = kept.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 8)
	n, err := kept.Read(buf)
	check(t, err == nil && string(buf[:n]) == "ok", "the waiting connection after the black hole: %q, %v", buf[:n], err)
	_ = kept.Close()
	check(t, <-accepted == "kept", "the server's first connection is not the one that waited")
	select {
	case got := <-accepted:
		t.Fatalf("the server saw the abandoned connect, which sent %q", got)
	case <-time.After(200 * time.Millisecond):
	}
}

// serve listens on a free loopback port until the test ends and runs
// handle on each connection accepted, which it closes after.
func serve(t *testing.T, handle func(net.Conn)) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	noErr(t, err, "listen")
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer func() { _ = c.Close() }()
				handle(c)
			}()
		}
	}()
	return ln
}
