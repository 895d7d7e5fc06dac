package dialects

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// A dialect whose DSN may name a primary and its standbys (PostgreSQL's
// multi-host DSN) lets pooldriver send reads to the standbys
// (pool_reads=standby) and keep them causally consistent: a task that
// committed a write reads only from a standby that has replayed it. What
// the dialect offers for that is below.

// Position is a place in the log a primary writes and its standbys replay
// (PostgreSQL's LSN), comparable across them: a standby whose replayed
// Position is at or past a commit's has the commit. 0 is no position.
type Position uint64

// String writes p as PostgreSQL writes an LSN: two hexadecimal halves,
// such as 0/16B3748.
func (p Position) String() string {
	return strings.ToUpper(strconv.FormatUint(uint64(p)>>32, 16) + "/" + strconv.FormatUint(uint64(p)&0xFFFFFFFF, 16))
}

// ParsePosition reads a Position written as String writes it (either
// case).
func ParsePosition(s string) (Position, error) {
	hi, lo, ok := strings.Cut(s, "/")
	if ok && hi != "" && lo != "" && len(hi) <= 8 && len(lo) <= 8 {
		h, herr := strconv.ParseUint(hi, 16, 32)
		l, lerr := strconv.ParseUint(lo, 16, 32)
		if herr == nil && lerr == nil {
			return Position(h<<32 | l), nil
		}
	}
	return 0, fmt.Errorf("pooldriver: %q is not a log position (want two hexadecimal halves, such as 0/16B3748)", s)
}

// StandbyTemplates is implemented by a Template whose DSN names several
// hosts that may be one database's primary and standbys.
type StandbyTemplates interface {
	// Standbys returns one Template per host the DSN names, in its order,
	// each opening connections to that host alone and only while it is a
	// standby (a host that is, or becomes, a primary refuses them, as
	// target_session_attrs=standby does); its Address names the host, its
	// String the DSN of that host without the password. nil: the DSN
	// names one host.
	Standbys() []Template
}

// Positioner is implemented by a Conn that can say, in one round trip,
// where its server is in the log.
type Positioner interface {
	LogPosition(ctx context.Context) (LogState, error)
}

// LogState is where a server stands in its log.
type LogState struct {
	Standby bool // the server is in recovery
	// Position is, for a standby, the position it has replayed; for a
	// primary, the end of its log as inserted so far, at or past every
	// commit it acknowledged.
	Position Position
	// Flushed is, for a primary, the end of its log as flushed, which is
	// as far as its standbys can have received: a primary inserts records
	// that it flushes only with the next write (PostgreSQL's standby
	// snapshots, every 15 s), so that on a primary that only reads, a
	// standby that has replayed all it can stays behind Position. 0 for a
	// standby.
	Flushed Position
	// Timeline is the history the positions are of: for a primary, the
	// timeline it writes (a promotion starts a new one); for a standby,
	// the one it receives. Positions of two timelines do not compare: a
	// standby left behind by a failover may have replayed records of the
	// old primary past the point where the new one took over. 0: not
	// known (a standby not streaming, or a role not allowed to see it).
	Timeline uint32
}

// PositionCommitter is implemented by a Conn that can commit the
// transaction a driver.Tx of its Driver() has open and learn, in the same
// round trip, a Position at or past the commit's.
type PositionCommitter interface {
	// CommitAt commits the open transaction as the driver's Tx.Commit
	// would (the same errors: a failed transaction's COMMIT rolls back and
	// reports it as the driver does) and returns the position; 0 with a
	// nil error: committed, but the position could not be read. After
	// CommitAt, pooldriver does not call the driver's Tx.Commit or
	// Rollback.
	CommitAt(ctx context.Context) (Position, error)
}

// ErrNotStandby is what a standby's Template's connect returns, wrapped,
// when the host is a primary.
var ErrNotStandby = errors.New("pooldriver: the server is not a standby")

// StandbyRefusals is implemented by a standby's Template (StandbyTemplates)
// that can tell the errors a primary would not have returned: a write
// refused because the server is a standby, a query cancelled for a
// conflict with the standby's recovery. pooldriver runs such a statement
// again on the primary, once, where it ran outside a transaction and
// returned no rows.
type StandbyRefusals interface {
	RefusedByStandby(err error) bool
}

// ReadProver is implemented by a Template whose dialect can tell, from a
// statement's text and what the server's catalog says of the names in
// it, that a standby runs it as the primary would.
type ReadProver interface {
	// ReadsOnly reports whether query only reads and a standby runs it
	// as the primary would: pool_reads=selects sends such a statement,
	// outside a transaction, to a standby. Unsure is false.
	ReadsOnly(query string) bool
	// StandbyDiffers reports whether query, which its caller says only
	// reads (ReadOnly, a read-only task), names a relation that a
	// standby answers differently or refuses (an unlogged or temporary
	// table, a sequence, a view reaching a user's or a volatile
	// function) or whose reads run code its text does not show: such a
	// statement runs on the primary. Without a reading of the catalog,
	// false: the caller's word stands.
	StandbyDiffers(query string) bool
}
