package faultproxy

import (
	"errors"
	"io"
	"net"
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
