package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/pooldriver/pooldriver/dialects"
)

var _ dialects.LoadReader = (*conn)(nil)

// loadSQL reads the server's connection limit and who holds it, as any
// role can: max_connections less what superuser_reserved_connections keeps
// for superusers (unless the role is one), the client backends connected,
// and the role's own CONNECTION LIMIT (-1: none) with its backends.
const loadSQL = `SELECT current_setting('max_connections')::int8 - ` +
	`CASE WHEN r.rolsuper THEN 0 ELSE current_setting('superuser_reserved_connections')::int8 END, ` +
	`(SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend'), ` +
	`r.rolconnlimit::int8, ` +
	`(SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend' AND usesysid = r.oid) ` +
	`FROM pg_roles r WHERE r.rolname = current_user`

// ServerLoad reads the limit with the least room left: the server's or the
// role's. PostgreSQL counts no refused connections: Refused is -1.
func (c *conn) ServerLoad(ctx context.Context) (dialects.ServerLoad, error) {
	if err := c.runDue(ctx); err != nil {
		return dialects.ServerLoad{}, err
	}
	var limit, connected, roleLimit, roleConnected int64
	if err := c.pgx().QueryRow(ctx, loadSQL, pgx.QueryExecModeSimpleProtocol).Scan(&limit, &connected, &roleLimit, &roleConnected); err != nil {
		return dialects.ServerLoad{}, fmt.Errorf("pooldriver: postgres: reading the server's connection limit: %w", err)
	}
	load := dialects.ServerLoad{Limit: limit, Connected: connected, Refused: -1}
	if roleLimit >= 0 && roleLimit-roleConnected < limit-connected {
		load.Limit, load.Connected = roleLimit, roleConnected
	}
	return load, nil
}
