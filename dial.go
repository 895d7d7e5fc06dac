// A Connector's physical connections: the pool's factory (open, dial),
// what the Connector does as the pool destroys one, the phys.Owner they
// call back, and the acquire a hold starts with.

package pooldriver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/pooldriver/pooldriver/dialects"
	"github.com/pooldriver/pooldriver/internal/phys"
	"github.com/pooldriver/pooldriver/pool"
)

// open is the pool's factory: a new physical connection, logged in with the
// template's credentials or those WithCredentials returns now, and prepared
// by the AfterConnect hook. One opened while Reset ran is opened again. ctx
// has the values of the acquire that needed it (a trace's span), or none
// when the pool opens one by itself, and not its cancellation (but see
// pool.Config.Factory).
func (c *Connector) open(ctx context.Context) (*phys.Conn, error) {
	if c.cfg.Tracer != nil {
		return c.openTraced(ctx)
	}
	return c.connect(ctx)
}

// connect is open, untraced.
func (c *Connector) connect(ctx context.Context) (*phys.Conn, error) {
	if c.cfg.ConnectTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.cfg.ConnectTimeout)
		defer cancel()
	}
	// A connection opened while Reset ran is not handed out: the pool
	// destroys what a factory call decided before Retire made, and calls
	// the factory again (pool.Retire, phys.Env.Dial).
	pc, err := c.env.Dial(ctx, c.dial)
	if err != nil {
		if c.cfg.ConnectTimeout > 0 && ctx.Err() != nil && errors.Is(err, context.DeadlineExceeded) {
			// Not the caller's deadline (a connect has none of its own)
			// but the attempt's: say so, as the pool tells the waiters
			// of a timed-out attempt.
			err = fmt.Errorf("pooldriver: connecting timed out after %v (pool_connect_timeout): %w", c.cfg.ConnectTimeout, err)
		}
		c.connectFailed(err)
		return nil, err
	}
	c.connected()
	if c.leaks != nil {
		c.leaks.add(pc)
	}
	return pc, nil
}

// dial opens one driver connection.
func (c *Connector) dial(ctx context.Context) (dialects.Conn, error) {
	secret := c.tmpl.Credentials().Password
	creds, err := c.credentials(ctx)
	if err != nil {
		return nil, err
	}
	dc, err := c.openConfigured(ctx, creds)
	accepted := false
	if err == nil {
		if err = c.prepareSession(ctx, dc); err != nil {
			_ = dc.Close()
			accepted = true
		}
	}
	if err != nil {
		// The driver's own error, as the plain driver returns it (callers
		// compare it with ==), unless it quotes a password; the log line
		// of the failure names the pool.
		err = redact(redact(err, creds.Password), secret)
		if accepted {
			// The server took the connection; the hook failed. Not the
			// slow refusal of a failover: no new connection at once.
			err = pool.Accepted(err)
		}
		return nil, err
	}
	c.logDebug("connection opened", "dsn", c.tmpl.String(), "user", creds.User)
	c.watchCatalog(dc)
	return dc, nil
}

// destroying is what c does as the pool destroys pc, before pc closes
// (the pool's destructor, phys.Env.Init): leak detection forgets it, and
// the BeforeClose hook sees it. It reports whether c is closing, for the
// log line that says pc closed.
func (c *Connector) destroying(pc *phys.Conn) (connectorClosing bool) {
	if c.leaks != nil {
		c.leaks.remove(pc)
	}
	c.beforeClose(pc)
	return c.closing.Load()
}

// connOwner is a Connector as its physical connections' owner (phys.Owner):
// a type of its own, so that what they ask of it is not the Connector's
// API. Pointer-shaped, it is held in the interface as the *Connector is.
type connOwner struct{ c *Connector }

var _ phys.Owner = connOwner{}

// Policy: the cleanup timeout, WithResetAlways and WithTrustFunctions.
func (o connOwner) Policy() (cleanupTimeout time.Duration, resetAlways, trustFunctions bool) {
	return o.c.cfg.CleanupTimeout, o.c.cfg.ResetAlways, o.c.cfg.TrustFunctions
}

// Watchers: the hooks set, and whether leak detection is on.
func (o connOwner) Watchers() (afterConnect, beforeAcquire, afterRelease, leaks bool) {
	s := &o.c.cfg
	return s.AfterConnect != nil, s.BeforeAcquire != nil, s.AfterRelease != nil, o.c.leaks != nil
}

// Logger is the Connector's.
func (o connOwner) Logger() *slog.Logger { return o.c.log }

// PrepareSession runs the AfterConnect hook (Connector.prepareSession).
func (o connOwner) PrepareSession(ctx context.Context, dc dialects.Conn) error {
	return o.c.prepareSession(ctx, dc)
}

// AfterRelease is the AfterRelease hook's verdict (Connector.afterRelease).
func (o connOwner) AfterRelease(pc *phys.Conn) bool { return o.c.afterRelease(pc) }

// Returned tells the leak detection that pc is going back to the pool (or
// being closed).
func (o connOwner) Returned(pc *phys.Conn) { o.c.leaks.returned(pc) }

// LookDue is the share's flag: set, the next connection let go asks how
// full the server is (Look).
func (o connOwner) LookDue() *atomic.Bool { return &o.c.share.lookDue }

// Look asks the server through pc, which nobody else can reach (a
// cleanup, see phys.Conn.settle), how full it is, and sets the pool's share
// from the answer (serverShare.look). It reports false when pc failed to
// say: pc is lost.
func (o connOwner) Look(pc *phys.Conn) bool { return o.c.share.look(pc, o.c.cfg.CleanupTimeout) }

// acquire takes a physical connection from the pool for a hold. Without a
// Tracer, and before Shutdown, this is one check more than take.
func (c *Connector) acquire(ctx context.Context) (*phys.Conn, error) {
	if c.gated.Load() {
		return c.acquireGated(ctx)
	}
	return c.take(ctx)
}

// acquireGated is acquire once Shutdown began (which refuses new work) or
// with a Tracer.
func (c *Connector) acquireGated(ctx context.Context) (*phys.Conn, error) {
	if c.drainMark.Load() != 0 {
		if t := ctxTaskFrom(ctx); t == nil || !c.admits(t.number()) {
			return nil, ErrShuttingDown
		}
	}
	if c.cfg.Tracer != nil {
		return c.acquireTraced(ctx)
	}
	return c.take(ctx)
}

// take is acquire, untraced.
func (c *Connector) take(ctx context.Context) (*phys.Conn, error) {
	r, err := c.pool.Acquire(ctx)
	if err != nil {
		return nil, c.acquireError(err)
	}
	pc, err := c.env.Take(ctx, r) // the hold's alone, once the BeforeAcquire hook said yes
	if err != nil {
		return nil, err // the hook's: pc is destroyed
	}
	if c.leaks != nil {
		c.leaks.taken(pc)
	}
	return pc, nil
}

// acquireError turns the pool's errors into pooldriver's. A connect made
// for the caller that failed comes back as the driver returned it.
func (c *Connector) acquireError(err error) error {
	var ae *pool.AcquireError
	switch {
	case errors.Is(err, pool.ErrClosed):
		return ErrClosed
	case !errors.As(err, &ae) && (err == context.Canceled || err == context.DeadlineExceeded): //nolint:errorlint // the pool returns the context's own error
		// The caller's context ended the wait while connecting was fine:
		// say what it waited for, as for the pool's own refusals.
		st := c.pool.Stats()
		ae = &pool.AcquireError{Reason: err, State: st.State, Total: st.Total, InUse: st.Active, Waiting: st.Waiting, Max: st.Max}
	case !errors.As(err, &ae):
		return err
	case ae.Reason == pool.ErrPermanent:
		return &refusedError{ae: ae, scheme: c.scheme()}
	case ae.Reason == pool.ErrTimeout:
		st := c.pool.Stats()
		e := &AcquireTimeoutError{Timeout: c.cfg.AcquireTimeout, Total: ae.Total, InUse: ae.InUse, Idle: st.Idle, Waiting: ae.Waiting, Max: ae.Max, Cause: ae.Cause}
		e.LeakDetectionOff = c.leaks == nil
		c.logWarn("timed out waiting for a connection", ae.Cause, "timeout", e.Timeout, "total", e.Total, "in_use", e.InUse, "idle", e.Idle, "waiting", e.Waiting, "max", e.Max)
		return e
	}
	return &waitError{ae: ae, leakHint: c.leaks == nil && ae.InUse >= ae.Max}
}

// LostRole retires the connections so far (Connector.lostRole).
func (o connOwner) LostRole(server string) { o.c.lostRole(server) }

// credentials are what a new connection of c logs in with: the DSN's, or
// those WithCredentials returns now.
func (c *Connector) credentials(ctx context.Context) (dialects.Credentials, error) {
	if c.cfg.Credentials == nil {
		return c.tmpl.Credentials(), nil
	}
	u, p, err := c.cfg.Credentials(ctx)
	if err != nil {
		return dialects.Credentials{}, redact(fmt.Errorf("pooldriver: credentials: %w", err), p)
	}
	return dialects.Credentials{User: u, Password: p}, nil
}
