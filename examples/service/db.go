package service

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/pooldriver/pooldriver"
	_ "github.com/pooldriver/pooldriver/dialects/postgres" // postgres:// DSNs
	"github.com/pooldriver/pooldriver/otelpool"
)

// Connect opens the service's database: the DSN's settings (its pool_*
// parameters included), then what only code can give, set on the Config
// before the Connector opens. The Connector logs the whole Config once, at
// INFO, through o.Logger. Only o.PoolName, o.MaxConns, o.Logger and
// o.TracerProvider are read.
func Connect(dsn string, o Options) (*sql.DB, error) {
	cfg, err := pooldriver.ParseConfig(dsn)
	if err != nil {
		return nil, err // names the parameter, never the password
	}
	if o.PoolName != "" {
		cfg.Name = o.PoolName
	}
	if o.MaxConns > 0 {
		cfg.MaxConns = o.MaxConns
	}
	cfg.Logger = o.Logger
	// The pool's spans: pool.acquire for each statement or transaction
	// that goes to the pool for a connection (a child of the request's
	// span, through the statement's context), pool.connect for each
	// connection it opens, a child of the acquire that needed it, and
	// pool.release, beside the acquire, when its hold gives the
	// connection back.
	if o.TracerProvider != nil {
		if cfg.Tracer, err = otelpool.NewTracer(o.TracerProvider); err != nil {
			return nil, err
		}
	}
	c, err := pooldriver.NewConnectorWithConfig(cfg)
	if err != nil {
		return nil, err
	}
	db := sql.OpenDB(c)
	// database/sql's own connections are logical ones, which cost no server
	// connection: keep as many as the pool has physical ones, and never
	// expire them (pooldriver.Open sets the same).
	db.SetMaxIdleConns(max(2, c.Config().MaxConns))
	db.SetConnMaxLifetime(0)
	db.SetConnMaxIdleTime(0)
	return db, nil
}

// schema is the service's tables. A note's body is limited by the database
// itself: the insert of a longer one fails inside its transaction, which the
// request's task then rolls back (createNote).
var schema = []string{
	`CREATE TABLE IF NOT EXISTS notes (
		id         bigserial PRIMARY KEY,
		body       text NOT NULL CHECK (length(body) BETWEEN 1 AND 1000),
		created_at timestamptz NOT NULL DEFAULT now()
	)`,
	`CREATE TABLE IF NOT EXISTS note_events (
		id      bigserial PRIMARY KEY,
		note_id bigint NOT NULL REFERENCES notes (id),
		kind    text NOT NULL,
		at      timestamptz NOT NULL DEFAULT now()
	)`,
}

// Migrate creates the service's tables if they do not exist.
func Migrate(ctx context.Context, db *sql.DB) error {
	for _, stmt := range schema {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("service: migrating: %w", err)
		}
	}
	return nil
}
