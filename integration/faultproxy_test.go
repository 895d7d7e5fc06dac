package integration

import (
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// proxyMode is what the fault proxy does with the traffic.
type proxyMode int

const (
	forward proxyMode = iota // pass bytes both ways
	delay                    // pass them, each chunk held back by the proxy's delay
	swallow                  // accept and hold connections, pass nothing, close nothing
	reset                    // cut every connection with a TCP RST, and every new one
)

// faultProxy is a TCP proxy on a free loopback port in front of a server,
// whose behaviour a test switches while clients are connected: the network
// faults of the fault suite, made on loopback only.
type faultProxy struct {
	ln     net.Listener
	target string

	mu    sync.Mutex // protects the fields below
	mode  proxyMode
	lag   time.Duration
	wake  chan struct{}         // closed and replaced on every mode change
	conns map[net.Conn]struct{} // both ends of every pair
	wg    sync.WaitGroup        // the proxy's goroutines
}

// newFaultProxy starts a proxy to target (host:port), forwarding; it is
// closed, with every connection through it, when the test ends.
func newFaultProxy(t *testing.T, target string) *faultProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &faultProxy{ln: ln, target: target, wake: make(chan struct{}), conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

// addr is the proxy's host:port.
func (p *faultProxy) addr() string { return p.ln.Addr().String() }

// set switches the mode; lag is the delay mode's.
func (p *faultProxy) set(m proxyMode, lag time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mode, p.lag = m, lag
	close(p.wake)
	p.wake = make(chan struct{})
	if m == reset {
		for c := range p.conns {
			rst(c)
		}
	}
}

// rst closes c so that the peer sees a connection reset.
func rst(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = c.Close()
}

func (p *faultProxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.conns == nil {
		return false // closed
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *faultProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		if !p.track(c) {
			_ = c.Close()
			return
		}
		p.wg.Add(1)
		go p.serve(c)
	}
}

// serve connects c to the target once the mode lets it, then pumps bytes
// both ways.
func (p *faultProxy) serve(c net.Conn) {
	defer p.wg.Done()
	var up net.Conn
	for up == nil {
		p.mu.Lock()
		m, wake := p.mode, p.wake
		p.mu.Unlock()
		switch m {
		case reset:
			rst(c)
			return
		case swallow:
			<-wake // hold it, answer nothing
			if p.closed() {
				return
			}
			continue
		}
		var err error
		up, err = net.DialTimeout("tcp", p.target, 5*time.Second)
		if err != nil || !p.track(up) {
			_ = c.Close()
			return
		}
	}
	var pumps sync.WaitGroup
	pumps.Add(2)
	go func() { defer pumps.Done(); p.pump(up, c) }()
	go func() { defer pumps.Done(); p.pump(c, up) }()
	pumps.Wait()
}

func (p *faultProxy) closed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.conns == nil
}

// pump copies src to dst chunk by chunk, as the mode says at each chunk;
// when either side ends, it ends both.
func (p *faultProxy) pump(dst, src net.Conn) {
	defer func() {
		_ = src.Close()
		_ = dst.Close()
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !p.deliver(dst, buf[:n]) {
			return
		}
		if err != nil {
			return
		}
	}
}

// deliver writes b to dst when the mode lets it: at once, after the lag,
// or after a black hole ends (never, if it ends in a reset or the close).
func (p *faultProxy) deliver(dst net.Conn, b []byte) bool {
	for {
		p.mu.Lock()
		m, lag, wake := p.mode, p.lag, p.wake
		p.mu.Unlock()
		switch m {
		case reset:
			return false
		case swallow:
			<-wake
			if p.closed() {
				return false
			}
			continue
		case delay:
			select {
			case <-time.After(lag):
			case <-wake:
			}
		}
		_, err := dst.Write(b)
		return err == nil
	}
}

// close stops the proxy and cuts every connection through it.
func (p *faultProxy) close() {
	_ = p.ln.Close()
	p.mu.Lock()
	conns := p.conns
	p.conns = nil
	close(p.wake)
	p.wake = make(chan struct{})
	p.mu.Unlock()
	for c := range conns {
		_ = c.Close()
	}
	p.wg.Wait()
}

// TestFaultProxy: the proxy itself, against an echo server: forward passes
// bytes, delay holds them back, a black hole passes nothing and closes
// nothing until it ends, reset cuts connections with an RST.
func TestFaultProxy(t *testing.T) {
	echo, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
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
	p := newFaultProxy(t, echo.Addr().String())
	c, err := net.Dial("tcp", p.addr())
	require.NoError(t, err)
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
	require.NoError(t, err, "forward")

	p.set(delay, 100*time.Millisecond)
	d, err := roundTrip(5 * time.Second)
	require.NoError(t, err, "delay")
	require.GreaterOrEqual(t, d, 200*time.Millisecond, "two chunks held back 100ms each")

	p.set(swallow, 0)
	_, err = roundTrip(300 * time.Millisecond)
	var ne net.Error
	require.True(t, errors.As(err, &ne) && ne.Timeout(), "black hole: %v", err)
	p.set(forward, 0) // what was swallowed is delivered now
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 4)
	_, err = io.ReadFull(c, buf)
	require.NoError(t, err, "after the black hole")

	p.set(reset, 0)
	_, err = roundTrip(5 * time.Second)
	require.Error(t, err, "reset")
	c2, err := net.Dial("tcp", p.addr()) // accepted, then reset: the dial may see it already
	if err == nil {
		_ = c2.SetDeadline(time.Now().Add(5 * time.Second))
		_, err = c2.Read(buf)
		c2.Close()
	}
	require.Error(t, err, "a new connection while resetting")
	require.False(t, errors.As(err, &ne) && ne.Timeout(), "a new connection while resetting was not reset: %v", err)
}
