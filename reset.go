package pooldriver

// Reset drops every physical connection, as after a failover or a
// credential change: idle ones are closed now, and those in use (a
// statement running, a *sql.Conn or *sql.Tx held, a task's) when they come
// back to the pool, without interrupting their users. Connections being
// opened while Reset runs are opened again. pool_min_conns connections are
// opened anew in the background. Later statements get new connections.
func (c *Connector) Reset() {
	if c.pool == nil {
		return
	}
	c.env.gen.Add(1)
	n := c.pool.CloseIdle()
	c.logDebug("reset: idle connections closed; connections in use are closed when they come back", "closed", n)
}
