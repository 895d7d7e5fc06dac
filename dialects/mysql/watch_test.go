package mysql

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net"
	"testing"
	"time"
)

// A conversation is what the driver writes and the server answers, step by
// step, with the wire's state expected after each step.
type conversation struct {
	steps []step
	caps  uint32 // the client's capabilities
	ext   uint32 // MariaDB's extended ones
}

type step struct {
	client bool   // written by the driver; else read from the server
	b      []byte // whole packets
	want   wantState
	name   string
}

// wantState is the wire's state after a step, as the conn reads it.
type wantState struct {
	known, inTx, autocommit, changed, err, busy, lost bool
}

func (s wantState) String() string {
	return fmt.Sprintf("known=%v inTx=%v autocommit=%v changed=%v err=%v busy=%v lost=%v",
		s.known, s.inTx, s.autocommit, s.changed, s.err, s.busy, s.lost)
}

// observed reads w's state as a wantState, taking the changed bit. Once
// the framing is lost, nothing else counts.
func observed(w *wire) wantState {
	s := w.state.Load()
	if s&wireLost != 0 {
		return lostState
	}
	return wantState{
		known: s&wireKnown != 0, inTx: s&wireInTx != 0, autocommit: s&wireAutocommit != 0,
		changed: w.takeChanged(), err: s&wireErr != 0, busy: s&wireBusy != 0, lost: s&wireLost != 0,
	}
}

// The capabilities go-sql-driver asks for, as a MariaDB 10.11 server agrees
// them (CLIENT_MYSQL clear: extended capabilities follow).
const (
	mariaCaps  = 1<<2 | capProtocol41 | 1<<13 | 1<<15 | 1<<17 | 1<<19 | 1<<20 | 1<<21 | capDeprecateEOF | 1<<7
	serverCaps = 0xfffff7fe // everything but CLIENT_MYSQL and CLIENT_SSL
)

// packets frames payload as the protocol does, from sequence number seq,
// splitting it at maxPayload.
func packets(seq byte, payload []byte) []byte {
	var out []byte
	for {
		n := min(len(payload), maxPayload)
		out = append(out, byte(n), byte(n>>8), byte(n>>16), seq)
		out = append(out, payload[:n]...)
		payload = payload[n:]
		seq++
		if n < maxPayload {
			return out
		}
	}
}

func lenencOf(n uint64) []byte {
	switch {
	case n < 0xfb:
		return []byte{byte(n)}
	case n < 1<<16:
		return []byte{0xfc, byte(n), byte(n >> 8)}
	case n < 1<<24:
		return []byte{0xfd, byte(n), byte(n >> 8), byte(n >> 16)}
	}
	b := []byte{0xfe, 0, 0, 0, 0, 0, 0, 0, 0}
	binary.LittleEndian.PutUint64(b[1:], n)
	return b
}

func le16(v uint16) []byte { return []byte{byte(v), byte(v >> 8)} }

// builder writes a conversation's packets.
type builder struct {
	c   conversation
	seq byte // the next server packet's sequence number
}

func newBuilder(caps, ext uint32) *builder {
	return &builder{c: conversation{caps: caps, ext: ext}}
}

func (b *builder) add(client bool, name string, want wantState, payloads ...[]byte) {
	var out []byte
	for _, p := range payloads {
		out = append(out, packets(b.seq, p)...)
		b.seq += byte(len(p)/maxPayload + 1)
	}
	b.c.steps = append(b.c.steps, step{client: client, b: out, want: want, name: name})
}

// handshake adds the greeting (offering serverCaps), the response and the
// OK that ends authentication.
func (b *builder) handshake(offered uint32) {
	g := []byte{10}
	g = append(g, "5.5.5-10.11.6-MariaDB-0+deb12u1\x00"...)
	g = append(g, 1, 0, 0, 0)    // connection id
	g = append(g, "scrambl1"...) // scramble, first part
	g = append(g, 0)             // filler
	g = append(g, le16(uint16(offered))...)
	g = append(g, 45) // character set
	g = append(g, le16(statusAutocommit)...)
	g = append(g, le16(uint16(offered>>16))...)
	g = append(g, 21, 0, 0, 0, 0, 0, 0) // auth data length, reserved
	g = append(g, 0x1d, 0, 0, 0)        // MariaDB's extended capabilities
	g = append(g, "scramble2345\x00mysql_native_password\x00"...)
	b.seq = 0
	b.add(false, "greeting", wantState{}, g)

	r := binary.LittleEndian.AppendUint32(nil, b.c.caps)
	r = append(r, 0, 0, 0, 0, 45)
	r = append(r, make([]byte, 19)...)
	r = binary.LittleEndian.AppendUint32(r, b.c.ext)
	r = append(r, "root\x00"...)
	r = append(r, 20)
	r = append(r, "01234567890123456789"...)
	r = append(r, "test\x00mysql_native_password\x00"...)
	b.add(true, "handshake response", wantState{}, r)
	b.add(false, "auth ok", wantState{}, okPayload(0x00, statusAutocommit|statusStateChanged, true))
}

// command adds a command packet; want is the state once it is written.
func (b *builder) command(name string, want wantState, payload []byte) {
	b.seq = 0
	b.add(true, name, want, payload)
}

func (b *builder) query(text string) {
	b.command(text, wantState{known: true, autocommit: true, busy: true}, append([]byte{comQuery}, text...))
}

// okPayload is an OK packet (header 0x00, or 0xfe for one that ends a result
// set under CLIENT_DEPRECATE_EOF), with session-state data if tracked.
func okPayload(header byte, status uint16, tracked bool) []byte {
	p := []byte{header}
	p = append(p, lenencOf(300)...)   // affected rows
	p = append(p, lenencOf(1<<20)...) // last insert id
	p = append(p, le16(status)...)
	p = append(p, 0, 0) // warnings
	if tracked {
		p = append(p, 0) // info
		if status&statusStateChanged != 0 {
			p = append(p, 3, 2, 1, '1')
		}
	}
	return p
}

func eofPayload(status uint16) []byte {
	return append([]byte{0xfe, 0, 0}, le16(status)...)
}

func errPayload() []byte {
	return append([]byte{0xff, 0x1e, 0x04}, "#42S22Unknown column"...)
}

// columnDef is a column (or parameter) definition.
func columnDef(name string) []byte {
	p := []byte{3, 'd', 'e', 'f', 4, 't', 'e', 's', 't', 1, 't', 1, 't'}
	p = append(p, byte(len(name)))
	p = append(p, name...)
	p = append(p, byte(len(name)))
	p = append(p, name...)
	p = append(p, 0x0c, 45, 0, 11, 0, 0, 0, 3, 0, 0, 0, 0, 0)
	return p
}

// textRow is a row of the text protocol: each value a length-encoded
// string, nil as NULL.
func textRow(values ...[]byte) []byte {
	var p []byte
	for _, v := range values {
		if v == nil {
			p = append(p, 0xfb)
			continue
		}
		p = append(p, lenencOf(uint64(len(v)))...)
		p = append(p, v...)
	}
	return p
}

// resultSet returns the payloads of a result set of the text protocol with
// two columns, rows, and an end with status.
func resultSet(caps uint32, status uint16, meta bool, rows ...[]byte) [][]byte {
	count := []byte{2}
	if !meta {
		count = append(count, 0) // MariaDB: the cached definitions stand
	}
	out := [][]byte{count}
	if meta {
		out = append(out, columnDef("a"), columnDef("b"))
	}
	if caps&capDeprecateEOF == 0 {
		out = append(out, eofPayload(0))
	}
	out = append(out, rows...)
	if caps&capDeprecateEOF == 0 {
		return append(out, eofPayload(status))
	}
	return append(out, okPayload(0xfe, status, false))
}

var (
	idle      = wantState{known: true, autocommit: true}
	inTx      = wantState{known: true, autocommit: true, inTx: true}
	changed   = wantState{known: true, autocommit: true, changed: true}
	failed    = wantState{known: true, autocommit: true, err: true}
	busy      = wantState{known: true, autocommit: true, busy: true}
	busyInTx  = wantState{known: true, autocommit: true, inTx: true, busy: true}
	lostState = wantState{lost: true}
)

// mariaDBConversation is a session of go-sql-driver with MariaDB 10.11:
// every kind of packet the wire follows.
func mariaDBConversation(caps uint32) conversation {
	b := newBuilder(caps, extCacheMetadata)
	b.handshake(serverCaps)
	deprecated := caps&capDeprecateEOF != 0
	// First replies: the driver's SET at connect, then ours.
	b.seq = 0
	b.add(true, "SET NAMES", wantState{busy: true}, append([]byte{comQuery}, "SET NAMES utf8mb4"...))
	b.add(false, "SET NAMES ok", changed, okPayload(0, statusAutocommit|statusStateChanged, true))

	b.query("BEGIN")
	b.add(false, "BEGIN ok", inTx, okPayload(0, statusAutocommit|statusInTrans, true))

	b.command("SELECT", busyInTx, append([]byte{comQuery}, "SELECT a, b FROM t"...))
	b.add(false, "rows", inTx, resultSet(caps, statusAutocommit|statusInTrans, true,
		textRow([]byte{}, []byte("x")),                        // starts with 0x00: an empty string
		textRow(nil, []byte("y")),                             // starts with 0xfb: NULL
		textRow([]byte("fe"), []byte{}),                       //
		textRow(bytes.Repeat([]byte{0xfe}, 300), []byte("z")), // 0xfc length, then 0xfe bytes
	)...)

	b.command("COMMIT", busyInTx, append([]byte{comQuery}, "COMMIT"...))
	b.add(false, "COMMIT ok", idle, okPayload(0, statusAutocommit, true))

	b.query("SELECT nosuch")
	b.add(false, "ERR", failed, errPayload())

	b.command("multi", wantState{known: true, autocommit: true, busy: true, err: true},
		append([]byte{comQuery}, "SET @v = 1; SELECT 1, 2; DO 1"...))
	multi := [][]byte{okPayload(0, statusAutocommit|statusMoreResults|statusStateChanged, true)}
	multi = append(multi, resultSet(caps, statusAutocommit|statusMoreResults, true, textRow([]byte("1"), []byte("2")))...)
	multi = append(multi, okPayload(0, statusAutocommit, true))
	b.add(false, "multi replies", changed, multi...)

	b.query("SET autocommit = 0")
	b.add(false, "autocommit off", wantState{known: true, changed: true}, okPayload(0, statusStateChanged, true))
	b.command("SET autocommit = 1", wantState{known: true, busy: true}, append([]byte{comQuery}, "SET autocommit = 1"...))
	b.add(false, "autocommit on", changed, okPayload(0, statusAutocommit|statusStateChanged, true))

	// A prepared statement: two parameters, two columns.
	b.command("prepare", busy, append([]byte{comStmtPrepare}, "SELECT a, b FROM t WHERE a = ? AND b = ?"...))
	prep := [][]byte{{0x00, 1, 0, 0, 0, 2, 0, 2, 0, 0, 0, 0}, columnDef("?"), columnDef("?")}
	if !deprecated {
		prep = append(prep, eofPayload(statusAutocommit))
	}
	prep = append(prep, columnDef("a"), columnDef("b"))
	if !deprecated {
		prep = append(prep, eofPayload(statusAutocommit))
	}
	b.add(false, "prepare ok", idle, prep...)

	execute := []byte{comStmtExecute, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 8, 0, 8, 0, 1, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0}
	b.command("execute", busy, execute)
	binRows := [][]byte{{2, 1}, columnDef("a"), columnDef("b")} // metadata follows
	if !deprecated {
		binRows = append(binRows, eofPayload(0))
	}
	binRows = append(binRows,
		[]byte{0x00, 0x00, 1, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0},
		[]byte{0x00, 0x0c, 1, 0, 0, 0, 0, 0, 0, 0}, // a NULL
	)
	if deprecated {
		binRows = append(binRows, okPayload(0xfe, statusAutocommit, false))
	} else {
		binRows = append(binRows, eofPayload(statusAutocommit))
	}
	b.add(false, "binary rows", idle, binRows...)

	b.command("execute again", busy, execute)
	again := [][]byte{{2, 0}} // the cached definitions stand
	if !deprecated {
		again = append(again, eofPayload(0))
	}
	again = append(again, []byte{0x00, 0x00, 3, 0, 0, 0, 0, 0, 0, 0, 4, 0, 0, 0, 0, 0, 0, 0})
	if deprecated {
		again = append(again, okPayload(0xfe, statusAutocommit, false))
	} else {
		again = append(again, eofPayload(statusAutocommit))
	}
	b.add(false, "binary rows, cached columns", idle, again...)

	b.command("long data", idle, []byte{comStmtSendLongData, 1, 0, 0, 0, 0, 0, 'x'})
	b.command("close", idle, []byte{comStmtClose, 1, 0, 0, 0})

	b.command("prepare fails", busy, append([]byte{comStmtPrepare}, "SELECT nosuch"...))
	b.add(false, "prepare ERR", idle, errPayload())

	b.query("LOAD DATA LOCAL INFILE 'Reader::r' INTO TABLE t")
	b.add(false, "infile request", busy, append([]byte{0xfb}, "Reader::r"...))
	b.seq = 2
	b.add(true, "infile data", busy, []byte("1\t2\n"), []byte("3\t4\n"))
	b.add(true, "infile end", busy, []byte{})
	b.seq = 5
	b.add(false, "infile ok", idle, okPayload(0, statusAutocommit, true))

	b.command("ping", busy, []byte{comPing})
	b.add(false, "ping ok", idle, okPayload(0, statusAutocommit, true))

	b.query("CREATE TEMPORARY TABLE tt (a int)")
	b.add(false, "temp table", changed, okPayload(0, statusAutocommit|statusStateChanged, true))

	b.command("reset", busy, []byte{comResetConnection})
	b.add(false, "reset ok", idle, okPayload(0, statusAutocommit, true))

	b.query("SELECT 1 UNION SELECT 2")
	broken := [][]byte{{1}, columnDef("1")}
	if !deprecated {
		broken = append(broken, eofPayload(0))
	}
	b.add(false, "rows then ERR", failed, append(broken, textRow([]byte("1")), errPayload())...)
	return b.c
}

// play runs c through a new wire, each step's bytes cut by cut (nil: whole),
// and checks the state after every step.
func play(t *testing.T, c conversation, cut func(i int, b []byte) [][]byte) *wire {
	t.Helper()
	w := newWire(nil, true)
	for i, s := range c.steps {
		chunks := [][]byte{s.b}
		if cut != nil {
			chunks = cut(i, s.b)
		}
		for _, ch := range chunks {
			if s.client {
				w.scan(&w.out, ch, true)
			} else {
				w.scan(&w.in, ch, false)
			}
		}
		if got := observed(w); got != s.want {
			t.Fatalf("after step %d (%s):\n got %v\nwant %v", i, s.name, got, s.want)
		}
	}
	return w
}

func TestWireFollowsConversation(t *testing.T) {
	for _, tc := range []struct {
		name string
		caps uint32
	}{
		{"deprecate EOF", mariaCaps},
		{"EOF packets", mariaCaps &^ capDeprecateEOF},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := mariaDBConversation(tc.caps)
			w := play(t, c, nil)
			if w.caps&capSessionTrack == 0 || w.state.Load()&wireTracked == 0 {
				t.Error("CLIENT_SESSION_TRACK was not asked for")
			}
			if !w.cacheMeta {
				t.Error("the metadata cache was not seen")
			}
			if got, want := w.roundTrips.Load(), uint64(17); got != want {
				t.Errorf("round trips = %d, want %d", got, want)
			}
		})
	}
}

// TestWireCutAtEveryByte: however the bytes of a step arrive, the wire
// reads the same.
func TestWireCutAtEveryByte(t *testing.T) {
	for _, caps := range []uint32{mariaCaps, mariaCaps &^ capDeprecateEOF} {
		c := mariaDBConversation(caps)
		for i, s := range c.steps {
			for at := 1; at < len(s.b); at++ {
				play(t, c, func(j int, b []byte) [][]byte {
					if j != i {
						return [][]byte{b}
					}
					return [][]byte{b[:at], b[at:]}
				})
			}
		}
	}
}

func TestWireRandomChunks(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, caps := range []uint32{mariaCaps, mariaCaps &^ capDeprecateEOF} {
		c := mariaDBConversation(caps)
		for range 300 {
			play(t, c, func(_ int, b []byte) [][]byte { return randomChunks(rng, b) })
		}
	}
}

func randomChunks(rng *rand.Rand, b []byte) [][]byte {
	var out [][]byte
	for len(b) > 0 {
		n := 1 + rng.IntN(min(len(b), 1+rng.IntN(40)))
		out = append(out, b[:n])
		b = b[n:]
	}
	return out
}

// TestWireLargePackets: a row of more than 16 MiB spans packets, and its
// first byte is 0xfe (the length of a long string), as is an EOF's.
func TestWireLargePackets(t *testing.T) {
	b := newBuilder(mariaCaps, extCacheMetadata)
	b.handshake(serverCaps)
	b.command("SELECT big", wantState{busy: true}, append([]byte{comQuery}, "SELECT big"...))
	row := textRow(bytes.Repeat([]byte{'x'}, maxPayload+10), []byte("y"))
	if row[0] != 0xfe {
		t.Fatalf("row starts with %#x", row[0])
	}
	exact := textRow(bytes.Repeat([]byte{'x'}, maxPayload-4)) // exactly one full packet, then an empty one
	if len(exact) != maxPayload {
		t.Fatalf("row of %d bytes", len(exact))
	}
	b.add(false, "big rows", idle, resultSet(mariaCaps, statusAutocommit, true, row, exact)...)
	rng := rand.New(rand.NewPCG(3, 4))
	play(t, b.c, nil)
	play(t, b.c, func(_ int, b []byte) [][]byte {
		var out [][]byte
		for len(b) > 0 {
			n := 1 + rng.IntN(min(len(b), 1<<20))
			out = append(out, b[:n])
			b = b[n:]
		}
		return out
	})
}

// TestWireLoses: what makes no sense stops the framing for good.
func TestWireLoses(t *testing.T) {
	query := append([]byte{comQuery}, "SELECT 1"...)
	for _, tc := range []struct {
		name  string
		caps  uint32
		steps func(b *builder)
	}{
		{"packet while idle", mariaCaps, func(b *builder) {
			b.add(false, "unasked", lostState, okPayload(0, statusAutocommit, true))
		}},
		{"command while busy", mariaCaps, func(b *builder) {
			b.command("first", busy, query)
			b.command("second", lostState, query)
		}},
		{"unknown command", mariaCaps, func(b *builder) {
			b.command("COM_STATISTICS", lostState, []byte{0x09})
		}},
		{"cursor", mariaCaps, func(b *builder) {
			b.command("execute with cursor", lostState, []byte{comStmtExecute, 1, 0, 0, 0, 1, 1, 0, 0, 0})
		}},
		{"packet after the client's command, not seq 0", mariaCaps, func(b *builder) {
			b.seq = 1
			b.add(true, "seq 1", lostState, query)
		}},
		{"ERR among definitions", mariaCaps, func(b *builder) {
			b.command("query", busy, query)
			b.add(false, "defs", lostState, []byte{2}, columnDef("a"), errPayload())
		}},
		{"no EOF after definitions", mariaCaps &^ capDeprecateEOF, func(b *builder) {
			b.command("query", busy, query)
			b.add(false, "defs", lostState, []byte{1}, columnDef("a"), textRow([]byte("1")))
		}},
		{"bad column count", mariaCaps, func(b *builder) {
			b.command("query", busy, query)
			b.add(false, "count", lostState, []byte{0xfc, 1})
		}},
		{"short OK", mariaCaps, func(b *builder) {
			b.command("query", busy, query)
			b.add(false, "ok", lostState, []byte{0, 0, 0, 2})
		}},
		{"empty packet", mariaCaps, func(b *builder) {
			b.command("query", busy, query)
			b.add(false, "empty", lostState, []byte{})
		}},
		{"compression", mariaCaps | capCompress, nil},
		{"TLS", mariaCaps | capSSL, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBuilder(tc.caps, extCacheMetadata)
			b.handshake(serverCaps)
			if tc.steps == nil {
				for i := range b.c.steps[1:] {
					b.c.steps[1+i].want = lostState
				}
				b.query("SELECT 1")
				b.c.steps[len(b.c.steps)-1].want = lostState
			} else {
				b.command("DO 1", wantState{busy: true}, append([]byte{comQuery}, "DO 1"...))
				b.add(false, "ok", idle, okPayload(0, statusAutocommit, true))
				tc.steps(b)
			}
			w := play(t, b.c, nil)
			// Lost for good: what follows, sensible or not, changes nothing.
			w.scan(&w.out, packets(0, query), true)
			w.scan(&w.in, packets(1, okPayload(0, statusAutocommit|statusInTrans, true)), false)
			if got := observed(w); got != lostState {
				t.Errorf("after more: %v", got)
			}
		})
	}
}

// TestWireAsksForTracking: the handshake response gets CLIENT_SESSION_TRACK
// when the server offers it, and only then.
func TestWireAsksForTracking(t *testing.T) {
	for _, tc := range []struct {
		name    string
		offered uint32
		caps    uint32
		want    bool
	}{
		{"offered", serverCaps, mariaCaps, true},
		{"not offered", serverCaps &^ capSessionTrack, mariaCaps, false},
		{"TLS request", serverCaps, mariaCaps | capSSL, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBuilder(tc.caps, extCacheMetadata)
			b.handshake(tc.offered)
			sock := &recordingConn{}
			w := newWire(sock, true)
			for _, s := range b.c.steps[:2] {
				if s.client {
					if n, err := w.Write(s.b); n != len(s.b) || err != nil {
						t.Fatalf("Write = %d, %v", n, err)
					}
				} else {
					sock.in = s.b
					if _, err := w.Read(make([]byte, 512)); err != nil {
						t.Fatal(err)
					}
				}
			}
			sent := sock.out.Bytes()
			caps := binary.LittleEndian.Uint32(sent[4:])
			if got := caps&capSessionTrack != 0; got != tc.want {
				t.Errorf("CLIENT_SESSION_TRACK sent: %v, want %v", got, tc.want)
			}
			if caps&^capSessionTrack != tc.caps || !bytes.Equal(sent[8:], b.c.steps[1].b[8:]) {
				t.Error("the response changed beyond that bit")
			}
			if got := w.written.Load(); got != uint64(len(sent)) {
				t.Errorf("written = %d, want %d", got, len(sent))
			}
		})
	}
}

// recordingConn is a net.Conn that serves in to reads and keeps what is
// written.
type recordingConn struct {
	net.Conn
	in  []byte
	out bytes.Buffer
}

func (c *recordingConn) Read(p []byte) (int, error) {
	n := copy(p, c.in)
	c.in = c.in[n:]
	return n, nil
}

func (c *recordingConn) Write(p []byte) (int, error) { return c.out.Write(p) }

// TestWireInterrupt: Interrupt fails a blocked read at once, and a deadline
// the driver sets afterwards does not undo it.
func TestWireInterrupt(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err == nil {
			defer c.Close()
			_, _ = c.Read(make([]byte, 1)) // until the client closes
		}
	}()
	nc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	w := newWire(nc, true)
	defer w.Close()
	done := make(chan error, 1)
	go func() {
		_, err := w.Read(make([]byte, 1))
		done <- err
	}()
	w.interrupt()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("the blocked read succeeded")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the blocked read was not interrupted")
	}
	if err := w.SetReadDeadline(time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := w.SetDeadline(time.Time{}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := w.Read(make([]byte, 1)); err == nil || time.Since(start) > 5*time.Second {
		t.Fatalf("a read after Interrupt: %v after %v", err, time.Since(start))
	}
	if _, err := w.Write([]byte{1}); err == nil {
		t.Fatal("a write after Interrupt succeeded")
	}
}

// FuzzWire feeds a command and a reply of any bytes after a handshake: the
// wire never panics, and reads the same however the bytes are cut.
func FuzzWire(f *testing.F) {
	c := mariaDBConversation(mariaCaps)
	for i, s := range c.steps {
		if s.client && i+1 < len(c.steps) && !c.steps[i+1].client && len(s.b)+len(c.steps[i+1].b) < 400 {
			f.Add(s.b, c.steps[i+1].b, uint(len(s.b)/2), uint(len(c.steps[i+1].b)/3))
		}
	}
	hs := newBuilder(mariaCaps, extCacheMetadata)
	hs.handshake(serverCaps)
	f.Fuzz(func(t *testing.T, cmd, reply []byte, cutCmd, cutReply uint) {
		whole, split := newWire(nil, true), newWire(nil, true)
		for _, w := range []*wire{whole, split} {
			for _, s := range hs.c.steps {
				if s.client {
					w.scan(&w.out, s.b, true)
				} else {
					w.scan(&w.in, s.b, false)
				}
			}
		}
		whole.scan(&whole.out, cmd, true)
		whole.scan(&whole.in, reply, false)
		for _, part := range [][]byte{cmd[:cutCmd%uint(len(cmd)+1)], cmd[cutCmd%uint(len(cmd)+1):]} {
			split.scan(&split.out, part, true)
		}
		for _, part := range [][]byte{reply[:cutReply%uint(len(reply)+1)], reply[cutReply%uint(len(reply)+1):]} {
			split.scan(&split.in, part, false)
		}
		if a, b := observed(whole), observed(split); a != b {
			t.Fatalf("whole: %v\nsplit: %v", a, b)
		}
	})
}

// TestObserveAfterLoss: a change the server reported stands though the
// wire lost the framing afterwards, and the loss itself counts as a change,
// once.
func TestObserveAfterLoss(t *testing.T) {
	handshake := newBuilder(mariaCaps, 0)
	handshake.handshake(serverCaps)
	newConn := func(t *testing.T) *conn {
		w := newWire(nil, true)
		for _, s := range handshake.c.steps {
			if s.client {
				w.scan(&w.out, s.b, true)
			} else {
				w.scan(&w.in, s.b, false)
			}
		}
		return &conn{w: w, known: true, autocommit: true, baseAuto: 1, cat: fixedCatalog(noShadows())}
	}
	exchange := func(w *wire, query string, reply []byte) {
		w.scan(&w.out, packets(0, append([]byte{comQuery}, query...)), true)
		w.scan(&w.in, packets(1, reply), false)
	}
	observe := func(t *testing.T, c *conn, q string) bool {
		t.Helper()
		changed, _, err := c.Observe(t.Context(), q, false)
		if err != nil {
			t.Fatal(err)
		}
		return changed
	}

	t.Run("reported, then lost", func(t *testing.T) {
		c := newConn(t)
		c.MarkBaseline()
		exchange(c.w, "CALL p()", okPayload(0, statusAutocommit|statusStateChanged, true))
		c.w.scan(&c.w.in, packets(0, okPayload(0, statusAutocommit, true)), false) // unasked: lost
		if c.w.state.Load()&wireLost == 0 {
			t.Fatal("the wire follows")
		}
		if !observe(t, c, "SELECT 1") {
			t.Error("the reported change was dropped")
		}
		if observe(t, c, "SELECT 1") {
			t.Error("the change counts twice")
		}
	})
	t.Run("lost", func(t *testing.T) {
		c := newConn(t)
		c.MarkBaseline()
		exchange(c.w, "DO 1", okPayload(0, statusAutocommit, true))
		if observe(t, c, "DO 1") {
			t.Fatal("DO 1 changes the session")
		}
		c.w.scan(&c.w.out, []byte{1, 0, 0, 0, 0x09}, true) // COM_STATISTICS: lost
		if !observe(t, c, "SELECT 1") {
			t.Error("the loss is no change")
		}
		if observe(t, c, "SELECT 1") {
			t.Error("the loss counts twice")
		}
	})
	t.Run("lost at the handshake", func(t *testing.T) {
		b := newBuilder(mariaCaps|capSSL, 0)
		b.handshake(serverCaps)
		w := newWire(nil, true)
		for _, s := range b.c.steps[:2] {
			if s.client {
				w.scan(&w.out, s.b, true)
			} else {
				w.scan(&w.in, s.b, false)
			}
		}
		c := &conn{w: w, known: true, autocommit: true, baseAuto: 1, cat: fixedCatalog(noShadows())}
		c.MarkBaseline() // as Open does
		if observe(t, c, "SELECT 1") {
			t.Error("a connection whose wire never followed (TLS) reads as changed")
		}
	})
}

// TestWireHidesCacheMetadata: the driver reads MariaDB's greeting without
// MARIADB_CLIENT_CACHE_METADATA, however the bytes arrive; nothing else
// changes, and a MySQL greeting (no extended capabilities) passes as is.
func TestWireHidesCacheMetadata(t *testing.T) {
	for _, tc := range []struct {
		name    string
		offered uint32
		want    bool // the bit is cleared
	}{
		{"MariaDB", serverCaps, true},
		{"MySQL", serverCaps | capMySQL, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBuilder(mariaCaps, 0)
			b.handshake(tc.offered)
			g := b.c.steps[0].b
			ext := bytes4(g, 4+1+len("5.5.5-10.11.6-MariaDB-0+deb12u1")+1+27)
			if ext&extCacheMetadata == 0 {
				t.Fatal("the test greeting does not offer the metadata cache")
			}
			for cut := 0; cut <= len(g); cut++ {
				sock := &recordingConn{in: append([]byte(nil), g...)}
				w := newWire(sock, true)
				var seen []byte
				for _, n := range []int{cut, len(g) - cut} {
					if n == 0 {
						continue
					}
					p := make([]byte, n)
					if k, err := w.Read(p); k != n || err != nil {
						t.Fatalf("Read = %d, %v", k, err)
					}
					seen = append(seen, p...)
				}
				want := append([]byte(nil), g...)
				if tc.want {
					want[4+1+len("5.5.5-10.11.6-MariaDB-0+deb12u1")+1+27] &^= extCacheMetadata
				}
				if string(seen) != string(want) {
					t.Fatalf("cut at %d: the driver reads\n%x\nwant\n%x", cut, seen, want)
				}
				if w.state.Load()&wireLost != 0 || w.phase != phaseAuth {
					t.Fatalf("cut at %d: state %#x, phase %d", cut, w.state.Load(), w.phase)
				}
			}
		})
	}
}

func bytes4(b []byte, at int) uint32 {
	return uint32(b[at]) | uint32(b[at+1])<<8 | uint32(b[at+2])<<16 | uint32(b[at+3])<<24
}

// FuzzWireGreeting feeds a greeting of any bytes: the wire never panics,
// reads the same however the bytes are cut, and changes at most the one
// bit of MARIADB_CLIENT_CACHE_METADATA.
func FuzzWireGreeting(f *testing.F) {
	b := newBuilder(mariaCaps, 0)
	b.handshake(serverCaps)
	f.Add(b.c.steps[0].b[4:], uint(40))
	f.Add([]byte{10, 0}, uint(1))
	f.Add([]byte{0xff, 1, 2}, uint(0))
	f.Fuzz(func(t *testing.T, payload []byte, cut uint) {
		g := packets(0, payload)
		at := int(cut % uint(len(g)+1))
		var seen [2][]byte
		var ws [2]*wire
		for i, chunks := range [][][]byte{{g}, {g[:at], g[at:]}} {
			w := newWire(&recordingConn{in: append([]byte(nil), g...)}, true)
			for _, ch := range chunks {
				if len(ch) == 0 {
					continue
				}
				p := make([]byte, len(ch))
				if n, _ := w.Read(p); n != len(p) {
					t.Fatalf("Read = %d of %d", n, len(p))
				}
				seen[i] = append(seen[i], p...)
			}
			ws[i] = w
		}
		if !bytes.Equal(seen[0], seen[1]) || ws[0].state.Load() != ws[1].state.Load() || ws[0].phase != ws[1].phase {
			t.Fatalf("whole and split differ:\n%x\n%x", seen[0], seen[1])
		}
		diff := 0
		for i := range g {
			if x := g[i] ^ seen[0][i]; x != 0 {
				if x != extCacheMetadata {
					t.Fatalf("byte %d changed from %#x to %#x", i, g[i], seen[0][i])
				}
				diff++
			}
		}
		if diff > 1 {
			t.Fatalf("%d bytes changed", diff)
		}
	})
}
