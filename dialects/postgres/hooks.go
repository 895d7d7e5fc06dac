package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/pooldriver/pooldriver/dialects"
)

// BeforeConnect adapts f for pooldriver.WithBeforeConnect: f gets the
// *pgx.ConnConfig of each new physical connection, its own copy with the
// credentials filled in, before it connects, as pgxpool's BeforeConnect
// does. Set a tracer, the DefaultQueryExecMode, OnNotice, OnNotification,
// RuntimeParams there:
//
//	pooldriver.WithBeforeConnect(postgres.BeforeConnect(func(ctx context.Context, cfg *pgx.ConnConfig) error {
//		cfg.Tracer = tracer
//		return nil
//	}))
func BeforeConnect(f func(ctx context.Context, cfg *pgx.ConnConfig) error) func(ctx context.Context, config any) error {
	return func(ctx context.Context, config any) error {
		cfg, ok := config.(*pgx.ConnConfig)
		if !ok {
			return fmt.Errorf("postgres.BeforeConnect: the connection is not PostgreSQL's (its configuration is %T): use it with a postgres:// DSN", config)
		}
		return f(ctx, cfg)
	}
}

// AfterConnect adapts f for pooldriver.WithAfterConnect: f gets the
// *pgx.Conn of each new physical connection, and of each one whose session
// was reset, as pgxpool's AfterConnect does. Register types there:
//
//	pooldriver.WithAfterConnect(postgres.AfterConnect(func(ctx context.Context, c *pgx.Conn) error {
//		t, err := c.LoadType(ctx, "mood")
//		if err != nil {
//			return err
//		}
//		c.TypeMap().RegisterType(t)
//		return nil
//	}))
func AfterConnect(f func(ctx context.Context, c *pgx.Conn) error) func(ctx context.Context, raw any) error {
	return hook("postgres.AfterConnect").AfterConnect(f)
}

// BeforeAcquire adapts f for pooldriver.WithBeforeAcquire: f gets the
// *pgx.Conn each time a physical connection leaves the pool, with the
// statement's context, as pgxpool's BeforeAcquire (PrepareConn) does.
func BeforeAcquire(f func(ctx context.Context, c *pgx.Conn) error) func(ctx context.Context, raw any) error {
	return hook("postgres.BeforeAcquire").AfterConnect(f)
}

// AfterRelease adapts f for pooldriver.WithAfterRelease: f gets the
// *pgx.Conn each time a physical connection goes back to the pool, and
// false closes it instead, as pgxpool's AfterRelease.
func AfterRelease(f func(c *pgx.Conn) bool) func(raw any) bool {
	return hook("postgres.AfterRelease").AfterRelease(f)
}

// BeforeClose adapts f for pooldriver.WithBeforeClose: f gets the *pgx.Conn
// of each physical connection just before it is closed.
func BeforeClose(f func(c *pgx.Conn)) func(raw any) {
	return hook("postgres.BeforeClose").BeforeClose(f)
}

// hook describes the typed hook adapter name.
func hook(name string) dialects.RawHook[*pgx.Conn] {
	return dialects.RawHook[*pgx.Conn]{Name: name, Want: "use it with a postgres:// DSN, or Wrap pgx's stdlib connector", As: dialects.As[*pgx.Conn]}
}

// MarkBaseline takes the reported parameters as they are now for the
// session's clean state (see dialects.SessionBaseline): a search_path or
// TimeZone set by pooldriver's AfterConnect hook is not a change.
func (c *conn) MarkBaseline() {
	pc := c.pgx().PgConn()
	for i, k := range reportedParams {
		c.reported[i] = pc.ParameterStatus(k)
	}
	c.differs = false
	if c.watch != nil {
		c.watch.clear()
	}
}
