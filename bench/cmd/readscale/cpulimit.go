package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// A server on a machine of its own, on one machine: -server-cpus puts each
// PostgreSQL server (its postmaster and every process it has and will
// fork) in a cgroup of its own whose CPU quota is that many CPUs, and
// leaves the client unlimited. Then what bounds the reads is each server's
// CPU, as where standbys are machines of their own, not the CPUs the
// client and three servers share (on 2 vCPUs, a pool of one connection per
// host already keeps both busy, and no number of standbys adds a read).

// cpuPeriodUs is the quota's period: short, so that a server that spent
// its quota waits milliseconds, not a tenth of a second, for the next.
const cpuPeriodUs = 10000

// cgroup is a CPU-limited cgroup (v2 or v1's cpu controller).
type cgroup struct{ dir string }

// newCgroup makes the cgroup name limited to cpus CPUs.
func newCgroup(name string, cpus float64) (*cgroup, error) {
	quota := int(cpus * cpuPeriodUs)
	if quota < 1000 {
		return nil, fmt.Errorf("-server-cpus %.3f: at least 0.1 CPU", cpus)
	}
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil { // v2
		if err := os.WriteFile("/sys/fs/cgroup/cgroup.subtree_control", []byte("+cpu"), 0); err != nil {
			return nil, fmt.Errorf("cgroup v2: enabling the cpu controller: %w", err)
		}
		g := &cgroup{dir: filepath.Join("/sys/fs/cgroup", name)}
		if err := os.Mkdir(g.dir, 0o755); err != nil {
			return nil, err
		}
		return g.limit(os.WriteFile(filepath.Join(g.dir, "cpu.max"), fmt.Appendf(nil, "%d %d", quota, cpuPeriodUs), 0))
	}
	g := &cgroup{dir: filepath.Join("/sys/fs/cgroup/cpu", name)}
	if err := os.Mkdir(g.dir, 0o755); err != nil {
		return nil, fmt.Errorf("no cgroup v2, and v1's cpu controller: %w", err)
	}
	err := os.WriteFile(filepath.Join(g.dir, "cpu.cfs_period_us"), fmt.Appendf(nil, "%d", cpuPeriodUs), 0)
	if err == nil {
		err = os.WriteFile(filepath.Join(g.dir, "cpu.cfs_quota_us"), fmt.Appendf(nil, "%d", quota), 0)
	}
	return g.limit(err)
}

// adopt moves the server whose data directory is data, its postmaster and
// the processes it forked so far, into g; what it forks later is born
// there. The postmaster moves first, so that a child it forks meanwhile is
// born in g or found among its children after.
func (g *cgroup) adopt(data string) error {
	pidFile, err := os.ReadFile(filepath.Join(data, "postmaster.pid"))
	if err != nil {
		return err
	}
	postmaster, _, _ := strings.Cut(string(pidFile), "\n")
	if _, err := strconv.Atoi(postmaster); err != nil {
		return fmt.Errorf("%s: postmaster.pid: %q is no pid", data, postmaster)
	}
	if err := g.move(postmaster); err != nil {
		return err
	}
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return err
	}
	for _, p := range procs {
		stat, err := os.ReadFile(filepath.Join("/proc", p.Name(), "stat"))
		if err != nil {
			continue // not a process, or gone
		}
		// pid (comm) state ppid ...: comm may hold spaces and ')', the
		// fields after it neither.
		end := strings.LastIndexByte(string(stat), ')')
		if f := strings.Fields(string(stat[end+1:])); end >= 0 && len(f) > 1 && f[1] == postmaster {
			if err := g.move(p.Name()); err != nil {
				return err
			}
		}
	}
	return nil
}

// move moves the process pid into g; one that has ended is no error.
func (g *cgroup) move(pid string) error {
	if err := os.WriteFile(filepath.Join(g.dir, "cgroup.procs"), []byte(pid), 0); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("moving %s into %s: %w", pid, g.dir, err)
	}
	return nil
}

// limit returns g where its limit was set (err nil), else removes it.
func (g *cgroup) limit(err error) (*cgroup, error) {
	if err != nil {
		g.remove()
		return nil, fmt.Errorf("limiting %s: %w", g.dir, err)
	}
	return g, nil
}

// remove removes g once its processes have ended.
func (g *cgroup) remove() { _ = os.Remove(g.dir) }
