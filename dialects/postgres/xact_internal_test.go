package postgres

import (
	"context"
	"database/sql/driver"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
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

// TestProbeNamed: a write in a transaction carries the probe unnamed until
// its text was judged (ChangesSession, as pooldriver asks after each
// statement), then prepares it under probeName in the same write, then
// binds it there; each run learns the server's id. Where the session may
// have dropped it (a DO block that deallocates it, judged a change) or the
// statement may (a call of a function that does), the probe goes unnamed
// and the transaction goes on. The next reset finds it gone and drops
// every statement, so that the next Parse of it does not meet one; and a
// probe the server refuses is the statement's error, not a transaction
// left aborted in silence.
func TestProbeNamed(t *testing.T) {
	c := opened(t)
	ctx := t.Context()
	table := fmt.Sprintf("pd_probe_named_%d", time.Now().UnixNano())
	fn := table + "_drop"
	exec(t, c, "CREATE TABLE "+table+" (v int)")
	exec(t, c, "CREATE FUNCTION "+fn+"(int) RETURNS int LANGUAGE plpgsql AS $$ BEGIN EXECUTE 'DEALLOCATE "+probeName+"'; RETURN $1; END $$")
	t.Cleanup(func() {
		if _, err := c.pgx().Exec(context.Background(), "ROLLBACK; DROP FUNCTION "+fn+"(int); DROP TABLE "+table); err != nil {
			t.Error(err)
		}
	})
	insert := "INSERT INTO " + table + " VALUES ($1)"
	args := []driver.NamedValue{{Ordinal: 1, Value: int64(7)}}
	run := func(query string) error {
		_, err := c.ExecContext(ctx, query, args)
		c.ChangesSession(query)
		return err
	}
	prepared := func() bool { return probePrepared(t, c) }
	begin := func() driver.Tx {
		tx, err := c.BeginTx(ctx, driver.TxOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return tx
	}
	reset := func() {
		if err := c.ResetSession(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// prepareProbe writes in transactions until the probe is prepared: the
	// first judgment after a reset may be with a reading taken since.
	prepareProbe := func() {
		for i := 0; !prepared(); i++ {
			if i == 3 {
				t.Fatal("the probe is not prepared after 3 writes")
			}
			tx := begin()
			if err := run(insert); err != nil {
				t.Fatal(err)
			}
			if err := tx.Rollback(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := run(insert); err != nil { // judged outside a transaction: no probe
		t.Fatal(err)
	}
	for i, want := range []bool{true, true} {
		tx := begin()
		if err := run(insert); err != nil {
			t.Fatal(err)
		}
		checkIDLearnt(t, c, fmt.Sprintf("run %d", i))
		if err := tx.Rollback(); err != nil {
			t.Fatal(err)
		}
		if got := prepared(); got != want || c.probeAt != c.dropGen+1 {
			t.Fatalf("run %d: the probe prepared on the server: %v, by the connection's count: %v", i, got, c.probeAt == c.dropGen+1)
		}
	}

	// Dropped earlier in the transaction, by DEALLOCATE or a DO block:
	// judged a change, so the next probe goes unnamed; the reset after
	// finds it gone and drops every statement, and the probe is prepared
	// again after.
	for _, drop := range []string{"DEALLOCATE " + probeName, "DO $$ BEGIN EXECUTE 'DEALLOCATE " + probeName + "'; END $$"} {
		prepareProbe()
		tx := begin()
		if _, err := c.ExecContext(ctx, drop, nil); err != nil {
			t.Fatal(err)
		}
		if !c.ChangesSession(drop) {
			t.Fatalf("%s judged no change", drop)
		}
		if err := run(insert); err != nil {
			t.Fatalf("a write after %s: %v", drop, err)
		}
		checkIDLearnt(t, c, "after "+drop)
		if err := tx.Rollback(); err != nil {
			t.Fatal(err)
		}
		reset()
		if !c.stmtsDropped || c.probeAt == c.dropGen+1 {
			t.Fatalf("the reset after %s: statements dropped %v, probe counted prepared %v", drop, c.stmtsDropped, c.probeAt == c.dropGen+1)
		}
	}
	prepareProbe()
	reset()
	if c.stmtsDropped {
		t.Fatal("a reset that found the probe where it was left dropped every statement")
	}

	// Dropped by the statement it goes with: the call, judged to run code
	// no reading vouches for, goes with the probe unnamed, its text new
	// or judged before.
	call := "SELECT " + fn + "($1)"
	for i := range 2 {
		prepareProbe()
		tx := begin()
		if err := run(call); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		if s := c.pgx().PgConn().TxStatus(); s != 'T' {
			t.Fatalf("call %d: transaction status %c after a call that dropped the probe", i, s)
		}
		if err := tx.Rollback(); err != nil {
			t.Fatal(err)
		}
		reset()
	}

	// Dropped through the raw connection (Raw, as a hook or a user of
	// pooldriver's Raw has it): not used until a reset finds it gone.
	prepareProbe()
	if _, err := c.Raw().(*pgx.Conn).Exec(ctx, "DEALLOCATE "+probeName); err != nil {
		t.Fatal(err)
	}
	tx := begin()
	if err := run(insert); err != nil {
		t.Fatalf("a write after the raw connection dropped the probe: %v", err)
	}
	checkIDLearnt(t, c, "after the raw connection dropped the probe")
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	reset()
	if !c.stmtsDropped || c.probeDoubt {
		t.Fatalf("the reset after the raw connection dropped the probe: statements dropped %v, in doubt %v", c.stmtsDropped, c.probeDoubt)
	}

	// Refused: dropped where nothing judged it (pgx's own connection,
	// behind the dialect's back), the named probe fails, and says so.
	prepareProbe()
	if c.probeAt != c.dropGen+1 {
		t.Fatal("the probe is prepared, by the connection's count not")
	}
	if _, err := c.pgx().Exec(ctx, "DEALLOCATE "+probeName); err != nil {
		t.Fatal(err)
	}
	tx = begin()
	err := run(insert)
	if err == nil || !strings.Contains(err.Error(), "aborted the transaction") {
		t.Fatalf("a write whose probe the server refused: %v", err)
	}
	_ = tx.Rollback()
}

// TestProbeNamedByQuery: a write that returns rows (INSERT … RETURNING,
// as GORM's Create runs it) carries the probe in a pipeline: unnamed until
// its text was judged, then prepared under probeName in the same write,
// then bound there, each run learning the server's id; a probe the server
// refuses is the error the rows end with.
func TestProbeNamedByQuery(t *testing.T) {
	c := opened(t)
	ctx := t.Context()
	table := fmt.Sprintf("pd_probe_query_%d", time.Now().UnixNano())
	exec(t, c, "CREATE TABLE "+table+" (v int)")
	t.Cleanup(func() {
		if _, err := c.pgx().Exec(context.Background(), "ROLLBACK; DROP TABLE "+table); err != nil {
			t.Error(err)
		}
	})
	insert := "INSERT INTO " + table + " VALUES ($1) RETURNING v"
	run := func() error {
		rows, err := c.QueryContext(ctx, insert, []driver.NamedValue{{Ordinal: 1, Value: int64(7)}})
		if err == nil {
			dest := make([]driver.Value, 1)
			for rows.Next(dest) == nil {
			}
			err = rows.Close()
		}
		c.ChangesSession(insert)
		return err
	}
	prepared := func() bool { return probePrepared(t, c) }
	inTx := func(f func()) {
		tx, err := c.BeginTx(ctx, driver.TxOptions{})
		if err != nil {
			t.Fatal(err)
		}
		f()
		_ = tx.Rollback()
	}
	if err := run(); err != nil { // judged outside a transaction: no probe
		t.Fatal(err)
	}
	for i := range 3 {
		inTx(func() {
			if err := run(); err != nil {
				t.Fatalf("run %d: %v", i, err)
			}
			checkIDLearnt(t, c, fmt.Sprintf("run %d", i))
		})
	}
	if !prepared() || c.probeAt != c.dropGen+1 {
		t.Fatalf("after 3 runs the probe is prepared on the server: %v, by the connection's count: %v", prepared(), c.probeAt == c.dropGen+1)
	}
	if _, err := c.pgx().Exec(ctx, "DEALLOCATE "+probeName); err != nil {
		t.Fatal(err)
	}
	inTx(func() {
		if err := run(); err == nil || !strings.Contains(err.Error(), "aborted the transaction") {
			t.Fatalf("rows whose probe the server refused: %v", err)
		}
	})
}

// probePrepared reports whether c's session holds the probe under
// probeName.
func probePrepared(t *testing.T, c *conn) bool {
	t.Helper()
	var v int
	if err := c.pgx().QueryRow(t.Context(), "SELECT count(*) FROM pg_catalog.pg_prepared_statements WHERE name = $1", probeName).Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v == 1
}
