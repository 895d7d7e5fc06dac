package pool

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"
)

// TestNextWaiter: the resource goes to the oldest waiter whose context ended
// (to tell it), else the oldest with time left to use it, else the one with
// the most time left; a waiter without a deadline is never passed over.
func TestNextWaiter(t *testing.T) {
	const hold = time.Millisecond // margin: useMargin ms
	const now = time.Second
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	type w struct {
		left  time.Duration // time to its deadline; -1: none
		ended bool
	}
	for _, tc := range []struct {
		name    string
		waiters []w
		want    int // index, -1: nil
	}{
		{"empty", nil, -1},
		{"no deadline is served first", []w{{left: -1}, {left: time.Hour}}, 0},
		{"FIFO among usable", []w{{left: time.Second}, {left: time.Hour}}, 0},
		{"too little time left is passed over", []w{{left: 2 * hold}, {left: time.Second}}, 1},
		{"no deadline after one passed over", []w{{left: hold}, {left: -1}}, 1},
		{"ended is told first", []w{{left: hold}, {ended: true, left: -1}, {left: time.Second}}, 1},
		{"usable before a later ended one", []w{{left: time.Second}, {ended: true, left: -1}}, 0},
		{"none usable: most time left", []w{{left: hold}, {left: 3 * hold}, {left: 2 * hold}}, 1},
		{"past deadline, none usable", []w{{left: -hold}, {left: -2 * hold}}, 0},
		{"exactly the margin is usable", []w{{left: useMargin * hold}}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &Pool[int]{}
			p.holds.avg = hold
			var ws []*waiter[int]
			for _, spec := range tc.waiters {
				x := &waiter[int]{ctx: context.Background(), deadline: noDeadline}
				if spec.left != -1 {
					x.deadline = now + spec.left
				}
				if spec.ended {
					x.ctx = ended
				}
				p.waiters.pushBack(x)
				ws = append(ws, x)
			}
			got := p.nextWaiterLocked(now)
			if tc.want == -1 {
				if got != nil {
					t.Fatalf("got a waiter, want none")
				}
				return
			}
			if got != ws[tc.want] {
				for i, x := range ws {
					if x == got {
						t.Fatalf("got waiter %d, want %d", i, tc.want)
					}
				}
				t.Fatalf("got %v, want waiter %d", got, tc.want)
			}
		})
	}
}

// TestHoldTimeIgnoresLongHolds: one long hold (a session kept for minutes)
// moves the average by at most maxHoldSample/8.
func TestHoldTimeIgnoresLongHolds(t *testing.T) {
	var h holdTime
	for range 50 {
		h.observe(time.Millisecond)
	}
	h.observe(10 * time.Minute)
	if limit := time.Millisecond + maxHoldSample/8; h.avg > limit {
		t.Fatalf("average %v after one long hold, want ≤ %v", h.avg, limit)
	}
}

// TestReleasePassesOverWaiterOutOfTime: through Acquire and Release, a
// waiter whose deadline is nearer than the margin waits while a later one
// with time is served; it is served once nobody else waits.
func TestReleasePassesOverWaiterOutOfTime(t *testing.T) {
	checkNoGoroutineLeak(t)
	var b backend
	cfg := b.config()
	cfg.Max = 1
	p := newPool(t, cfg)
	r := mustAcquire(t, p)
	p.mu.Lock()
	p.holds.avg = time.Minute // margin: useMargin minutes
	p.mu.Unlock()

	type got struct {
		r   *Resource[*item]
		err error
	}
	acquire := func(ctx context.Context) chan got {
		ch := make(chan got, 1)
		go func() {
			r, err := p.Acquire(ctx)
			ch <- got{r, err}
		}()
		return ch
	}
	short, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	first := acquire(short)
	waitFor(t, "the short waiter queued", func() bool { return p.Stats().Waiting == 1 })
	second := acquire(context.Background())
	waitFor(t, "the second waiter queued", func() bool { return p.Stats().Waiting == 2 })

	r.Release()
	g := <-second
	if g.err != nil {
		t.Fatal(g.err)
	}
	select {
	case g := <-first:
		t.Fatalf("the waiter out of time was served first (%v)", g.err)
	default:
	}
	g.r.Release()
	if g := <-first; g.err != nil || g.r == nil {
		t.Fatalf("the waiter out of time, alone: %v", g.err)
	} else {
		g.r.Release()
	}
}

// TestEachWaiterTimesOutOnItsOwnClock: with one timer for the pool, each
// waiter still waits its whole AcquireTimeout (not less because an older
// one's timeout fired) and then fails, and the timer serves later waits
// after it has gone quiet. On the bubble's clock: the second waiter queues
// half a timeout after the first, however busy the machine (synctest.Test
// also fails the test if a goroutine of the pool outlives it).
func TestEachWaiterTimesOutOnItsOwnClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var b backend
		cfg := b.config()
		cfg.Max = 1
		cfg.AcquireTimeout = 300 * time.Millisecond
		p := newPool(t, cfg)
		r := mustAcquire(t, p)
		defer r.Release()

		type outcome struct {
			waited time.Duration
			err    error
		}
		start := func() chan outcome {
			ch := make(chan outcome, 1)
			go func() {
				t0 := time.Now()
				_, err := p.Acquire(context.Background())
				ch <- outcome{time.Since(t0), err}
			}()
			return ch
		}
		first := start()
		synctest.Wait()
		if n := p.Stats().Waiting; n != 1 {
			t.Fatalf("%d waiting, want the first waiter queued", n)
		}
		time.Sleep(cfg.AcquireTimeout / 2)
		second := start()
		synctest.Wait()
		if n := p.Stats().Waiting; n != 2 {
			t.Fatalf("%d waiting, want the second waiter queued", n)
		}
		for i, ch := range []chan outcome{first, second} {
			o := <-ch
			if !errors.Is(o.err, ErrTimeout) {
				t.Fatalf("waiter %d: %v, want ErrTimeout", i, o.err)
			}
			if o.waited < cfg.AcquireTimeout {
				t.Fatalf("waiter %d timed out after %v, before its AcquireTimeout %v", i, o.waited, cfg.AcquireTimeout)
			}
		}
		if s := p.Stats(); s.Timeouts != 2 || s.Waiting != 0 {
			t.Fatalf("stats: %+v", s)
		}
		// The timer is re-armed for a later wait after it has gone quiet.
		if _, err := p.Acquire(context.Background()); !errors.Is(err, ErrTimeout) {
			t.Fatalf("a later wait: %v, want ErrTimeout", err)
		}
	})
}

// TestWaitListClasses: waiters of work begun come before those of new
// work, each class in arrival order; one put back (pushFront) is first of
// its own class only; a waiter leaving from anywhere keeps both classes
// in order, and a later one still joins its class.
func TestWaitListClasses(t *testing.T) {
	type op struct {
		push   string // "b", "n": pushBack begun / new; "B", "N": pushFront; "": remove
		remove int    // with push "": the index (in push order) of the waiter to remove
	}
	for _, tc := range []struct {
		name string
		ops  []op
		want []int // indexes in push order, head first
	}{
		{"new only: FIFO", []op{{push: "n"}, {push: "n"}, {push: "n"}}, []int{0, 1, 2}},
		{"begun only: FIFO", []op{{push: "b"}, {push: "b"}}, []int{0, 1}},
		{"begun goes before new", []op{{push: "n"}, {push: "b"}, {push: "n"}, {push: "b"}}, []int{1, 3, 0, 2}},
		{"new put back: first of new only", []op{{push: "b"}, {push: "n"}, {push: "N"}}, []int{0, 2, 1}},
		{"begun put back: first of all", []op{{push: "b"}, {push: "n"}, {push: "B"}}, []int{2, 0, 1}},
		{"begun put back into an empty class", []op{{push: "n"}, {push: "B"}, {push: "b"}}, []int{1, 2, 0}},
		{"the last begun leaves", []op{{push: "b"}, {push: "b"}, {push: "n"}, {remove: 1}, {push: "b"}}, []int{0, 4, 2}},
		{"every begun leaves", []op{{push: "b"}, {push: "n"}, {remove: 0}, {push: "b"}, {push: "n"}}, []int{3, 1, 4}},
		{"the tail leaves", []op{{push: "n"}, {push: "b"}, {remove: 0}, {push: "n"}}, []int{1, 3}},
		{"the only waiter leaves", []op{{push: "b"}, {remove: 0}, {push: "n"}, {push: "b"}}, []int{3, 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var l waitList[int]
			var ws []*waiter[int]
			for _, o := range tc.ops {
				switch o.push {
				case "":
					l.remove(ws[o.remove])
					ws = append(ws, nil)
					continue
				case "b", "n":
					w := &waiter[int]{begun: o.push == "b"}
					l.pushBack(w)
					ws = append(ws, w)
				case "B", "N":
					w := &waiter[int]{begun: o.push == "B"}
					l.pushFront(w)
					ws = append(ws, w)
				}
			}
			var got []int
			var prev *waiter[int]
			for w := l.head; w != nil; w = w.next {
				if w.prev != prev {
					t.Fatalf("broken back link at waiter %d", index(ws, w))
				}
				got = append(got, index(ws, w))
				prev = w
			}
			if l.tail != prev {
				t.Fatalf("tail is not the last waiter")
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) || l.len() != len(tc.want) {
				t.Fatalf("order %v (len %d), want %v", got, l.len(), tc.want)
			}
		})
	}
}

func index(ws []*waiter[int], w *waiter[int]) int {
	for i, x := range ws {
		if x == w {
			return i
		}
	}
	return -1
}

// TestReleaseServesBegunWorkFirst: through Acquire and Release, a waiter
// of work begun (Config.Begun) is served before older waiters of new
// work, and those in their turn after it.
func TestReleaseServesBegunWorkFirst(t *testing.T) {
	checkNoGoroutineLeak(t)
	type begunKey struct{}
	var b backend
	cfg := b.config()
	cfg.Max = 1
	cfg.Begun = func(ctx context.Context) bool { return ctx.Value(begunKey{}) != nil }
	p := newPool(t, cfg)
	r := mustAcquire(t, p)

	served := make(chan string, 3)
	acquire := func(name string, ctx context.Context) {
		go func() {
			r, err := p.Acquire(ctx)
			if err != nil {
				served <- name + ": " + err.Error()
				return
			}
			served <- name
			r.Release()
		}()
	}
	acquire("new 1", context.Background())
	waitFor(t, "new 1 queued", func() bool { return p.Stats().Waiting == 1 })
	acquire("new 2", context.Background())
	waitFor(t, "new 2 queued", func() bool { return p.Stats().Waiting == 2 })
	acquire("begun", context.WithValue(context.Background(), begunKey{}, true))
	waitFor(t, "begun queued", func() bool { return p.Stats().Waiting == 3 })
	r.Release()
	var got []string
	for range 3 {
		got = append(got, <-served)
	}
	if want := "[begun new 1 new 2]"; fmt.Sprint(got) != want {
		t.Fatalf("served %v, want %s", got, want)
	}
}
