package integration

import (
	"context"
	"database/sql"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pooldriver/pooldriver"
	"github.com/pooldriver/pooldriver/dialects/postgres"
)

// directPathQueries cover every conversion of the PostgreSQL dialect's
// direct query path (dialects/postgres/direct.go): each type the stdlib
// asks for in binary and converts (bool, bytea, cid, oid, xid, date, the
// floats, the integers, json, jsonb, timestamp, timestamptz, xml), types
// read as text (numeric, text, varchar, char, uuid, interval, arrays,
// inet, an enum-like domain), NULLs of each, infinities, several rows,
// none, and statements that return no columns.
var directPathQueries = []struct {
	query string
	args  []any
}{
	{`SELECT true, false, NULL::bool`, nil},
	{`SELECT '\x00fffe'::bytea, ''::bytea, NULL::bytea`, nil},
	{`SELECT '7'::cid, 4294967295::oid, '12'::xid, NULL::oid`, nil},
	{`SELECT '2024-02-29'::date, 'infinity'::date, '-infinity'::date, '4713-01-01 BC'::date, NULL::date`, nil},
	{`SELECT 1.5::float4, 'NaN'::float4, '-Infinity'::float8, 1e300::float8, NULL::float8`, nil},
	{`SELECT (-32768)::int2, 2147483647::int4, (-9223372036854775808)::int8, NULL::int4`, nil},
	{`SELECT '{"a": [1, 2]}'::json, '{"b": null}'::jsonb, 'null'::jsonb, NULL::jsonb`, nil},
	{`SELECT '2024-02-29 13:14:15.123456'::timestamp, 'infinity'::timestamp, NULL::timestamp`, nil},
	{`SELECT '2024-02-29 13:14:15.123456+03'::timestamptz, '-infinity'::timestamptz, NULL::timestamptz`, nil},
	{`SELECT '<a>x</a>'::xml, NULL::xml`, nil},
	{`SELECT 123.4500::numeric(9,4), 'NaN'::numeric, 'héllo'::text, 'x'::varchar(10), 'y'::char(3), NULL::text`, nil},
	{`SELECT 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'::uuid, '1 day 02:03:04'::interval, '{1,NULL,3}'::int4[], '10.0.0.1/8'::inet`, nil},
	{`SELECT $1::int8 + 1, $2::text || '!', $3::float8 * 2, $4::bool, $5::bytea, $6::timestamptz`,
		[]any{int64(41), "hi", 1.25, true, []byte{1, 2}, "2024-01-02T03:04:05Z"}},
	{`SELECT $1::int4[], $2::numeric, $3::uuid`, []any{[]int32{1, 2}, "1.5", [16]byte{1, 2, 3}}},
	{`SELECT g, g::text, g % 2 = 0 FROM generate_series(1, 5) g`, nil},
	{`SELECT 1 WHERE false`, nil},
	{`SELECT`, nil},
	{`CREATE TEMP TABLE IF NOT EXISTS direct_path_t (a int)`, nil},
	{`SELECT $1::text IS NULL`, []any{nil}},
}

// TestDirectPathMatchesStdlib runs directPathQueries through pooldriver and
// through pgx's stdlib itself, and requires the same columns, column
// types and driver values from both, twice (the second time from the
// statement cache). Errors must match too: a wrong argument count, an
// argument pgx cannot encode, a statement the server refuses.
func TestDirectPathMatchesStdlib(t *testing.T) {
	t.Parallel()
	forServer(t, "postgres", func(t *testing.T, s server) {
		tn := newTenant(t, s)
		pd, _ := tn.open(t, "pool_max_conns=1")
		plain, err := sql.Open("pgx", tn.base)
		require.NoError(t, err)
		t.Cleanup(func() { _ = plain.Close() })
		plain.SetMaxOpenConns(1)
		c := ctx(t)
		for round := range 2 {
			for _, q := range directPathQueries {
				want, werr := readAll(c, plain, q.query, q.args...)
				got, gerr := readAll(c, pd, q.query, q.args...)
				require.NoError(t, werr, "stdlib: %s", q.query)
				require.NoError(t, gerr, "pooldriver: %s", q.query)
				assert.Equal(t, want, got, "round %d: %s", round, q.query)
			}
		}
		for _, q := range []struct {
			query string
			args  []any
		}{
			{`SELECT $1::int4`, nil},
			{`SELECT $1::int4`, []any{"not a number"}},
			{`SELECT $1::int4`, []any{struct{}{}}},
			{`SELECT no_such_column`, nil},
			{`SELECT 1/0`, nil},
			{`SELECT 1; SELECT 2`, nil},
		} {
			_, werr := readAll(c, plain, q.query, q.args...)
			_, gerr := readAll(c, pd, q.query, q.args...)
			require.Error(t, werr, q.query)
			require.Error(t, gerr, q.query)
			assert.Equal(t, werr.Error(), gerr.Error(), q.query)
		}
		// Exec: rows affected and errors, each side on a table of its own.
		tables := map[*sql.DB]string{plain: s.table(t, "direct", "a int PRIMARY KEY, b text"), pd: s.table(t, "direct", "a int PRIMARY KEY, b text")}
		for _, q := range []struct {
			query string
			args  []any
		}{
			{`INSERT INTO %s VALUES ($1, $2), ($1 + 1, $2)`, []any{1, "x"}},
			{`INSERT INTO %s VALUES ($1, $2)`, []any{int64(3), nil}},
			{`UPDATE %s SET b = $1 WHERE a >= $2`, []any{"y", 2}},
			{`DELETE FROM %s WHERE a = $1`, []any{3}},
			{`SELECT * FROM %s WHERE a > $1`, []any{0}},
			{`INSERT INTO %s VALUES ($1, $2)`, []any{1, "duplicate"}},
			{`INSERT INTO %s VALUES ($1, $2)`, []any{9}},
			{`UPDATE %s SET a = $1`, []any{struct{}{}}},
			{`UPDATE %s SET b = 'z'; UPDATE %[1]s SET b = 'w'`, nil},
		} {
			var res [2]string
			for i, db := range []*sql.DB{plain, pd} {
				r, err := db.ExecContext(c, fmt.Sprintf(q.query, tables[db]), q.args...)
				if err != nil {
					res[i] = "error: " + strings.ReplaceAll(err.Error(), tables[db], "T")
					continue
				}
				n, err := r.RowsAffected()
				res[i] = fmt.Sprint(n, err)
			}
			assert.Equal(t, res[0], res[1], q.query)
		}

		// After the errors the connection still runs what it cached.
		want, _ := readAll(c, plain, directPathQueries[12].query, directPathQueries[12].args...)
		got, err := readAll(c, pd, directPathQueries[12].query, directPathQueries[12].args...)
		require.NoError(t, err)
		assert.Equal(t, want, got)
	})
}

// TestDirectPathStatementCache: the direct path keeps at most
// statement_cache_capacity statements prepared on the server, drops one
// the server no longer accepts (after DDL changes its result type), and
// leaves the stdlib to the queries it does not take: a QueryExecMode in
// front of the arguments, NamedArgs, and a DSN whose exec mode is not
// cache_statement, or a pgx tracer.
func TestDirectPathStatementCache(t *testing.T) {
	t.Parallel()
	forServer(t, "postgres", func(t *testing.T, s server) {
		tn := newTenant(t, s)
		db, _ := tn.open(t, "pool_max_conns=1&statement_cache_capacity=4")
		c := ctx(t)
		conn, err := db.Conn(c)
		require.NoError(t, err)
		defer conn.Close()
		prepared := func() int { // the direct path's, by their names
			var n int
			require.NoError(t, conn.QueryRowContext(c, `SELECT count(*) FROM pg_prepared_statements WHERE name LIKE 'pooldriver\_%'`).Scan(&n))
			return n
		}
		for i := range 20 {
			var v int
			require.NoError(t, conn.QueryRowContext(c, fmt.Sprintf("SELECT %d", i)).Scan(&v))
			require.Equal(t, i, v)
		}
		n := prepared()
		assert.Positive(t, n, "no statement of the direct path on the server")
		assert.LessOrEqual(t, n, 5, "statements on the server beyond the cache's capacity (4, and the one being prepared)")

		_, err = conn.ExecContext(c, `CREATE TEMP TABLE direct_stale (a int)`)
		require.NoError(t, err)
		var a any
		require.ErrorIs(t, conn.QueryRowContext(c, `SELECT * FROM direct_stale`).Scan(&a), sql.ErrNoRows)
		_, err = conn.ExecContext(c, `ALTER TABLE direct_stale ADD COLUMN b text`)
		require.NoError(t, err)
		_, err = conn.ExecContext(c, `INSERT INTO direct_stale VALUES (1, 'x')`)
		require.NoError(t, err)
		// The first run after the DDL may fail as the stdlib's does
		// ("cached plan must not change result type"); the next prepares
		// the statement afresh.
		var b string
		if err := conn.QueryRowContext(c, `SELECT * FROM direct_stale`).Scan(&a, &b); err != nil {
			require.Contains(t, err.Error(), "cached plan must not change result type")
			require.NoError(t, conn.QueryRowContext(c, `SELECT * FROM direct_stale`).Scan(&a, &b))
		}
		assert.Equal(t, "x", b)

		var v int64
		require.NoError(t, conn.QueryRowContext(c, `SELECT $1::int8`, pgx.QueryExecModeSimpleProtocol, int64(7)).Scan(&v))
		assert.Equal(t, int64(7), v, "QueryExecMode in front of the arguments")
		require.NoError(t, conn.QueryRowContext(c, `SELECT @v::int8`, pgx.NamedArgs{"v": int64(8)}).Scan(&v))
		assert.Equal(t, int64(8), v, "NamedArgs")
	})
	// A pgx tracer sees pgx.Conn's statements: with one configured, the
	// direct path steps aside and the tracer sees every query and Exec.
	forServer(t, "postgres", func(t *testing.T, s server) {
		tr := &queryTracer{}
		marker := unique("traced")
		db, _ := newTenant(t, s).open(t, "pool_max_conns=1", pooldriver.WithBeforeConnect(postgres.BeforeConnect(
			func(_ context.Context, cfg *pgx.ConnConfig) error { cfg.Tracer = tr; return nil })))
		c := ctx(t)
		for i := range 3 {
			var n int
			require.NoError(t, db.QueryRowContext(c, "SELECT $1::int AS "+marker, i).Scan(&n))
			_, err := db.ExecContext(c, "SELECT $1::int AS "+marker, i)
			require.NoError(t, err)
		}
		assert.Equal(t, 6, tr.saw(marker), "statements the tracer saw")
	})
	forServer(t, "postgres", func(t *testing.T, s server) {
		tn := newTenant(t, s)
		db, _ := tn.open(t, "pool_max_conns=1&default_query_exec_mode=simple_protocol")
		c := ctx(t)
		var n int
		for range 2 {
			require.NoError(t, db.QueryRowContext(c, `SELECT count(*) FROM pg_prepared_statements`).Scan(&n))
		}
		assert.Zero(t, n, "simple_protocol prepares nothing")
	})
}

// readAll runs query and returns its column names, the column types'
// answers and every row's values as the driver gave them.
func readAll(ctx context.Context, db *sql.DB, query string, args ...any) ([]string, error) {
	rows, err := db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	types, err := rows.ColumnTypes()
	if err != nil {
		return nil, err
	}
	out := []string{strings.Join(cols, ",")}
	for _, ct := range types {
		l, lok := ct.Length()
		p, sc, pok := ct.DecimalSize()
		out = append(out, fmt.Sprintf("%s %s %d/%v %d,%d/%v %v", ct.Name(), ct.DatabaseTypeName(), l, lok, p, sc, pok, ct.ScanType()))
	}
	vals := make([]any, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		for _, v := range vals {
			out = append(out, fmt.Sprintf("%T %#v", v, v))
			if v != nil && reflect.TypeOf(v).Kind() == reflect.Slice {
				out = append(out, fmt.Sprintf("%x", v))
			}
		}
	}
	return out, rows.Err()
}
