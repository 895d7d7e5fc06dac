//go:build unix

package dialects

import (
	"io"
	"net"
	"syscall"
)

func peekSocket(c net.Conn) error {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	var (
		buf  [1]byte
		n    int
		rerr error
	)
	// Control, not Read: Read takes the socket's read lock, which a
	// driver's own reader goroutine may hold while it waits for the server
	// (pgx leaves one in Read after a slow write), and would wait for it
	// forever. A peek that neither blocks nor consumes needs no lock.
	err = rc.Control(func(fd uintptr) {
		n, _, rerr = syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
	})
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
