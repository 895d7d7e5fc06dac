package pooldriver

import (
	"context"
	"errors"
	"fmt"

	"github.com/pooldriver/pooldriver/dialects"
)

// Hooks on the life of a physical connection, as pgxpool has them. Each
// gets the real driver connection, raw, as RawConn gives it: a *pgx.Conn
// (dialects/postgres), go-sql-driver/mysql's driver.Conn (dialects/mysql),
// an *odbc.Conn (dialects/odbc), the wrapped driver's driver.Conn (Wrap).
// A hook runs with the connection to itself, never at the same time as a
// statement on it. A hook that panics counts as one that failed. Each
// dialect has a typed adapter of every hook, whose function takes its own
// connection type and which says so when given another dialect's:
// postgres.AfterConnect(func(ctx, *pgx.Conn) error), mysql.AfterRelease,
// odbc.BeforeClose, and so on.

// WithBeforeConnect sets f to shape the driver's configuration of every new
// physical connection before it connects: config is that connection's own
// copy, with the credentials filled in, and f may change it. Use the
// dialect's typed adapter, postgres.BeforeConnect (a *pgx.ConnConfig: a
// tracer, DefaultQueryExecMode, OnNotice, ...). An error fails the
// connection attempt. PostgreSQL only: it is rejected (see Connector.Err)
// for other dialects, and with Wrap (configure the wrapped connector
// instead).
func WithBeforeConnect(f func(ctx context.Context, config any) error) Option {
	return hookOption("WithBeforeConnect", f == nil, func(c *Config) { c.BeforeConnect = f })
}

// WithAfterConnect sets f to run on every new physical connection before
// anyone uses it, and again after every session reset (a reset gives the
// session back the state of a new connection, which undoes what f set):
// register types (pgx's TypeMap), set what every session starts with
// (HikariCP's connectionInitSql). What f leaves in the session is what
// pooldriver resets to; f must not leave a transaction open. A reset does
// not undo what lives in the driver (pgx's TypeMap): f may skip it when it
// is there already, sparing a round trip per reset. An error
// closes the connection unused: on a new one, the statement that needed it
// fails with the error (errors.Is reaches it); after a reset, the
// connection is closed instead of reused.
func WithAfterConnect(f func(ctx context.Context, raw any) error) Option {
	return hookOption("WithAfterConnect", f == nil, func(c *Config) { c.AfterConnect = f })
}

// WithBeforeAcquire sets f to run each time a physical connection is taken
// from the pool for a statement, a *sql.Conn, a *sql.Tx or a task, with the
// context of the statement (pgxpool's PrepareConn): check something of the
// connection, say that the server is still the primary. An error closes the
// connection unused and fails the statement with it; return
// driver.ErrBadConn for database/sql to retry on another connection. f
// must not change the session: pooldriver would not know (use
// WithAfterConnect). It runs on every acquire: keep it cheap.
func WithBeforeAcquire(f func(ctx context.Context, raw any) error) Option {
	return hookOption("WithBeforeAcquire", f == nil, func(c *Config) { c.BeforeAcquire = f })
}

// WithAfterRelease sets f to run each time a physical connection goes back
// to the pool, after pooldriver rolled back and reset what was left on it;
// false closes it instead (pgxpool's AfterRelease). It runs in the
// goroutine that ends the statement or hold: keep it cheap.
func WithAfterRelease(f func(raw any) bool) Option {
	return hookOption("WithAfterRelease", f == nil, func(c *Config) { c.AfterRelease = f })
}

// WithBeforeClose sets f to run just before a physical connection is closed
// (pgxpool's BeforeClose).
func WithBeforeClose(f func(raw any)) Option {
	return hookOption("WithBeforeClose", f == nil, func(c *Config) { c.BeforeClose = f })
}

// checkHooks reports a hook that c's template cannot run.
func (c *Config) checkHooks(t dialects.Template) error {
	if c.BeforeConnect == nil {
		return nil
	}
	if _, ok := t.(dialects.ConfigurableTemplate); !ok {
		return errors.New("pooldriver: WithBeforeConnect: this connector has no driver configuration to shape (postgres:// DSNs have; with Wrap, configure the wrapped connector)")
	}
	return nil
}

// call runs hook f, turning a panic into an error.
func call(name string, f func() error) (err error) {
	defer func() {
		if x := recover(); x != nil {
			err = fmt.Errorf("panicked: %v", x)
		}
		if err != nil {
			err = fmt.Errorf("pooldriver: %s hook: %w", name, err)
		}
	}()
	return f()
}

// prepareSession runs the AfterConnect hook on dc, new or just reset, and
// makes what it left the session's baseline. The caller has dc to itself.
func (c *Connector) prepareSession(ctx context.Context, dc dialects.Conn) error {
	f := c.cfg.AfterConnect
	if f == nil {
		return nil
	}
	if err := call("AfterConnect", func() error { return f(ctx, dc.Raw()) }); err != nil {
		return err
	}
	if b, ok := dc.(dialects.SessionBaseline); ok {
		b.MarkBaseline()
	}
	st, err := dc.TxStatus(ctx, "")
	if err != nil {
		return fmt.Errorf("pooldriver: after the AfterConnect hook: %w", err)
	}
	if st != dialects.TxIdle {
		return errors.New("pooldriver: the AfterConnect hook left a transaction open")
	}
	return nil
}

// openConfigured opens a physical connection, through the BeforeConnect
// hook when there is one.
func (c *Connector) openConfigured(ctx context.Context, creds dialects.Credentials) (dialects.Conn, error) {
	f := c.cfg.BeforeConnect
	if f == nil {
		return c.tmpl.Open(ctx, creds)
	}
	return c.tmpl.(dialects.ConfigurableTemplate).OpenConfigured(ctx, creds, func(ctx context.Context, config any) error {
		return call("BeforeConnect", func() error { return f(ctx, config) })
	})
}

// beforeAcquire runs the BeforeAcquire hook on pc, just taken from the pool.
func (c *Connector) beforeAcquire(ctx context.Context, pc *physConn) error {
	f := c.cfg.BeforeAcquire
	return call("BeforeAcquire", func() error { return f(ctx, pc.dc.Raw()) })
}

// afterRelease runs the AfterRelease hook on pc, settled and about to go
// back to the pool.
func (c *Connector) afterRelease(pc *physConn) bool {
	f := c.cfg.AfterRelease
	ok := false
	err := call("AfterRelease", func() error {
		ok = f(pc.dc.Raw())
		return nil
	})
	if err != nil {
		c.logWarn("the AfterRelease hook failed; the connection will be closed", err)
	}
	return ok
}

// beforeClose runs the BeforeClose hook on pc.
func (c *Connector) beforeClose(pc *physConn) {
	if f := c.cfg.BeforeClose; f != nil {
		if err := call("BeforeClose", func() error { f(pc.dc.Raw()); return nil }); err != nil {
			c.logWarn("the BeforeClose hook failed", err)
		}
	}
}
