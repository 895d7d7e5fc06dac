package dialects

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
)

// ErrUnsupported is returned by a Conn method the dialect cannot perform
// (a raw rollback or a session reset, say). pooldriver then falls back to
// what is always safe: the driver's own Tx.Rollback, or closing the
// connection and opening a new one.
var ErrUnsupported = errors.New("pooldriver: not supported by this dialect")

// Wrap returns a Template that opens physical connections through any
// database/sql driver.Connector: the generic dialect behind
// pooldriver.Wrap. It cannot see the server's transaction state, so only
// transactions begun with BeginTx are tracked; a session is reset with the
// driver's own driver.SessionResetter, and without one the connection is
// replaced. Credentials cannot be applied: the connector logs in by itself.
func Wrap(c driver.Connector) Template { return genericTemplate{c} }

type genericTemplate struct{ c driver.Connector }

func (t genericTemplate) Credentials() Credentials { return Credentials{} }

func (t genericTemplate) String() string { return fmt.Sprintf("wrapped %T", t.c) }

func (t genericTemplate) Open(ctx context.Context, _ Credentials) (Conn, error) {
	c, err := t.c.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return genericConn{c}, nil
}

type genericConn struct{ c driver.Conn }

func (g genericConn) Driver() driver.Conn { return g.c }

func (g genericConn) TxStatus(context.Context, string) (TxStatus, error) { return TxIdle, nil }

func (g genericConn) Rollback(context.Context) error { return ErrUnsupported }

func (g genericConn) ResetSession(ctx context.Context) error {
	if r, ok := g.c.(driver.SessionResetter); ok {
		return r.ResetSession(ctx)
	}
	return ErrUnsupported
}

func (g genericConn) Ping(ctx context.Context) error {
	if p, ok := g.c.(driver.Pinger); ok {
		return p.Ping(ctx)
	}
	if v, ok := g.c.(driver.Validator); ok && !v.IsValid() {
		return driver.ErrBadConn
	}
	return nil
}

func (g genericConn) Raw() any { return g.c }

func (g genericConn) Close() error { return g.c.Close() }
