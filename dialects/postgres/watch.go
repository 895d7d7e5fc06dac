package postgres

import (
	"encoding/binary"
	"io"
	"sync/atomic"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
)

// paramWatch reads the server's messages on their way to pgx and notes when
// a ParameterStatus goes by, so that the check after every statement (see
// conn.changesSession) compares the reported parameters with the baseline
// only when one may have changed, instead of looking each of them up every
// time: pgx keeps them in a map and tells nobody when one arrives.
//
// It sits between pgx's reader and its protocol decoder (pgconn.Config's
// BuildFrontend), so it sees the plain messages, after TLS, from the
// startup's answer on. Every one of them is framed as a type byte and a
// four-byte length that counts itself, which is all it reads; it copies
// nothing. Should the framing ever make no sense (a length below four), it
// stops reading and says "maybe" from then on, which costs only the lookups
// it would have saved.
//
// It also counts the bytes pgx writes through the frontend (see
// conn.Written): every message of a statement goes that way; only a
// pgconn.Batch (pgx's SendBatch in exec or simple-protocol mode, which
// database/sql never sends) writes to the socket past it.
type paramWatch struct {
	r io.Reader

	// written counts the bytes the server's socket accepted, over every
	// connection attempt. Atomic: pgx writes a Terminate from a goroutine
	// of its own when it gives a connection up, while a statement may be
	// asking.
	written atomic.Uint64

	// The framing, written only by Read (pgx reads on one goroutine at a
	// time, and hands its reads over with a happens-before).
	hdr  [5]byte // the current message's header, as far as read
	nhdr int     // bytes of hdr read; 5 once the header is complete
	body int64   // bytes of the current message's body not yet read

	// state is what Read learnt, for conn.changesSession, which may run on
	// another goroutine than pgx's last read: bits of watch*.
	state atomic.Uint32

	// replies counts the messages read that answer a request: every one
	// but those the server sends unasked (NoticeResponse, ParameterStatus,
	// NotificationResponse). See conn.unanswered.
	replies atomic.Uint64
}

const (
	watchSeen    = 1 << iota // a ParameterStatus was read since the last clear
	watchLost                // the framing made no sense: always "maybe"
	watchSettled             // what was read ends with a complete ReadyForQuery
)

// watchFrontend returns build (pgx's BuildFrontend, or the one the
// configuration had) with w reading in front of the decoder and counting
// what the frontend writes. pgx builds a frontend for every connection
// attempt, so w's framing starts afresh each time.
func watchFrontend(w *paramWatch, build pgconn.BuildFrontendFunc) pgconn.BuildFrontendFunc {
	if build == nil {
		build = pgproto3.NewFrontend
	}
	return func(r io.Reader, out io.Writer) *pgproto3.Frontend {
		w.reset(r)
		return build(w, &countingWriter{w: out, n: &w.written})
	}
}

// countingWriter adds to n the bytes that w accepted. A write that fails
// having accepted none left nothing for the server to run: pgx says so
// with SafeToRetry, and the count agrees.
type countingWriter struct {
	w io.Writer
	n *atomic.Uint64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	if n > 0 {
		c.n.Add(uint64(n))
	}
	return n, err
}

func (w *paramWatch) reset(r io.Reader) {
	w.r, w.nhdr, w.body = r, 0, 0
	w.state.Store(0)
}

// Read reads from pgx's reader and follows the framing of what it read.
func (w *paramWatch) Read(p []byte) (int, error) {
	n, err := w.r.Read(p)
	if n > 0 {
		w.scan(p[:n])
	}
	return n, err
}

// scan follows the messages in b, which continues what was read before.
func (w *paramWatch) scan(b []byte) {
	old := w.state.Load()
	if old&watchLost != 0 {
		return
	}
	// The framing lives in locals while the loop runs: pgx hands over a
	// few messages per read, and this runs on every read.
	var set uint32
	var replies uint64
	typ, nhdr := w.hdr[0], w.nhdr
	n := int64(len(b))
	pos := w.body // where the next header starts, from b's start; may lie past b's end
	if nhdr > 0 {
		// The rest of a header the last read split (pos is 0).
		k := copy(w.hdr[nhdr:], b)
		nhdr += k
		if nhdr < len(w.hdr) {
			w.nhdr = nhdr // b is all read
			return
		}
		nhdr = 0
		typ = w.hdr[0]
		size := binary.BigEndian.Uint32(w.hdr[1:])
		if size < 4 {
			w.state.Or(watchLost)
			return
		}
		if typ == 'S' {
			set |= watchSeen
		}
		replies += answers(typ)
		pos = int64(k) + int64(size) - 4
	}
	for pos+int64(len(w.hdr)) <= n {
		// A whole header in b, the usual case: read it in place.
		h := b[pos : pos+int64(len(w.hdr))]
		typ = h[0]
		size := binary.BigEndian.Uint32(h[1:])
		if size < 4 {
			w.state.Or(watchLost)
			return
		}
		if typ == 'S' {
			set |= watchSeen
		}
		replies += answers(typ)
		pos += 1 + int64(size) // the type byte, then size bytes
	}
	if replies > 0 {
		w.replies.Add(replies)
	}
	if pos < n {
		nhdr = copy(w.hdr[:], b[pos:]) // a header split by the read's end
		pos = n
	}
	body := pos - n
	w.body, w.nhdr = body, nhdr
	if nhdr == 0 {
		w.hdr[0] = typ // the last complete header's type; a partial one keeps its own
	}
	if body == 0 && nhdr == 0 && typ == 'Z' {
		set |= watchSettled
	}
	for {
		next := old&^watchSettled | set
		if next == old || w.state.CompareAndSwap(old, next) {
			return
		}
		old = w.state.Load()
	}
}

// answers is 1 for a message type that answers a request, 0 for one the
// server sends unasked.
func answers(typ byte) uint64 {
	switch typ {
	case 'N', 'S', 'A':
		return 0
	}
	return 1
}

// maybeChanged reports whether a reported parameter may have changed since
// the last clear.
func (w *paramWatch) maybeChanged() bool {
	return w.state.Load()&(watchSeen|watchLost) != 0
}

// clear forgets the ParameterStatus messages read so far, once the caller
// has compared the parameters pgx holds with the baseline, between
// statements. It does so only when what was read ends with a ReadyForQuery:
// between statements pgx has decoded every message up to the last
// ReadyForQuery, so none of those read waits undecoded in its buffer, not
// yet in the values the caller saw (a message the server sent unasked
// after it would).
func (w *paramWatch) clear() {
	old := w.state.Load()
	if old&(watchSettled|watchSeen) == watchSettled|watchSeen {
		w.state.CompareAndSwap(old, old&^watchSeen)
	}
}
