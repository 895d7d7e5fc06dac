package mysql

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-sql-driver/mysql"

	"github.com/pooldriver/pooldriver/dialects"
)

// Reads on replicas (pool_reads=standby): a DSN that names several servers
// names a primary and its replicas, told apart by @@global.read_only (a
// replica runs read-only; the primary takes writes, pool_target=primary).
// The replicas are MariaDB's, replicating by GTID: a position is a GTID's
// sequence number in the one replication domain (gtids.go).

var (
	_ dialects.StandbyTemplates  = (*template)(nil)
	_ dialects.StandbyRefusals   = (*template)(nil)
	_ dialects.Positioner        = (*conn)(nil)
	_ dialects.PositionCommitter = (*conn)(nil)
)

// Standbys returns, for a DSN that names several servers, one template
// per server in the DSN's order (see dialects.StandbyTemplates): the
// template itself with that server alone, whose new connections are
// refused (dialects.ErrNotStandby) unless the server runs read-only, and
// which asks for no writable server. Its String is its DSN with that
// server alone, the password masked. nil for a DSN of one server.
func (t *template) Standbys() []dialects.Template {
	if len(t.hosts) < 2 {
		return nil
	}
	out := make([]dialects.Template, 0, len(t.hosts))
	for _, h := range t.hosts {
		n := *t
		n.cfg = t.cfg.Clone()
		retarget(n.cfg, h)
		n.hosts = nil
		n.target = dialects.TargetAny
		n.standby = true
		redacted := n.cfg.Clone()
		if redacted.Passwd != "" {
			redacted.Passwd = "xxxxx"
		}
		n.redacted = "mysql://" + redacted.FormatDSN()
		out = append(out, &n)
	}
	return out
}

// checkRole returns an error if the DSN asks for a server that takes
// writes (pool_target=primary) and c's runs read-only, wrapping
// ErrReadOnly, or c's template is a replica's (Standbys) and its server
// takes writes, wrapping dialects.ErrNotStandby.
func (c *conn) checkRole(ctx context.Context) error {
	if c.t.target != dialects.TargetPrimary && !c.t.standby {
		return nil
	}
	v, err := c.queryRow(ctx, "SELECT @@global.read_only")
	if err != nil {
		return fmt.Errorf("pooldriver: mysql: %s: reading @@global.read_only: %w", c.server(), err)
	}
	readOnly := !isZero(v[0])
	switch {
	case c.t.standby && !readOnly:
		return fmt.Errorf("pooldriver: mysql: %s is not read-only: %w", c.server(), dialects.ErrNotStandby)
	case c.t.target == dialects.TargetPrimary && readOnly:
		return fmt.Errorf("%s: %w", c.server(), ErrReadOnly)
	}
	return nil
}

// Server errors a replica returns where its primary may not have.
const (
	errReadOnlyTx     = 1792 // ER_CANT_EXECUTE_IN_READ_ONLY_TRANSACTION
	errNoSuchTable    = 1146 // ER_NO_SUCH_TABLE
	errUnknownDB      = 1049 // ER_BAD_DB_ERROR
	errUnknownRoutine = 1305 // ER_SP_DOES_NOT_EXIST
)

// RefusedByStandby reports whether err, returned by a replica's
// connection, is one the primary may not have returned: a write refused
// because the server runs read-only (1290) or in a read-only transaction
// (1792); a table, database or function it does not know (1146, 1049,
// 1305), which the primary may have made a moment ago and the replica not
// applied yet. On the primary the statement may fail the same way: one
// round trip more.
func (t *template) RefusedByStandby(err error) bool {
	var me *mysql.MySQLError
	if !errors.As(err, &me) {
		return false
	}
	switch me.Number {
	case errReadOnlyServer, errReadOnlyTx, errNoSuchTable, errUnknownDB, errUnknownRoutine:
		return true
	}
	return false
}

// positionSQL reads, in one round trip, whether the server runs read-only
// (a replica), the GTIDs it wrote to its binary log, those it has
// (gtid_current_pos: per domain, the binary log's where its last GTID is
// the server's own, else what it applied from a primary) and those it
// applied from its primary (gtid_slave_pos).
const positionSQL = "SELECT @@global.read_only, @@global.gtid_binlog_pos, @@global.gtid_current_pos, @@global.gtid_slave_pos"

// LogPosition reads where the server is (see dialects.Positioner): a
// replica (read-only) at the GTID it applied last, a primary at the later
// of its binary log's and its current position's (a GTID it logged under
// another server_id counts too); Flushed is the primary's Position, which
// its binary log holds once committed. The Timeline is the server_id of
// that GTID, the server that wrote it: a replica left on another
// history by a failover (GTIDs of the old primary's that the new one
// never had, numbered as the new one's) reports the old primary's
// server_id, unlike the new primary's, and serves no reads. A position
// that spans several replication domains, or lies in another domain than
// the DSN's other servers' and commits', fails.
func (c *conn) LogPosition(ctx context.Context) (dialects.LogState, error) {
	if c.broken {
		return dialects.LogState{}, errBroken
	}
	v, err := c.queryRow(ctx, positionSQL)
	if err != nil {
		return dialects.LogState{}, fmt.Errorf("pooldriver: mysql: reading the GTID position: %w", err)
	}
	s := dialects.LogState{Standby: !isZero(v[0])}
	var g gtid
	cols := []int{1, 2}
	if s.Standby {
		cols = []int{3}
	}
	for _, col := range cols {
		text, _ := textOf(v[col])
		h, err := positionOf(text)
		if err != nil {
			return dialects.LogState{Standby: s.Standby}, fmt.Errorf("pooldriver: mysql: reading the GTID position: %w", err)
		}
		if g.ok && h.ok && h.domain != g.domain {
			return dialects.LogState{Standby: s.Standby}, fmt.Errorf("pooldriver: mysql: reading the GTID position: the binary log's is in domain %d, the current one in %d: %w", g.domain, h.domain, errDomains)
		}
		g = g.later(h)
	}
	if !g.ok {
		return s, nil // nothing applied, or written, yet
	}
	if c.t == nil || !c.t.domain.agree(g.domain) {
		return dialects.LogState{Standby: s.Standby}, fmt.Errorf("pooldriver: mysql: reading the GTID position: domain %d is not the one the DSN's other servers' positions are in: %w", g.domain, errDomains)
	}
	s.Position, s.Timeline = dialects.Position(g.seq), g.server
	if !s.Standby {
		s.Flushed = s.Position
	}
	return s, nil
}

// CommitAt commits the transaction the driver's BeginTx opened, as its
// Tx.Commit does (a COMMIT on the connection, which the driver's Tx
// object, then dropped, does not track), and returns the commit's
// sequence number from the COMMIT's own reply (see gtids.go). 0 with a
// nil error: committed, and the reply told no GTID of the DSN's domain
// (the transaction wrote nothing to the binary log, the server tracks no
// last_gtid, its report could not be read, or the GTID is of another
// domain).
func (c *conn) CommitAt(ctx context.Context) (dialects.Position, error) {
	if c.broken {
		return 0, errBroken
	}
	if c.w != nil {
		c.w.gtid = gtid{}
	}
	if _, err := c.execer.ExecContext(ctx, "COMMIT", nil); err != nil {
		return 0, err
	}
	if c.w == nil {
		return 0, nil
	}
	g := c.w.gtid
	if !c.gtids || !g.ok || c.w.state.Load()&wireLost != 0 || !c.t.domain.agree(g.domain) {
		return 0, nil
	}
	return dialects.Position(g.seq), nil
}
