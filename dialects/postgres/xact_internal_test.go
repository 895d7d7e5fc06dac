package postgres

import (
	"database/sql/driver"
	"fmt"
	"strconv"
	"testing"
)

// TestDecimal: decimal answers as strconv.ParseUint does, for the texts a
// transaction's id and a timeline come as and for those around the
// limits.
func TestDecimal(t *testing.T) {
	texts := []string{"", "0", "7", "42", "00012", "-1", "+1", "1a", " 1", "4294967295", "4294967296",
		"18446744073709551615", "18446744073709551616", "99999999999999999999", "123456789012345678901",
		"1844674407370955161", "18446744073709551610"}
	for i := uint64(1); i < 1<<63; i = i*7 + 3 {
		texts = append(texts, strconv.FormatUint(i, 10))
	}
	for _, s := range texts {
		for _, bits := range []uint{32, 64} {
			want, err := strconv.ParseUint(s, 10, int(bits))
			ok := err == nil && s != "" && s[0] != '+'
			got, gotOK := decimal([]byte(s), bits)
			if gotOK != ok || ok && got != want {
				t.Errorf("decimal(%q, %d) = %d, %v; want %d, %v", s, bits, got, gotOK, want, ok)
			}
		}
	}
}

// TestTxIDLearntByQuery: in a transaction, a statement that returns rows
// and may write (INSERT … RETURNING, as GORM's Create runs it) brings the
// transaction's id in its own round trip, on its first run on the
// connection (prepared in the same write) and on a later one (prepared
// before); the id is the server's. A transaction that only began is known
// to have none.
func TestTxIDLearntByQuery(t *testing.T) {
	c := opened(t)
	ctx := t.Context()
	exec(t, c, "CREATE TEMP TABLE pd_probe_q (v int)")
	const insert = "INSERT INTO pd_probe_q VALUES ($1) RETURNING v"
	for _, run := range []string{"first run, prepared with it", "prepared before"} {
		tx, err := c.BeginTx(ctx, driver.TxOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if ref := c.OpenTxRef(); ref.ID != 0 || !ref.Clean {
			t.Fatalf("%s: a transaction that only began: %+v, want no id and clean", run, ref)
		}
		rows, err := c.QueryContext(ctx, insert, []driver.NamedValue{{Ordinal: 1, Value: int64(7)}})
		if err != nil {
			t.Fatal(err)
		}
		dest := make([]driver.Value, 1)
		for rows.Next(dest) == nil {
		}
		if err := rows.Close(); err != nil {
			t.Fatal(err)
		}
		checkIDLearnt(t, c, run)
		if err := tx.Rollback(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestTxIDLearntByPreparedStatement: a statement prepared before the
// transaction (a *sql.Stmt, GORM's PrepareStmt) that writes in it brings
// the transaction's id as the connection's own statements do, by Exec and
// by Query; one that only reads, before it, assigns none.
func TestTxIDLearntByPreparedStatement(t *testing.T) {
	c := opened(t)
	ctx := t.Context()
	exec(t, c, "CREATE TEMP TABLE pd_probe_p (v int)")
	for _, by := range []string{"Exec", "Query"} {
		query := "INSERT INTO pd_probe_p VALUES ($1)"
		if by == "Query" {
			query += " RETURNING v"
		}
		st, err := c.PrepareContext(ctx, query)
		if err != nil {
			t.Fatal(err)
		}
		read, err := c.PrepareContext(ctx, "SELECT v FROM pd_probe_p WHERE v = $1")
		if err != nil {
			t.Fatal(err)
		}
		tx, err := c.BeginTx(ctx, driver.TxOptions{})
		if err != nil {
			t.Fatal(err)
		}
		args := []driver.NamedValue{{Ordinal: 1, Value: int64(7)}}
		dest := make([]driver.Value, 1)
		rows, err := read.(driver.StmtQueryContext).QueryContext(ctx, args)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next(dest) == nil {
		}
		_ = rows.Close()
		if ref := c.OpenTxRef(); ref.ID != 0 {
			t.Fatalf("%s: a transaction that only read: %+v, want no id", by, ref)
		}
		if by == "Exec" {
			_, err = st.(driver.StmtExecContext).ExecContext(ctx, args)
		} else {
			var rows driver.Rows
			if rows, err = st.(driver.StmtQueryContext).QueryContext(ctx, args); err == nil {
				for rows.Next(dest) == nil {
				}
				err = rows.Close()
			}
		}
		if err != nil {
			t.Fatal(err)
		}
		checkIDLearnt(t, c, by+" of a prepared statement")
		if err := tx.Rollback(); err != nil {
			t.Fatal(err)
		}
		_ = st.Close()
		_ = read.Close()
	}
}

// checkIDLearnt compares the id c learnt of its open transaction with the
// server's: it must have learnt one, the same.
func checkIDLearnt(t *testing.T, c *conn, what string) {
	t.Helper()
	ref := c.OpenTxRef()
	rows, err := c.QueryContext(t.Context(), "SELECT pg_catalog.pg_current_xact_id_if_assigned()::text", nil)
	if err != nil {
		t.Fatal(err)
	}
	dest := make([]driver.Value, 1)
	if err := rows.Next(dest); err != nil {
		t.Fatal(err)
	}
	_ = rows.Close()
	if got := fmt.Sprint(dest[0]); ref.ID == 0 || strconv.FormatUint(ref.ID, 10) != got {
		t.Errorf("%s: the id learnt is %d, the server's %s", what, ref.ID, got)
	}
}
