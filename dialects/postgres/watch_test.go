package postgres

import (
	"bytes"
	"context"
	"database/sql/driver"
	"errors"
	"io"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/pooldriver/pooldriver/dialects"
	"github.com/pooldriver/pooldriver/dialects/internal/sqllex"
)

// backendStream encodes msgs as the server sends them.
func backendStream(t testing.TB, msgs ...pgproto3.BackendMessage) []byte {
	t.Helper()
	var b []byte
	for _, m := range msgs {
		var err error
		if b, err = m.Encode(b); err != nil {
			t.Fatal(err)
		}
	}
	return b
}

// chunkReader returns its data in the chunk sizes given, then the rest.
type chunkReader struct {
	data  []byte
	sizes []int
}

func (r *chunkReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, io.EOF
	}
	n := len(r.data)
	if len(r.sizes) > 0 {
		n = min(n, r.sizes[0])
		r.sizes = r.sizes[1:]
	}
	n = copy(p, r.data[:n])
	r.data = r.data[n:]
	return n, nil
}

// readThrough reads all of data through a fresh watch, cut into the
// chunks sizes gives, and returns the watch.
func readThrough(t testing.TB, data []byte, sizes []int) *paramWatch {
	t.Helper()
	w := new(paramWatch)
	w.reset(&chunkReader{data: data, sizes: sizes})
	got, err := io.ReadAll(w)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, data) {
		t.Fatal("the watch changed what it read")
	}
	return w
}

var (
	ready      = &pgproto3.ReadyForQuery{TxStatus: 'I'}
	paramTZ    = &pgproto3.ParameterStatus{Name: "TimeZone", Value: "Pacific/Chatham"}
	selectRows = []pgproto3.BackendMessage{
		&pgproto3.BindComplete{},
		&pgproto3.DataRow{Values: [][]byte{[]byte("S"), []byte("Z"), make([]byte, 70000)}},
		&pgproto3.CommandComplete{CommandTag: []byte("SELECT 1")},
	}
)

// TestWatchFraming reads responses with and without a ParameterStatus, cut
// at every byte and in random chunks, and checks what the watch reports and
// when it may forget.
func TestWatchFraming(t *testing.T) {
	cases := []struct {
		name    string
		msgs    []pgproto3.BackendMessage
		seen    bool // a ParameterStatus went by
		settled bool // the stream ends with a complete ReadyForQuery
	}{
		{"rows", append(selectRows, ready), false, true},
		{"set", []pgproto3.BackendMessage{&pgproto3.CommandComplete{CommandTag: []byte("SET")}, paramTZ, ready}, true, true},
		{"status after ready", append(append(selectRows, ready), paramTZ), true, false},
		{"rows not yet ended", selectRows, false, false},
		// Bytes that would be a ParameterStatus at a message's start, inside
		// a row: not one.
		{"S in a value", []pgproto3.BackendMessage{&pgproto3.DataRow{Values: [][]byte{backendStream(t, paramTZ)}}, ready}, false, true},
	}
	for _, tc := range cases {
		data := backendStream(t, tc.msgs...)
		check := func(w *paramWatch, how string) {
			t.Helper()
			if got := w.maybeChanged(); got != tc.seen {
				t.Errorf("%s, %s: maybeChanged = %t, want %t", tc.name, how, got, tc.seen)
			}
			w.clear()
			if got, want := w.maybeChanged(), tc.seen && !tc.settled; got != want {
				t.Errorf("%s, %s: after clear, maybeChanged = %t, want %t", tc.name, how, got, want)
			}
		}
		check(readThrough(t, data, nil), "one read")
		for cut := 1; cut < len(data) && cut < 300; cut++ {
			check(readThrough(t, data, []int{cut}), "cut")
		}
		rng := rand.New(rand.NewPCG(1, uint64(len(data))))
		for range 200 {
			var sizes []int
			for range 20 {
				sizes = append(sizes, 1+rng.IntN(40))
			}
			check(readThrough(t, data, sizes), "random chunks")
		}
	}
}

// TestWatchReplies: the watch counts the messages that answer a request,
// not those the server sends unasked, however the reads cut them.
func TestWatchReplies(t *testing.T) {
	notice := &pgproto3.NoticeResponse{Severity: "NOTICE", Message: "n"}
	notify := &pgproto3.NotificationResponse{PID: 1, Channel: "c", Payload: "p"}
	goodbye := &pgproto3.ErrorResponse{Severity: "FATAL", Code: "57P01", Message: "terminating connection due to administrator command"}
	cases := []struct {
		name string
		msgs []pgproto3.BackendMessage
		want uint64
	}{
		{"rows", append(selectRows, ready), 4},
		{"unasked only", []pgproto3.BackendMessage{notice, paramTZ, notify}, 0},
		{"goodbye after unasked", []pgproto3.BackendMessage{notify, paramTZ, goodbye}, 1},
		{"bound, then goodbye", []pgproto3.BackendMessage{&pgproto3.BindComplete{}, notice, goodbye}, 2},
	}
	for _, tc := range cases {
		data := backendStream(t, tc.msgs...)
		if got := readThrough(t, data, nil).replies.Load(); got != tc.want {
			t.Errorf("%s, one read: %d replies, want %d", tc.name, got, tc.want)
		}
		for cut := 1; cut < len(data) && cut < 300; cut++ {
			if got := readThrough(t, data, []int{cut}).replies.Load(); got != tc.want {
				t.Errorf("%s, cut at %d: %d replies, want %d", tc.name, cut, got, tc.want)
			}
		}
	}
}

// TestUnanswered: a statement's error is marked not run only where the
// server's goodbye (a FATAL of class 57) is the first answer read since
// the statement was sent.
func TestUnanswered(t *testing.T) {
	goodbye := &pgconn.PgError{Severity: "FATAL", Code: "57P01", Message: "terminating connection due to administrator command"}
	cases := []struct {
		name    string
		err     error
		replies uint64 // answers read since the statement was sent
		notRun  bool
	}{
		{"goodbye first", goodbye, 1, true},
		{"goodbye read before it was sent", goodbye, 0, true},
		{"goodbye after BindComplete", goodbye, 2, false},
		{"idle session timeout", &pgconn.PgError{Severity: "FATAL", Code: "57P05"}, 1, true},
		{"an ERROR of class 57 (query_canceled)", &pgconn.PgError{Severity: "ERROR", Code: "57014"}, 1, false},
		{"another FATAL", &pgconn.PgError{Severity: "FATAL", Code: "28000"}, 1, false},
		{"not the server's", io.ErrUnexpectedEOF, 0, false},
	}
	for _, tc := range cases {
		c := &conn{watch: new(paramWatch)}
		c.watch.replies.Store(7 + tc.replies)
		err := c.unanswered(tc.err, 7)
		if got := errors.Is(err, dialects.ErrNotRun) && errors.Is(err, driver.ErrBadConn); got != tc.notRun {
			t.Errorf("%s: not run = %t, want %t (%v)", tc.name, got, tc.notRun, err)
		}
		if !errors.Is(err, tc.err) {
			t.Errorf("%s: %v no longer matches the statement's error", tc.name, err)
		}
	}
	if err := (&conn{}).unanswered(goodbye, 0); err != goodbye {
		t.Errorf("a connection without a watch (Wrap's): %v, want the error as it was", err)
	}
}

// TestWatchLostFraming: a length that cannot be makes the watch say
// "maybe" for good, also after a clear, whatever follows.
func TestWatchLostFraming(t *testing.T) {
	data := append([]byte{'C', 0, 0, 0, 3}, backendStream(t, ready)...)
	w := readThrough(t, data, nil)
	w.clear()
	if !w.maybeChanged() {
		t.Error("after a length of 3, the watch says nothing changed")
	}
}

// TestWatchNewAttempt: pgx builds a frontend per connection attempt; a
// failed attempt's half-read message must not confuse the next.
func TestWatchNewAttempt(t *testing.T) {
	w := new(paramWatch)
	build := watchFrontend(w, nil)
	half := backendStream(t, paramTZ)
	build(&chunkReader{data: half[:3]}, io.Discard).Receive() //nolint:errcheck // cut short on purpose
	build(&chunkReader{data: backendStream(t, selectRows[0], ready)}, io.Discard)
	if _, err := io.ReadAll(w); err != nil {
		t.Fatal(err)
	}
	w.clear()
	if w.maybeChanged() {
		t.Error("the first attempt's read shows in the second's")
	}
}

// FuzzWatch: whatever the bytes and however they are cut, the watch never
// panics nor changes them; after a ParameterStatus it says "maybe", and it
// forgets that only where what it read ends with a whole ReadyForQuery.
func FuzzWatch(f *testing.F) {
	f.Add([]byte{}, []byte{1, 2, 3}, false)
	f.Add([]byte{}, []byte{5, 0, 9}, true)
	f.Add(backendStream(f, selectRows[0], selectRows[2], ready), []byte{5, 0, 9}, true)
	f.Add([]byte{'Z', 0, 0, 0, 5}, []byte{0}, true)
	f.Fuzz(func(t *testing.T, tail, cuts []byte, withStatus bool) {
		var data []byte
		if withStatus {
			data = backendStream(t, paramTZ)
		}
		data = append(data, tail...)
		var sizes []int
		for _, c := range cuts {
			sizes = append(sizes, 1+int(c))
		}
		w := readThrough(t, data, sizes)
		if withStatus && !w.maybeChanged() {
			t.Fatal("a ParameterStatus went by unseen")
		}
		w.clear()
		if withStatus && !w.maybeChanged() && !(w.nhdr == 0 && w.body == 0 && w.hdr[0] == 'Z') {
			t.Error("forgot a ParameterStatus where what was read does not end with a ReadyForQuery")
		}
	})
}

// opened opens a connection as pooldriver does for a postgres:// DSN, with
// its watch.
func opened(t testing.TB) *conn {
	t.Helper()
	tmpl, _, err := Dialect.Parse(serverDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	dc, err := tmpl.Open(t.Context(), tmpl.Credentials())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dc.Close() })
	c := dc.(*conn)
	if c.watch == nil {
		t.Fatal("a connection opened from a DSN has no watch")
	}
	return c
}

// connKinds are the two ways a connection reaches the dialect: opened from
// a DSN, with the watch, and opened by pgx's stdlib under Wrap, without.
var connKinds = []struct {
	name string
	open func(*testing.T) *conn
}{{"dsn", func(t *testing.T) *conn { return opened(t) }}, {"wrapped", func(t *testing.T) *conn { return wrapped(t) }}}

// TestWatchAgreesWithLookups runs, on a connection with a watch and on one
// without (Wrap's), statements that change reported parameters in every way
// (by text, behind it, for a transaction only, a reset), and checks after
// each that ChangesSession answers what looking every parameter up answers.
func TestWatchAgreesWithLookups(t *testing.T) {
	steps := []string{
		"SELECT 1",
		"SET TimeZone = 'UTC'",
		"SELECT 1",
		"RESET ALL",
		"SELECT 1",
		"BEGIN",
		"SELECT set_config('search_path', 'pg_catalog', true)",
		"SELECT 1",
		"COMMIT",
		"SELECT 1",
		"SELECT set_config('DateStyle', 'German', false)",
		"SELECT 1",
		"SELECT 2",
		"SELECT set_config('DateStyle', 'ISO, MDY', false)",
		"SELECT 1",
		"BEGIN",
		"SELECT set_config('TimeZone', 'Asia/Tokyo', false)",
		"COMMIT",
		"SELECT 1",
		"DISCARD ALL",
		"SELECT 1",
		// Texts too long to remember, between short ones.
		"SET TimeZone = 'UTC' /*" + strings.Repeat(" ", maxLexedText) + "*/",
		"SELECT 1",
		"SELECT 1 /*" + strings.Repeat(" ", maxLexedText) + "*/",
		"SELECT 1",
	}
	for _, kind := range connKinds {
		t.Run(kind.name, func(t *testing.T) {
			c := kind.open(t)
			// What the watch and the lookups say, not the catalog: a
			// statement no fresh reading vouches for (the reading fails
			// closed, and a loaded machine may keep it from being read)
			// counts as a change for what it names.
			c.TrustFunctions(true)
			for _, q := range steps {
				exec(t, c, q)
				pc := c.pgx().PgConn()
				want := sqllex.Of(q, sqllex.Postgres).ChangesSession || pc.TxStatus() == 'I' && c.paramsDiffer(pc)
				if got := c.ChangesSession(q); got != want {
					t.Errorf("after %q: ChangesSession = %t, the lookups say %t", q, got, want)
				}
			}
		})
	}
}

// TestWatchKeepsUsersFrontend: a BuildFrontend the configuration hook set is
// still the one pgx decodes with, behind the watch.
func TestWatchKeepsUsersFrontend(t *testing.T) {
	tmpl, _, err := Dialect.Parse(serverDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	built := 0
	before := BeforeConnect(func(_ context.Context, cfg *pgx.ConnConfig) error {
		prev := cfg.BuildFrontend
		cfg.BuildFrontend = func(r io.Reader, w io.Writer) *pgproto3.Frontend {
			built++
			return prev(r, w)
		}
		return nil
	})
	dc, err := tmpl.(dialects.ConfigurableTemplate).OpenConfigured(t.Context(), tmpl.Credentials(), before)
	if err != nil {
		t.Fatal(err)
	}
	defer dc.Close()
	if built != 1 {
		t.Errorf("the hook's BuildFrontend ran %d times, want 1", built)
	}
	c := dc.(*conn)
	exec(t, c, "SET TimeZone = 'Asia/Tokyo'")
	if !c.ChangesSession("SELECT 1") {
		t.Error("a changed TimeZone went unseen behind the hook's frontend")
	}
}

// TestWatchRowsOpen: asked while a result is open, whose ParameterStatus
// arrived with its rows but is not decoded yet, the watch must not forget
// it: once the rows close, the change shows.
func TestWatchRowsOpen(t *testing.T) {
	c := opened(t)
	ctx := t.Context()
	exec(t, c, "PREPARE tz AS SELECT set_config('TimeZone', 'Asia/Tokyo', false)")
	c.MarkBaseline()
	q := "EXECUTE tz"
	rows, err := c.Driver().(driver.QueryerContext).QueryContext(ctx, q, nil)
	if err != nil {
		t.Fatal(err)
	}
	c.ChangesSession(q) // whatever it says now, it must not forget
	if err := rows.Close(); err != nil {
		t.Fatal(err)
	}
	if !c.ChangesSession(q) {
		t.Error("the TimeZone set by the rows' statement went unseen")
	}
}

// BenchmarkWatchScan follows the framing of one point select's answer
// (BindComplete, a row, CommandComplete, ReadyForQuery), read at once as
// pgx reads it: the watch's cost on every statement.
func BenchmarkWatchScan(b *testing.B) {
	data := backendStream(b, &pgproto3.BindComplete{},
		&pgproto3.DataRow{Values: [][]byte{[]byte("name 42"), []byte("42")}},
		&pgproto3.CommandComplete{CommandTag: []byte("SELECT 1")}, ready)
	var w paramWatch
	b.ReportAllocs()
	for b.Loop() {
		w.scan(data)
	}
	if w.maybeChanged() {
		b.Fatal("no ParameterStatus was read, yet the watch says one may have changed")
	}
}
