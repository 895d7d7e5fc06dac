package postgres

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/pooldriver/pooldriver/dialects"
)

var _ dialects.OpenTxInspector = (*conn)(nil)

// OpenTx asks the server for the isolation level and access mode of the
// open transaction: current_setting reads the transaction's own values,
// whatever SET TRANSACTION or BEGIN ISOLATION LEVEL chose.
func (c *conn) OpenTx(ctx context.Context) (driver.IsolationLevel, bool, error) {
	if err := c.runDue(ctx); err != nil {
		return 0, false, err
	}
	var iso, ro string
	// The simple protocol: nothing pgx would keep prepared (a carried
	// reset deallocates every statement: carry.go).
	err := c.pgx().QueryRow(ctx, "SELECT current_setting('transaction_isolation'), current_setting('transaction_read_only')",
		pgx.QueryExecModeSimpleProtocol).Scan(&iso, &ro)
	if err != nil {
		return 0, false, fmt.Errorf("pooldriver: postgres: reading the open transaction's isolation level: %w", err)
	}
	level, ok := isolationLevels[iso]
	if !ok {
		return 0, false, fmt.Errorf("pooldriver: postgres: unknown isolation level %q", iso)
	}
	return level, ro == "on", nil
}

// isolationLevels maps PostgreSQL's names to database/sql's levels.
var isolationLevels = map[string]driver.IsolationLevel{
	"read uncommitted": driver.IsolationLevel(sql.LevelReadUncommitted),
	"read committed":   driver.IsolationLevel(sql.LevelReadCommitted),
	"repeatable read":  driver.IsolationLevel(sql.LevelRepeatableRead),
	"serializable":     driver.IsolationLevel(sql.LevelSerializable),
}
