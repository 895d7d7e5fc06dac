//go:build unix

package dialects

import (
	"io"
	"net"
	"syscall"
)

// peeker looks at a socket without reading from it. Everything a peek
// needs is made once, in init: the raw connection and the function given to
// its Control (a method value, with its results in the peeker), so that a
// peek allocates nothing.
type peeker struct {
	rc   syscall.RawConn // nil: not a socket, nothing to check
	fn   func(fd uintptr)
	buf  [1]byte
	n    int
	rerr error
}

func (p *peeker) init(c net.Conn) {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return
	}
	p.rc, p.fn = rc, p.recv
}

func (p *peeker) recv(fd uintptr) {
	p.n, _, p.rerr = syscall.Recvfrom(int(fd), p.buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
}

func (p *peeker) peek() error {
	if p.rc == nil {
		return nil
	}
	// Control, not Read: Read takes the socket's read lock, which a
	// driver's own reader goroutine may hold while it waits for the server
	// (pgx leaves one in Read after a slow write), and would wait for it
	// forever. A peek that neither blocks nor consumes needs no lock.
	err := p.rc.Control(p.fn)
	n, rerr := p.n, p.rerr
	p.rerr = nil
	switch {
	case err != nil:
		return err
	case rerr == syscall.EAGAIN || rerr == syscall.EWOULDBLOCK:
		return nil // nothing to read: alive
	case rerr != nil:
		return rerr
	case n == 0:
		return io.EOF
	default:
		return ErrUnexpectedData
	}
}
