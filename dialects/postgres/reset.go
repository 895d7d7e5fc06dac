package postgres

import (
	"context"
	"fmt"
	"strings"

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
// Its last statement returns the names of what a user prepared with SQL
// PREPARE (which pg_prepared_statements marks from_sql): almost always
// none. resetPrepared turns them into DEALLOCATE statements, run in a
// second message. Deallocating them in the same message would need a DO
// block, whose PL/pgSQL compile doubled the reset's server time; building
// them on the server (string_agg of quote_ident) made the reset's round
// trip 40 µs where it is 31 now (docs/design.md).
const resetSQL = `CLOSE ALL; SET SESSION AUTHORIZATION DEFAULT; RESET ALL; UNLISTEN *; ` +
	`DISCARD TEMP; DISCARD SEQUENCES; SELECT pg_advisory_unlock_all(); ` +
	`SELECT name FROM pg_prepared_statements WHERE from_sql`

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

// resetPrepared returns the DEALLOCATE statements for the names
// resetSQL's last statement returned, or "" for none.
func resetPrepared(res []*pgconn.Result) (string, error) {
	if len(res) < 2 || !res[len(res)-1].CommandTag.Select() {
		return "", fmt.Errorf("pooldriver: postgres: reset session: %d results, not the reset's", len(res))
	}
	var b strings.Builder
	for _, row := range res[len(res)-1].Rows {
		if len(row) != 1 {
			return "", fmt.Errorf("pooldriver: postgres: reset session: a row of %d columns, not a statement's name", len(row))
		}
		if b.Len() > 0 {
			b.WriteString("; ")
		}
		b.WriteString("DEALLOCATE ")
		b.WriteString(quoteIdent(string(row[0])))
	}
	return b.String(), nil
}

// quoteIdent quotes name as an SQL identifier: in double quotes, each
// double quote doubled. A name cannot hold a NUL, the one byte this would
// not carry.
func quoteIdent(name string) string {
	return `"` + strings.ReplaceAll(name, `"`, `""`) + `"`
}

// ResetKeepsStatements reports that ResetSession keeps pgx's prepared
// statements (see resetSQL).
func (c *conn) ResetKeepsStatements() bool { return true }
