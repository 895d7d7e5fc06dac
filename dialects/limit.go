package dialects

import (
	"context"
	"sync"
	"time"
)

// ConnLimitDetector is implemented by a Template whose database says, when
// it refuses a new connection, that it refused it for want of room: it is
// up, and at its connection limit (PostgreSQL SQLSTATE 53300, MySQL 1040,
// 1203, 1226). pooldriver's circuit breaker then stops opening connections
// and serves callers from those it has, instead of taking the server for
// unreachable. Errors of statements are never asked about.
type ConnLimitDetector interface {
	AtConnLimit(err error) bool
}

var limitFuncs detectors

// RegisterConnLimitDetector registers f, which the Template of Wrap
// consults: a wrapped connector's connect error that any registered f
// recognizes counts as "at the connection limit". A dialect package calls
// it from init, with the test its own Template uses.
func RegisterConnLimitDetector(f func(err error) bool) { limitFuncs.add(f) }

// AtConnLimit is the generic Template's ConnLimitDetector: whether a
// registered dialect recognizes err.
func (genericTemplate) AtConnLimit(err error) bool { return limitFuncs.any(err) }

var _ ConnLimitDetector = genericTemplate{}

// detectors is a list of tests of connect errors, which dialect packages
// register from init and the generic Template consults.
type detectors struct {
	mu sync.RWMutex // protects fs
	fs []func(error) bool
}

func (d *detectors) add(f func(error) bool) {
	if f == nil {
		return
	}
	d.mu.Lock()
	d.fs = append(d.fs, f)
	d.mu.Unlock()
}

// any reports whether one of the tests recognizes err.
func (d *detectors) any(err error) bool {
	d.mu.RLock()
	defer d.mu.RUnlock()
	for _, f := range d.fs {
		if f(err) {
			return true
		}
	}
	return false
}

// ServerLoad is what a server says of its connection slots, as a client
// without special privileges can read it.
type ServerLoad struct {
	// Limit is how many connections the client's user may hold in all:
	// the tighter of the server's limit (less what it reserves for
	// superusers, unless the user is one) and the user's own.
	Limit int64
	// Connected counts the connections held against Limit now, the
	// asking one included.
	Connected int64
	// Idle counts, of Connected, the connections that have sat idle for
	// IdleFor or longer, as far as the user may see their state
	// (PostgreSQL shows it for its own role's sessions, or every
	// session's to a superuser or pg_read_all_stats; MariaDB its own
	// user's threads, or every thread's with PROCESS). A pool's
	// connections at a full server never sit idle that long (pooldriver
	// gives back what sits idle for a second there). These are held by a
	// client that does not need them now (an admin tool, a service with
	// room to spare), and count for no pool that waits.
	Idle int64
	// Refused counts the logins the server refused since it started
	// (MariaDB: its failed logins, less the port probes), or is -1 where
	// the server does not say (PostgreSQL),
	// or where the user's own limit is the tighter one (those refusals
	// are the user's, not the server's).
	Refused int64
}

// IdleFor is how long a connection sits idle before ServerLoad counts it
// in Idle. Long: on a starved machine (servers in containers on 2 cores,
// callers' contexts running out) a pool's connection sat idle between
// two statements past half a second, and the pools, taking each other for
// idle clients, gave nothing back.
const IdleFor = 5 * time.Second

// LoadReader is implemented by a Conn whose server says how full it is.
// pooldriver asks now and then, while its pool holds connections, so that
// the replicas of a service that share a full server share it fairly (see
// pooldriver's share.go). One round trip, no session change.
type LoadReader interface {
	ServerLoad(ctx context.Context) (ServerLoad, error)
}
