package pooldriver

// WaitCleanups waits until no session reset of c's runs in the background
// (internal/phys/cleanup.go), so that a test reads Stats, hooks and the server after
// them.
func WaitCleanups(c *Connector) { c.env.WaitCleanups() }

// CheckNow runs one round of c's pool's health check at once.
func CheckNow(c *Connector) { c.pool.CheckNow() }
