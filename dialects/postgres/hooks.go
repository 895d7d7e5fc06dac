package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
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
	return func(ctx context.Context, raw any) error {
		c, ok := raw.(*pgx.Conn)
		if !ok {
			return fmt.Errorf("postgres.AfterConnect: the connection is %T, not a *pgx.Conn: use it with a postgres:// DSN, or Wrap pgx's stdlib connector", raw)
		}
		return f(ctx, c)
	}
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
