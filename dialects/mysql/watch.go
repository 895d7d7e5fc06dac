package mysql

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net"
	"sync/atomic"
	"syscall"
	"time"
)

// wire is the socket of a connection the dialect dialed, as go-sql-driver
// sees it. It passes every byte through unchanged (but one bit on each side
// of the handshake, see below) and follows the protocol on the way: the
// commands the driver writes and the packets the server answers with. From
// the OK and EOF packets that end every reply it keeps the server's status
// flags: whether a transaction is open (SERVER_STATUS_IN_TRANS), whether
// autocommit is on (SERVER_STATUS_AUTOCOMMIT), and whether the session's
// state changed (SERVER_SESSION_STATE_CHANGED). So the transaction state
// after a statement costs no round trip, and changes the statement's text
// does not show are seen.
//
// The server sets SERVER_SESSION_STATE_CHANGED only for a client that
// announced CLIENT_SESSION_TRACK in its handshake response (MariaDB 10.11:
// never otherwise), which go-sql-driver does not: the wire sets that bit in
// the response it writes, when the server's greeting offers it. The server
// then appends session-state data to its OK packets, after the fields the
// driver reads.
//
// MariaDB's greeting may offer MARIADB_CLIENT_CACHE_METADATA (the server
// then skips the column definitions when it executes a prepared statement
// again). go-sql-driver v1.10 asks for it, but its Stmt.Exec reads the
// definitions the server skipped and blocks (pooldriver runs a cached
// prepared statement again on every db.Exec with arguments): the wire
// clears the bit in the greeting as the driver reads it, so the driver
// never asks for it and every reply carries its definitions.
//
// It reads lengths and the first bytes of packets only; it copies no
// payload. Should the framing ever make no sense (a packet nobody asked
// for, a command before the reply to the last one was read, an unknown
// command, TLS or compression from the handshake on), it stops following
// it for good and says so (wireLost); the connection then asks the server,
// as connections without a wire do. It keeps counting the bytes written.
type wire struct {
	nc net.Conn

	written     atomic.Uint64 // bytes written to nc
	roundTrips  atomic.Uint64 // commands written that the server answers (tests count them)
	interrupted atomic.Bool   // Interrupt was called: every deadline stays in the past
	state       atomic.Uint32 // what the server said: bits of wire*

	// The protocol, touched only by Read and Write: go-sql-driver calls
	// them one at a time, as does rawReset while the driver is idle, and
	// pooldriver hands the connection between goroutines with a
	// happens-before.
	in, out     framer
	phase       uint8  // phase*
	expect      uint8  // what the server's next packet is: expect*
	defs        int64  // column or parameter definitions left to read
	defsEOF     bool   // an EOF packet follows the definitions
	pending     int64  // a prepared statement's column definitions, after its parameters'
	after       uint8  // what follows the definitions: expectRows or expectNone
	caps        uint32 // the client's capabilities as the server read them
	cacheMeta   bool   // MariaDB's MARIADB_CLIENT_CACHE_METADATA was agreed
	serverCaps  uint32 // the server's, from its greeting
	wantTrack   bool   // ask for CLIENT_SESSION_TRACK if the server offers it
	trackAsked  bool   // the wire set CLIENT_SESSION_TRACK in the handshake response
	sentReplyTo bool   // the handshake response was seen

	// The GTID of the last commit an OK packet reported (MariaDB's
	// last_gtid, tracked: see gtids.go), touched only by Read: the conn
	// reads it after the driver's call returned, on the same goroutine.
	gtid gtid
}

// Bits of wire.state.
const (
	wireKnown      = 1 << iota // a reply to a command ended with OK or EOF: the flags below are the server's
	wireInTx                   // SERVER_STATUS_IN_TRANS of the last OK or EOF
	wireAutocommit             // SERVER_STATUS_AUTOCOMMIT of the last OK or EOF
	wireChanged                // SERVER_SESSION_STATE_CHANGED was read since the last takeChanged
	wireErr                    // the last reply ended with ERR: what the command did is not in the flags
	wireBusy                   // a reply is awaited or being read
	wireLost                   // the framing made no sense: the flags say nothing any more (sets wireChanged too)
	wireTracked                // the client's capabilities include CLIENT_SESSION_TRACK
)

// Phases of the connection.
const (
	phaseGreeting = iota // the server's greeting is awaited
	phaseAuth            // the handshake response and authentication
	phaseCommand         // commands and their replies
)

// What the server's next packet is, in phaseCommand.
const (
	expectNone    = iota // nothing: no reply is awaited
	expectHeader         // the first packet of a reply to COM_QUERY or COM_STMT_EXECUTE, or of its next result
	expectDefs           // a column or parameter definition, or the EOF after them (w.defs == 0)
	expectRows           // a row, or the end of the result set
	expectPrepare        // the reply to COM_STMT_PREPARE
	expectSimple         // OK, EOF or ERR (COM_PING, COM_RESET_CONNECTION, ...)
	expectInfile         // nothing: the client sends a LOCAL INFILE's data
	expectLoaded         // OK or ERR after a LOCAL INFILE's data
)

// Protocol constants (see the MySQL and MariaDB client/server protocol).
const (
	capMySQL         = 1 << 0 // clear in MariaDB's greeting: extended capabilities follow
	capCompress      = 1 << 5
	capProtocol41    = 1 << 9
	capSSL           = 1 << 11
	capSessionTrack  = 1 << 23
	capDeprecateEOF  = 1 << 24
	extCacheMetadata = 1 << 4 // MARIADB_CLIENT_CACHE_METADATA, bit 36 of the capabilities

	statusInTrans      = 0x0001
	statusAutocommit   = 0x0002
	statusMoreResults  = 0x0008
	statusStateChanged = 0x4000

	maxPayload = 0xffffff // a payload of this size continues in the next packet
)

// Commands the wire follows.
const (
	comQuit             = 0x01
	comInitDB           = 0x02
	comQuery            = 0x03
	comRefresh          = 0x07
	comProcessKill      = 0x0c
	comDebug            = 0x0d
	comPing             = 0x0e
	comStmtPrepare      = 0x16
	comStmtExecute      = 0x17
	comStmtSendLongData = 0x18
	comStmtClose        = 0x19
	comStmtReset        = 0x1a
	comSetOption        = 0x1b
	// comResetConnection (0x1f) is in conn.go.
)

func newWire(nc net.Conn, wantTrack bool) *wire {
	return &wire{nc: nc, wantTrack: wantTrack}
}

// framer follows the packets of one direction: each is a 3-byte length and
// a sequence number, then the payload; a payload of maxPayload bytes
// continues in the next packet, and the packets so joined make one logical
// packet, of which it keeps the first bytes.
type framer struct {
	hdr   [4]byte
	nhdr  int
	left  int   // payload bytes of the current packet not yet seen
	more  bool  // the logical packet continues in the next packet
	seq   byte  // the sequence number of the logical packet's first packet
	total int64 // payload bytes of the logical packet so far
	limit int   // bytes of the payload to keep in pre
	npre  int
	pre   [128]byte
}

// How many bytes of a packet's payload the wire keeps.
const (
	greetingPrefix = 128 // the server's greeting, up to its capabilities
	responsePrefix = 36  // the handshake response, up to MariaDB's capabilities
	replyPrefix    = 24  // a row, or the OK or EOF packet ending rows: up to the status flags
	okPrefix       = 128 // the first packet of a reply: an OK packet, with its info text and session state (a GTID)
	commandPrefix  = 6   // a command, up to COM_STMT_EXECUTE's cursor flags
)

// Read reads from the socket and follows what the server sent. In the
// server's greeting it clears MARIADB_CLIENT_CACHE_METADATA (see wire).
func (w *wire) Read(p []byte) (int, error) {
	n, err := w.nc.Read(p)
	if n > 0 && w.state.Load()&wireLost == 0 {
		if at := w.scan(&w.in, p[:n], false); at >= 0 {
			p[at] &^= extCacheMetadata
		}
	}
	return n, err
}

// Write follows what the driver writes, then writes it. In the handshake
// response it sets CLIENT_SESSION_TRACK (see wire), on a copy that is
// wiped once written: it holds the user, the database and the password's
// scramble.
func (w *wire) Write(p []byte) (int, error) {
	out, patched := p, false
	if w.state.Load()&wireLost == 0 {
		if at := w.scan(&w.out, p, true); at >= 0 {
			out, patched = append([]byte(nil), p...), true
			out[at] |= capSessionTrack >> 16
		}
	}
	n, err := w.nc.Write(out)
	if patched {
		clear(out)
	}
	w.written.Add(uint64(n))
	if n < len(p) {
		w.lose() // the framing followed bytes that never left
	}
	return n, err
}

// scan follows the packets in b, which continues what f read before. It
// returns the index in b of the byte to patch (see wire), or -1: for the
// client's bytes (client true), the handshake response's byte that
// carries CLIENT_SESSION_TRACK; for the server's, the greeting's byte that
// carries MARIADB_CLIENT_CACHE_METADATA.
func (w *wire) scan(f *framer, b []byte, client bool) (patch int) {
	patch = -1
	i := 0
	for i < len(b) {
		if f.nhdr < len(f.hdr) {
			k := copy(f.hdr[f.nhdr:], b[i:])
			f.nhdr += k
			i += k
			if f.nhdr < len(f.hdr) {
				break
			}
			f.left = int(f.hdr[0]) | int(f.hdr[1])<<8 | int(f.hdr[2])<<16
			if !f.more {
				f.seq, f.total, f.npre = f.hdr[3], 0, 0
				f.limit = w.prefixLimit(client)
			}
			f.more = f.left == maxPayload
			f.total += int64(f.left)
		}
		if k := min(f.left, len(b)-i); k > 0 {
			if f.npre < f.limit {
				start := f.npre
				f.npre += copy(f.pre[f.npre:f.limit], b[i:i+k])
				if w.phase != phaseCommand {
					if at := w.patchAt(f, client); start <= at && at < f.npre {
						patch = i + at - start
						if client {
							w.trackAsked = true
						}
					}
				}
			}
			f.left -= k
			i += k
		}
		if f.left > 0 {
			break
		}
		f.nhdr = 0
		if f.more {
			continue
		}
		if client {
			w.clientPacket(f)
		} else {
			w.serverPacket(f)
		}
		if w.state.Load()&wireLost != 0 {
			return patch
		}
	}
	return patch
}

func (w *wire) prefixLimit(client bool) int {
	switch {
	case client && w.phase == phaseCommand:
		return commandPrefix
	case client:
		return responsePrefix
	case w.phase == phaseGreeting:
		return greetingPrefix
	case w.expect == expectHeader, w.expect == expectSimple, w.expect == expectLoaded:
		return okPrefix
	}
	return replyPrefix
}

// patchAt returns the index in f.pre of the byte the wire is to patch in
// the packet whose first bytes f.pre holds (see scan), once f.pre holds
// enough to tell; else -1.
func (w *wire) patchAt(f *framer, client bool) int {
	if !client {
		return w.cacheMetaAt(f)
	}
	if f.npre < 3 || !w.wantTrack || w.phase != phaseAuth || w.sentReplyTo || f.seq != 1 ||
		w.serverCaps&capSessionTrack == 0 {
		return -1
	}
	lo := uint32(f.pre[0]) | uint32(f.pre[1])<<8
	if lo&capProtocol41 == 0 || lo&capSSL != 0 || f.pre[2]&(capSessionTrack>>16) != 0 {
		return -1 // not a response to patch (TLS follows), or no need
	}
	return 2
}

// cacheMetaAt returns the index in f.pre of the greeting's byte that
// carries MARIADB_CLIENT_CACHE_METADATA, if the server offers it there;
// else -1. After the protocol version (10) and the server's version (up to
// a NUL) come the connection id (4 bytes), the scramble's first part (8),
// a filler (1), the lower capabilities (2), the character set (1), the
// status flags (2), the upper capabilities (2), the scramble's length (1),
// a filler (6), and then, where CLIENT_MYSQL is clear (MariaDB), the
// extended capabilities (4).
func (w *wire) cacheMetaAt(f *framer) int {
	if w.phase != phaseGreeting || f.seq != 0 || f.npre == 0 || f.pre[0] != 10 {
		return -1
	}
	nul := bytes.IndexByte(f.pre[1:f.npre], 0)
	if nul < 0 {
		return -1
	}
	caps, ext := 1+nul+1+4+8+1, 1+nul+1+27
	if ext >= f.npre || f.pre[caps]&capMySQL != 0 || f.pre[ext]&extCacheMetadata == 0 {
		return -1
	}
	return ext
}

// clientPacket follows one logical packet the driver wrote.
func (w *wire) clientPacket(f *framer) {
	p := f.pre[:f.npre]
	if w.phase != phaseCommand {
		if f.seq != 0 {
			if !w.sentReplyTo && f.seq == 1 {
				w.sentReplyTo = true
				w.handshakeResponse(p)
			}
			return // authentication data
		}
		if w.phase == phaseGreeting {
			w.lose()
			return
		}
		w.phase = phaseCommand
	}
	if w.expect == expectInfile {
		if f.seq == 0 {
			w.lose()
		} else if f.total == 0 {
			w.expect = expectLoaded // the empty packet that ends the data
		}
		return
	}
	if f.seq != 0 || w.expect != expectNone || len(p) == 0 {
		w.lose() // not a command, or one before the last reply was read
		return
	}
	next := uint8(expectNone)
	switch p[0] {
	case comQuery:
		next = expectHeader
	case comStmtExecute:
		if len(p) < 6 || p[5] != 0 {
			w.lose() // a cursor: rows would come by COM_STMT_FETCH
			return
		}
		next = expectHeader
	case comStmtPrepare:
		next = expectPrepare
	case comQuit, comStmtClose, comStmtSendLongData:
		// no reply
	case comInitDB, comRefresh, comProcessKill, comDebug, comPing, comStmtReset, comSetOption, comResetConnection:
		next = expectSimple
	default:
		w.lose()
		return
	}
	if next != expectNone {
		w.roundTrips.Add(1)
	}
	w.await(next)
}

// handshakeResponse reads the capabilities the server will use from the
// client's handshake response (or TLS request) p.
func (w *wire) handshakeResponse(p []byte) {
	if len(p) < 4 {
		w.lose()
		return
	}
	caps := binary.LittleEndian.Uint32(p)
	if w.trackAsked {
		caps |= capSessionTrack
	}
	w.caps = caps
	if caps&(capSSL|capCompress) != 0 || caps&capProtocol41 == 0 {
		w.lose() // what follows is encrypted or compressed, or too old
		return
	}
	if caps&capMySQL == 0 && len(p) >= 32 {
		w.cacheMeta = binary.LittleEndian.Uint32(p[28:])&extCacheMetadata != 0
	}
	if caps&capSessionTrack != 0 {
		w.state.Or(wireTracked)
	}
}

// serverPacket follows one logical packet the server sent.
func (w *wire) serverPacket(f *framer) {
	p := f.pre[:f.npre]
	if len(p) == 0 {
		w.lose()
		return
	}
	switch w.phase {
	case phaseGreeting:
		w.phase = phaseAuth
		w.greeting(p)
		return
	case phaseAuth:
		return // authentication; its OK packet precedes every command's
	}
	first := p[0]
	switch w.expect {
	case expectHeader, expectLoaded:
		switch {
		case first == 0x00:
			w.ok(p, false, int64(len(p)) == f.total)
		case first == 0xff:
			w.failed()
		case first == 0xfb && w.expect == expectHeader:
			w.expect = expectInfile
		case w.expect == expectHeader:
			w.columnCount(p, f.total)
		default:
			w.lose()
		}
	case expectDefs:
		switch {
		case w.defs > 0 && first != 0xff:
			w.defs--
			if w.defs == 0 && !w.defsEOF {
				w.defsRead()
			}
		case w.defs == 0 && first == 0xfe && f.total < 9:
			w.defsRead()
		default:
			w.lose()
		}
	case expectRows:
		switch {
		case first == 0xfe && f.total <= maxPayload:
			w.ok(p, w.caps&capDeprecateEOF == 0, int64(len(p)) == f.total)
		case first == 0xff:
			w.failed()
		}
		// anything else is a row, text or binary: a text row may start
		// with 0x00 (an empty string), a binary row always does.
	case expectPrepare:
		switch {
		case first == 0x00 && len(p) >= 9:
			cols := int64(binary.LittleEndian.Uint16(p[5:]))
			params := int64(binary.LittleEndian.Uint16(p[7:]))
			if params == 0 {
				params, cols = cols, 0
			}
			w.startDefs(params, expectNone)
			w.pending = cols
		case first == 0xff:
			w.await(expectNone) // nothing ran: the flags stand
		default:
			w.lose()
		}
	case expectSimple:
		switch first {
		case 0x00:
			w.ok(p, false, int64(len(p)) == f.total)
		case 0xfe:
			w.ok(p, w.caps&capDeprecateEOF == 0, int64(len(p)) == f.total)
		case 0xff:
			w.failed()
		default:
			w.lose()
		}
	default: // expectNone, expectInfile: nothing was asked
		w.lose()
	}
}

// greeting reads the server's capabilities from its greeting p.
func (w *wire) greeting(p []byte) {
	if p[0] != 10 {
		return // an ERR (the server refuses the connection), or an old protocol: no tracking
	}
	i := 1
	for i < len(p) && p[i] != 0 {
		i++
	}
	i += 1 + 4 + 8 + 1 // the version's NUL, the connection id, the scramble's first part, a filler
	if i+2 > len(p) {
		return
	}
	w.serverCaps = uint32(binary.LittleEndian.Uint16(p[i:]))
	if i+7 <= len(p) { // the character set, the status flags, the upper capabilities
		w.serverCaps |= uint32(binary.LittleEndian.Uint16(p[i+5:])) << 16
	}
}

// columnCount reads the first packet of a result set: its column count and,
// with MariaDB's metadata cache, whether the column definitions follow.
func (w *wire) columnCount(p []byte, total int64) {
	n, size := lenenc(p)
	if size == 0 || n == 0 {
		w.lose()
		return
	}
	if w.cacheMeta && total > int64(size) {
		if size >= len(p) {
			w.lose()
			return
		}
		if p[size] == 0 {
			n = 0 // the definitions the client cached stand
		}
	}
	w.startDefs(int64(n), expectRows)
}

// startDefs expects n definitions, each followed by an EOF unless
// CLIENT_DEPRECATE_EOF, then what after says.
func (w *wire) startDefs(n int64, after uint8) {
	w.pending = 0
	w.after = after
	w.defs, w.defsEOF = n, w.caps&capDeprecateEOF == 0
	if n == 0 && (after == expectNone || !w.defsEOF) {
		w.defsRead()
		return
	}
	w.expect = expectDefs
}

// defsRead moves past the definitions just read.
func (w *wire) defsRead() {
	if w.pending > 0 {
		w.defs, w.pending = w.pending, 0
		return
	}
	w.await(w.after)
}

// ok reads the status flags of an OK packet (or, if eof, of an EOF packet)
// that ends a reply or one of its results; whole: p is all of it. A
// report of session state that only tells a commit's GTID (see
// onlyGTID) is not a change of the session.
func (w *wire) ok(p []byte, eof, whole bool) {
	var status uint16
	i := 0
	if eof {
		if len(p) < 5 {
			w.lose()
			return
		}
		status = binary.LittleEndian.Uint16(p[3:])
	} else {
		i = 1
		for range 2 { // affected rows, last insert id
			_, size := lenenc(p[i:])
			if size == 0 {
				w.lose()
				return
			}
			i += size
		}
		if i+2 > len(p) {
			w.lose()
			return
		}
		status = binary.LittleEndian.Uint16(p[i:])
	}
	set := uint32(wireKnown)
	if status&statusInTrans != 0 {
		set |= wireInTx
	}
	if status&statusAutocommit != 0 {
		set |= wireAutocommit
	}
	if status&statusStateChanged != 0 && (eof || !whole || !w.onlyGTID(p[i+2:])) {
		set |= wireChanged
	}
	w.update(wireInTx|wireAutocommit|wireErr, set)
	if status&statusMoreResults != 0 {
		w.expect = expectHeader
		return
	}
	w.await(expectNone)
}

// failed follows an ERR packet, which ends the reply and carries no flags.
func (w *wire) failed() {
	w.update(0, wireErr)
	w.await(expectNone)
}

// await sets what the server's next packet is.
func (w *wire) await(next uint8) {
	w.expect = next
	if next == expectNone {
		w.update(wireBusy, 0)
	} else {
		w.update(0, wireBusy)
	}
}

// update clears the state's bits in clear and sets those in set.
func (w *wire) update(clear, set uint32) {
	for {
		old := w.state.Load()
		next := old&^clear | set
		if next == old || w.state.CompareAndSwap(old, next) {
			return
		}
	}
}

// lose stops following the framing for good. What the server said in the
// packets it can no longer read is unknown: that counts as a change of the
// session (wireChanged), once.
func (w *wire) lose() { w.state.Or(wireLost | wireChanged) }

// takeChanged reports whether SERVER_SESSION_STATE_CHANGED was read since
// the last call, and forgets it.
func (w *wire) takeChanged() bool {
	return w.state.And(^uint32(wireChanged))&wireChanged != 0
}

// lenenc reads a length-encoded integer: its value and its size in bytes,
// 0 if b does not hold a valid one.
func lenenc(b []byte) (uint64, int) {
	if len(b) == 0 {
		return 0, 0
	}
	switch c := b[0]; {
	case c < 0xfb:
		return uint64(c), 1
	case c == 0xfc && len(b) >= 3:
		return uint64(b[1]) | uint64(b[2])<<8, 3
	case c == 0xfd && len(b) >= 4:
		return uint64(b[1]) | uint64(b[2])<<8 | uint64(b[3])<<16, 4
	case c == 0xfe && len(b) >= 9:
		return binary.LittleEndian.Uint64(b[1:]), 9
	}
	return 0, 0
}

// interrupt makes the socket's blocked and future I/O fail at once; safe
// from any goroutine. A deadline set later stays in the past.
func (w *wire) interrupt() {
	w.interrupted.Store(true)
	_ = w.nc.SetDeadline(aLongTimeAgo)
}

// keepInterrupted undoes a deadline just set over Interrupt's.
func (w *wire) keepInterrupted(err error) error {
	if w.interrupted.Load() {
		_ = w.nc.SetDeadline(aLongTimeAgo)
	}
	return err
}

func (w *wire) Close() error         { return w.nc.Close() }
func (w *wire) LocalAddr() net.Addr  { return w.nc.LocalAddr() }
func (w *wire) RemoteAddr() net.Addr { return w.nc.RemoteAddr() }
func (w *wire) SetDeadline(t time.Time) error {
	return w.keepInterrupted(w.nc.SetDeadline(t))
}
func (w *wire) SetReadDeadline(t time.Time) error {
	return w.keepInterrupted(w.nc.SetReadDeadline(t))
}
func (w *wire) SetWriteDeadline(t time.Time) error {
	return w.keepInterrupted(w.nc.SetWriteDeadline(t))
}

// SyscallConn reaches the socket itself, so that a check for a closed idle
// connection (the driver's, and dialects.CheckSocket) peeks at it as
// without the wire.
func (w *wire) SyscallConn() (syscall.RawConn, error) {
	sc, ok := w.nc.(syscall.Conn)
	if !ok {
		return nil, errors.New("pooldriver: mysql: the socket is not a system socket")
	}
	return sc.SyscallConn()
}

var (
	_ net.Conn     = (*wire)(nil)
	_ syscall.Conn = (*wire)(nil)
)
