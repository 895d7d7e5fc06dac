package fakedb

import (
	"context"
	"database/sql/driver"

	"github.com/pooldriver/pooldriver/dialects"
)

func init() {
	if err := dialects.Register(Dialect{}, "fake"); err != nil {
		panic(err) // only a second dialect claiming "fake" can cause this
	}
}

// Dialect is the pooldriver dialect for fake servers, registered for the
// "fake" scheme. Its DSN is fake://[user[:password]@]server[?params]: the
// server is a name given to [NewServer]; pool_* parameters are returned to
// pooldriver; app=<name> is kept on the conns ([Conn.App]); any other
// parameter is an error. Parse does not need the server to exist; Open
// does. Once a password is set on the server ([Server.SetPassword]),
// logins must match it.
type Dialect struct{}

var _ dialects.Dialect = Dialect{}

// Name returns "fake".
func (Dialect) Name() string { return "fake" }

// Parse implements dialects.Dialect.
func (Dialect) Parse(dsn string) (dialects.Template, map[string]string, error) {
	t, params, err := parseDSN(dsn)
	if err != nil {
		return nil, nil, err
	}
	return t, params, nil
}

// dialectConn is the dialects.Conn around a fake conn.
type dialectConn struct{ c *Conn }

var (
	_ dialects.Conn         = (*dialectConn)(nil)
	_ dialects.WriteCounter = (*dialectConn)(nil)
)

func (d *dialectConn) Driver() driver.Conn { return d.c }

// TxStatus reads the conn's state without a statement (lastQuery is
// ignored) and counts the call in Stats.TxStatusCalls. It marks the conn
// busy like any other call, so calling it during a statement is an overlap.
func (d *dialectConn) TxStatus(ctx context.Context, lastQuery string) (dialects.TxStatus, error) {
	d.c.enter()
	defer d.c.exit()
	d.c.srv.stats.txStatusCalls.Add(1)
	if d.c.srv.takeTxStatusFailure() {
		return dialects.TxIdle, ErrTxStatus
	}
	return d.c.TxStatus(), nil
}

// Rollback runs a raw ROLLBACK.
func (d *dialectConn) Rollback(ctx context.Context) error {
	_, err := d.c.ExecContext(ctx, "ROLLBACK", nil)
	return err
}

func (d *dialectConn) ResetSession(ctx context.Context) error { return d.c.ResetSession(ctx) }

func (d *dialectConn) Ping(ctx context.Context) error { return d.c.Ping(ctx) }

// Raw returns the *[Conn].
func (d *dialectConn) Raw() any { return d.c }

// Written counts statements that reached the server, as a dialect that
// sees its connection's bytes counts those (dialects.WriteCounter).
func (d *dialectConn) Written() uint64 { return uint64(d.c.sent.Load()) }

func (d *dialectConn) Close() error { return d.c.Close() }

var _ dialects.SessionTracker = (*dialectConn)(nil)

// ChangesSession implements dialects.SessionTracker: SET and TEMP change the
// session; a statement that does not parse might have.
func (d *dialectConn) ChangesSession(query string) bool {
	cmd, err := parse(query)
	return err != nil || cmd.op == opSet || cmd.op == opTemp
}
