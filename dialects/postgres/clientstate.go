package postgres

import (
	"context"
)

// What a session leaves in the client. The reset returns the server's
// session to a new connection's state; pgx keeps, for the connection,
// what the server sent it, and some of that is the last user's:
//
//   - notifications (pgx.Conn's buffer, filled by pgconn's OnNotification
//     as it reads them off the wire): those that reached the session
//     while it listened, the reset's UNLISTEN * reading the last of them.
//     Nothing takes them from the buffer but WaitForNotification, which
//     would hand them to the next user: clearClient empties it.
//   - statements prepared over the protocol under a name of the user's
//     own (pgx.Conn.Prepare through RawConn): pgx keeps them in a map by
//     that name and the server keeps them, for the next user's EXECUTE
//     or pgx.Conn.Exec by name. reconcile deallocates them, through pgx
//     so that its map forgets them too.
//
// What else pgx keeps needs nothing: the parameter statuses (pgconn's map)
// are the server's reports, which the reset's own ReadyForQuery brings
// up to date for every parameter it changed back; the notices go to the
// OnNotice hook as they come and are not kept; pgx's statement cache holds
// statements of its own names (reconcile); its description cache gives a
// statement its parameters' types, while its result is read by the
// description the server sends with it (docs/design.md).

// doneCtx is a context already done: pgx.Conn.WaitForNotification under
// it hands out what its buffer holds and, once it is empty, returns at
// once without touching the connection.
var doneCtx = func() context.Context {
	c, cancel := context.WithCancel(context.Background())
	cancel()
	return c
}()

// clearClient empties what pgx keeps of the session that the reset does
// not reach on the server: the notifications it buffered.
func (c *conn) clearClient() {
	p := c.pgx()
	for {
		if n, _ := p.WaitForNotification(doneCtx); n == nil {
			return
		}
	}
}
