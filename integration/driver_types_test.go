package integration

import (
	"bytes"
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"fmt"
	"math/big"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pooldriver/pooldriver"
)

// TestArgumentTypesPostgres: the types pgx accepts reach it through
// pooldriver (which lets the real driver check arguments) and come back.
func TestArgumentTypesPostgres(t *testing.T) {
	t.Parallel()
	forServer(t, "postgres", func(t *testing.T, s server) {
		tn := newTenant(t, s)
		db, _ := tn.open(t, "pool_max_conns=2")
		c := ctx(t)

		var text string
		require.NoError(t, db.QueryRowContext(c, "SELECT array_to_string($1::int4[], ',')", []int32{1, -2, 3}).Scan(&text))
		assert.Equal(t, "1,-2,3", text, "[]int32")

		num := pgtype.Numeric{Int: big.NewInt(-12345), Exp: -2, Valid: true}
		require.NoError(t, db.QueryRowContext(c, "SELECT $1::numeric::text", num).Scan(&text))
		assert.Equal(t, "-123.45", text, "pgtype.Numeric")
		var numBack pgtype.Numeric
		require.NoError(t, db.QueryRowContext(c, "SELECT $1::numeric * 2", num).Scan(&numBack))
		f, err := numBack.Float64Value()
		require.NoError(t, err)
		assert.InDelta(t, -246.9, f.Float64, 1e-9)

		var txt pgtype.Text
		require.NoError(t, db.QueryRowContext(c, "SELECT $1::text || '!'", pgtype.Text{String: "héllo", Valid: true}).Scan(&txt))
		assert.Equal(t, pgtype.Text{String: "héllo!", Valid: true}, txt, "pgtype.Text")
		require.NoError(t, db.QueryRowContext(c, "SELECT $1::text", pgtype.Text{}).Scan(&txt))
		assert.False(t, txt.Valid, "NULL pgtype.Text")

		when := time.Date(2024, 2, 29, 13, 14, 15, 123456000, time.FixedZone("x", 3*3600))
		var back time.Time
		require.NoError(t, db.QueryRowContext(c, "SELECT $1::timestamptz", when).Scan(&back))
		assert.True(t, when.Equal(back), "time.Time: %v != %v", when, back)

		raw := json.RawMessage(`{"a": [1, 2], "b": "x"}`)
		require.NoError(t, db.QueryRowContext(c, "SELECT $1::jsonb ->> 'b'", raw).Scan(&text))
		assert.Equal(t, "x", text, "json.RawMessage")

		id := [16]byte{0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0, 0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef}
		const idText = "12345678-9abc-def0-0123-456789abcdef"
		require.NoError(t, db.QueryRowContext(c, "SELECT $1::uuid::text", id).Scan(&text))
		assert.Equal(t, idText, text, "uuid as [16]byte")
		var same bool
		require.NoError(t, db.QueryRowContext(c, "SELECT $1::uuid = $2::uuid", idText, id).Scan(&same))
		assert.True(t, same, "uuid as string")

		blob := []byte{0, 1, 2, 0xfe, 0xff}
		var blobBack []byte
		require.NoError(t, db.QueryRowContext(c, "SELECT $1::bytea", blob).Scan(&blobBack))
		assert.Equal(t, blob, blobBack, "[]byte")

		var isNull bool
		require.NoError(t, db.QueryRowContext(c, "SELECT $1::text IS NULL", nil).Scan(&isNull))
		assert.True(t, isNull, "nil")

		// The same through a table, a prepared statement and a transaction.
		table := s.table(t, "types", "a int4[], n numeric, ts timestamptz, j jsonb, u uuid, b bytea, z text")
		tx, err := db.BeginTx(c, nil)
		require.NoError(t, err)
		st, err := tx.PrepareContext(c, "INSERT INTO "+table+" VALUES ($1, $2, $3, $4, $5, $6, $7)")
		require.NoError(t, err)
		_, err = st.ExecContext(c, []int32{7, 8}, num, when, raw, id, blob, nil)
		require.NoError(t, err)
		require.NoError(t, st.Close())
		require.NoError(t, tx.Commit())
		var (
			arr  pgtype.FlatArray[int32]
			n2   pgtype.Numeric
			ts2  time.Time
			j2   []byte
			u2   pgtype.UUID
			b2   []byte
			z2   sql.NullString
			tmap = pgtype.NewMap()
		)
		require.NoError(t, db.QueryRowContext(c, "SELECT a, n, ts, j, u, b, z FROM "+table).
			Scan(tmap.SQLScanner(&arr), &n2, &ts2, &j2, &u2, &b2, &z2))
		assert.Equal(t, pgtype.FlatArray[int32]{7, 8}, arr)
		assert.Equal(t, 0, n2.Int.Cmp(big.NewInt(-12345)))
		assert.EqualValues(t, -2, n2.Exp)
		assert.True(t, when.Equal(ts2))
		assert.JSONEq(t, string(raw), string(j2))
		assert.Equal(t, id, u2.Bytes)
		assert.Equal(t, blob, b2)
		assert.False(t, z2.Valid)
	})
}

// TestArgumentTypesMySQL: time.Time (with parseTime=true) and []byte round
// trip through pooldriver.
func TestArgumentTypesMySQL(t *testing.T) {
	t.Parallel()
	forServer(t, "mysql", func(t *testing.T, s server) {
		tn := newTenant(t, s)
		db, _ := tn.open(t, "parseTime=true&pool_max_conns=2")
		c := ctx(t)

		when := time.Date(2024, 2, 29, 13, 14, 15, 123456000, time.UTC)
		var back time.Time
		require.NoError(t, db.QueryRowContext(c, "SELECT CAST(? AS DATETIME(6))", when).Scan(&back))
		assert.True(t, when.Equal(back), "time.Time: %v != %v", when, back)

		blob := []byte{0, 1, 2, '\'', '\\', 0xfe, 0xff}
		var blobBack []byte
		require.NoError(t, db.QueryRowContext(c, "SELECT ?", blob).Scan(&blobBack))
		assert.Equal(t, blob, blobBack, "[]byte")

		var isNull bool
		require.NoError(t, db.QueryRowContext(c, "SELECT ? IS NULL", nil).Scan(&isNull))
		assert.True(t, isNull, "nil")

		table := s.table(t, "types", "ts DATETIME(6), b BLOB, z VARCHAR(10)")
		tx, err := db.BeginTx(c, nil)
		require.NoError(t, err)
		st, err := tx.PrepareContext(c, "INSERT INTO "+table+" VALUES (?, ?, ?)")
		require.NoError(t, err)
		_, err = st.ExecContext(c, when, blob, nil)
		require.NoError(t, err)
		require.NoError(t, st.Close())
		require.NoError(t, tx.Commit())
		var (
			ts2 time.Time
			b2  []byte
			z2  sql.NullString
		)
		require.NoError(t, db.QueryRowContext(c, "SELECT ts, b, z FROM "+table).Scan(&ts2, &b2, &z2))
		assert.True(t, when.Equal(ts2), "%v != %v", when, ts2)
		assert.True(t, bytes.Equal(blob, b2))
		assert.False(t, z2.Valid)
	})
}

// TestRawConnCopyFrom: pgx's CopyFrom through RawConn runs on the task's
// connection, inside the transaction a raw BEGIN opened there.
func TestRawConnCopyFrom(t *testing.T) {
	t.Parallel()
	forServer(t, "postgres", func(t *testing.T, s server) {
		tn := newTenant(t, s)
		db, c := tn.open(t, "pool_max_conns=2")
		table := s.table(t, "copy", "id int, name text")

		task, end := pooldriver.WithTask(ctx(t))
		defer end()
		_, err := db.ExecContext(task, "BEGIN")
		require.NoError(t, err)
		pid := backendID(t, db, task, s)

		const n = 1000
		rows := make([][]any, n)
		for i := range rows {
			rows[i] = []any{int32(i), fmt.Sprintf("row %d", i)}
		}
		sc, err := db.Conn(task)
		require.NoError(t, err)
		var copied, rawPID int64
		err = sc.Raw(func(driverConn any) error {
			return pooldriver.RawConn(task, driverConn, func(raw any) error {
				pc, ok := raw.(*pgx.Conn)
				if !ok {
					return fmt.Errorf("raw is %T, want *pgx.Conn", raw)
				}
				rawPID = int64(pc.PgConn().PID())
				var err error
				copied, err = pc.CopyFrom(task, pgx.Identifier{table}, []string{"id", "name"}, pgx.CopyFromRows(rows))
				return err
			})
		})
		require.NoError(t, err)
		require.NoError(t, sc.Close())
		assert.EqualValues(t, n, copied)
		assert.Equal(t, pid, rawPID, "RawConn used the task's connection")

		assert.EqualValues(t, n, count(t, db, task, table), "the task sees the copied rows")
		assert.Zero(t, s.adminInt(t, "SELECT count(*) FROM "+table), "visible before COMMIT")
		_, err = db.ExecContext(task, "COMMIT")
		require.NoError(t, err)
		assert.EqualValues(t, n, s.adminInt(t, "SELECT count(*) FROM "+table))
		// pooldriver cannot see what the callback did to the session, so
		// the transaction-mode task keeps the connection (as after a SET)
		// until it ends, and it is reset before reuse.
		assert.EqualValues(t, 1, c.Stats().Active)
		resets := c.Stats().SessionResets
		end()
		waitFor(t, "the reset, in the background", func() bool { return c.Stats().Active == 0 && c.Stats().SessionResets == resets+1 })

		// Without a task, RawConn uses the *sql.Conn's connection, taken
		// from the pool by its first use and given back by its Close.
		sc, err = db.Conn(context.Background())
		require.NoError(t, err)
		require.NoError(t, sc.Raw(func(driverConn any) error {
			return pooldriver.RawConn(context.Background(), driverConn, func(raw any) error {
				_, err := raw.(*pgx.Conn).Exec(context.Background(), "SELECT 1")
				return err
			})
		}))
		assert.EqualValues(t, 1, c.Stats().Active, "the *sql.Conn holds its connection")
		require.NoError(t, sc.Close())
		waitFor(t, "the reset, in the background", func() bool { return c.Stats().Active == 0 })
	})
}

// TestArgumentTypesPostgresPlainAndPooled runs the same arguments through
// pgx's stdlib and through pooldriver (which hands them to pgx without
// its checker: dialects.ArgumentsAsIs) and compares what comes back,
// errors included: values database/sql's default converter would change
// (int, uint8) or refuse (uint64 with the high bit, []int32, a struct)
// reach pgx alike.
func TestArgumentTypesPostgresPlainAndPooled(t *testing.T) {
	t.Parallel()
	forServer(t, "postgres", func(t *testing.T, s server) {
		tn := newTenant(t, s)
		pooled, _ := tn.open(t, "pool_max_conns=2")
		plain, err := sql.Open("pgx", tn.base)
		require.NoError(t, err)
		defer plain.Close()
		c := ctx(t)
		type point struct{ X, Y int }
		cases := []struct {
			query string
			arg   any
			fails bool // under the plain driver, as it must under pooldriver
		}{
			{"SELECT $1::int8::text", 7, false},
			{"SELECT $1::int2::text", uint8(200), false},
			{"SELECT $1::numeric::text", uint64(1) << 63, false},
			{"SELECT array_to_string($1::int4[], ',')", []int32{4, -5}, false},
			{"SELECT $1::numeric::text", pgtype.Numeric{Int: big.NewInt(31), Exp: -1, Valid: true}, false},
			{"SELECT $1::text", valuerText("from a Valuer"), false},
			{"SELECT $1::text", point{1, 2}, true},
			{"SELECT $1::int4::text", int64(1) << 40, true},
		}
		run := func(db *sql.DB, query string, arg any) (string, bool) {
			var out sql.NullString
			err := db.QueryRowContext(c, query, arg).Scan(&out)
			return out.String, err != nil
		}
		for _, tc := range cases {
			want, wantErr := run(plain, tc.query, tc.arg)
			require.Equal(t, tc.fails, wantErr, "%s with %T under the plain driver", tc.query, tc.arg)
			got, gotErr := run(pooled, tc.query, tc.arg)
			assert.Equal(t, wantErr, gotErr, "%s with %T: failed under plain %t, under pooldriver %t", tc.query, tc.arg, wantErr, gotErr)
			assert.Equal(t, want, got, "%s with %T", tc.query, tc.arg)
		}
		// A failed argument costs pooldriver's connection nothing.
		var one int
		require.NoError(t, pooled.QueryRowContext(c, "SELECT 1").Scan(&one))
	})
}

// valuerText is a driver.Valuer.
type valuerText string

func (v valuerText) Value() (driver.Value, error) { return string(v), nil }
