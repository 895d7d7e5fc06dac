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

	mu    sync.Mutex // protects conns
	conns map[*phys.Conn]struct{}
}

func newLeakDetector(log *slog.Logger, count *atomic.Int64, threshold time.Duration) *leakDetector {
	d := &leakDetector{log: log, count: count, threshold: threshold, epoch: time.Now(), done: make(chan struct{}), conns: map[*phys.Conn]struct{}{}}
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

func (d *leakDetector) add(pc *phys.Conn) {
	d.mu.Lock()
	d.conns[pc] = struct{}{}
	d.mu.Unlock()
}

func (d *leakDetector) remove(pc *phys.Conn) {
	d.mu.Lock()
	delete(d.conns, pc)
	d.mu.Unlock()
}

// taken records that pc left the pool, and who took it.
func (d *leakDetector) taken(pc *phys.Conn) {
	pc.Leak.Taken(2, int64(time.Since(d.epoch))+1) // from the caller of Connector.acquire
}

// returned records that pc is going back to the pool (or being closed).
func (d *leakDetector) returned(pc *phys.Conn) {
	at, reported := pc.Leak.Returned()
	if reported && at > 0 {
		held := time.Since(d.epoch) - time.Duration(at-1)
		phys.LogAt(context.Background(), d.log, slog.LevelInfo, "a connection reported as leaked came back", nil, "held", held.Round(time.Millisecond))
	}
}

func (d *leakDetector) run() {
	period := min(max(d.threshold/4, time.Millisecond), time.Second)
	t := time.NewTicker(period)
	defer t.Stop()
	var conns []*phys.Conn
	for {
		select {
		case <-d.done:
			return
		case <-t.C:
		}
		conns = conns[:0]
		d.mu.Lock()
		for pc := range d.conns {
			conns = append(conns, pc)
		}
		d.mu.Unlock()
		now := time.Since(d.epoch)
		for _, pc := range conns {
			d.check(pc, now)
		}
	}
}

// check reports pc if it has been out of the pool longer than the
// threshold and was not reported yet.
func (d *leakDetector) check(pc *phys.Conn, now time.Duration) {
	m := &pc.Leak
	at := m.TakenAt.Load()
	if at == 0 || now-time.Duration(at-1) < d.threshold {
		return
	}
	var pcs [phys.LeakStackDepth]uintptr
	n, ok := m.Report(at, &pcs)
	if !ok {
		return
	}
	// Counted before it is logged: whoever reads the line finds it counted.
	d.count.Add(1)
	phys.LogAt(context.Background(), d.log, slog.LevelWarn, "connection held longer than the leak detection threshold; it was taken by", nil,
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
