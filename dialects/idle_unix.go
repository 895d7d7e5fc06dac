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
	err = rc.Read(func(fd uintptr) bool {
		n, _, rerr = syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		return true // never wait for readiness
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
