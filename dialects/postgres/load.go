package postgres

import (
	"context"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5"

	"github.com/pooldriver/pooldriver/dialects"
)

var _ dialects.LoadReader = (*conn)(nil)

// loadSQL reads the server's connection limit and who holds it, as any
// role can: max_connections less what superuser_reserved_connections keeps
// for superusers (unless the role is one), the client backends connected
// and, of them, those idle for dialects.IdleFor or longer (a session of
// another role shows no state unless the role may read all statistics: it
// is not counted idle), then the same two counts for the role, with its
// own CONNECTION LIMIT (-1: none). One pass over pg_stat_activity.
var loadSQL = `SELECT current_setting('max_connections')::int8 - ` +
	`CASE WHEN r.rolsuper THEN 0 ELSE current_setting('superuser_reserved_connections')::int8 END, ` +
	`a.n, a.idle, r.rolconnlimit::int8, a.role_n, a.role_idle ` +
	`FROM pg_roles r, LATERAL (SELECT count(*) AS n, ` +
	`count(*) FILTER (WHERE s.idle) AS idle, ` +
	`count(*) FILTER (WHERE s.usesysid = r.oid) AS role_n, ` +
	`count(*) FILTER (WHERE s.usesysid = r.oid AND s.idle) AS role_idle ` +
	`FROM (SELECT usesysid, state = 'idle' AND state_change < now() - interval '` +
	strconv.FormatInt(dialects.IdleFor.Milliseconds(), 10) + ` milliseconds' AS idle ` +
	`FROM pg_stat_activity WHERE backend_type = 'client backend') s) a ` +
	`WHERE r.rolname = current_user`

// ServerLoad reads the limit with the least room left: the server's or the
// role's. PostgreSQL counts no refused connections: Refused is -1.
func (c *conn) ServerLoad(ctx context.Context) (dialects.ServerLoad, error) {
	if err := c.runDue(ctx); err != nil {
		return dialects.ServerLoad{}, err
	}
	var limit, connected, idle, roleLimit, roleConnected, roleIdle int64
	if err := c.pgx().QueryRow(ctx, loadSQL, pgx.QueryExecModeSimpleProtocol).Scan(&limit, &connected, &idle, &roleLimit, &roleConnected, &roleIdle); err != nil {
		return dialects.ServerLoad{}, fmt.Errorf("pooldriver: postgres: reading the server's connection limit: %w", err)
	}
	load := dialects.ServerLoad{Limit: limit, Connected: connected, Idle: idle, Refused: -1}
	if roleLimit >= 0 && roleLimit-roleConnected < limit-connected {
		load.Limit, load.Connected, load.Idle = roleLimit, roleConnected, roleIdle
	}
	return load, nil
}
