package integration

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pooldriver/pooldriver"
	"github.com/pooldriver/pooldriver/dialects/postgres"
)

// Connection hooks against the real servers: a PostgreSQL composite type registered
// with pgx's TypeMap by AfterConnect, a pgx tracer, OnNotice and the query
// exec mode set by BeforeConnect, each beside the plain pgx driver; a
// session variable set by AfterConnect that survives session resets; a
// failing hook.

// registerType is an AfterConnect hook that loads the type name into the
// connection's TypeMap, counting its calls.
func registerType(name string, calls *atomic.Int64) func(context.Context, any) error {
	return postgres.AfterConnect(func(ctx context.Context, c *pgx.Conn) error {
		calls.Add(1)
		t, err := c.LoadType(ctx, name)
		if err != nil {
			return err
		}
		c.TypeMap().RegisterType(t)
		return nil
	})
}

// TestAfterConnectRegistersType: an argument of a custom composite type
// needs the type registered with pgx: the plain driver, which has not,
// fails; pooldriver, whose AfterConnect registers it on every connection,
// new or reset, succeeds, and the server gets the value.
func TestAfterConnectRegistersType(t *testing.T) {
	t.Parallel()
	forServer(t, "postgres", func(t *testing.T, s server) {
		pair := unique("pair")
		s.adminExec(t, "CREATE TYPE "+pair+" AS (n int, word text)")
		t.Cleanup(func() { _, _ = s.admin(t).ExecContext(context.Background(), "DROP TYPE "+pair) })
		q := "SELECT ($1::" + pair + ").n, ($1::" + pair + ").word"
		var n int
		var word string

		plain, err := sql.Open("pgx", s.dsn)
		require.NoError(t, err)
		defer plain.Close()
		err = plain.QueryRowContext(ctx(t), q, pgtype.CompositeFields{int32(2), "sad"}).Scan(&n, &word)
		require.ErrorContains(t, err, "unknown type", "the plain driver encoded an unregistered composite")

		tn := newTenant(t, s)
		var calls atomic.Int64
		db, c := tn.open(t, "pool_max_conns=1", pooldriver.WithAfterConnect(registerType(pair, &calls)))
		require.NoError(t, db.QueryRowContext(ctx(t), q, pgtype.CompositeFields{int32(2), "sad"}).Scan(&n, &word))
		assert.Equal(t, 2, n)
		assert.Equal(t, "sad", word)

		// A changed session is reset (DISCARD ALL, a fresh statement
		// cache); the hook runs again on the same connection. (Counted
		// from here: while no catalog reading since the CREATE TYPE
		// vouches for the statement above, it counts as a change too.)
		pid := backendID(t, db, ctx(t), s)
		resets, hooked := c.Stats().SessionResets, calls.Load()
		changeSession(t, db, s)
		waitFor(t, "the reset, in the background", func() bool {
			return c.Stats().SessionResets > resets && calls.Load() > hooked
		})
		require.NoError(t, db.QueryRowContext(ctx(t), q, pgtype.CompositeFields{int32(3), "happy"}).Scan(&n, &word))
		assert.Equal(t, "happy", word)
		assert.Equal(t, pid, backendID(t, db, ctx(t), s), "the connection was replaced")
	})
}

// changeSession changes a setting in a *sql.Conn, which closes: its
// connection's session is reset before reuse.
func changeSession(t *testing.T, db *sql.DB, s server) {
	t.Helper()
	sc, err := db.Conn(ctx(t))
	require.NoError(t, err)
	defer sc.Close()
	_, err = sc.ExecContext(ctx(t), s.setSetting)
	require.NoError(t, err)
}

// queryTracer records the SQL pgx runs.
type queryTracer struct {
	mu  sync.Mutex
	sql []string
}

func (tr *queryTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	tr.mu.Lock()
	tr.sql = append(tr.sql, d.SQL)
	tr.mu.Unlock()
	return ctx
}

func (tr *queryTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (tr *queryTracer) saw(marker string) int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	n := 0
	for _, q := range tr.sql {
		if strings.Contains(q, marker) {
			n++
		}
	}
	return n
}

// TestBeforeConnectShapesPgxConfig: a tracer, OnNotice and
// DefaultQueryExecMode set on pgx's ConnConfig by BeforeConnect act on
// pooldriver's connections as on the plain driver's given the same config:
// the tracer sees the statements, the notice arrives, and no statement is
// prepared on the server.
func TestBeforeConnectShapesPgxConfig(t *testing.T) {
	t.Parallel()
	forServer(t, "postgres", func(t *testing.T, s server) {
		type observed struct {
			traced    int
			notices   []string
			preparedN int64
		}
		marker := unique("traced")
		run := func(t *testing.T, db *sql.DB) observed {
			sc, err := db.Conn(ctx(t))
			require.NoError(t, err)
			defer sc.Close()
			for i := range 3 {
				var n int
				require.NoError(t, sc.QueryRowContext(ctx(t), "SELECT $1::int + 1 AS "+marker, i).Scan(&n))
				require.Equal(t, i+1, n)
			}
			_, err = sc.ExecContext(ctx(t), "DO $$ BEGIN RAISE NOTICE 'hello %', 42; END $$")
			require.NoError(t, err)
			var o observed
			require.NoError(t, sc.QueryRowContext(ctx(t), "SELECT count(*) FROM pg_prepared_statements").Scan(&o.preparedN))
			return o
		}
		shapeWith := func(tr *queryTracer, notices *[]string, mu *sync.Mutex) func(cfg *pgx.ConnConfig) {
			return func(cfg *pgx.ConnConfig) {
				cfg.Tracer = tr
				cfg.DefaultQueryExecMode = pgx.QueryExecModeExec
				cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
					mu.Lock()
					*notices = append(*notices, n.Message)
					mu.Unlock()
				}
			}
		}
		var results []observed
		for _, via := range []string{"plain", "pooldriver"} {
			t.Run(via, func(t *testing.T) {
				tr := &queryTracer{}
				var mu sync.Mutex
				var notices []string
				shape := shapeWith(tr, &notices, &mu)
				o := run(t, func() *sql.DB {
					if via == "plain" {
						cfg, err := pgx.ParseConfig(s.dsn)
						require.NoError(t, err)
						shape(cfg)
						db := stdlib.OpenDB(*cfg)
						t.Cleanup(func() { db.Close() })
						return db
					}
					db, _ := newTenant(t, s).open(t, "", pooldriver.WithBeforeConnect(postgres.BeforeConnect(
						func(_ context.Context, cfg *pgx.ConnConfig) error { shape(cfg); return nil })))
					return db
				}())
				o.traced = tr.saw(marker)
				mu.Lock()
				o.notices = append(o.notices, notices...)
				mu.Unlock()
				results = append(results, o)
			})
		}
		require.Len(t, results, 2)
		assert.Equal(t, observed{traced: 3, notices: []string{"hello 42"}, preparedN: 0}, results[0], "plain")
		assert.Equal(t, results[0], results[1], "pooldriver differs from the plain driver")
	})
}

// sessionTag is an AfterConnect hook that sets the server's session
// variable of s (the tests' getVar reads it) through the raw connection.
func sessionTag(s server, calls *atomic.Int64) func(context.Context, any) error {
	return func(ctx context.Context, raw any) error {
		calls.Add(1)
		if s.name == "postgres" {
			_, err := raw.(*pgx.Conn).Exec(ctx, s.setVar)
			return err
		}
		_, err := raw.(driver.ExecerContext).ExecContext(ctx, s.setVar, nil)
		return err
	}
}

// TestAfterConnectSurvivesReset: what AfterConnect sets in the session is
// there on a new connection and again after a reset, which undid what a
// *sql.Conn changed; and it is no change of the session by itself (no
// reset after a clean use).
func TestAfterConnectSurvivesReset(t *testing.T) {
	t.Parallel()
	forEachServer(t, func(t *testing.T, s server) {
		t.Parallel()
		tn := newTenant(t, s)
		var calls atomic.Int64
		// pool_trust_functions: what counts here is the hook and the
		// *sql.Conn, not a catalog reading (while none since other
		// tests' DDL vouches for a statement, every one that names
		// anything counts as a change).
		db, c := tn.open(t, "pool_max_conns=1&pool_trust_functions=true", pooldriver.WithAfterConnect(sessionTag(s, &calls)))
		getVar := func() string {
			var v sql.NullString
			require.NoError(t, db.QueryRowContext(ctx(t), s.getVar).Scan(&v))
			return v.String
		}
		getSetting := func() string {
			var v string
			require.NoError(t, db.QueryRowContext(ctx(t), s.getSetting).Scan(&v))
			return v
		}
		assert.Equal(t, "1", getVar())
		before := getSetting()
		assert.Zero(t, c.Stats().SessionResets, "the hook's variable counted as a change")

		changeSession(t, db, s)
		waitFor(t, "the reset, in the background", func() bool { return c.Stats().SessionResets == 1 && calls.Load() == 2 })
		assert.Equal(t, "1", getVar(), "after the reset")
		assert.Equal(t, before, getSetting(), "the *sql.Conn's setting survived the reset")
		assert.EqualValues(t, 1, c.Stats().Created)
	})
}

// TestAfterConnectErrorFailsConnect: a failing hook fails the statement
// with its error, and the server connection is closed, never used.
func TestAfterConnectErrorFailsConnect(t *testing.T) {
	t.Parallel()
	forEachServer(t, func(t *testing.T, s server) {
		t.Parallel()
		tn := newTenant(t, s)
		table := s.table(t, "hookfail", "id int")
		errHook := errors.New("type mood does not exist")
		var ranOn atomic.Int64
		hook := func(ctx context.Context, raw any) error {
			ranOn.Add(1)
			return errHook
		}
		db, c := tn.open(t, "", pooldriver.WithAfterConnect(hook))
		_, err := db.ExecContext(ctx(t), fmt.Sprintf("INSERT INTO %s VALUES (1)", table))
		require.ErrorIs(t, err, errHook)
		assert.Contains(t, err.Error(), "AfterConnect hook: type mood does not exist")
		assert.Positive(t, ranOn.Load())
		tn.waitConns(t, 0)
		assert.Zero(t, s.adminInt(t, "SELECT count(*) FROM "+table))
		assert.Zero(t, c.Stats().Total)
		assert.Positive(t, c.Stats().ConnectErrors)
	})
}
