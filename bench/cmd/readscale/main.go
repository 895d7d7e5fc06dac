// Command readscale measures what standbys add to read throughput: it
// starts a PostgreSQL primary and two streaming standbys of its own (from
// the binaries in -pgbin, as user nobody when run as root), then runs
// read-only point selects by primary key, closed loop, through pooldriver
// on the primary alone, on one standby alone, and through pooldriver with
// pool_reads=standby over the three hosts, the same pool size per host,
// side by side in rounds whose order alternates. It prints each round's
// reads per second, the ratio of two standbys to the primary alone, and
// the split: two standbys against twice one standby alone, what routing
// over two pools keeps of two servers' worth of reads.
//
//	go run ./cmd/readscale -pgbin /usr/lib/postgresql/15/bin -conns 4 -workers 64 -dur 5s -rounds 3
//
// With -server-cpus each server runs under a CPU quota, standing for a
// server on a machine of its own (cpulimit.go).
package main

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"log"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/pooldriver/pooldriver"
	_ "github.com/pooldriver/pooldriver/dialects/postgres"
)

const rows = 10000

var probes []func() string

var watch = flag.Bool("watch", false, "print where reads went and each standby's state every second")

func main() {
	pgbin := flag.String("pgbin", "/usr/lib/postgresql/15/bin", "PostgreSQL's binaries")
	conns := flag.Int("conns", 4, "pool size per host (pool_max_conns)")
	workers := flag.Int("workers", 64, "goroutines running selects")
	dur := flag.Duration("dur", 5*time.Second, "each measurement")
	rounds := flag.Int("rounds", 3, "rounds, each measuring both")
	serverCPUs := flag.Float64("server-cpus", 0, "each server's CPU quota, in CPUs (0: none; see cpulimit.go)")
	flag.Parse()

	dir, err := os.MkdirTemp("", "readscale-")
	check(err)
	defer func() { _ = os.RemoveAll(dir) }()
	asNobody := os.Geteuid() == 0
	if asNobody {
		check(os.Chown(dir, 65534, 65534))
	}
	c := &cluster{bin: *pgbin, dir: dir, nobody: asNobody, cpus: *serverCPUs}
	defer c.stop()
	c.start()
	for i, port := range c.ports {
		db, err := sql.Open("pgx", fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port))
		check(err)
		q := "SELECT 'primary insert ' || pg_current_wal_insert_lsn() || ' write ' || pg_current_wal_lsn() || ' flush ' || pg_current_wal_flush_lsn() || ' repl ' || coalesce((SELECT string_agg(sent_lsn || '/' || replay_lsn || '/' || coalesce(replay_lag::text, '-'), ' ') FROM pg_stat_replication), '')"
		if i > 0 {
			q = "SELECT 'standby receive ' || coalesce(pg_last_wal_receive_lsn()::text, '-') || ' replay ' || coalesce(pg_last_wal_replay_lsn()::text, '-') || ' startup ' || coalesce((SELECT wait_event_type || ':' || wait_event FROM pg_stat_activity WHERE backend_type = 'startup'), 'running')"
		}
		probes = append(probes, func() string {
			var s string
			if err := db.QueryRow(q).Scan(&s); err != nil {
				return err.Error()
			}
			return s
		})
	}

	primaryDSN := fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable&pool_max_conns=%d", c.ports[0], *conns)
	standbyDSN := fmt.Sprintf("postgres://postgres@127.0.0.1:%d,127.0.0.1:%d,127.0.0.1:%d/postgres?sslmode=disable&target_session_attrs=read-write&pool_reads=standby&pool_max_conns=%d",
		c.ports[0], c.ports[1], c.ports[2], *conns)
	fmt.Printf("cpus %d, pool %d per host, %d workers, %v per measurement", nproc(), *conns, *workers, *dur)
	if *serverCPUs > 0 {
		fmt.Printf(", each server limited to %.2f CPU", *serverCPUs)
	}
	fmt.Println()
	oneDSN := fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable&pool_max_conns=%d", c.ports[1], *conns)
	var ratios, splits []float64
	for r := range *rounds {
		var primary, standbys, one float64
		run := func(name string) {
			switch name {
			case "primary":
				primary = measure(primaryDSN, *workers, *dur, nil)
			case "one":
				one = measure(oneDSN, *workers, *dur, nil)
			case "standbys":
				standbys = measure(standbyDSN, *workers, *dur, func(c *pooldriver.Connector) {
					st := c.Stats()
					fmt.Printf("  standbys: reads on standby %d, on primary %d;", st.ReadsOnStandby, st.ReadsOnPrimary)
					for _, h := range c.Standbys() {
						fmt.Printf(" [%s up=%v lag=%v]", h.Host, h.Up, h.Lag)
					}
					fmt.Println()
				})
			}
		}
		order := []string{"primary", "one", "standbys"}
		if r%2 == 1 {
			slices.Reverse(order)
		}
		for _, n := range order {
			run(n)
		}
		ratios = append(ratios, standbys/primary)
		splits = append(splits, standbys/(2*one))
		fmt.Printf("round %d: primary alone %.0f reads/s, one standby alone %.0f, two standbys %.0f: ratio %.2f, split %.2f\n",
			r+1, primary, one, standbys, standbys/primary, standbys/(2*one))
	}
	slices.Sort(ratios)
	slices.Sort(splits)
	fmt.Printf("median ratio (two standbys / primary alone): %.2f\n", ratios[len(ratios)/2])
	fmt.Printf("median split (two standbys / twice one standby alone): %.2f\n", splits[len(splits)/2])
}

// measure runs workers read-only point selects in a closed loop through a
// pooldriver Connector for dsn for dur, after a warm-up, and returns reads
// per second.
func measure(dsn string, workers int, dur time.Duration, after func(*pooldriver.Connector)) float64 {
	c := pooldriver.New(dsn)
	check(c.Err())
	db := sql.OpenDB(c)
	defer func() { _ = db.Close() }()
	ctx := pooldriver.ReadOnly(context.Background())
	var n atomic.Int64
	var stop atomic.Bool
	var wg sync.WaitGroup
	counting := atomic.Bool{}
	for range workers {
		wg.Go(func() {
			var v string
			for !stop.Load() {
				if err := db.QueryRowContext(ctx, "SELECT v FROM kv WHERE id = $1", rand.IntN(rows)+1).Scan(&v); err != nil {
					log.Fatalf("select: %v", err)
				}
				if counting.Load() {
					n.Add(1)
				}
			}
		})
	}
	time.Sleep(dur / 4) // warm-up: pools filled, standbys looked at
	counting.Store(true)
	start := time.Now()
	if *watch {
		for time.Since(start) < dur {
			time.Sleep(time.Second)
			st := c.Stats()
			fmt.Printf("  %5.1fs on standby %d, on primary %d:", time.Since(start).Seconds(), st.ReadsOnStandby, st.ReadsOnPrimary)
			for _, h := range c.Standbys() {
				fmt.Printf(" [%s up=%v replayed=%s lag=%v]", h.Host, h.Up, h.Replayed, h.Lag)
			}
			fmt.Println()
			for _, q := range probes {
				fmt.Println("    ", q())
			}
		}
	} else {
		time.Sleep(dur)
	}
	counting.Store(false)
	elapsed := time.Since(start)
	stop.Store(true)
	wg.Wait()
	if after != nil {
		after(c)
	}
	return float64(n.Load()) / elapsed.Seconds()
}

// cluster is a primary (ports[0]) and two streaming standbys.
type cluster struct {
	bin    string
	dir    string
	nobody bool
	cpus   float64 // each server's CPU quota (0: none)
	ports  [3]int
	up     []string  // data directories started
	groups []*cgroup // the servers' cgroups, where cpus > 0
}

func (c *cluster) data(i int) string { return filepath.Join(c.dir, fmt.Sprintf("d%d", i)) }

func (c *cluster) start() {
	for i := range c.ports {
		c.ports[i] = freePort()
	}
	c.run("initdb", "-D", c.data(0), "-U", "postgres", "--auth=trust", "--locale=C", "-E", "UTF8")
	c.conf(0, "max_connections = 300\nshared_buffers = 256MB\nwal_level = replica\nmax_wal_senders = 10\nhot_standby = on\n")
	c.pgctl(0, "start")
	c.psql(0, fmt.Sprintf("CREATE TABLE kv (id int PRIMARY KEY, v text); INSERT INTO kv SELECT g, md5(g::text) FROM generate_series(1, %d) g", rows))
	// Frozen, analysed and left alone by autovacuum: its vacuum's records,
	// replayed on a standby busy with reads of the same pages, wait for
	// them (a recovery conflict) and make the standby lag for seconds.
	c.psql(0, "ALTER TABLE kv SET (autovacuum_enabled = off)")
	c.psql(0, "VACUUM (FREEZE, ANALYZE) kv")
	c.psql(0, "CHECKPOINT")
	c.run("pg_ctl", "-D", c.data(0), "-m", "fast", "-w", "stop")
	c.up = nil
	// A cleanly stopped primary's directory is a base backup of it.
	for i := 1; i < 3; i++ {
		c.run("cp", "-a", c.data(0), c.data(i))
		c.conf(i, fmt.Sprintf("primary_conninfo = 'host=127.0.0.1 port=%d user=postgres'\n", c.ports[0]))
		f, err := os.Create(filepath.Join(c.data(i), "standby.signal"))
		check(err)
		check(f.Close())
		if c.nobody {
			check(os.Chown(filepath.Join(c.data(i), "standby.signal"), 65534, 65534))
		}
	}
	if c.cpus > 0 { // before any server runs: a cgroup that cannot be made leaves none running
		for i := range 3 {
			g, err := newCgroup(fmt.Sprintf("readscale-%d-%d", os.Getpid(), i), c.cpus)
			if err != nil {
				c.removeGroups()
				log.Fatal(err)
			}
			c.groups = append(c.groups, g)
		}
	}
	for i := range 3 {
		c.pgctl(i, "start")
		if c.cpus > 0 {
			if err := c.groups[i].adopt(c.data(i)); err != nil {
				c.stop()
				log.Fatal(err)
			}
		}
	}
	fmt.Printf("primary :%d, standbys :%d :%d\n", c.ports[0], c.ports[1], c.ports[2])
}

// conf appends to server i's postgresql.conf its port and socket, and extra.
func (c *cluster) conf(i int, extra string) {
	f, err := os.OpenFile(filepath.Join(c.data(i), "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	check(err)
	_, err = fmt.Fprintf(f, "port = %d\nunix_socket_directories = '%s'\nlisten_addresses = '127.0.0.1'\n%s", c.ports[i], c.dir, extra)
	check(err)
	check(f.Close())
}

func (c *cluster) pgctl(i int, verb string) {
	c.run("pg_ctl", "-D", c.data(i), "-l", c.data(i)+".log", "-w", verb)
	c.up = append(c.up, c.data(i))
}

func (c *cluster) psql(i int, sqlText string) {
	c.run("psql", "-h", "127.0.0.1", "-p", fmt.Sprint(c.ports[i]), "-U", "postgres", "-d", "postgres", "-v", "ON_ERROR_STOP=1", "-q", "-c", sqlText)
}

func (c *cluster) stop() {
	for _, d := range c.up {
		_ = c.cmd("pg_ctl", "-D", d, "-m", "immediate", "-w", "stop").Run()
	}
	c.removeGroups()
}

// removeGroups removes the servers' cgroups, once their processes exited.
func (c *cluster) removeGroups() {
	if len(c.groups) > 0 {
		time.Sleep(100 * time.Millisecond) // the servers' last processes exit
	}
	for _, g := range c.groups {
		g.remove()
	}
}

func (c *cluster) cmd(name string, args ...string) *exec.Cmd {
	path := name
	if name != "cp" {
		path = filepath.Join(c.bin, name)
	}
	cmd := exec.Command(path, args...)
	if c.nobody {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	}
	return cmd
}

func (c *cluster) run(name string, args ...string) {
	if out, err := c.cmd(name, args...).CombinedOutput(); err != nil {
		log.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
}

func freePort() int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	check(err)
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port
}

func nproc() int {
	out, err := exec.Command("nproc").Output()
	if err != nil {
		return 0
	}
	var n int
	if _, err := fmt.Sscan(string(out), &n); err != nil {
		return 0
	}
	return n
}

func check(err error) {
	if err != nil {
		log.Fatal(err)
	}
}
