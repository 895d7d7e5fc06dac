package fakedb

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// servers is the process-wide registry through which fake DSNs and
// [Driver.Open] find a server by name.
var (
	serversMu sync.Mutex // protects servers
	servers   = map[string]*Server{}
)

// lookupServer returns the server registered under name.
func lookupServer(name string) (*Server, error) {
	serversMu.Lock()
	s := servers[name]
	serversMu.Unlock()
	if s == nil {
		return nil, &nameError{err: ErrNoServer, what: " ", name: name}
	}
	return s, nil
}

// nameError wraps an error with the name it is about: err, then what, then
// the quoted name.
type nameError struct {
	err  error
	what string
	name string
}

func (e *nameError) Error() string { return e.err.Error() + e.what + strconv.Quote(e.name) }
func (e *nameError) Unwrap() error { return e.err }

// Server is a fake database server: committed tables, credentials, the set
// of open conns, counters and failure switches. All methods are safe for
// concurrent use.
type Server struct {
	name  string
	stats counters

	// Lock order: Conn.mu before Server.mu.
	mu           sync.Mutex             // protects the following fields
	tables       map[string][]int64     // committed rows
	passwords    map[string]string      // user → password; empty: no check
	conns        map[*Conn]struct{}     // open conns
	failConnects int                    // connect attempts still to fail
	failTxStatus int                    // dialect TxStatus calls still to fail
	loseReplies  atomic.Int32           // statements to lose the reply of (LoseReplies)
	failErr      error                  // what they fail with
	connectDelay time.Duration          // wait before every connect
	onPing       atomic.Pointer[func()] // called by every Ping first (OnPing)
	nextID       int64                  // last conn ID handed out
}

// NewServer creates a server and registers it under name, replacing any
// server registered under that name before.
func NewServer(name string) *Server {
	s := &Server{
		name:   name,
		tables: map[string][]int64{},
		conns:  map[*Conn]struct{}{},
	}
	serversMu.Lock()
	servers[name] = s
	serversMu.Unlock()
	return s
}

// Name returns the name the server is registered under.
func (s *Server) Name() string { return s.name }

// Close unregisters the server (if it is still the one registered under its
// name): DSNs naming it stop working. Conns already open, and conns made by
// [Server.Connector], keep working.
func (s *Server) Close() {
	serversMu.Lock()
	if servers[s.name] == s {
		delete(servers, s.name)
	}
	serversMu.Unlock()
}

// SetPassword sets the password of user. Once any password is set, logins
// through [Dialect] must name a user with a password and give it; logins
// through [Server.Connector] are never checked.
func (s *Server) SetPassword(user, password string) {
	s.mu.Lock()
	if s.passwords == nil {
		s.passwords = map[string]string{}
	}
	s.passwords[user] = password
	s.mu.Unlock()
}

// FailConnects makes the next n connect attempts fail with err.
func (s *Server) FailConnects(n int, err error) {
	s.mu.Lock()
	s.failConnects, s.failErr = n, err
	s.mu.Unlock()
}

// FailTxStatus makes the next n dialect TxStatus calls fail, as asking the
// server for its transaction state fails when the statement's context ends
// or the connection is killed at that moment.
func (s *Server) FailTxStatus(n int) {
	s.mu.Lock()
	s.failTxStatus = n
	s.mu.Unlock()
}

// LoseReplies makes the next n statements that run lose their reply: the
// server applies each, then the connection breaks and the driver says
// driver.ErrBadConn, as pgx's stdlib does when it takes such a failure for
// one that happened before anything was sent. Only a dialect that counts
// what it sent (dialects.WriteCounter) can tell.
func (s *Server) LoseReplies(n int) { s.loseReplies.Store(int32(n)) }

func (s *Server) takeLostReply() bool {
	for {
		n := s.loseReplies.Load()
		if n <= 0 {
			return false
		}
		if s.loseReplies.CompareAndSwap(n, n-1) {
			return true
		}
	}
}

// takeTxStatusFailure consumes one injected TxStatus failure, if any.
func (s *Server) takeTxStatusFailure() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failTxStatus > 0 {
		s.failTxStatus--
		return true
	}
	return false
}

// OnPing has every Ping call f first (nil: none), on the pinging
// goroutine: a test holds a health check there.
func (s *Server) OnPing(f func()) {
	if f == nil {
		s.onPing.Store(nil)
		return
	}
	s.onPing.Store(&f)
}

// SetConnectDelay makes every connect attempt wait d first. The wait ends
// early, with the context's error, if the connect's context ends.
func (s *Server) SetConnectDelay(d time.Duration) {
	s.mu.Lock()
	s.connectDelay = d
	s.mu.Unlock()
}

// BreakAll breaks every open conn, as a dropped network would: its next
// call returns driver.ErrBadConn without running anything, and from then on
// IsValid reports false and every call fails with driver.ErrBadConn. Its
// transaction, if any, is rolled back when that call discovers the break or
// when the conn is closed.
func (s *Server) BreakAll() { s.markAll(stateBroken) }

// KillAll kills every open conn, as a server terminating the backend
// would: its next statement (Exec, Query, Prepare, Begin, Commit, Rollback,
// rows Next) fails with [ErrKilled], which is not driver.ErrBadConn; Ping
// and ResetSession return driver.ErrBadConn. The conn is dead afterwards,
// like a broken one.
func (s *Server) KillAll() { s.markAll(stateKilled) }

func (s *Server) markAll(state int32) {
	for _, c := range s.Conns() {
		c.state.CompareAndSwap(stateOK, state)
	}
}

// Conns returns the open conns, by ID.
func (s *Server) Conns() []*Conn {
	s.mu.Lock()
	out := make([]*Conn, 0, len(s.conns))
	for c := range s.conns {
		out = append(out, c)
	}
	s.mu.Unlock()
	slices.SortFunc(out, func(a, b *Conn) int { return int(a.id - b.id) })
	return out
}

// Table returns a copy of the committed rows of table, in insertion order.
func (s *Server) Table(name string) []int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.tables[name])
}

// OpenTxCount returns the number of conns currently inside a transaction.
func (s *Server) OpenTxCount() int { return int(s.stats.openTx.Load()) }

// Running returns the number of statements running on the server now.
// A statement counts from when it reaches the server (when
// [Stats].Statements counts it) until its call returns: a SLEEP counts for
// as long as it sleeps, a query until it returns its rows (not while they
// are read). Tests wait on it to know that a statement is under way.
func (s *Server) Running() int { return int(s.stats.running.Load()) }

// Stats returns a snapshot of the server's counters.
func (s *Server) Stats() Stats { return s.stats.snapshot() }

// connect opens a conn. With check set, user and password must match the
// password table (if any password is set).
func (s *Server) connect(ctx context.Context, user, password string, check bool, app string) (*Conn, error) {
	c, err := s.connectAttempt(ctx, user, password, check, app)
	if err != nil {
		s.stats.connectFailures.Add(1)
		return nil, err
	}
	s.stats.connects.Add(1)
	s.stats.opened()
	return c, nil
}

func (s *Server) connectAttempt(ctx context.Context, user, password string, check bool, app string) (*Conn, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	delay := s.connectDelay
	s.mu.Unlock()
	if delay > 0 {
		if err := sleep(ctx, delay); err != nil {
			return nil, err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failConnects > 0 {
		s.failConnects--
		return nil, s.failErr
	}
	if check && len(s.passwords) > 0 {
		if pw, ok := s.passwords[user]; !ok || pw != password {
			return nil, &nameError{err: ErrAuthFailed, what: " for user ", name: user}
		}
	}
	s.nextID++
	c := &Conn{srv: s, id: s.nextID, user: user, app: app}
	s.conns[c] = struct{}{}
	return c, nil
}

// sleep waits d, or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
