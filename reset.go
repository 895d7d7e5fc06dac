package pooldriver

import (
	"log/slog"
)

// Reset drops every physical connection, as after a failover or a
// credential change: idle ones are closed now, and those in use (a
// statement running, a *sql.Conn or *sql.Tx held, a task's) when they come
// back to the pool, without interrupting their users. Connections being
// opened while Reset runs are opened again. pool_min_conns connections are
// opened anew in the background. Later statements get new connections.
// With pool_reads=standby, every host's pool is reset: the standbys'
// (Standbys) too.
func (c *Connector) Reset() {
	if c.pool == nil {
		return
	}
	for _, pc := range c.pools() {
		pc.resetPool()
	}
}

// resetPool is Reset of c's own pool, where it has one.
func (c *Connector) resetPool() {
	if c.pool == nil {
		return
	}
	c.env.Reset() // those being opened: the factory opens them again
	n := c.pool.Retire()
	c.logDebug("reset: idle connections closed; connections in use are closed when they come back", "closed", n)
}

// lostRole is Reset when server left the role the DSN asks for (a primary
// turned read-only or standby): the other connections to it fail their
// writes too. The physical connections ask once for the generation that
// reached server (phys.Conn.lostRole): those opened since, to the server
// that has the role now, are not retired.
func (c *Connector) lostRole(server string) {
	n := c.pool.Retire()
	c.logAt(slog.LevelWarn, "the server left the role the DSN asks for (target_session_attrs): every connection opened so far is retired, idle ones now, busy ones when they come back", nil, "server", server, "closed", n)
}
