package postgres

import (
	"context"
	"fmt"
	"math"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pooldriver/pooldriver/dialects"
)

var (
	_ dialects.Positioner        = (*conn)(nil)
	_ dialects.PositionCommitter = (*conn)(nil)
)

// positionSQL reads whether the server is in recovery and its position:
// the replayed one for a standby (NULL on one that has replayed nothing
// yet), for a primary the end of the log inserted so far and the end
// flushed; and the timeline: a primary's from the name of its current WAL
// file, a standby's as its WAL receiver has it (NULL: not streaming; -1:
// the role may not see it). The subquery asks pg_is_in_recovery() once
// (PostgreSQL does not flatten a subquery with a volatile function), so a
// promotion under way cannot pair a standby's answer with a primary's
// position. Every name is pg_catalog's, so the session's search_path
// cannot bend it.
const positionSQL = `SELECT r, CASE WHEN r THEN pg_catalog.pg_last_wal_replay_lsn() ` +
	`ELSE pg_catalog.pg_current_wal_insert_lsn() END, ` +
	`CASE WHEN r THEN NULL ELSE pg_catalog.pg_current_wal_flush_lsn() END, ` +
	`CASE WHEN r THEN (SELECT coalesce(w.received_tli, -1) FROM pg_catalog.pg_stat_wal_receiver w) ` +
	`ELSE ('x' || pg_catalog.substr(pg_catalog.pg_walfile_name(pg_catalog.pg_current_wal_flush_lsn()), 1, 8))::pg_catalog.bit(32)::pg_catalog.int4 END ` +
	`FROM (SELECT pg_catalog.pg_is_in_recovery() AS r) s`

// commitAtSQL commits and reads the position in one simple-protocol query.
// After COMMIT the SELECT runs in a transaction of its own; it also runs
// where the COMMIT rolled back (a failed transaction), and not where the
// COMMIT failed (a deferred constraint, a serialization failure): the
// server skips the rest of the query string then. positionSQL rather than
// pg_current_wal_insert_lsn() alone, which fails during recovery: a
// read-only transaction committed on a standby must not read as failed.
const commitAtSQL = "COMMIT; " + positionSQL

// LogPosition reads where the server is in the log, in one round trip on
// the simple protocol (see positionSQL): nothing is prepared, so it works
// the same behind a transaction pooler, and the session is left as it
// was. A waiting reset (carry.go) stays waiting for the next statement:
// the query reads no setting a session can change, so running the reset
// first would cost a round trip for nothing. Inside a transaction it runs
// in it; in a failed one it fails as any statement does.
func (c *conn) LogPosition(ctx context.Context) (dialects.LogState, error) {
	if c.carry.broken != nil {
		return dialects.LogState{}, c.carry.broken
	}
	res, err := c.pgx().PgConn().Exec(ctx, positionSQL).ReadAll()
	if err != nil {
		return dialects.LogState{}, fmt.Errorf("pooldriver: postgres: reading the log position: %w", err)
	}
	if len(res) != 1 {
		return dialects.LogState{}, fmt.Errorf("pooldriver: postgres: reading the log position: %d results, want 1", len(res))
	}
	return readPosition(res[0])
}

// readPosition reads positionSQL's row.
func readPosition(r *pgconn.Result) (dialects.LogState, error) {
	if len(r.Rows) != 1 || len(r.Rows[0]) != 4 {
		return dialects.LogState{}, fmt.Errorf("pooldriver: postgres: reading the log position: want one row of four columns")
	}
	row := r.Rows[0]
	s := dialects.LogState{Standby: string(row[0]) == "t"}
	for i, at := range []*dialects.Position{&s.Position, &s.Flushed} {
		if row[i+1] == nil {
			continue // a standby that has replayed nothing; a standby's flush
		}
		pos, err := dialects.ParsePosition(string(row[i+1]))
		if err != nil {
			return dialects.LogState{Standby: s.Standby}, fmt.Errorf("pooldriver: postgres: reading the log position: %w", err)
		}
		*at = pos
	}
	if row[3] != nil {
		tli, err := strconv.ParseInt(string(row[3]), 10, 64)
		if err != nil {
			return dialects.LogState{Standby: s.Standby}, fmt.Errorf("pooldriver: postgres: reading the timeline: %w", err)
		}
		if tli > 0 && tli <= math.MaxUint32 {
			s.Timeline = uint32(tli)
		}
	}
	return s, nil
}

// CommitAt commits the transaction that the stdlib's BeginTx opened and
// reads the position in the same round trip (see commitAtSQL), on pgx's
// connection directly. It fails as the stdlib's Tx.Commit (pgx's
// dbTx.Commit) does:
//
//   - a COMMIT that the server answers with ROLLBACK (the transaction had
//     failed) returns pgx.ErrTxCommitRollback;
//   - a COMMIT that fails returns the error as pgx has it (a
//     *pgconn.PgError, a context's or the network's error), and where the
//     transaction is still open afterwards (the context was done before
//     anything was sent, the connection broke) the connection is closed,
//     as pgx closes it.
//
// Once the server acknowledged the COMMIT, the commit stands: should
// reading the position fail after it (a cancel that reached the SELECT,
// the connection lost before its row), CommitAt returns 0 and no error.
// 0 is no position: the caller knows the commit but not where it lies.
//
// pgx keeps no transaction state beyond its Tx object (the stdlib's
// wrapped dbTx, which is dropped unused) and the server's ReadyForQuery
// status, which this query's ReadyForQuery updates: a later BeginTx,
// TxStatus and the session tracking (the watch sees this round trip's
// messages and bytes as any statement's) find the connection as after the
// stdlib's Commit. pgx's query tracer, if one is configured, does not see
// this COMMIT.
func (c *conn) CommitAt(ctx context.Context) (dialects.Position, error) {
	p := c.pgx()
	res, err := p.PgConn().Exec(ctx, commitAtSQL).ReadAll()
	if len(res) == 0 {
		// The COMMIT did not complete.
		if err == nil {
			err = fmt.Errorf("pooldriver: postgres: COMMIT: no result")
		}
		if p.PgConn().TxStatus() != 'I' {
			_ = p.Close(ctx)
		}
		return 0, err
	}
	if res[0].CommandTag.String() == "ROLLBACK" {
		return 0, pgx.ErrTxCommitRollback
	}
	if err != nil || len(res) != 2 {
		return 0, nil
	}
	st, err := readPosition(res[1])
	if err != nil {
		return 0, nil
	}
	return st.Position, nil
}
