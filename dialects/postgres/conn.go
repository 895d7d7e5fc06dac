package postgres

import (
	"context"
	"database/sql/driver"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/pooldriver/pooldriver/dialects"
)

// conn is one physical PostgreSQL connection. Like the *pgx.Conn inside it,
// it is not safe for concurrent use; pooldriver serializes all calls.
type conn struct {
	sc *stdlib.Conn
}

var (
	_ dialects.Conn        = (*conn)(nil)
	_ dialects.IdleChecker = (*conn)(nil)
)

// CheckIdle looks, without a round trip, for the server having closed the
// connection while it was idle: PostgreSQL sends an error, then hangs up.
func (c *conn) CheckIdle() error {
	pg := c.pgx().PgConn()
	if pg.IsClosed() {
		return driver.ErrBadConn
	}
	return dialects.CheckSocket(pg.Conn())
}

// Driver returns the *stdlib.Conn.
func (c *conn) Driver() driver.Conn { return c.sc }

// Raw returns the *pgx.Conn.
func (c *conn) Raw() any { return c.sc.Conn() }

func (c *conn) pgx() *pgx.Conn { return c.sc.Conn() }

// TxStatus reads the status of the last ReadyForQuery message; it never
// talks to the server, so lastQuery is not needed.
func (c *conn) TxStatus(ctx context.Context, lastQuery string) (dialects.TxStatus, error) {
	if c.pgx().IsClosed() {
		return dialects.TxIdle, fmt.Errorf("pooldriver: postgres: connection is closed: %w", driver.ErrBadConn)
	}
	switch s := c.pgx().PgConn().TxStatus(); s {
	case 'I':
		return dialects.TxIdle, nil
	case 'T':
		return dialects.TxActive, nil
	case 'E':
		return dialects.TxFailed, nil
	default:
		return dialects.TxIdle, fmt.Errorf("pooldriver: postgres: unknown transaction status %q", s)
	}
}

// Rollback sends a raw ROLLBACK; outside a transaction the server only warns.
func (c *conn) Rollback(ctx context.Context) error {
	if _, err := c.pgx().PgConn().Exec(ctx, "ROLLBACK").ReadAll(); err != nil {
		return fmt.Errorf("pooldriver: postgres: rollback: %w", err)
	}
	return nil
}

// ResetSession rolls back, runs DISCARD ALL (which refuses to run inside a
// transaction block, hence the separate rollback) and then drops pgx's
// prepared statements and statement/description caches: after DISCARD ALL
// the server knows none of them, and pgx would otherwise execute a cached
// statement name that no longer exists.
func (c *conn) ResetSession(ctx context.Context) error {
	pc := c.pgx().PgConn()
	if pc.TxStatus() != 'I' {
		if err := c.Rollback(ctx); err != nil {
			return err
		}
	}
	if _, err := pc.Exec(ctx, "DISCARD ALL").ReadAll(); err != nil {
		return fmt.Errorf("pooldriver: postgres: reset session: %w", err)
	}
	if err := c.pgx().DeallocateAll(ctx); err != nil {
		return fmt.Errorf("pooldriver: postgres: reset session: %w", err)
	}
	return nil
}

// Ping sends an empty query.
func (c *conn) Ping(ctx context.Context) error {
	if err := c.pgx().PgConn().Ping(ctx); err != nil {
		return fmt.Errorf("pooldriver: postgres: ping: %w", err)
	}
	return nil
}

// Close closes the connection, waiting at most 5s for the server to
// acknowledge.
func (c *conn) Close() error { return c.sc.Close() }
