package postgres

import (
	"context"
	"fmt"

	"github.com/pooldriver/pooldriver/dialects"
)

var _ dialects.StatementKeeper = (*conn)(nil)

// resetSQL returns the session to a new connection's state in one round
// trip: what DISCARD ALL does, but for DEALLOCATE ALL and DISCARD PLANS.
// The statements pgx prepared over the protocol stay (no user statement
// can name or change them, and pgx's cache and pooldriver's still know
// them); those a user prepared with SQL PREPARE, which pg_prepared_statements
// marks from_sql, are deallocated by name. The role and session
// authorization, every setting, cursors, listeners, advisory locks,
// temporary objects and sequence positions go back to what a new
// connection has. One simple-protocol message: the statements run in one
// implicit transaction, which none of them refuses.
const resetSQL = `CLOSE ALL; SET SESSION AUTHORIZATION DEFAULT; RESET ALL; UNLISTEN *; ` +
	`SELECT pg_advisory_unlock_all(); DISCARD TEMP; DISCARD SEQUENCES; ` +
	`DO $pooldriver$ DECLARE r record; BEGIN ` +
	`FOR r IN SELECT name FROM pg_prepared_statements WHERE from_sql LOOP ` +
	`EXECUTE format('DEALLOCATE %I', r.name); END LOOP; END $pooldriver$`

// ResetSession rolls back an open transaction (the reset refuses to run in
// a failed one, and must not commit a live one), then runs resetSQL.
func (c *conn) ResetSession(ctx context.Context) error {
	pc := c.pgx().PgConn()
	if pc.TxStatus() != 'I' {
		if err := c.Rollback(ctx); err != nil {
			return err
		}
	}
	if _, err := pc.Exec(ctx, resetSQL).ReadAll(); err != nil {
		return fmt.Errorf("pooldriver: postgres: reset session: %w", err)
	}
	return nil
}

// ResetKeepsStatements reports that ResetSession keeps pgx's prepared
// statements (see resetSQL).
func (c *conn) ResetKeepsStatements() bool { return true }
