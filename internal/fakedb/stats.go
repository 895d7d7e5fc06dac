package fakedb

import "sync/atomic"

// Stats is a snapshot of a server's counters. Each field is read atomically;
// the snapshot as a whole is not, so compare fields only when the server is
// quiet.
type Stats struct {
	Connects        int64 // successful connects
	ConnectFailures int64 // connect attempts that returned an error (injected, auth, context)
	Closes          int64 // conns closed (first Close of each)
	Open            int64 // conns currently open (connected, not yet closed, dead or not)
	MaxOpen         int64 // high-water mark of Open

	Statements    int64 // statements that reached the server: Queries + Execs
	Queries       int64 // QueryContext calls (conn or stmt) that reached the server
	Execs         int64 // ExecContext calls (conn or stmt) that reached the server
	Prepares      int64 // successful PrepareContext calls
	StmtCloses    int64 // prepared statements closed
	Pings         int64 // successful Ping calls and PING statements
	Resets        int64 // successful session resets
	TxStatusCalls int64 // dialect TxStatus calls

	Begins              int64 // transactions begun with BeginTx
	RawBegins           int64 // transactions begun with a BEGIN statement
	Commits             int64 // transactions committed (either way)
	Rollbacks           int64 // transactions rolled back by ROLLBACK, Tx.Rollback, or COMMIT of a failed tx
	DisconnectRollbacks int64 // transactions rolled back by the server because their conn closed or died
	OpenTx              int64 // conns currently inside a transaction

	Overlaps int64 // a conn method entered while another was running on the same conn; must stay 0
}

// counters are the live, atomic form of [Stats].
type counters struct {
	connects, connectFailures, closes, open, maxOpen                   atomic.Int64
	statements, queries, execs, prepares, stmtCloses                   atomic.Int64
	pings, resets, txStatusCalls                                       atomic.Int64
	begins, rawBegins, commits, rollbacks, disconnectRollbacks, openTx atomic.Int64
	overlaps                                                           atomic.Int64
	running                                                            atomic.Int64 // statements in run now (Server.Running)
}

func (c *counters) snapshot() Stats {
	return Stats{
		Connects:            c.connects.Load(),
		ConnectFailures:     c.connectFailures.Load(),
		Closes:              c.closes.Load(),
		Open:                c.open.Load(),
		MaxOpen:             c.maxOpen.Load(),
		Statements:          c.statements.Load(),
		Queries:             c.queries.Load(),
		Execs:               c.execs.Load(),
		Prepares:            c.prepares.Load(),
		StmtCloses:          c.stmtCloses.Load(),
		Pings:               c.pings.Load(),
		Resets:              c.resets.Load(),
		TxStatusCalls:       c.txStatusCalls.Load(),
		Begins:              c.begins.Load(),
		RawBegins:           c.rawBegins.Load(),
		Commits:             c.commits.Load(),
		Rollbacks:           c.rollbacks.Load(),
		DisconnectRollbacks: c.disconnectRollbacks.Load(),
		OpenTx:              c.openTx.Load(),
		Overlaps:            c.overlaps.Load(),
	}
}

// opened counts a new open conn and raises the high-water mark.
func (c *counters) opened() {
	n := c.open.Add(1)
	for {
		m := c.maxOpen.Load()
		if n <= m || c.maxOpen.CompareAndSwap(m, n) {
			return
		}
	}
}
