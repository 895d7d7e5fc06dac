package pooldriver

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/pooldriver/pooldriver/dialects"
)

// testReplicas is replicas with n standbys and no Connectors: enough for
// the rules that read positions.
func testReplicas(n int, maxLag time.Duration) *replicas {
	r := &replicas{maxLag: maxLag}
	for i := range n {
		r.hosts = append(r.hosts, &standby{c: &Connector{}, host: string(rune('a' + i))})
	}
	return r
}

func (r *replicas) sawPrimary(at time.Time, p dialects.Position) {
	r.seen[r.next] = sample{at: at, pos: p}
	r.next = (r.next + 1) % positionHistory
	r.n = min(r.n+1, positionHistory)
}

// TestStandbyLag: a standby's lag is the time since the primary's oldest
// position it has not replayed was seen; 0 where it replayed the newest.
func TestStandbyLag(t *testing.T) {
	r := testReplicas(1, time.Second)
	now := time.Now()
	if got := r.lag(100, now); got != 0 {
		t.Fatalf("no primary seen: lag %v, want 0", got)
	}
	r.sawPrimary(now.Add(-300*time.Millisecond), 100)
	r.sawPrimary(now.Add(-200*time.Millisecond), 200)
	r.sawPrimary(now.Add(-100*time.Millisecond), 300)
	for _, c := range []struct {
		replayed dialects.Position
		want     time.Duration
	}{{300, 0}, {350, 0}, {250, 100 * time.Millisecond}, {200, 100 * time.Millisecond}, {150, 200 * time.Millisecond}, {50, 300 * time.Millisecond}} {
		if got := r.lag(c.replayed, now); got != c.want {
			t.Errorf("replayed %d: lag %v, want %v", c.replayed, got, c.want)
		}
	}
	// Behind every position kept: at least the history's length.
	for i := range positionHistory {
		r.sawPrimary(now.Add(time.Duration(i)*time.Millisecond), dialects.Position(1000+i))
	}
	if got := r.lag(10, now.Add(positionHistory*time.Millisecond)); got < positionEvery*positionHistory {
		t.Errorf("behind all kept: lag %v, want at least %v", got, positionEvery*positionHistory)
	}
}

// TestStandbyServes: a standby serves a read while its last look is
// recent, it answered as a standby within the lag bound, and it replayed
// what the read must see; the task's last standby first, else in turn.
func TestStandbyServes(t *testing.T) {
	r := testReplicas(2, time.Second)
	now := time.Now()
	a, b := r.hosts[0], r.hosts[1]
	if h := r.source(0, nil); h != nil {
		t.Fatalf("never looked at: served by %s", h.host)
	}
	a.seen.Store(&standbySeen{at: now, up: true, replayed: 500})
	b.seen.Store(&standbySeen{at: now, up: true, replayed: 900})
	if h := r.source(600, nil); h != b {
		t.Fatalf("after 600: got %v, want b (a replayed 500)", h)
	}
	if h := r.source(100, a); h != a {
		t.Fatalf("the task's last standby serves: got %v", h)
	}
	if h := r.source(1000, nil); h != nil {
		t.Fatalf("after 1000: none replayed it, got %s", h.host)
	}
	b.seen.Store(&standbySeen{at: now, up: true, replayed: 900, lag: 2 * time.Second})
	a.seen.Store(&standbySeen{at: now.Add(-2 * time.Second), up: true, replayed: 900})
	if h := r.source(0, nil); h != nil {
		t.Fatalf("one lags, one's look is old: got %s", h.host)
	}
	a.seen.Store(&standbySeen{at: now})
	if h := r.source(0, nil); h != nil {
		t.Fatalf("down: got %s", h.host)
	}
	if got := r.onPrimary.Load(); got != 4 {
		t.Errorf("reads sent to the primary: %d, want 4", got)
	}
	if got := r.onStandby.Load(); got != 2 {
		t.Errorf("reads served by standbys: %d, want 2", got)
	}

	// A standby whose pool failed to connect serves again after
	// standbyRetry.
	a.seen.Store(&standbySeen{at: now, up: true, replayed: 900})
	a.c.dials.failures.Store(1)
	a.c.dials.lastAt.Store(now.UnixNano())
	if r.serves(a, 0, now) {
		t.Error("a standby that failed to connect just now serves")
	}
	if !r.serves(a, 0, now.Add(standbyRetry)) {
		t.Errorf("a standby that failed to connect %v ago does not serve", standbyRetry)
	}
}

// TestRouteSelects: with pool_reads=selects a statement the dialect
// proves only reads goes to a standby, outside a task and in one that
// wrote nothing unseen; without the proof, or for another operation, it
// goes to the primary.
func TestRouteSelects(t *testing.T) {
	r := testReplicas(1, time.Second)
	r.hosts[0].seen.Store(&standbySeen{at: time.Now(), up: true, replayed: 10})
	r.proves = func(q string) bool { return q == "SELECT 1" }
	bg := context.Background()
	if r.route(bg, nil, opStmt, false, false, "SELECT 1", nil) == nil {
		t.Error("a proven read went to the primary")
	}
	if r.route(bg, nil, opStmt, false, false, "SELECT f()", nil) != nil {
		t.Error("a statement not proven went to a standby")
	}
	if r.route(bg, nil, opBegin, false, false, "SELECT 1", nil) != nil {
		t.Error("a BeginTx went to a standby")
	}
	ctx, end := WithTask(bg)
	defer end()
	tk := taskFrom(ctx)
	if r.route(ctx, tk, opStmt, false, false, "SELECT 1", nil) == nil || tk.reads.wroteUnseen.Load() {
		t.Error("a task's proven read went to the primary, or counted as a write")
	}
	if r.route(ctx, tk, opExec, false, false, "UPDATE t SET a = 1", nil) != nil || !tk.reads.wroteUnseen.Load() {
		t.Fatal("a task's write went to a standby, or did not count")
	}
	if r.route(ctx, tk, opStmt, false, false, "SELECT 1", nil) != nil {
		t.Error("a proven read after a write of unknown position went to a standby")
	}
}

// TestRouteTask: a task's reads see its writes: a write outside a *sql.Tx
// sends its later reads to the primary; a commit's position, to standbys
// that replayed it; what it read once, it never reads behind.
func TestRouteTask(t *testing.T) {
	r := testReplicas(2, time.Second)
	now := time.Now()
	a, b := r.hosts[0], r.hosts[1]
	a.seen.Store(&standbySeen{at: now, up: true, replayed: 500})
	b.seen.Store(&standbySeen{at: now, up: true, replayed: 900})

	ctx, end := WithTask(ReadOnly(context.Background()))
	defer end()
	tk := taskFrom(ctx)
	h := r.route(ctx, tk, opStmt, false, false, "", nil)
	if h == nil {
		t.Fatal("a read-only task's read went to the primary")
	}
	if got := tk.readsAfter(); got != h.seen.Load().replayed {
		t.Errorf("after reading from %s the task reads after %v", h.host, got)
	}
	if r.route(ctx, tk, opStmt, false, false, "", nil) != h {
		t.Error("the task's next read left its standby while it could serve")
	}

	wctx, wend := WithTask(context.Background())
	defer wend()
	wt := taskFrom(wctx)
	if r.route(wctx, wt, opBegin, false, false, "", nil) != nil {
		t.Fatal("a read-write BeginTx went to a standby")
	}
	if wt.reads.wroteUnseen.Load() {
		t.Fatal("a BeginTx counted as a write outside a transaction")
	}
	wt.readAfter(800) // its commit
	if h := r.route(wctx, wt, opBegin, true, false, "", nil); h != b {
		t.Fatalf("a read-only *sql.Tx after a commit at 800: got %v, want b", h)
	}
	if r.route(wctx, wt, opExec, false, false, "", nil) != nil || !wt.reads.wroteUnseen.Load() {
		t.Fatal("a statement outside a transaction on the primary is a write whose position is unknown")
	}
	if h := r.route(wctx, wt, opBegin, true, false, "", nil); h != nil {
		t.Fatalf("after a write of unknown position: got %s, want the primary", h.host)
	}
}

// TestReadToken: a token is the task's position, and reads after it.
func TestReadToken(t *testing.T) {
	ctx, end := WithTask(context.Background())
	defer end()
	if tok := ReadToken(ctx); tok != "" {
		t.Fatalf("a task that wrote nothing: token %q", tok)
	}
	taskFrom(ctx).readAfter(0x1_0000_00AB)
	tok := ReadToken(ctx)
	if tok != "1/AB" {
		t.Fatalf("token %q, want 1/AB", tok)
	}
	next, err := WithReadToken(context.Background(), tok)
	if err != nil {
		t.Fatal(err)
	}
	if got := readMarkFrom(next).after; got != 0x1_0000_00AB {
		t.Fatalf("WithReadToken: after %v", got)
	}
	nctx, nend := WithTask(next)
	defer nend()
	if got := taskFrom(nctx).readsAfter(); got != 0x1_0000_00AB {
		t.Fatalf("a task from the token's context reads after %v", got)
	}
	if ReadToken(nctx) != tok {
		t.Fatal("the token is not passed on")
	}
	for _, bad := range []string{"x", "1/", "/1", "g/1", "123456789/1"} {
		if _, err := WithReadToken(context.Background(), bad); err == nil || !strings.Contains(err.Error(), "WithReadToken") {
			t.Errorf("token %q: %v", bad, err)
		}
	}
}

// TestReadsNeedStandbys: pool_reads=standby with a dialect or DSN that
// has no standbys is an error that says so.
func TestReadsNeedStandbys(t *testing.T) {
	c := New(fakeDSN(t, "pool_reads=standby"))
	if err := c.Err(); err == nil || !strings.Contains(err.Error(), "pool_reads=standby") {
		t.Fatalf("got %v", err)
	}
}
