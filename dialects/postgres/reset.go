package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pooldriver/pooldriver/dialects"
)

var _ dialects.StatementKeeper = (*conn)(nil)

// resetSQL returns the session to a new connection's state in one round
// trip: what DISCARD ALL does, but for DEALLOCATE ALL and DISCARD PLANS.
// The statements pgx prepared over the protocol stay (no user statement
// can name or change them, and pgx's cache and pooldriver's still know
// them). The role and session authorization, every setting, cursors,
// listeners, advisory locks, temporary objects and sequence positions go
// back to what a new connection has. One simple-protocol message: the
// statements run in one implicit transaction, which none of them refuses.
//
// Its last statement, which releases the advisory locks, also returns the
// DEALLOCATE statements for what a user prepared with SQL PREPARE (which
// pg_prepared_statements marks from_sql), names quoted by the server; NULL
// when there is none, as there almost always is. resetPrepared runs them.
// Deallocating them in the same message would need a DO block, whose
// PL/pgSQL compile doubled the reset's server time.
const resetSQL = `CLOSE ALL; SET SESSION AUTHORIZATION DEFAULT; RESET ALL; UNLISTEN *; ` +
	`DISCARD TEMP; DISCARD SEQUENCES; ` +
	`SELECT pg_advisory_unlock_all(), (SELECT string_agg('DEALLOCATE ' || quote_ident(name), '; ') ` +
	`FROM pg_prepared_statements WHERE from_sql)`

// ResetSession rolls back an open transaction (the reset refuses to run in
// a failed one, and must not commit a live one), then runs resetSQL and,
// where it names any, deallocates the statements a user prepared in SQL.
func (c *conn) ResetSession(ctx context.Context) error {
	pc := c.pgx().PgConn()
	if pc.TxStatus() != 'I' {
		if err := c.Rollback(ctx); err != nil {
			return err
		}
	}
	res, err := pc.Exec(ctx, resetSQL).ReadAll()
	if err != nil {
		return fmt.Errorf("pooldriver: postgres: reset session: %w", err)
	}
	dealloc, err := resetPrepared(res)
	if err != nil {
		return err
	}
	if dealloc != "" {
		if _, err := pc.Exec(ctx, dealloc).ReadAll(); err != nil {
			return fmt.Errorf("pooldriver: postgres: reset session: deallocating what the session prepared: %w", err)
		}
	}
	return nil
}

// resetPrepared returns the DEALLOCATE statements resetSQL's last
// statement returned, or "" for none.
func resetPrepared(res []*pgconn.Result) (string, error) {
	if len(res) == 0 || len(res[len(res)-1].Rows) != 1 || len(res[len(res)-1].Rows[0]) != 2 {
		return "", fmt.Errorf("pooldriver: postgres: reset session: %d results, not the reset's", len(res))
	}
	return string(res[len(res)-1].Rows[0][1]), nil // NULL reads as nil: ""
}

// ResetKeepsStatements reports that ResetSession keeps pgx's prepared
// statements (see resetSQL).
func (c *conn) ResetKeepsStatements() bool { return true }
