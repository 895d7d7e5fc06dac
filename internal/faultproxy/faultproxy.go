// Package faultproxy is a loopback TCP proxy that makes network faults on
// demand (delay, black hole, reset), for the fault suite in integration/
// and the faults workload of bench/cmd/loadtest.
package faultproxy

import (
	"errors"
	"net"
	"sync"
	"time"
)

// Mode is what the fault proxy does with the traffic.
type Mode int

const (
	Forward   Mode = iota // pass bytes both ways
	Delay                 // pass them, each chunk held back by the lag
	BlackHole             // accept and hold connections, pass nothing, close nothing
	Reset                 // cut every connection with a TCP RST, and every new one
)

// Direction is which way a chunk of bytes travels through the proxy.
type Direction int

const (
	ToServer Direction = iota // the client's bytes, on their way to the server
	ToClient                  // the server's bytes, on their way to the client
)

// Verdict is what a Filter decides for one chunk of bytes.
type Verdict int

const (
	Pass        Verdict = iota // deliver it, as the mode says
	DropAndCut                 // lose it and cut the pair: the client sees a reset, the server an end of file
	PassThenCut                // deliver it, then close the pair: the client reads it, then an end of file
)

// A Filter sees every chunk read from either side before it is delivered,
// and decides its fate: a cut at a chosen message (a server's reply lost
// after the server applied the statement, a request lost before it
// arrived). On loopback a small message arrives in one chunk; a filter that
// matches a message should still look for it anywhere in the chunk. It
// runs on the proxy's goroutines, one per direction and connection pair.
type Filter func(dir Direction, b []byte) Verdict

// Proxy is a TCP proxy on a free loopback port in front of a server,
// whose behaviour its user switches while clients are connected: network
// faults made on loopback only.
type Proxy struct {
	ln     net.Listener
	target string

	mu    sync.Mutex // protects the fields below
	mode  Mode
	lag   time.Duration
	wake  chan struct{}         // closed and replaced on every mode change
	watch Filter                // nil: every chunk passes
	conns map[net.Conn]struct{} // both ends of every pair
	wg    sync.WaitGroup        // the proxy's goroutines
}

// New starts a proxy on a free loopback port to target (host:port),
// forwarding. Close stops it.
func New(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, target: target, wake: make(chan struct{}), conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the proxy's host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Set switches the mode; lag is Delay's.
func (p *Proxy) Set(m Mode, lag time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mode, p.lag = m, lag
	close(p.wake)
	p.wake = make(chan struct{})
	if m == Reset {
		for c := range p.conns {
			rst(c)
		}
	}
}

// SetFilter sets the filter every chunk goes through from now on; nil
// removes it.
func (p *Proxy) SetFilter(f Filter) {
	p.mu.Lock()
	p.watch = f
	p.mu.Unlock()
}

// rst closes c so that the peer sees a connection reset.
func rst(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = c.Close()
}

func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.conns == nil {
		return false // closed
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) accept() {
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
func (p *Proxy) serve(c net.Conn) {
	defer p.wg.Done()
	var up net.Conn
	var held []byte // what c sent while the black hole held it
	for up == nil {
		p.mu.Lock()
		// Read with the mode under one lock: a wake read after Close is
		// Close's new one, which nothing closes.
		m, wake, closed := p.mode, p.wake, p.conns == nil
		p.mu.Unlock()
		if closed {
			return // Close closed c
		}
		switch m {
		case Reset:
			rst(c)
			return
		case BlackHole:
			var gone bool
			if held, gone = hold(c, wake, held); gone {
				_ = c.Close() // the server never hears of it
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
		if len(held) > 0 {
			if _, err := up.Write(held); err != nil {
				_ = c.Close()
				_ = up.Close()
				return
			}
		}
	}
	var pumps sync.WaitGroup
	pumps.Add(2)
	go func() { defer pumps.Done(); p.pump(up, c, ToServer) }()
	go func() { defer pumps.Done(); p.pump(c, up, ToClient) }()
	pumps.Wait()
}

// hold keeps c, a connection the black hole caught before it reached
// the server, until wake: it reads what c sends (appended to held) and
// reports gone when c closed meanwhile. A network that loses every packet
// loses the connect of a client that gave up in the meantime: the server
// never sees it once the network is back, nor a burst of the connects
// abandoned during the fault.
func hold(c net.Conn, wake <-chan struct{}, held []byte) ([]byte, bool) {
	done := make(chan error, 1)
	go func() {
		buf := make([]byte, 4<<10)
		for {
			n, err := c.Read(buf)
			held = append(held, buf[:n]...)
			if err != nil {
				done <- err
				return
			}
		}
	}()
	var err error
	select {
	case err = <-done:
	case <-wake:
		_ = c.SetReadDeadline(time.Now()) // stop the reader, and keep c
		err = <-done
		_ = c.SetReadDeadline(time.Time{})
	}
	var ne net.Error
	return held, !(errors.As(err, &ne) && ne.Timeout())
}

// pump copies src to dst chunk by chunk, as the filter and the mode say at
// each chunk; when either side ends, it ends both. dir is the way from src
// to dst.
func (p *Proxy) pump(dst, src net.Conn, dir Direction) {
	cut := false
	defer func() {
		if cut {
			// The client sees a reset, at once; the server an end of file.
			client := dst
			if dir == ToServer {
				client = src
			}
			rst(client)
		}
		_ = src.Close()
		_ = dst.Close()
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			f := p.watch
			p.mu.Unlock()
			v := Pass
			if f != nil {
				v = f(dir, buf[:n])
			}
			if v == DropAndCut {
				cut = true
				return
			}
			if !p.deliver(dst, buf[:n]) {
				return
			}
			if v == PassThenCut {
				return // a plain close: a reset could discard what was delivered
			}
		}
		if err != nil {
			return
		}
	}
}

// deliver writes b to dst when the mode lets it: at once, after the lag,
// or after a black hole ends (never, if it ends in a reset or the close).
func (p *Proxy) deliver(dst net.Conn, b []byte) bool {
	for {
		p.mu.Lock()
		m, lag, wake, closed := p.mode, p.lag, p.wake, p.conns == nil
		p.mu.Unlock()
		if closed {
			return false
		}
		switch m {
		case Reset:
			return false
		case BlackHole:
			<-wake
			continue
		case Delay:
			select {
			case <-time.After(lag):
			case <-wake:
			}
		}
		_, err := dst.Write(b)
		return err == nil
	}
}

// Close stops the proxy and cuts every connection through it; it returns
// once its goroutines have ended. It may be called more than once.
func (p *Proxy) Close() {
	_ = p.ln.Close()
	p.mu.Lock()
	if p.conns == nil {
		p.mu.Unlock()
		p.wg.Wait()
		return
	}
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
