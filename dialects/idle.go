package dialects

import (
	"crypto/tls"
	"errors"
	"net"
)

// IdleChecker is implemented by a Conn that can tell, without a round trip,
// that the server closed it while it sat idle. pooldriver calls CheckIdle
// before it hands out an idle connection and replaces the connection when it
// returns an error, so that a connection the server killed (a restart,
// pg_terminate_backend, KILL, an idle timeout) never fails a statement.
type IdleChecker interface {
	CheckIdle() error
}

// ErrUnexpectedData is returned by CheckSocket for an idle connection with
// bytes waiting: the server spoke unasked, which it does before hanging up
// (PostgreSQL's "terminating connection due to administrator command").
var ErrUnexpectedData = errors.New("pooldriver: idle connection has unexpected data from the server")

// CheckSocket checks an idle connection's socket without blocking and
// without consuming anything: an idle connection has nothing to read, so
// end-of-file (the server hung up) or waiting bytes mean it is unusable. For
// a TLS connection it looks at the TCP connection underneath. It returns nil
// when it cannot tell (not a socket, or a platform without the check).
func CheckSocket(c net.Conn) error {
	var s SocketCheck
	s.Init(c)
	return s.Check()
}

// SocketCheck is CheckSocket for one connection, set up once (Init), so
// that each Check allocates nothing: a dialect keeps one per connection and
// runs it every time the connection is handed out idle. Like a Conn it is
// not safe for concurrent use, and it must not be copied after Init (it
// refers to itself).
type SocketCheck struct {
	p peeker
}

// Init prepares s for c (for a TLS connection, the TCP connection
// underneath). On a socket it cannot check, Check returns nil.
func (s *SocketCheck) Init(c net.Conn) {
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	s.p.init(c)
}

// Check is CheckSocket on the connection given to Init.
func (s *SocketCheck) Check() error { return s.p.peek() }
