package integration

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"database/sql"
	"os"
	"strings"
	"testing"

	"entgo.io/ent/dialect"
	entsql "entgo.io/ent/dialect/sql"
	"github.com/jmoiron/sqlx"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/mysqldialect"
	"github.com/uptrace/bun/dialect/pgdialect"
	gormmysql "gorm.io/driver/mysql"
	gormpostgres "gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/pooldriver/pooldriver"
)

// The README's "With an ORM" block is what a service author copies on the
// first day. TestORMWiringREADME runs each of its lines as it stands there,
// and its subtest "README" fails unless every line of that block is also a
// line of this file, so that the README cannot change without the test.

// ormProbe is what the test asks of one ORM: a statement, a query of one
// integer, and the *sql.DB the ORM says it runs on. param is the
// placeholder the ORM takes in a query: `?` for GORM, bun and sqlx (which
// rewrites it with Rebind, by the driver name it was given), the server's
// own for ent, which passes the query on as it is.
type ormProbe struct {
	exec  func(c context.Context, query string) error
	scan  func(c context.Context, n *int64, query string, args ...any) error
	db    *sql.DB
	param string
}

// one runs query through the ORM and returns the integer it selects.
func (p ormProbe) one(c context.Context, query string, args ...any) (int64, error) {
	var n int64
	err := p.scan(c, &n, query, args...)
	return n, err
}

// execer is the statement method sqlx's and bun's DB both have.
type execer interface {
	ExecContext(c context.Context, query string, args ...any) (sql.Result, error)
}

func execWith(x execer) func(c context.Context, query string) error {
	return func(c context.Context, query string) error {
		_, err := x.ExecContext(c, query)
		return err
	}
}

func gormProbe(t *testing.T, gdb *gorm.DB) ormProbe {
	sqlDB, err := gdb.DB()
	require.NoError(t, err)
	exec := func(c context.Context, query string) error { return gdb.WithContext(c).Exec(query).Error }
	scan := func(c context.Context, n *int64, query string, args ...any) error {
		return gdb.WithContext(c).Raw(query, args...).Scan(n).Error
	}
	return ormProbe{exec: exec, scan: scan, db: sqlDB, param: "?"}
}

func sqlxProbe(xdb *sqlx.DB) ormProbe {
	scan := func(c context.Context, n *int64, query string, args ...any) error {
		return xdb.GetContext(c, n, xdb.Rebind(query), args...)
	}
	return ormProbe{exec: execWith(xdb), scan: scan, db: xdb.DB, param: "?"}
}

func bunProbe(bdb *bun.DB) ormProbe {
	scan := func(c context.Context, n *int64, query string, args ...any) error {
		return bdb.NewRaw(query, args...).Scan(c, n)
	}
	return ormProbe{exec: execWith(bdb), scan: scan, db: bdb.DB, param: "?"}
}

// entProbe goes through ent's SQL driver, which a generated client
// (ent.NewClient(ent.Driver(drv))) runs every statement through; this
// module has no generated client.
func entProbe(drv *entsql.Driver, s server) ormProbe {
	exec := func(c context.Context, query string) error { return drv.Exec(c, query, []any{}, nil) }
	scan := func(c context.Context, n *int64, query string, args ...any) error {
		var rows entsql.Rows
		if err := drv.Query(c, query, args, &rows); err != nil {
			return err
		}
		defer func() { _ = rows.Close() }()
		if !rows.Next() {
			return cmp.Or(rows.Err(), sql.ErrNoRows)
		}
		if err := rows.Scan(n); err != nil {
			return err
		}
		return rows.Close()
	}
	return ormProbe{exec: exec, scan: scan, db: drv.DB(), param: s.placeholder(1)}
}

// inTransaction reports whether the ORM's statements with context c run
// inside a transaction an earlier statement began. MySQL says so in
// @@in_transaction. PostgreSQL has no such variable: txid_current() gives
// the transaction it runs in an id, the same for the rest of it, while two
// statements outside a transaction are two transactions with two ids.
func inTransaction(t *testing.T, s server, c context.Context, p ormProbe) bool {
	t.Helper()
	if s.name == "mysql" {
		n, err := p.one(c, "SELECT @@in_transaction")
		require.NoError(t, err)
		return n == 1
	}
	a, err := p.one(c, "SELECT txid_current()")
	require.NoError(t, err)
	b, err := p.one(c, "SELECT txid_current()")
	require.NoError(t, err)
	return a == b
}

// postgresORMs and mysqlORMs run the README's lines, as written there, on
// db, which sql.OpenDB(pooldriver.New(dsn)) returned.
func postgresORMs(t *testing.T, s server, db *sql.DB) map[string]ormProbe {
	gdb, err := gorm.Open(gormpostgres.New(gormpostgres.Config{Conn: db}), &gorm.Config{})
	require.NoError(t, err)
	xdb := sqlx.NewDb(db, "pgx")
	bdb := bun.NewDB(db, pgdialect.New())
	drv := entsql.OpenDB(dialect.Postgres, db)
	return map[string]ormProbe{"gorm": gormProbe(t, gdb), "sqlx": sqlxProbe(xdb), "bun": bunProbe(bdb), "ent": entProbe(drv, s)}
}

func mysqlORMs(t *testing.T, s server, db *sql.DB) map[string]ormProbe {
	probes := map[string]ormProbe{}
	gdb, err := gorm.Open(gormmysql.New(gormmysql.Config{Conn: db}), &gorm.Config{})
	require.NoError(t, err)
	probes["gorm"] = gormProbe(t, gdb)
	xdb := sqlx.NewDb(db, "mysql")
	probes["sqlx"] = sqlxProbe(xdb)
	bdb := bun.NewDB(db, mysqldialect.New())
	probes["bun"] = bunProbe(bdb)
	drv := entsql.OpenDB(dialect.MySQL, db)
	probes["ent"] = entProbe(drv, s)
	return probes
}

// throughPooldriver checks that the ORM runs on db's Connector, that its
// bind parameters reach the server in the server's form, and that a task's
// raw transaction keeps its connection across the ORM's calls: the
// statements after the task's BEGIN run inside it, on one server session,
// while a statement outside the task gets another. Under a plain driver the
// BEGIN's connection goes back to the pool, and all three land on one
// connection outside any transaction.
func throughPooldriver(t *testing.T, s server, db *sql.DB, p ormProbe) {
	t.Helper()
	want, ok := pooldriver.ConnectorOf(db)
	require.True(t, ok)
	got, ok := pooldriver.ConnectorOf(p.db)
	require.True(t, ok, "the ORM's *sql.DB is not pooldriver's")
	assert.Same(t, want, got, "the ORM runs on another Connector")

	n, err := p.one(ctx(t), "SELECT "+p.param+" + 1", 41)
	require.NoError(t, err, "a query with a bind parameter")
	assert.EqualValues(t, 42, n, "a query with a bind parameter")

	tctx, end := pooldriver.WithTask(ctx(t))
	defer end()
	require.NoError(t, p.exec(tctx, "BEGIN"))
	inTx := inTransaction(t, s, tctx, p)
	first, err := p.one(tctx, s.backendID)
	require.NoError(t, err)
	outside, err := p.one(ctx(t), s.backendID)
	require.NoError(t, err)
	second, err := p.one(tctx, s.backendID)
	require.NoError(t, err)
	require.NoError(t, p.exec(tctx, "ROLLBACK"))

	assert.True(t, inTx, "the statements after the task's BEGIN run inside its transaction")
	assert.Equal(t, first, second, "the task's statements after its BEGIN run on one server session")
	assert.NotEqual(t, first, outside, "a statement outside the task ran on the task's connection")
}

// TestORMWiringREADME: each line of the README's "With an ORM" block, run
// as written against each server, gives an ORM that runs on pooldriver
// (see throughPooldriver). On PostgreSQL, the two ways the README warns of
// do not: sqlx.Open("pooldriver", dsn) goes through pooldriver but leaves
// `?` unrewritten, and GORM's gormpostgres.Open(dsn) opens plain pgx
// (ormPitfalls).
func TestORMWiringREADME(t *testing.T) {
	t.Run("README", func(t *testing.T) {
		block := readmeORMBlock(t)
		require.GreaterOrEqual(t, len(block), 8, "the README's ORM block: a line for each ORM and server")
		src, err := os.ReadFile("orm_wiring_test.go")
		require.NoError(t, err)
		lines := map[string]bool{}
		for l := range strings.SplitSeq(string(src), "\n") {
			lines[strings.TrimSpace(l)] = true
		}
		for _, l := range block {
			assert.True(t, lines[l], "README line not run by this test: %s", l)
		}
	})

	forEachServer(t, func(t *testing.T, s server) {
		dsn := s.dsn
		db := sql.OpenDB(pooldriver.New(dsn)) // the README's first line, which the ORM lines follow
		t.Cleanup(func() { _ = db.Close() })

		var probes map[string]ormProbe
		switch s.name {
		case "postgres":
			probes = postgresORMs(t, s, db)
		case "mysql":
			probes = mysqlORMs(t, s, db)
		}
		require.Len(t, probes, 4, "the README's lines for %s", s.name)
		for _, orm := range []string{"gorm", "sqlx", "bun", "ent"} {
			t.Run(orm, func(t *testing.T) { throughPooldriver(t, s, db, probes[orm]) })
		}
	})

	t.Run("pitfalls", func(t *testing.T) { forServer(t, "postgres", ormPitfalls) })
}

// ormPitfalls: the two ways of wiring an ORM that the README warns of do
// what it says on PostgreSQL.
func ormPitfalls(t *testing.T, s server) {
	require.NotContains(t, s.dsn, "pool_", "this test adds its own pool_* key to the DSN")

	t.Run("sqlx.Open leaves ? unrewritten", func(t *testing.T) {
		xdb, err := sqlx.Open("pooldriver", s.dsn)
		require.NoError(t, err)
		t.Cleanup(func() { _ = xdb.Close() })
		_, ok := pooldriver.ConnectorOf(xdb.DB)
		require.True(t, ok, "sqlx.Open(\"pooldriver\", dsn) runs on pooldriver")

		query := "SELECT * FROM (VALUES (1, 'a')) AS w (id, name) WHERE id = ? AND name = ?"
		assert.Equal(t, query, xdb.Rebind(query), "sqlx knows no bind type for the name pooldriver")
		_, err = xdb.NamedExecContext(ctx(t), "SELECT * FROM (VALUES (1, 'a')) AS w (id, name) WHERE id = :id AND name = :name",
			map[string]any{"id": 1, "name": "a"})
		require.Error(t, err, "NamedExec sends ? to PostgreSQL")
		assert.Contains(t, err.Error(), "syntax error at or near")
		t.Logf("NamedExec: %v", err)
	})

	t.Run("GORM's own pgx bypasses pooldriver", func(t *testing.T) {
		_, err := gorm.Open(gormpostgres.Open(s.dsn+sepFor(s.dsn)+"pool_max_conns=4"), &gorm.Config{Logger: logger.Discard})
		require.Error(t, err, "pgx sends pool_max_conns to the server as a setting")
		assert.Contains(t, err.Error(), "pool_max_conns")
		t.Logf("a pool_* key: %v", err)

		gdb, err := gorm.Open(gormpostgres.Open(s.dsn), &gorm.Config{})
		require.NoError(t, err)
		p := gormProbe(t, gdb)
		t.Cleanup(func() { _ = p.db.Close() })
		_, ok := pooldriver.ConnectorOf(p.db)
		assert.False(t, ok, "gormpostgres.Open(dsn) opened pooldriver")

		// gorm.Open's ping left the DB one connection, so the task's
		// first statement and its BEGIN run on that one.
		tctx, end := pooldriver.WithTask(ctx(t))
		defer end()
		before, err := p.one(tctx, s.backendID)
		require.NoError(t, err)
		require.NoError(t, p.exec(tctx, "BEGIN"))
		after, err := p.one(tctx, s.backendID)
		require.NoError(t, err)
		assert.NotEqual(t, before, after, "pgx's stdlib drops the connection left in a transaction; the next statement gets another")
		assert.False(t, inTransaction(t, s, tctx, p), "the statements after the task's BEGIN run outside any transaction")
	})
}

// sepFor returns what joins one more query parameter to dsn.
func sepFor(dsn string) string {
	if containsQuery(dsn) {
		return "&"
	}
	return "?"
}

// readmeORMBlock returns the lines of the Go block that follows the
// README's paragraph beginning "With an ORM", trimmed, blank ones left out.
func readmeORMBlock(t *testing.T) []string {
	t.Helper()
	readme, err := os.ReadFile("../README.md")
	require.NoError(t, err)
	sc := bufio.NewScanner(bytes.NewReader(readme))
	var block []string
	found, in := false, false
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		switch {
		case !found:
			found = strings.HasPrefix(l, "With an ORM")
		case !in:
			in = l == "```go"
		case l == "```":
			return block
		case l != "":
			block = append(block, l)
		}
	}
	require.NoError(t, sc.Err())
	t.Fatal("README.md: no paragraph beginning \"With an ORM\" followed by a ```go block")
	return nil
}
