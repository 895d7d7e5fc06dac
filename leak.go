package pooldriver

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pooldriver/pooldriver/internal/logline"
	"github.com/pooldriver/pooldriver/internal/phys"
)

// Leak detection (HikariCP's leakDetectionThreshold): a physical connection
// kept out of the pool longer than the threshold, by a hold (a *sql.Conn, a
// *sql.Tx, rows nobody closes) or by a task, is logged once at WARN with
// the stack of the code that took it, and counted in Stats.Leaks. Off by
// default; when off, nothing of it runs. When on, each acquire records the
// time and the caller's program counters (no allocation, no symbols); one
// background goroutine looks for connections out too long.

// leakDetector watches the physical connections of one Connector.
type leakDetector struct {
	log       *slog.Logger  // the Connector's; nil: nothing is logged
	count     *atomic.Int64 // the Connector's count of leaks, for Stats
	threshold time.Duration
	epoch     time.Time
	done      chan struct{}
	wg        sync.WaitGroup
	conns     sync.Map // *phys.Conn → *leakMark: the Connector's open connections
}

// leakStackDepth bounds the frames recorded per acquire.
const leakStackDepth = 32

// leakMark is the detector's record of one physical connection.
type leakMark struct {
	takenAt atomic.Int64 // on the detector's clock, plus 1; 0: in the pool

	mu       sync.Mutex // protects the fields below
	reported bool       // this acquisition was reported
	n        int
	pcs      [leakStackDepth]uintptr
}

// taken records the stack of whoever took the connection from the pool,
// from skip frames above taken's caller, as not reported yet.
func (m *leakMark) taken(skip int, at int64) {
	m.mu.Lock()
	m.n = runtime.Callers(skip+2, m.pcs[:])
	m.reported = false
	m.mu.Unlock()
	m.takenAt.Store(at)
}

// returned records that the connection is going back to the pool (or
// being closed): it returns when it was taken (0: not recorded) and
// whether that acquisition was reported.
func (m *leakMark) returned() (at int64, reported bool) {
	at = m.takenAt.Swap(0)
	m.mu.Lock()
	reported = m.reported
	m.reported = false
	m.mu.Unlock()
	return at, reported
}

// report marks the acquisition taken at at as reported, where it is still
// the connection's and was not reported yet, and copies its stack into
// pcs: it returns the number of frames copied, or false.
func (m *leakMark) report(at int64, pcs *[leakStackDepth]uintptr) (int, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.reported || m.takenAt.Load() != at {
		return 0, false
	}
	m.reported = true
	return copy(pcs[:], m.pcs[:m.n]), true
}

func newLeakDetector(log *slog.Logger, count *atomic.Int64, threshold time.Duration) *leakDetector {
	d := &leakDetector{log: log, count: count, threshold: threshold, epoch: time.Now(), done: make(chan struct{})}
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		d.run()
	}()
	return d
}

// stop ends the background goroutine and waits for it.
func (d *leakDetector) stop() {
	select {
	case <-d.done:
	default:
		close(d.done)
	}
	d.wg.Wait()
}

// add starts watching pc, a new connection.
func (d *leakDetector) add(pc *phys.Conn) { d.conns.Store(pc, &leakMark{}) }

// remove stops watching pc, which is being closed.
func (d *leakDetector) remove(pc *phys.Conn) { d.conns.Delete(pc) }

// mark is pc's record, or nil when pc is not watched (opened before
// the detector, or closed).
func (d *leakDetector) mark(pc *phys.Conn) *leakMark {
	m, _ := d.conns.Load(pc)
	lm, _ := m.(*leakMark)
	return lm
}

// taken records that pc left the pool, and who took it.
func (d *leakDetector) taken(pc *phys.Conn) {
	if m := d.mark(pc); m != nil {
		m.taken(2, int64(time.Since(d.epoch))+1) // from the caller of Connector.acquire
	}
}

// returned records that pc is going back to the pool (or being closed).
func (d *leakDetector) returned(pc *phys.Conn) {
	m := d.mark(pc)
	if m == nil {
		return
	}
	at, reported := m.returned()
	if reported && at > 0 {
		held := time.Since(d.epoch) - time.Duration(at-1)
		logline.At(context.Background(), d.log, slog.LevelInfo, "a connection reported as leaked came back", nil, "held", held.Round(time.Millisecond))
	}
}

func (d *leakDetector) run() {
	period := min(max(d.threshold/4, time.Millisecond), time.Second)
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-d.done:
			return
		case <-t.C:
		}
		now := time.Since(d.epoch)
		d.conns.Range(func(_, m any) bool {
			d.check(m.(*leakMark), now)
			return true
		})
	}
}

// check reports the connection of m if it has been out of the pool longer
// than the threshold and was not reported yet.
func (d *leakDetector) check(m *leakMark, now time.Duration) {
	at := m.takenAt.Load()
	if at == 0 || now-time.Duration(at-1) < d.threshold {
		return
	}
	var pcs [leakStackDepth]uintptr
	n, ok := m.report(at, &pcs)
	if !ok {
		return
	}
	// Counted before it is logged: whoever reads the line finds it counted.
	d.count.Add(1)
	logline.At(context.Background(), d.log, slog.LevelWarn, "connection held longer than the leak detection threshold; it was taken by", nil,
		"held", (now - time.Duration(at-1)).Round(time.Millisecond), "threshold", d.threshold, "stack", formatStack(pcs[:n]))
}

// formatStack formats the frames of pcs, leaving out pooldriver's own and
// database/sql's at the top: the first line is the code that took the
// connection.
func formatStack(pcs []uintptr) string {
	var b strings.Builder
	frames := runtime.CallersFrames(pcs)
	top := true
	for {
		f, more := frames.Next()
		if top && (strings.HasPrefix(f.Function, "github.com/pooldriver/pooldriver.") || strings.HasPrefix(f.Function, "database/sql.")) {
			if !more {
				break
			}
			continue
		}
		top = false
		fmt.Fprintf(&b, "%s\n\t%s:%d\n", f.Function, f.File, f.Line)
		if !more {
			break
		}
	}
	return strings.TrimSuffix(b.String(), "\n")
}
