package integration

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"slices"
	"testing"

	xsamotelsql "github.com/XSAM/otelsql"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	uptraceotelsql "github.com/uptrace/opentelemetry-go-extra/otelsql"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/pooldriver/pooldriver"
)

// openBehind opens pooldriver behind a tracing wrapper: wrap gets the
// Connector and a TracerProvider recording into rec. The DB and the
// Connector (for a wrapper whose DB.Close does not reach it) are closed when
// the test ends; then the server must see none of its connections left.
func openBehind(t *testing.T, tn *tenant, wrap func(*pooldriver.Connector, *sdktrace.TracerProvider) *sql.DB) (*sql.DB, *pooldriver.Connector, *tracetest.SpanRecorder) {
	t.Helper()
	c := pooldriver.New(tn.dsn("pool_max_conns=2"))
	require.NoError(t, c.Err())
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	db := wrap(c, tp)
	t.Cleanup(func() {
		_ = db.Close()
		_ = c.Close()
		_ = tp.Shutdown(context.Background())
		tn.waitConns(t, 0)
	})
	return db, c, rec
}

// rawSetVar sets the server's session variable of s on raw, the real
// driver connection RawConn hands over: a *pgx.Conn on PostgreSQL.
func rawSetVar(ctx context.Context, s server, raw any) error {
	if s.name == "postgres" {
		pc, ok := raw.(*pgx.Conn)
		if !ok {
			return fmt.Errorf("raw is %T, want *pgx.Conn", raw)
		}
		_, err := pc.Exec(ctx, s.setVar)
		return err
	}
	_, err := raw.(driver.ExecerContext).ExecContext(ctx, s.setVar, nil)
	return err
}

// TestWrapperXSAMOtelsql: behind XSAM/otelsql's OpenDB, statements run and
// are traced, and RawConn looks through otelsql's connection (its Raw
// method) to the real one of the *sql.Conn's session. otelsql's driver
// keeps pooldriver's in an unexported field, so ConnectorOf cannot find
// the Connector, nor so its Stats: the Connector passed to OpenDB is kept.
func TestWrapperXSAMOtelsql(t *testing.T) {
	t.Parallel()
	forEachServer(t, func(t *testing.T, s server) {
		tn := newTenant(t, s)
		db, c, rec := openBehind(t, tn, func(c *pooldriver.Connector, tp *sdktrace.TracerProvider) *sql.DB {
			return xsamotelsql.OpenDB(c, xsamotelsql.WithTracerProvider(tp))
		})
		_, err := db.ExecContext(ctx(t), "SELECT 1")
		require.NoError(t, err)
		assert.True(t, slices.ContainsFunc(rec.Ended(), func(sp sdktrace.ReadOnlySpan) bool {
			return sp.Name() == string(xsamotelsql.MethodConnExec)
		}), "no %s span", xsamotelsql.MethodConnExec)

		got, ok := pooldriver.ConnectorOf(db)
		assert.False(t, ok, "ConnectorOf found %p behind XSAM/otelsql: update its doc and the README", got)
		assert.EqualValues(t, 1, c.Stats().Acquires, "the kept Connector's Stats")

		sc, err := db.Conn(ctx(t))
		require.NoError(t, err)
		require.NoError(t, sc.Raw(func(driverConn any) error {
			assert.Equal(t, "*otelsql.otConn", fmt.Sprintf("%T", driverConn))
			return pooldriver.RawConn(ctx(t), driverConn, func(raw any) error { return rawSetVar(ctx(t), s, raw) })
		}))
		var v string
		require.NoError(t, sc.QueryRowContext(ctx(t), s.getVar).Scan(&v))
		assert.Equal(t, "1", v, "RawConn's connection is the *sql.Conn's session")
		assert.EqualValues(t, 1, c.Stats().Active, "the *sql.Conn holds its connection")
		require.NoError(t, sc.Close())
		// The reset runs in the background: the connection is back once
		// it is done.
		waitFor(t, "the hold ended through otelsql's IsValid", func() bool { return c.Stats().Active == 0 })
		// What the raw connection did is reset before the next user.
		require.NoError(t, db.QueryRowContext(ctx(t), s.getVar).Scan(&v))
		assert.Empty(t, v)
	})
}

// TestWrapperUptraceOtelsql: uptrace's otelsql.OpenDB passes on the inner
// connector's Driver, so ConnectorOf finds the Connector, and its Stats,
// with nothing to unwrap; its connection exposes nothing, so RawConn
// refuses it, naming its type; and its connector has no Close, so DB.Close
// leaves the Connector open.
func TestWrapperUptraceOtelsql(t *testing.T) {
	t.Parallel()
	forEachServer(t, func(t *testing.T, s server) {
		tn := newTenant(t, s)
		db, c, rec := openBehind(t, tn, func(c *pooldriver.Connector, tp *sdktrace.TracerProvider) *sql.DB {
			return uptraceotelsql.OpenDB(c, uptraceotelsql.WithTracerProvider(tp))
		})
		_, err := db.ExecContext(ctx(t), "SELECT 1")
		require.NoError(t, err)
		assert.NotEmpty(t, rec.Ended(), "no span")

		got, ok := pooldriver.ConnectorOf(db)
		assert.True(t, ok)
		assert.Same(t, c, got)
		if ok {
			assert.EqualValues(t, 1, got.Stats().Acquires)
		}

		sc, err := db.Conn(ctx(t))
		require.NoError(t, err)
		err = sc.Raw(func(driverConn any) error {
			return pooldriver.RawConn(ctx(t), driverConn, func(any) error { return nil })
		})
		require.Error(t, err)
		assert.Contains(t, err.Error(), "*otelsql.otelConn is not a pooldriver connection")
		require.NoError(t, sc.Close())

		require.NoError(t, db.Close())
		assert.EqualValues(t, 1, c.Stats().Total, "DB.Close closed the Connector: update the README")
		require.NoError(t, c.Close())
		assert.Zero(t, c.Stats().Total)
	})
}
