package mysql

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
)

// MariaDB names every transaction it writes to its binary log with a GTID,
// domain-server-sequence (0-1-42), and a replica applies them in order; in
// one replication domain the sequence numbers only grow, through a
// failover too (a promoted replica numbers on from what it applied). So
// within one domain a sequence number is a position in the sense of
// dialects.Position: a replica whose applied GTID's sequence is at or past
// a commit's has the commit. The dialect reads positions of one domain
// only; a server whose position spans several (multi-source replication,
// gtid_domain_id set per session) cannot say one, and its reads stay on
// the primary.
//
// A commit's GTID comes with the COMMIT's own reply: the session tracks
// the system variable last_gtid (session_track_system_variables), and the
// server appends its new value to the OK packet of each statement that
// committed a write. The wire reads it there (onlyGTID), at no round trip.

// gtid is a GTID as an OK packet or a position reported it.
type gtid struct {
	seq    uint64
	domain uint32
	server uint32 // the server_id of the server that wrote it
	ok     bool
}

// later returns the later of g and h, which are of one domain.
func (g gtid) later(h gtid) gtid {
	if !g.ok || h.ok && h.seq > g.seq {
		return h
	}
	return g
}

// gtidDomain is the one replication domain the positions of a DSN's
// servers are read in: the first a look or a commit saw. The primary's
// template and its replicas' share it (Standbys and Targeted copy the
// pointer), so that a commit or a server in another domain (a
// gtid_domain_id changed) tells no position: its sequence numbers do not
// compare with the others'.
type gtidDomain struct {
	plus1 atomic.Uint64 // the domain + 1; 0: none seen yet
}

// agree reports whether domain is the one the DSN's positions are read
// in, taking it as that one where none was seen yet.
func (d *gtidDomain) agree(domain uint32) bool {
	v := uint64(domain) + 1
	return d.plus1.CompareAndSwap(0, v) || d.plus1.Load() == v
}

// Session-state entry types (the OK packet's session state information).
const (
	trackSystemVariables = 0x00
	gtidVariable         = "last_gtid"
)

// onlyGTID reads the rest of an OK packet, r (from its warnings on), and
// reports whether its report of session state only tells last_gtid's new
// value, which it keeps in w.gtid: such a report changes nothing a reset
// must undo. Anything else, or anything it cannot read, is a change.
func (w *wire) onlyGTID(r []byte) bool {
	if w.caps&capSessionTrack == 0 || len(r) < 2 {
		return false
	}
	r = r[2:] // warnings
	n, size := lenenc(r)
	if size == 0 || uint64(len(r)-size) < n {
		return false
	}
	r = r[size+int(n):] // the info text
	n, size = lenenc(r)
	if size == 0 || uint64(len(r)-size) != n || n == 0 {
		return false
	}
	r = r[size:]
	var g gtid
	for len(r) > 0 {
		kind := r[0]
		n, size = lenenc(r[1:])
		if kind != trackSystemVariables || size == 0 || uint64(len(r)-1-size) < n {
			return false
		}
		entry := r[1+size : 1+size+int(n)]
		r = r[1+size+int(n):]
		name, rest, ok := lenencString(entry)
		if !ok || string(name) != gtidVariable {
			return false
		}
		value, rest, ok := lenencString(rest)
		if !ok || len(rest) != 0 {
			return false
		}
		if g, ok = parseGTID(string(value)); !ok {
			return false
		}
	}
	w.gtid = g
	return true
}

// lenencString reads a length-encoded string from b: it and what follows.
func lenencString(b []byte) (s, rest []byte, ok bool) {
	n, size := lenenc(b)
	if size == 0 || uint64(len(b)-size) < n {
		return nil, nil, false
	}
	return b[size : size+int(n)], b[size+int(n):], true
}

// parseGTID reads one GTID, domain-server-sequence.
func parseGTID(s string) (gtid, bool) {
	d, rest, ok1 := strings.Cut(s, "-")
	server, seq, ok2 := strings.Cut(rest, "-")
	if !ok1 || !ok2 {
		return gtid{}, false
	}
	domain, err1 := strconv.ParseUint(d, 10, 32)
	id, err2 := strconv.ParseUint(server, 10, 32)
	n, err3 := strconv.ParseUint(seq, 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return gtid{}, false
	}
	return gtid{seq: n, domain: uint32(domain), server: uint32(id), ok: true}, true
}

// errDomains is the error of a position that spans several domains.
var errDomains = errors.New("the GTID position spans several replication domains; reads on replicas follow one")

// positionOf reads a GTID position as @@gtid_binlog_pos and
// @@gtid_slave_pos write it, a GTID per domain separated by commas: its
// one GTID, or none (ok false) for an empty one.
func positionOf(s string) (gtid, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return gtid{}, nil
	}
	if strings.Contains(s, ",") {
		return gtid{}, fmt.Errorf("%q: %w", s, errDomains)
	}
	g, ok := parseGTID(s)
	if !ok {
		return gtid{}, fmt.Errorf("%q is not a GTID position (want domain-server-sequence)", s)
	}
	return g, nil
}
