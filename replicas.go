package pooldriver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/pooldriver/pooldriver/dialects"
)

// With pool_reads=standby, a Connector keeps, beside its own pool (the
// primary's, as the DSN's target_session_attrs finds it), one Connector
// per host of the DSN that connects to that host only while it is a
// standby: replicas. A read (reads.go) takes a connection from a standby
// that can serve it, else from the primary.
//
// Which standby can serve a read is known from their positions in the
// log, read off the callers' paths on connections of their own (one per
// host): every positionEvery, the primary's flushed position and each
// standby's replayed one. A standby serves a read when it answered its
// last look (which is recent: within the lag bound, twice it for the
// standby the read's task read from last, see stays), is still a
// standby, lags the primary by at most pool_max_replica_lag, and has
// replayed the position the read must see (its task's writes: their
// commits' positions, learnt in the COMMIT's round trip).
//
// A standby's lag is read from the primary's positions over time: it is
// the time since the primary's first position the standby has not
// replayed was seen, 0 where it replayed the newest (a primary without
// writes has nothing to lag behind).

// standbyConfigs returns the Config of a Connector per standby of t, the
// template of a Connector whose Config is s and whose scheme is scheme:
// each connects to its host only while it is a standby. An error names
// what is wrong.
func standbyConfigs(t dialects.Template, s Config, scheme string) ([]Config, error) {
	st, ok := t.(dialects.StandbyTemplates)
	if !ok {
		return nil, fmt.Errorf("pooldriver: pool_reads=%s: the %s dialect cannot send reads to standbys (PostgreSQL's and MySQL/MariaDB's can)", s.Reads, scheme)
	}
	if s.ServerPooling == dialects.ServerPoolingSession || s.ServerPooling == dialects.ServerPoolingTransaction {
		return nil, fmt.Errorf("pooldriver: pool_reads=%s cannot be used with pool_server_pooling: the pooler hides which server a connection reaches", s.Reads)
	}
	hosts := st.Standbys()
	if len(hosts) == 0 {
		return nil, fmt.Errorf("pooldriver: pool_reads=%s: the DSN names one host; name the primary and its standbys (host1,host2,...)", s.Reads)
	}
	if _, ok := t.(dialects.ReadProver); !ok && s.Reads == ReadsSelects {
		return nil, fmt.Errorf("pooldriver: pool_reads=selects: the %s dialect cannot prove that a statement only reads (use pool_reads=standby)", scheme)
	}
	subs := make([]Config, len(hosts))
	for i, h := range hosts {
		sub := s
		sub.tmpl = h
		sub.Reads = ReadsPrimary
		sub.Target = dialects.TargetAny // a standby's template asks for a standby
		sub.standbyPool = true
		// A standby's pool fails its caller at once when it cannot
		// connect (the read goes to the primary): it keeps no
		// connections open by itself, which would be dialled again at
		// once while the standby is down.
		sub.MinConns, sub.MinIdleConns = 0, 0
		if s.Name != "" {
			sub.Name = s.Name + " standby " + standbyHost(h)
		}
		subs[i] = sub
	}
	return subs, nil
}

// standbyHost is how a standby's template h is named in logs and errors:
// its address, where the dialect tells it.
func standbyHost(h dialects.Template) string {
	if a, ok := h.(dialects.AddressedTemplate); ok && a.Address().Host != "" {
		return dialects.Address{Host: a.Address().Host, Port: a.Address().Port}.String()
	}
	return h.String()
}

// newReplicas is the standbys of c, whose template is t and whose Config
// is s, without any yet: add adds each standby's Connector, made from
// standbyConfigs.
func newReplicas(c *Connector, t dialects.Template, s Config) *replicas {
	r := &replicas{c: c, maxLag: s.MaxReplicaLag, readWait: s.ReadWait, kick: make(chan struct{}, 1)}
	r.prover, _ = t.(dialects.ReadProver)
	r.selects = s.Reads == ReadsSelects
	r.primary = monitor{tmpl: t, creds: c.credentials}
	return r
}

// add adds sc, the Connector of one standby, before the looks start.
func (r *replicas) add(sc *Connector) {
	h := sc.cfg.tmpl
	sb := &standby{c: sc, host: standbyHost(h), mon: monitor{tmpl: h, creds: r.c.credentials}, kick: make(chan struct{}, 1)}
	if rf, ok := h.(dialects.StandbyRefusals); ok {
		sb.refused = rf.RefusedByStandby
	}
	r.hosts = append(r.hosts, sb)
}

// start starts the looks, which end when c closes.
func (r *replicas) start() {
	r.wg.Add(1 + len(r.hosts))
	go r.loop(r.lookPrimary, r.kick)
	for _, h := range r.hosts {
		go r.loop(func(ctx context.Context) { r.lookStandby(ctx, h) }, h.kick)
	}
}

// loop runs look every positionEvery, and at once when kicked (a read
// waits for the look: readwait.go), until the Connector closes.
func (r *replicas) loop(look func(ctx context.Context), kick <-chan struct{}) {
	defer r.wg.Done()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-r.c.closed
		cancel()
	}()
	tick := time.NewTicker(positionEvery)
	defer tick.Stop()
	for {
		look(ctx)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-kick:
		}
	}
}

// lookPrimary records the primary's flushed position: what a standby can
// have replayed (its inserted one may hold records it flushes only with
// the next write).
func (r *replicas) lookPrimary(ctx context.Context) {
	defer r.waits.looked()
	started := time.Now()
	st, err := r.primary.position(ctx, r.c.cfg.CleanupTimeout)
	if err != nil || st.Standby {
		return
	}
	if st.Timeline != 0 {
		r.primaryTLI.Store(st.Timeline)
	}
	p := st.Flushed
	if p == 0 {
		p = st.Position
	}
	r.mu.Lock()
	r.seen[r.next] = sample{started: started, at: time.Now(), pos: p}
	r.next = (r.next + 1) % positionHistory
	r.n = min(r.n+1, positionHistory)
	r.mu.Unlock()
}

// lookStandby records h's replayed position and its lag. A host that
// answers as a primary (its connection, or its refusal of one: the
// template connects to a standby only) is the primary's, or a standby
// promoted: it is logged as a change only where a look saw it up as a
// standby before; then its pool lets its connections go. One that does
// not answer is logged where it never answered, or was up.
func (r *replicas) lookStandby(ctx context.Context, h *standby) {
	defer r.waits.looked()
	started := time.Now()
	st, err := h.mon.position(ctx, r.c.cfg.CleanupTimeout)
	now := time.Now()
	if err != nil || !st.Standby {
		primary := err == nil || errors.Is(err, dialects.ErrNotStandby)
		old := h.seen.Load()
		switch {
		case primary && old != nil && old.up:
			r.c.logAt(slog.LevelInfo, "a standby is a primary now: no reads go to it", nil, "host", h.host)
			// Its pool's connections are a primary's now, which its
			// pool must not hand to a read: they go, the busy ones as
			// they come back.
			h.c.resetPool()
		case !primary && (old == nil || old.up):
			r.c.logAt(slog.LevelInfo, "a standby does not answer: no reads go to it", err, "host", h.host)
		}
		h.seen.Store(&standbySeen{at: now, primary: primary})
		if err == nil {
			h.mon.drop() // a primary now: the next look connects again, and is refused while it stays one
		}
		return
	}
	if st.Timeline != 0 {
		h.tli = st.Timeline
	}
	if pt := r.primaryTLI.Load(); pt != 0 && h.tli != 0 && h.tli != pt {
		// Left behind by a failover: what it replayed may be the old
		// primary's past the point where the new one took over, which
		// positions on the new timeline do not tell.
		if old := h.seen.Load(); old == nil || old.up {
			r.c.logAt(slog.LevelInfo, "a standby follows another timeline than the primary's: no reads go to it", nil, "host", h.host, "timeline", h.tli, "primary_timeline", pt)
		}
		h.seen.Store(&standbySeen{at: now})
		return
	}
	h.seen.Store(&standbySeen{started: started, at: now, up: true, replayed: st.Position, lag: r.lag(st.Position, now)})
}

// lag is how long the primary has had a position that p, a standby's
// replayed one, does not reach: 0 where it reaches the newest seen.
func (r *replicas) lag(p dialects.Position, now time.Time) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.n == 0 {
		return 0 // the primary not seen yet: nothing to lag behind
	}
	var behindSince time.Time
	for i := 1; i <= r.n; i++ { // newest first
		s := r.seen[(r.next-i+positionHistory)%positionHistory]
		if s.pos <= p {
			break
		}
		behindSince = s.at
	}
	if behindSince.IsZero() {
		return 0
	}
	if r.n == positionHistory && behindSince.Equal(r.seen[r.next].at) {
		return max(now.Sub(behindSince), positionEvery*positionHistory) // behind all that is kept
	}
	return now.Sub(behindSince)
}

// primaryPosition asks the primary for its position now.
func (r *replicas) primaryPosition(ctx context.Context) (dialects.Position, error) {
	if r.c.closing.Load() {
		return 0, ErrClosed // its look's connection is closed, and stays so
	}
	st, err := r.primary.position(ctx, r.c.cfg.CleanupTimeout)
	if err == nil && st.Standby {
		err = errors.New("pooldriver: the primary's host is a standby now")
	}
	return st.Position, err
}

// source returns the standby whose pool serves a read that must see
// after and may lag the primary by maxLag (0: pool_max_replica_lag),
// counted; nil: the primary serves it. last, the standby the read's task
// read from last (else the one its parked connection is to), is taken
// first while it can serve. Where none can yet but one close behind may
// soon, the read waits for it up to pool_read_wait (readwait.go). Where
// none serves then, own, the standby the task itself read from last (nil:
// none), serves while it stays.
func (r *replicas) source(ctx context.Context, after dialects.Position, last, own *standby, maxLag time.Duration) *standby {
	h := r.pick(after, last, maxLag, time.Now())
	if h == nil && r.readWait > 0 {
		h = r.wait(ctx, after, last, maxLag)
	}
	if h == nil && own != nil && r.stays(own, after, maxLag, time.Now()) {
		h = own
	}
	if h == nil {
		r.onPrimary.Add(1)
		return nil
	}
	r.onStandby.Add(1)
	return h
}

// pick returns a standby that can serve a read that must see after
// (serves), last first, the others in turn; nil: none.
func (r *replicas) pick(after dialects.Position, last *standby, maxLag time.Duration, now time.Time) *standby {
	if last != nil && r.serves(last, after, maxLag, now) {
		return last
	}
	n := uint32(len(r.hosts))
	first := r.rr.Add(1)
	for i := range n {
		h := r.hosts[(first+i)%n]
		if r.serves(h, after, maxLag, now) {
			return h
		}
	}
	return nil
}

// serves reports whether h can serve a read that must see after and may
// lag the primary by maxLag (0: pool_max_replica_lag), from its last
// look.
func (r *replicas) serves(h *standby, after dialects.Position, maxLag time.Duration, now time.Time) bool {
	return r.fits(h, after, maxLag, 1, now)
}

// stays reports whether h, the standby a task read from last, takes the
// task's next read where serves would send it to the primary because h's
// last look is no longer recent: a look late on a busy machine. The
// primary is not ahead of every standby: a commit's record is flushed, so
// streamed and replayed, before the backend that committed makes it
// visible there, so for a moment a standby shows a commit the primary
// does not, and a task that read it on h would read older on the primary.
// h never goes back on what it showed. Its last look, at most twice
// maxLag ago (serves: maxLag), found it up, at or past after and within
// maxLag of the primary, and its pool connects: what it serves is at most
// three times maxLag old, where serves' is twice.
func (r *replicas) stays(h *standby, after dialects.Position, maxLag time.Duration, now time.Time) bool {
	return r.fits(h, after, maxLag, 2, now)
}

// fits is serves with a look at most looks times maxLag old.
func (r *replicas) fits(h *standby, after dialects.Position, maxLag, looks time.Duration, now time.Time) bool {
	s := h.seen.Load()
	if s == nil || s.replayed < after || !r.near(s, maxLag, looks, now) {
		return false
	}
	// A standby its pool failed to connect to lately (full, or going
	// down before a look saw it) is tried again after standbyRetry.
	return !h.c.dials.failedWithin(now, standbyRetry)
}

// near reports whether a standby's last look s found it up, is at most
// looks times maxLag old, and found it at most maxLag behind the primary
// (maxLag 0: pool_max_replica_lag).
func (r *replicas) near(s *standbySeen, maxLag, looks time.Duration, now time.Time) bool {
	if maxLag == 0 {
		maxLag = r.maxLag
	}
	return s != nil && s.up && now.Sub(s.at) <= looks*maxLag && s.lag <= maxLag
}

// close closes the looks' connections, once c's closed is closed. The
// standbys' Connectors are their builder's to close (closeNow).
func (r *replicas) close() {
	r.wg.Wait()
	for _, h := range r.hosts {
		h.mon.drop()
	}
	r.primary.drop()
}

// position reads the server's position on m's connection, connecting
// first where it has none (not before m.retry); a failure drops it.
func (m *monitor) position(ctx context.Context, timeout time.Duration) (dialects.LogState, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if m.dc == nil {
		if time.Now().Before(m.retry) {
			// The last error, wrapped: a host that refused as a primary
			// is still seen as one until the next connect.
			return dialects.LogState{}, fmt.Errorf("pooldriver: connecting to look at the server's position failed; retrying soon: %w", m.failed)
		}
		creds, err := m.creds(ctx)
		if err == nil {
			m.dc, err = m.tmpl.Open(ctx, creds)
		}
		if err != nil {
			m.retry, m.failed = time.Now().Add(monitorRetry), err
			return dialects.LogState{}, err
		}
	}
	pr, ok := m.dc.(dialects.Positioner)
	if !ok {
		m.dropLocked()
		err := errors.New("pooldriver: the dialect's connections cannot say their position in the log")
		m.retry, m.failed = time.Now().Add(time.Hour), err
		return dialects.LogState{}, err
	}
	st, err := pr.LogPosition(ctx)
	if err != nil {
		m.dropLocked()
		m.retry, m.failed = time.Now().Add(monitorRetry), err
	}
	return st, err
}

// drop closes m's connection.
func (m *monitor) drop() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.dropLocked()
}

func (m *monitor) dropLocked() {
	if m.dc != nil {
		_ = m.dc.Close()
		m.dc = nil
	}
}
