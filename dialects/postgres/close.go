package postgres

import (
	"context"
	"net"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// Close closes the connection. A healthy one ends the way pgx ends it: a
// Terminate message, then the socket closed, waiting at most 5s for the
// write.
//
// A connection that is lost or in an unknown state is cut at once instead,
// by closing its socket (see abort): the server reads end-of-file, rolls
// back and ends the session, and its locks go with it.
func (c *conn) Close() error {
	pc := c.pgx().PgConn()
	if pc.IsClosed() || pc.IsBusy() {
		abort(pc)
		// pgx marks its connection closed; a Terminate it still writes
		// meets the closed socket, an error that says nothing here.
		_ = c.sc.Close()
		return nil
	}
	return c.sc.Close()
}

// abort closes pc's socket without a word to the server.
//
// pgx closes a connection whose read or write failed (a statement whose
// context ended mid-flight, a ROLLBACK past its cleanup timeout)
// asynchronously: it sends a cancel request over a new connection, then
// Terminate, then drains the socket, all bounded by 15s, and its Close
// returns at once meanwhile. On a loaded machine the cancel request alone
// can take seconds (the server starts a process for it), and the session
// stays "idle in transaction" with its row locks all that time, past
// db.Close. A connection still busy with a request (a result not read to
// its end) has no use for a Terminate either: the server may not be
// reading, and the write would wait.
//
// The raw socket beneath TLS is closed, not the TLS connection, whose
// Close writes an alert and could wait as well. pgx's own goroutine, if
// any, then finds the socket closed and ends.
func abort(pc *pgconn.PgConn) {
	nc := pc.Conn()
	if nc == nil {
		return
	}
	if u, ok := nc.(interface{ NetConn() net.Conn }); ok {
		nc = u.NetConn()
	}
	_ = nc.Close()
}

// Cut asks the server to cancel what the connection runs, waiting at most
// a second for the request to go out, then closes its socket (see abort
// and dialects.Cutter): without the cancel, a backend busy with a long
// statement would find its client gone only when it next writes.
func (c *conn) Cut() {
	pc := c.pgx().PgConn()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = pc.CancelRequest(ctx) // the socket is closed either way
	abort(pc)
}
