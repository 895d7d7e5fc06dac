package pooldriver

import (
	"context"
	"errors"
	"fmt"

	"github.com/pooldriver/pooldriver/dialects"
	"github.com/pooldriver/pooldriver/internal/phys"
)

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

// beforeAcquire runs the BeforeAcquire hook on pc, just taken from the pool
// (phys.Env.Take).
func (c *Connector) beforeAcquire(ctx context.Context, pc *phys.Conn) error {
	f := c.cfg.BeforeAcquire
	return call("BeforeAcquire", func() error { return f(ctx, pc.DC.Raw()) })
}

// afterRelease runs the AfterRelease hook on pc, settled and about to go
// back to the pool.
func (c *Connector) afterRelease(pc *phys.Conn) bool {
	f := c.cfg.AfterRelease
	ok := false
	err := call("AfterRelease", func() error {
		ok = f(pc.DC.Raw())
		return nil
	})
	if err != nil {
		c.logWarn("the AfterRelease hook failed; the connection will be closed", err)
	}
	return ok
}

// beforeClose runs the BeforeClose hook on pc.
func (c *Connector) beforeClose(pc *phys.Conn) {
	if f := c.cfg.BeforeClose; f != nil {
		if err := call("BeforeClose", func() error { f(pc.DC.Raw()); return nil }); err != nil {
			c.logWarn("the BeforeClose hook failed", err)
		}
	}
}
