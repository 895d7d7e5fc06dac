package postgres

import (
	"context"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pooldriver/pooldriver/dialects"
)

// hostOrder keeps, for a multi-host DSN, the hosts whose last connect
// attempt failed slowly (a connect timeout: a host down without a word, a
// network that drops its packets) and tries them after the others, so
// that a pool whose first host is gone pays one connect timeout, not one
// per new connection. A host that refuses at once or answers (a standby
// to a read-write DSN, a refused login) costs nothing and keeps its place.
// A host stays behind for 2s after its first slow failure, twice as long
// after each further one, at most 30s; an attempt that reaches it again
// (it is still tried, last) and gets an answer puts it back in its place.
//
// A host that a try under way has waited on for silentTry or more goes
// last too, while that try lasts: a primary killed mid-connect (its
// postmaster accepted the connection and died without a word) holds its
// tries until their connect timeout, and the attempts that the pool
// starts meanwhile (see the pool's failingFastLocked) must reach the host that
// answers, the promoted standby, first.
type hostOrder struct {
	mu      sync.Mutex
	slow    map[hostPort]slowHost
	pending map[hostPort]map[*attempts]time.Time // the tries under way on each host, and when they began
	// last: by database, the catalog of the host the newest connection
	// reached (see sibling).
	last map[string]*dialects.Catalog[*pgCatalog]
	now  func() time.Time
}

type hostPort struct {
	host string
	port uint16
}

type slowHost struct {
	until time.Time
	fails int
}

const (
	slowHostFirst = 2 * time.Second
	slowHostMax   = 30 * time.Second
	// slowAttempt: a failed attempt this long, or nearly the whole
	// connect_timeout, failed slowly.
	slowAttempt = time.Second
	// silentTry: a try under way this long makes its host go last for
	// the attempts that start meanwhile (a handshake on this machine's
	// loopback takes a few milliseconds; a loaded server's, tens).
	silentTry = 100 * time.Millisecond
)

// newHostOrder returns a hostOrder for cfg, or nil when cfg names fewer
// than two hosts (nothing to reorder).
func newHostOrder(cfg *pgconn.Config) *hostOrder {
	first := hostPort{cfg.Host, cfg.Port}
	for _, f := range cfg.Fallbacks {
		if (hostPort{f.Host, f.Port}) != first {
			return &hostOrder{slow: map[hostPort]slowHost{}, pending: map[hostPort]map[*attempts]time.Time{}, last: map[string]*dialects.Catalog[*pgCatalog]{}, now: time.Now}
		}
	}
	return nil
}

// connect is one connection's attempt: it orders cfg's hosts (the slow
// ones last, each group in the DSN's order) and times each host's try
// through cfg's DialFunc and LookupFunc; done records what they showed.
func (o *hostOrder) connect(cfg *pgconn.Config) (done func(ok bool)) {
	o.order(cfg)
	a := &attempts{o: o, timeout: cfg.ConnectTimeout, byIP: map[string]string{}}
	lookup, dial := cfg.LookupFunc, cfg.DialFunc
	cfg.LookupFunc = func(ctx context.Context, host string) ([]string, error) {
		addrs, err := lookup(ctx, host)
		a.mu.Lock()
		for _, ip := range addrs {
			a.byIP[ip] = host
		}
		a.mu.Unlock()
		return addrs, err
	}
	cfg.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		a.begin(addr)
		return dial(ctx, network, addr)
	}
	return a.end
}

// order moves the hosts that failed slowly behind the others.
func (o *hostOrder) order(cfg *pgconn.Config) {
	all := append([]*pgconn.FallbackConfig{{Host: cfg.Host, Port: cfg.Port, TLSConfig: cfg.TLSConfig}}, cfg.Fallbacks...)
	now := o.now()
	o.mu.Lock()
	var fast, slow []*pgconn.FallbackConfig
	for _, f := range all {
		hp := hostPort{f.Host, f.Port}
		if s, ok := o.slow[hp]; ok && now.Before(s.until) || o.silentLocked(hp, now) {
			slow = append(slow, f)
		} else {
			fast = append(fast, f)
		}
	}
	o.mu.Unlock()
	if len(slow) == 0 || len(fast) == 0 {
		return
	}
	all = append(fast, slow...)
	cfg.Host, cfg.Port, cfg.TLSConfig = all[0].Host, all[0].Port, all[0].TLSConfig
	cfg.Fallbacks = all[1:]
}

// silentLocked reports whether a try under way on hp began silentTry ago
// or more. The caller holds o.mu.
func (o *hostOrder) silentLocked(hp hostPort, now time.Time) bool {
	for _, began := range o.pending[hp] {
		if now.Sub(began) >= silentTry {
			return true
		}
	}
	return false
}

// pend records a's try of hp beginning at now (the zero hostPort: none)
// and ends its try of was.
func (o *hostOrder) pend(a *attempts, was, hp hostPort, now time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if m := o.pending[was]; m != nil {
		delete(m, a)
		if len(m) == 0 {
			delete(o.pending, was)
		}
	}
	if hp == (hostPort{}) {
		return
	}
	m := o.pending[hp]
	if m == nil {
		m = map[*attempts]time.Time{}
		o.pending[hp] = m
	}
	m[a] = now
}

// sibling is told that a connection to database reached the server of
// cat. When cat has no reading yet and the host the pool reached before
// has one, cat starts from that one, due at once (Catalog.Seed): the
// hosts of a multi-host DSN are one database's primary and standbys,
// physical copies whose catalogs are the same, and after a failover the
// first connection to the promoted standby serves its statement rather
// than read the catalog first (tens to hundreds of milliseconds in a new
// server process on a loaded machine, while every other new connection
// waits for that reading). Its own reading replaces the borrowed one off
// the callers' paths. A DSN may name hosts that are not copies (a logical
// replica, another cluster): the reading is borrowed only where id, the
// new server's system identifier, is the one read with it, which a
// physical standby shares with its primary and nothing else does.
func (o *hostOrder) sibling(cat *dialects.Catalog[*pgCatalog], database string, id func() string) {
	o.mu.Lock()
	prev := o.last[database]
	o.last[database] = cat
	o.mu.Unlock()
	if prev == nil || prev == cat || cat.Current() != nil {
		return
	}
	if s := prev.Current(); s != nil && s.Value.sysid != "" && s.Value.sysid == id() {
		cat.Seed(s.Value)
	}
}

// attempts times one connection's tries, host by host.
type attempts struct {
	o       *hostOrder
	timeout time.Duration
	mu      sync.Mutex
	byIP    map[string]string // the DSN's host of each address looked up
	tries   []try
}

type try struct {
	at    hostPort
	start time.Time
}

// begin records a try of addr (ip:port, or a socket's path) starting now.
func (a *attempts) begin(addr string) {
	now := a.o.now()
	a.mu.Lock()
	hp := hostPort{host: addr}
	if ip, port, err := net.SplitHostPort(addr); err == nil {
		p, _ := strconv.ParseUint(port, 10, 16)
		hp = hostPort{a.byIP[ip], uint16(p)}
	}
	var was hostPort
	if n := len(a.tries); n > 0 {
		was = a.tries[n-1].at
	}
	a.tries = append(a.tries, try{hp, now})
	a.mu.Unlock()
	a.o.pend(a, was, hp, now)
}

// end records what the tries showed: each that ended in failure after a
// while makes its host slow; the last, when the connection opened (ok),
// puts its host back in its place.
func (a *attempts) end(ok bool) {
	now := a.o.now()
	a.mu.Lock()
	tries := a.tries
	a.mu.Unlock()
	if len(tries) > 0 {
		a.o.pend(a, tries[len(tries)-1].at, hostPort{}, now)
	}
	slowAfter := slowAttempt
	if a.timeout > 0 {
		slowAfter = min(slowAttempt, a.timeout*9/10)
	}
	a.o.mu.Lock()
	defer a.o.mu.Unlock()
	for i, t := range tries {
		last := i == len(tries)-1
		if last && ok {
			delete(a.o.slow, t.at)
			continue
		}
		end := now
		if !last {
			end = tries[i+1].start
		}
		if end.Sub(t.start) < slowAfter {
			continue
		}
		s := a.o.slow[t.at]
		s.until = now.Add(min(slowHostFirst<<s.fails, slowHostMax))
		s.fails = min(s.fails+1, 8)
		a.o.slow[t.at] = s
	}
}
