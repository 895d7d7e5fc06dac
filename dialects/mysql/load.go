package mysql

import (
	"context"
	"fmt"

	"github.com/pooldriver/pooldriver/dialects"
)

var _ dialects.LoadReader = (*conn)(nil)

// loadSQL reads, as any user can on MariaDB: max_connections, the threads
// connected, the connections refused for max_connections since the server
// started, the user's own limit (0: none) and the user's connections.
// MySQL 8 has no information_schema.GLOBAL_STATUS: the query fails there,
// and pooldriver stops asking.
const loadSQL = `SELECT @@max_connections, ` +
	`(SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = 'THREADS_CONNECTED'), ` +
	`(SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = 'CONNECTION_ERRORS_MAX_CONNECTIONS'), ` +
	`@@max_user_connections, ` +
	`(SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE USER = SUBSTRING_INDEX(CURRENT_USER(), '@', 1))`

// ServerLoad reads the limit with the least room left: the server's or the
// user's. Refusals are counted for the server's limit only: Refused is -1
// when the user's is the tighter.
func (c *conn) ServerLoad(ctx context.Context) (dialects.ServerLoad, error) {
	if c.broken {
		return dialects.ServerLoad{}, errBroken
	}
	v, err := c.queryInts(ctx, loadSQL)
	if err != nil {
		return dialects.ServerLoad{}, fmt.Errorf("pooldriver: mysql: reading the server's connection limit: %w", err)
	}
	load := dialects.ServerLoad{Limit: v[0], Connected: v[1], Refused: v[2]}
	if userLimit, mine := v[3], v[4]; userLimit > 0 && userLimit-mine < load.Limit-load.Connected {
		load = dialects.ServerLoad{Limit: userLimit, Connected: mine, Refused: -1}
	}
	return load, nil
}
