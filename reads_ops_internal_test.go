package pooldriver

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pooldriver/pooldriver/dialects"
	"github.com/pooldriver/pooldriver/internal/fakedb"
)

// lookHost is a host as a standby's look sees it: down, a primary (which
// refuses a standby's connection, and says so on one made before), or a
// standby at pos. Its template is the standby template of the host.
type lookHost struct {
	mu      sync.Mutex
	down    bool
	primary bool
	pos     dialects.Position
}

func (h *lookHost) set(down, primary bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.down, h.primary = down, primary
}

func (h *lookHost) Credentials() dialects.Credentials { return dialects.Credentials{} }
func (h *lookHost) String() string                    { return "look://host" }

func (h *lookHost) Open(context.Context, dialects.Credentials) (dialects.Conn, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case h.down:
		return nil, errors.New("connection refused")
	case h.primary:
		return nil, fmt.Errorf("validating: %w", dialects.ErrNotStandby)
	}
	return &lookConn{h: h}, nil
}

// lookConn is a look's connection to a lookHost: only LogPosition and
// Close are called.
type lookConn struct {
	dialects.Conn
	h *lookHost
}

func (c *lookConn) LogPosition(context.Context) (dialects.LogState, error) {
	c.h.mu.Lock()
	defer c.h.mu.Unlock()
	if c.h.down {
		return dialects.LogState{}, errors.New("connection reset by peer")
	}
	return dialects.LogState{Standby: !c.h.primary, Position: c.h.pos}, nil
}

func (c *lookConn) Close() error { return nil }

// lineLog keeps the messages of the lines logged, with their "host".
type lineLog struct {
	mu    sync.Mutex
	lines []string
}

func (l *lineLog) Enabled(context.Context, slog.Level) bool { return true }

func (l *lineLog) Handle(_ context.Context, r slog.Record) error {
	s := r.Level.String() + " " + r.Message
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "host" || a.Key == "name" || a.Key == "from" || a.Key == "length" {
			s += " " + a.Key + "=" + a.Value.String()
		}
		return true
	})
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, s)
	return nil
}

func (l *lineLog) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *lineLog) WithGroup(string) slog.Handler      { return l }

// take returns the lines logged since the last take.
func (l *lineLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.lines
	l.lines = nil
	return out
}

// hostsOf returns the hosts Standbys lists, with "+" for those up.
func hostsOf(c *Connector) []string {
	out := []string{}
	for _, s := range c.Standbys() {
		if s.Up {
			out = append(out, s.Host+"+")
		} else {
			out = append(out, s.Host)
		}
	}
	return out
}

// TestStandbysLeaveOutPrimary: Standbys lists the hosts a look found
// standbys or did not hear from, not those it found primaries; the
// primary's host logs nothing, a host that never answers logs once, a
// standby promoted logs once, and a host a look found a primary stays one
// through the looks before its next connect (which return the refusal,
// wrapped).
func TestStandbysLeaveOutPrimary(t *testing.T) {
	logs := &lineLog{}
	c := &Connector{cfg: Config{CleanupTimeout: time.Second}, log: slog.New(logs)}
	r := &replicas{c: c, maxLag: time.Second}
	c.reads = r
	hosts := map[string]*lookHost{"p": {primary: true}, "s": {pos: 100}, "d": {down: true}}
	for _, name := range []string{"p", "s", "d"} {
		r.hosts = append(r.hosts, &standby{c: &Connector{}, host: name, mon: monitor{tmpl: hosts[name], creds: c.credentials}})
	}
	c.tmpl = hosts["p"] // credentials' template
	look := func() {
		for _, h := range r.hosts {
			r.lookStandby(context.Background(), h)
		}
	}
	check := func(when string, wantHosts, wantLines []string) {
		t.Helper()
		if got := hostsOf(c); strings.Join(got, ",") != strings.Join(wantHosts, ",") {
			t.Errorf("%s: Standbys %v, want %v", when, got, wantHosts)
		}
		if got := logs.take(); strings.Join(got, "|") != strings.Join(wantLines, "|") {
			t.Errorf("%s: logged %q, want %q", when, got, wantLines)
		}
	}

	check("before any look", []string{"p", "s", "d"}, nil)
	look()
	check("the first look", []string{"s+", "d"}, []string{"INFO pooldriver: a standby does not answer: no reads go to it host=d"})
	for range 3 { // within monitorRetry: the refusals, wrapped
		look()
	}
	check("looks before the next connect", []string{"s+", "d"}, nil)

	hosts["s"].set(false, true) // promoted
	look()
	check("a standby promoted", []string{"d"}, []string{"INFO pooldriver: a standby is a primary now: no reads go to it host=s"})
	look()
	check("the promoted one refuses", []string{"d"}, nil)

	hosts["p"].set(true, false) // the primary goes down
	for _, h := range r.hosts {
		h.mon.retry = time.Time{}
	}
	look()
	check("the primary down", []string{"p", "d"}, nil)

	hosts["s"].set(false, false) // a standby again
	hosts["d"].set(false, false)
	for _, h := range r.hosts {
		h.mon.retry = time.Time{}
	}
	look()
	check("standbys again", []string{"p", "s+", "d+"}, nil)
	hosts["d"].set(true, false)
	look()
	check("a standby down", []string{"p", "s+", "d"}, []string{"INFO pooldriver: a standby does not answer: no reads go to it host=d"})
}

// TestStandbysNeverNil: with pool_reads=standby, Standbys is empty, not
// nil, where every host is a primary: the exporters tell a Connector with
// standbys by it.
func TestStandbysNeverNil(t *testing.T) {
	c := &Connector{}
	if c.Standbys() != nil {
		t.Fatal("Standbys without pool_reads=standby")
	}
	c.reads = testReplicas(2, time.Second)
	for _, h := range c.reads.hosts {
		h.seen.Store(&standbySeen{at: time.Now(), primary: true})
	}
	if s := c.Standbys(); s == nil || len(s) != 0 {
		t.Fatalf("every host a primary: Standbys %v", s)
	}
}

// TestResetReachesStandbys: Reset drops the connections of every host's
// pool: the standbys' too.
func TestResetReachesStandbys(t *testing.T) {
	primary, standbySrv := fakedb.NewServer(t.Name()+"_primary"), fakedb.NewServer(t.Name()+"_standby")
	defer primary.Close()
	defer standbySrv.Close()
	c := New("fake://" + primary.Name() + "?pool_max_conns=1")
	sub := New("fake://" + standbySrv.Name() + "?pool_max_conns=1")
	for _, x := range []*Connector{c, sub} {
		if err := x.Err(); err != nil {
			t.Fatal(err)
		}
	}
	c.reads = &replicas{c: c, hosts: []*standby{{c: sub, host: "standby"}}}
	db, subDB := sql.OpenDB(c), sql.OpenDB(sub)
	defer db.Close() // closes sub too, as a Connector closes its standbys'
	defer subDB.Close()
	connID := func(db *sql.DB) int64 {
		t.Helper()
		var id int64
		if err := db.QueryRow("CONNID").Scan(&id); err != nil {
			t.Fatal(err)
		}
		return id
	}
	before, subBefore := connID(db), connID(subDB)
	c.Reset()
	if after := connID(db); after == before {
		t.Errorf("the primary's pool: connection %d before Reset and after", after)
	}
	if after := connID(subDB); after == subBefore {
		t.Errorf("a standby's pool: connection %d before Reset and after", after)
	}
	if s := sub.Stats(); s.Created != 2 {
		t.Errorf("the standby's pool created %d connections, want 2", s.Created)
	}
}

// TestMiddlewareMalformedToken: a malformed token is counted and logged by
// the Connector with standbys that the request ran on, without the token;
// the request goes on without it. A good token, none, or a request that
// ran nowhere with standbys count nothing.
func TestMiddlewareMalformedToken(t *testing.T) {
	srv := fakedb.NewServer(t.Name())
	defer srv.Close()
	logs := &lineLog{}
	c := New("fake://"+srv.Name(), WithLogger(slog.New(logs)))
	if err := c.Err(); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.reads = &replicas{c: c}
	logs.take()
	var after dialects.Position
	var ranOn *replicas
	h := MiddlewareWithReadToken("X-Read-Token")(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		after = readMarkFrom(r.Context()).after
		if ranOn != nil {
			taskFrom(r.Context()).reads.on.Store(ranOn) // a statement on c, as route records it
		}
	}))
	serve := func(header, cookie string) {
		t.Helper()
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		if header != "" {
			req.Header.Set("X-Read-Token", header)
		}
		if cookie != "" {
			req.AddCookie(&http.Cookie{Name: "X-Read-Token", Value: cookie})
		}
		h.ServeHTTP(httptest.NewRecorder(), req)
	}

	ranOn = c.reads
	serve("0/16B3748", "")
	if after != 0x16B3748 {
		t.Fatalf("a good token: reads after %v", after)
	}
	serve("", "")
	serve("not-a-token", "")
	if after != 0 {
		t.Fatalf("a malformed token: reads after %v, want as without one", after)
	}
	serve("", "0/zz")
	if got := c.Stats().ReadTokensMalformed; got != 2 {
		t.Fatalf("ReadTokensMalformed %d, want 2", got)
	}
	const msg = "WARN pooldriver: a request's read token is malformed: it reads as one without a token"
	want := []string{msg + " name=X-Read-Token from=header length=11"} // the cookie's: held back, within logInterval
	if got := logs.take(); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("logged %q, want %q", got, want)
	}

	ranOn = nil
	serve("not-a-token", "")
	if got := c.Stats().ReadTokensMalformed; got != 2 {
		t.Fatalf("a request that ran nowhere with standbys: ReadTokensMalformed %d, want 2", got)
	}
}
