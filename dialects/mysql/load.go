package mysql

import (
	"context"
	"fmt"
	"strconv"

	"github.com/pooldriver/pooldriver/dialects"
)

var _ dialects.LoadReader = (*conn)(nil)

// loadSQL reads, as any user can on MariaDB: max_connections, the threads
// connected, the logins refused since the server started, the user's own
// limit (0: none) and the user's connections, and the threads asleep for
// dialects.IdleFor or longer, of those the user may see and of its own.
//
// The refusals are the failed logins (ABORTED_CONNECTS) less those that
// never reached the handshake (ABORTED_CONNECTS_PREAUTH: a port probe),
// which only grows. They are not CONNECTION_ERRORS_MAX_CONNECTIONS:
// MariaDB keeps one connection beyond max_connections for a SUPER user,
// and counts there only the attempts that find that one taken too; a lone
// login refused while it is free (a breaker's one trial at a time) is
// counted among the failed logins only, so a pool that waited alone at a
// full server was never seen. Other failed logins count too (a wrong
// password, an unknown database): at a full server, where the count is
// read for, a login is refused for the limit before it can fail for
// another cause but in that one connection. A pool counts every connect
// of its own that failed as its own (the share's mine). Where the user's
// limit is the tighter, Refused is -1: those refusals are the user's.
// MySQL 8 has no information_schema.GLOBAL_STATUS: the query fails there,
// and pooldriver stops asking.
var loadSQL = `SELECT @@max_connections, ` +
	globalStatus("THREADS_CONNECTED") + `, ` +
	globalStatus("ABORTED_CONNECTS") + ` - ` + globalStatus("ABORTED_CONNECTS_PREAUTH") + `, ` +
	`@@max_user_connections, ` +
	`(SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE USER = SUBSTRING_INDEX(CURRENT_USER(), '@', 1)), ` +
	`(SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ` + asleep + `), ` +
	`(SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ` + asleep + ` AND USER = SUBSTRING_INDEX(CURRENT_USER(), '@', 1))`

// asleep is a PROCESSLIST row's test for a connection idle for
// dialects.IdleFor or longer.
var asleep = `COMMAND = 'Sleep' AND TIME_MS >= ` + strconv.FormatInt(dialects.IdleFor.Milliseconds(), 10)

// globalStatus reads one status counter, 0 where the server has none.
func globalStatus(name string) string {
	return `CAST(COALESCE((SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = '` + name + `'), 0) AS SIGNED)`
}

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
	load := dialects.ServerLoad{Limit: v[0], Connected: v[1], Refused: v[2], Idle: v[5]}
	if userLimit, mine := v[3], v[4]; userLimit > 0 && userLimit-mine < load.Limit-load.Connected {
		load = dialects.ServerLoad{Limit: userLimit, Connected: mine, Refused: -1, Idle: v[6]}
	}
	return load, nil
}
