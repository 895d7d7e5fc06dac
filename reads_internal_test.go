package pooldriver

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/pooldriver/pooldriver/dialects"
	"github.com/pooldriver/pooldriver/internal/phys"
	"github.com/pooldriver/pooldriver/pool"
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
	if h := r.source(context.Background(), 0, nil, nil, 0); h != nil {
		t.Fatalf("never looked at: served by %s", h.host)
	}
	a.seen.Store(&standbySeen{at: now, up: true, replayed: 500})
	b.seen.Store(&standbySeen{at: now, up: true, replayed: 900})
	if h := r.source(context.Background(), 600, nil, nil, 0); h != b {
		t.Fatalf("after 600: got %v, want b (a replayed 500)", h)
	}
	if h := r.source(context.Background(), 100, a, nil, 0); h != a {
		t.Fatalf("the task's last standby serves: got %v", h)
	}
	if h := r.source(context.Background(), 1000, nil, nil, 0); h != nil {
		t.Fatalf("after 1000: none replayed it, got %s", h.host)
	}
	b.seen.Store(&standbySeen{at: now, up: true, replayed: 900, lag: 2 * time.Second})
	a.seen.Store(&standbySeen{at: now.Add(-2 * time.Second), up: true, replayed: 900})
	if h := r.source(context.Background(), 0, nil, nil, 0); h != nil {
		t.Fatalf("one lags, one's look is old: got %s", h.host)
	}
	a.seen.Store(&standbySeen{at: now})
	if h := r.source(context.Background(), 0, nil, nil, 0); h != nil {
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
	if r.serves(a, 0, 0, now) {
		t.Error("a standby that failed to connect just now serves")
	}
	if !r.serves(a, 0, 0, now.Add(standbyRetry)) {
		t.Errorf("a standby that failed to connect %v ago does not serve", standbyRetry)
	}
}

// TestOwnStandbyStays: a late look (older than the lag bound, up to
// twice it) does not send a task's read from the standby it read
// from last to the primary, which may not show yet a commit the standby
// showed; another standby, a look too old, a lag past the bound, a
// position not replayed or a standby down does.
func TestOwnStandbyStays(t *testing.T) {
	r := testReplicas(2, 100*time.Millisecond)
	now := time.Now()
	a, b := r.hosts[0], r.hosts[1]
	late := now.Add(-150 * time.Millisecond)
	a.seen.Store(&standbySeen{at: late, up: true, replayed: 500, lag: 50 * time.Millisecond})
	b.seen.Store(&standbySeen{at: late, up: true, replayed: 500})
	if h := r.source(context.Background(), 400, a, a, 0); h != a {
		t.Fatalf("own standby, late look: got %v, want a", h)
	}
	if h := r.source(context.Background(), 400, a, nil, 0); h != nil {
		t.Fatalf("the parked connection's standby, late look: got %s, want the primary", h.host)
	}
	if h := r.source(context.Background(), 400, nil, b, 0); h != b {
		t.Fatalf("own standby b, late look: got %v, want b", h)
	}
	for _, c := range []struct {
		name  string
		seen  standbySeen
		after dialects.Position
	}{
		{"look older than twice the bound", standbySeen{at: now.Add(-250 * time.Millisecond), up: true, replayed: 500}, 400},
		{"lag past the bound", standbySeen{at: late, up: true, replayed: 500, lag: 200 * time.Millisecond}, 400},
		{"not replayed", standbySeen{at: late, up: true, replayed: 500}, 600},
		{"down", standbySeen{at: late, replayed: 500}, 400},
	} {
		a.seen.Store(&c.seen)
		if h := r.source(context.Background(), c.after, a, a, 0); h != nil {
			t.Errorf("%s: got %s, want the primary", c.name, h.host)
		}
	}
}

// TestRouteSelects: with pool_reads=selects a statement the dialect
// proves only reads goes to a standby, outside a task and in one that
// wrote nothing unseen; without the proof, or for another operation, it
// goes to the primary.
func TestRouteSelects(t *testing.T) {
	r := testReplicas(1, time.Second)
	r.hosts[0].seen.Store(&standbySeen{at: time.Now(), up: true, replayed: 10})
	r.prover, r.selects = testProver{reads: "SELECT 1", differs: "SELECT * FROM unlogged_t"}, true
	bg := context.Background()
	if routeTo(r, bg, nil, opStmt, false, false, "SELECT 1", nil) == nil {
		t.Error("a proven read went to the primary")
	}
	if routeTo(r, bg, nil, opStmt, false, false, "SELECT f()", nil) != nil {
		t.Error("a statement not proven went to a standby")
	}
	if routeTo(r, bg, nil, opBegin, false, false, "SELECT 1", nil) != nil {
		t.Error("a BeginTx went to a standby")
	}
	ctx, end := WithTask(bg)
	defer end()
	tk := taskFrom(ctx)
	if routeTo(r, ctx, tk, opStmt, false, false, "SELECT 1", nil) == nil || tk.wroteUnseen() {
		t.Error("a task's proven read went to the primary, or counted as a write")
	}
	if routeTo(r, ctx, tk, opExec, false, false, "UPDATE t SET a = 1", nil) != nil || !tk.wroteUnseen() {
		t.Fatal("a task's write went to a standby, or did not count")
	}
	if routeTo(r, ctx, tk, opStmt, false, false, "SELECT 1", nil) != nil {
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
	h := routeTo(r, ctx, tk, opStmt, false, false, "", nil)
	if h == nil {
		t.Fatal("a read-only task's read went to the primary")
	}
	if got := tk.readsAfter(); got != h.seen.Load().replayed {
		t.Errorf("after reading from %s the task reads after %v", h.host, got)
	}
	if routeTo(r, ctx, tk, opStmt, false, false, "", nil) != h {
		t.Error("the task's next read left its standby while it could serve")
	}

	wctx, wend := WithTask(context.Background())
	defer wend()
	wt := taskFrom(wctx)
	if routeTo(r, wctx, wt, opBegin, false, false, "", nil) != nil {
		t.Fatal("a read-write BeginTx went to a standby")
	}
	if wt.wroteUnseen() {
		t.Fatal("a BeginTx counted as a write outside a transaction")
	}
	wt.readAfter(800) // its commit
	if h := routeTo(r, wctx, wt, opBegin, true, false, "", nil); h != b {
		t.Fatalf("a read-only *sql.Tx after a commit at 800: got %v, want b", h)
	}
	if routeTo(r, wctx, wt, opExec, false, false, "", nil) != nil || !wt.wroteUnseen() {
		t.Fatal("a statement outside a transaction on the primary is a write whose position is unknown")
	}
	if h := routeTo(r, wctx, wt, opBegin, true, false, "", nil); h != nil {
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

// testProver proves one statement a read, and finds in one other what a
// standby answers differently.
type testProver struct{ reads, differs string }

func (p testProver) ReadsOnly(q string) bool      { return q == p.reads }
func (p testProver) StandbyDiffers(q string) bool { return q == p.differs }

// TestRouteReadOnlyDiffers: a statement its caller says only reads goes
// to the primary where the dialect finds in it what a standby answers
// differently; any other goes to a standby.
func TestRouteReadOnlyDiffers(t *testing.T) {
	r := testReplicas(1, time.Second)
	r.hosts[0].seen.Store(&standbySeen{at: time.Now(), up: true, replayed: 10})
	r.prover = testProver{differs: "SELECT * FROM unlogged_t"}
	ro := ReadOnly(context.Background())
	if routeTo(r, ro, nil, opStmt, false, false, "SELECT * FROM t", nil) == nil {
		t.Error("a ReadOnly read went to the primary")
	}
	if routeTo(r, ro, nil, opStmt, false, false, "SELECT * FROM unlogged_t", nil) != nil {
		t.Error("a ReadOnly read of what a standby answers differently went to a standby")
	}
	ctx, end := WithTask(ro)
	defer end()
	if routeTo(r, ctx, taskFrom(ctx), opStmt, false, false, "SELECT * FROM unlogged_t", nil) != nil {
		t.Error("a read-only task's read of what a standby answers differently went to a standby")
	}
}

// TestRouteNestedTask: a task started inside a task reads after all its
// parent wrote and read, and its parent after all it did.
func TestRouteNestedTask(t *testing.T) {
	r := testReplicas(2, time.Second)
	now := time.Now()
	a, b := r.hosts[0], r.hosts[1]
	a.seen.Store(&standbySeen{at: now, up: true, replayed: 500})
	b.seen.Store(&standbySeen{at: now, up: true, replayed: 900})

	pctx, pend := WithTask(context.Background())
	defer pend()
	parent := taskFrom(pctx)
	parent.readAfter(800) // the request's commit
	cctx, cend := WithTask(ReadOnly(pctx))
	child := taskFrom(cctx)
	if got := child.readsAfter(); got != 800 {
		t.Fatalf("the child task reads after %v, want its parent's 800", got)
	}
	if h := routeTo(r, cctx, child, opStmt, false, false, "", nil); h != b {
		t.Fatalf("the child's read after its parent's commit at 800: got %v, want b", h)
	}
	cend()

	// A write of the child's whose position nothing tells sends the
	// parent's reads, and a sibling's, to the primary.
	cctx, cend = WithTask(pctx)
	routeTo(r, cctx, taskFrom(cctx), opExec, false, false, "UPDATE t SET a = 1", nil)
	cend()
	if !parent.wroteUnseen() {
		t.Fatal("the child's unseen write is not its parent's")
	}
	sctx, send := WithTask(ReadOnly(pctx))
	defer send()
	if h := routeTo(r, sctx, taskFrom(sctx), opStmt, false, false, "", nil); h != nil {
		t.Fatalf("a sibling's read after the child's unseen write went to %s", h.host)
	}
}

// TestReadTokenUnreadable: where the primary's position cannot be read
// after a write whose position nothing told, the token sends the next
// request's reads to the primary; it is never "" then.
func TestReadTokenUnreadable(t *testing.T) {
	r := testReplicas(1, time.Second)
	r.hosts[0].seen.Store(&standbySeen{at: time.Now(), up: true, replayed: 1 << 40})
	r.c = &Connector{closed: make(chan struct{})}
	r.c.closing.Store(true) // its look's connection is closed: no position
	ctx, end := WithTask(context.Background())
	defer end()
	routeTo(r, ctx, taskFrom(ctx), opExec, false, false, "INSERT INTO t VALUES (1)", nil)
	tok := ReadToken(ctx)
	if tok == "" {
		t.Fatal("a task that wrote: empty token")
	}
	next, err := WithReadToken(context.Background(), tok)
	if err != nil {
		t.Fatal(err)
	}
	if h := routeTo(r, ReadOnly(next), nil, opStmt, false, false, "", nil); h != nil {
		t.Fatalf("a read with the token went to %s, not the primary", h.host)
	}
}

// routeTo is route's standby alone.
func routeTo(r *replicas, ctx context.Context, t *task, k opKind, readTx, primary bool, query string, parked *pool.Resource[*phys.Conn]) *standby {
	h, _ := r.route(ctx, t, k, readTx, primary, query, parked)
	return h
}

// TestRouteMonotonic: after a task's read, its next read goes where the
// last one did until a look begun after it ended tells how far that
// server was; from then on that is the task's floor.
func TestRouteMonotonic(t *testing.T) {
	r := testReplicas(2, time.Second)
	a, b := r.hosts[0], r.hosts[1]
	old := time.Now().Add(-time.Second)
	a.seen.Store(&standbySeen{started: old, at: old, up: true, replayed: 500})
	b.seen.Store(&standbySeen{started: old, at: old, up: true, replayed: 900})
	r.seen[0], r.next, r.n = sample{started: old, at: old, pos: 900}, 1, 1

	ctx, end := WithTask(ReadOnly(context.Background()))
	defer end()
	tk := taskFrom(ctx)
	tk.readAfter(1000) // no standby has it: the primary serves
	if h, read := r.route(ctx, tk, opStmt, false, false, "", nil); h != nil || !read {
		t.Fatalf("got %v (read %v), want the primary's read", h, read)
	}
	tk.reads.after.Store(0) // as if the floor were older than what the primary served
	tk.readEnded(nil)
	if h := routeTo(r, ctx, tk, opStmt, false, false, "", nil); h != nil {
		t.Fatalf("before a look tells what the primary's read saw: got %s, want the primary", h.host)
	}
	now := time.Now().Add(time.Millisecond)
	r.sawPrimary(now, 950) // a look begun after the read ended
	r.seen[(r.next-1+positionHistory)%positionHistory].started = now
	if h := routeTo(r, ctx, tk, opStmt, false, false, "", nil); h != nil {
		t.Fatalf("standbys at 500 and 900 after the primary's read saw 950: got %s", h.host)
	}
	if got := tk.readsAfter(); got != 950 {
		t.Fatalf("the floor is %v, want 950", got)
	}

	// Between standbys: what a read on b saw is b's position at a look
	// begun after it, not at the look before.
	ctx2, end2 := WithTask(ReadOnly(context.Background()))
	defer end2()
	t2 := taskFrom(ctx2)
	b.seen.Store(&standbySeen{started: now.Add(-10 * time.Millisecond), at: now, up: true, replayed: 900})
	t2.readEnded(b)
	a.seen.Store(&standbySeen{started: now, at: now, up: true, replayed: 2000})
	if h := routeTo(r, ctx2, t2, opStmt, false, false, "", nil); h != b {
		t.Fatalf("before a look at b tells what the read saw: got %v, want b", h)
	}
	t2.reads.ended.Store(&readEnd{on: b, at: now})
	b.seen.Store(&standbySeen{started: now.Add(time.Millisecond), at: now, up: true, replayed: 1500})
	if h := routeTo(r, ctx2, t2, opStmt, false, false, "", nil); h == nil || t2.readsAfter() != 1500 {
		t.Fatalf("after b's look: got %v, floor %v, want a standby and 1500", h, t2.readsAfter())
	}
	b.seen.Store(&standbySeen{started: now, at: now, up: false})
	t2.readEnded(b)
	if h := routeTo(r, ctx2, t2, opStmt, false, false, "", nil); h != nil {
		t.Fatalf("b down before a look told what the read saw: got %s, want the primary", h.host)
	}
}

// TestReadWait: a read whose position no standby was seen at waits for a
// standby close behind, whose look it kicks, and takes it once a look
// sees the position; a standby further behind than pool_read_wait is not
// kicked, and the primary serves the read.
func TestReadWait(t *testing.T) {
	r := testReplicas(2, time.Second)
	r.readWait = time.Minute // the test's looks answer; nothing waits this long
	near, far := r.hosts[0], r.hosts[1]
	now := time.Now()
	near.kick, far.kick = make(chan struct{}, 1), make(chan struct{}, 1)
	near.seen.Store(&standbySeen{started: now, at: now, up: true, replayed: 500})
	far.seen.Store(&standbySeen{started: now, at: now, up: true, replayed: 900, lag: 2 * time.Minute})
	r.maxLag = time.Hour
	done := make(chan struct{})
	go func() { // near's look loop
		defer close(done)
		<-near.kick
		at := time.Now()
		near.seen.Store(&standbySeen{started: at, at: at, up: true, replayed: 1000})
		r.waits.looked()
	}()
	if h := r.source(context.Background(), 1000, nil, nil, 0); h != near {
		t.Fatalf("got %v, want the standby close behind once its look saw 1000", h)
	}
	<-done
	select {
	case <-far.kick:
		t.Fatal("a standby further behind than pool_read_wait was kicked")
	default:
	}

	// None close behind: no wait, the primary.
	near.seen.Store(&standbySeen{started: now, at: time.Now(), up: true, replayed: 500, lag: 2 * time.Minute})
	if h := r.source(context.Background(), 1000, nil, nil, 0); h != nil {
		t.Fatalf("got %s, want the primary", h.host)
	}
	// The caller's context ends the wait.
	near.seen.Store(&standbySeen{started: now, at: time.Now(), up: true, replayed: 500})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if h := r.source(ctx, 1000, nil, nil, 0); h != nil {
		t.Fatalf("a cancelled read waited and got %s", h.host)
	}
}

// TestWithMaxLag: a context's lag budget replaces pool_max_replica_lag
// for its reads; a budget that is not positive is an error.
func TestWithMaxLag(t *testing.T) {
	r := testReplicas(1, 50*time.Millisecond)
	now := time.Now()
	r.hosts[0].seen.Store(&standbySeen{started: now, at: now, up: true, replayed: 10, lag: time.Second})
	ro := ReadOnly(context.Background())
	if routeTo(r, ro, nil, opStmt, false, false, "", nil) != nil {
		t.Fatal("a standby 1s behind served a read with a 50ms bound")
	}
	loose, err := WithMaxLag(ro, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if routeTo(r, loose, nil, opStmt, false, false, "", nil) == nil {
		t.Fatal("a read with a 5s budget did not go to a standby 1s behind")
	}
	for _, d := range []time.Duration{0, -time.Second} {
		if _, err := WithMaxLag(ro, d); err == nil || !strings.Contains(err.Error(), "WithMaxLag") {
			t.Errorf("WithMaxLag(%v): %v", d, err)
		}
	}
}

// TestReadTokenCoversReads: a token covers what the task's reads saw: a
// look begun after its last read tells that server's position, which the
// token carries; before one has, ReadToken waits for one (here none
// comes within its second: a token no standby reaches).
func TestReadTokenCoversReads(t *testing.T) {
	r := testReplicas(1, time.Second)
	r.c = &Connector{closed: make(chan struct{})}
	r.c.closing.Store(true) // the primary's position cannot be read
	ctx, end := WithTask(ReadOnly(context.Background()))
	defer end()
	tk := taskFrom(ctx)
	routeTo(r, ctx, tk, opStmt, false, false, "", nil) // the primary: no standby is up
	tk.readEnded(nil)
	if tok := ReadToken(ctx); tok != unreachedPosition.String() {
		t.Fatalf("before a look: token %q, want %q", tok, unreachedPosition.String())
	}
	later := time.Now().Add(time.Millisecond)
	r.sawPrimary(later, 0x1_0000_0042)
	r.seen[(r.next-1+positionHistory)%positionHistory].started = later
	if tok := ReadToken(ctx); tok != "1/42" {
		t.Fatalf("after a look: token %q, want 1/42", tok)
	}
}
