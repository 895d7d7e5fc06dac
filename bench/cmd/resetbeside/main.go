// Command resetbeside tells where the cost of an off-path session reset
// lands. A serial caller ("A", one connection of its own, no
// reset) runs `SELECT pd_bench_f()` while a second caller ("B") runs
// `SELECT 1` in a loop through pooldriver, once with
// pool_reset_always=true (every statement of B's is followed by a reset of
// its connection, off B's path) and once without; B runs in the same
// process, then in another. If the resets cost the server or the machine,
// A slows down beside them; if they cost only the caller whose connections
// are reset, B's own rate falls and A's latency stays.
//
// With -latency it measures instead what a reset leaves to the next
// statement on the same server session: the latency percentiles of one
// serial caller running `SELECT 1` or `SELECT pd_bench_f()` with
// pool_reset_always=true (every statement runs on a session just reset)
// and with no reset at all.
//
// With -rotation (PostgreSQL, through pgconn, no pool) it measures what a
// serial caller pays for running each statement on the next of n
// connections rather than on the same one: what a caller whose last
// connection is being reset does.
//
//	go run ./cmd/resetbeside            # both servers, both placements
//	go run ./cmd/resetbeside -latency
//	go run ./cmd/resetbeside -rotation
//
// The servers are $POOLDRIVER_POSTGRES_DSN and $POOLDRIVER_MYSQL_DSN (or
// the local defaults); the function pd_bench_f is created on each.
package main

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/pooldriver/pooldriver"
	"github.com/pooldriver/pooldriver/bench"
	_ "github.com/pooldriver/pooldriver/dialects/mysql"
	_ "github.com/pooldriver/pooldriver/dialects/postgres"
)

const fn = "SELECT pd_bench_f()"

func main() {
	load := flag.String("load", "", "run as caller B only: this DSN, for -for")
	dur := flag.Duration("for", 3*time.Second, "how long caller B runs with -load")
	rounds := flag.Int("rounds", 3, "rounds per server")
	latency := flag.Bool("latency", false, "measure the latency of a statement on a session just reset instead")
	rotation := flag.Bool("rotation", false, "measure a serial caller rotating over PostgreSQL connections instead")
	flag.Parse()
	if *rotation {
		rotate(bench.PostgresDSN())
		return
	}
	if *load != "" {
		n := runB(*load, *dur)
		fmt.Printf("%.0f\n", float64(n)/dur.Seconds())
		return
	}
	for _, base := range []string{bench.PostgresDSN(), bench.MySQLDSN()} {
		server := base[:strings.Index(base, ":")]
		if err := createFunction(base, server); err != nil {
			log.Printf("%s: skipped: %v", server, err)
			continue
		}
		if *latency {
			for _, q := range []string{"SELECT 1", fn} {
				for _, mode := range []string{"pool_reset_always=true", "pool_trust_functions=true"} {
					fmt.Printf("%s %-20s %-27s %s\n", server, q, mode, percentiles(with(base, mode), q))
				}
			}
			continue
		}
		a := open(with(base, "pool_max_conns=1", "pool_trust_functions=true"))
		serial(a, 500)
		for r := range *rounds {
			alone := serial(a, 5000)
			for _, b := range []struct{ name, dsn string }{
				{"with resets", with(base, "pool_reset_always=true")},
				{"without", base},
			} {
				in, inRate := beside(a, b.dsn)
				out, outRate := besideProcess(a, b.dsn)
				fmt.Printf("%s round %d: A alone %v; beside B %-11s: same process A %v (B %.0f/s), other process A %v (B %.0f/s)\n",
					server, r+1, alone, b.name, in, inRate, out, outRate)
			}
		}
		_ = a.Close()
	}
}

func with(dsn string, params ...string) string {
	for _, p := range params {
		if strings.Contains(dsn, "?") {
			dsn += "&" + p
		} else {
			dsn += "?" + p
		}
	}
	return dsn
}

func open(dsn string) *sql.DB {
	c := pooldriver.New(dsn)
	if err := c.Err(); err != nil {
		log.Fatal(err)
	}
	return sql.OpenDB(c)
}

func createFunction(dsn, server string) error {
	db := open(dsn)
	defer func() { _ = db.Close() }()
	q := "CREATE OR REPLACE FUNCTION pd_bench_f() RETURNS int LANGUAGE sql AS 'SELECT 1'"
	if server == "mysql" {
		q = "CREATE OR REPLACE FUNCTION pd_bench_f() RETURNS INT DETERMINISTIC RETURN 1"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := db.ExecContext(ctx, q)
	return err
}

// serial runs A's statement n times and returns the mean latency.
func serial(db *sql.DB, n int) time.Duration {
	start := time.Now()
	for range n {
		if _, err := db.ExecContext(context.Background(), fn); err != nil {
			log.Fatal(err)
		}
	}
	return time.Since(start) / time.Duration(n)
}

// percentiles runs q serially through a pool of its own and returns the
// percentiles of its latency.
func percentiles(dsn, q string) string {
	db := open(dsn)
	defer func() { _ = db.Close() }()
	lat := make([]time.Duration, 5000)
	for i := -1000; i < len(lat); i++ { // 1,000 to warm up
		start := time.Now()
		if _, err := db.ExecContext(context.Background(), q); err != nil {
			log.Fatal(err)
		}
		if i >= 0 {
			lat[i] = time.Since(start)
		}
	}
	return quantiles(lat)
}

// rotate prints the latency of a prepared SELECT 1 run serially on one
// connection, and round-robin over 2, 4 and 8.
func rotate(dsn string) {
	ctx := context.Background()
	cfg, err := pgconn.ParseConfig(dsn) // a pooldriver postgres:// DSN without pool_* keys is pgconn's too
	if err != nil {
		log.Fatal(err)
	}
	var conns []*pgconn.PgConn
	defer func() {
		for _, c := range conns {
			_ = c.Close(ctx)
		}
	}()
	for _, n := range []int{1, 2, 4, 8} {
		for len(conns) < n {
			c, err := pgconn.ConnectConfig(ctx, cfg)
			if err != nil {
				log.Fatal(err)
			}
			if _, err := c.Prepare(ctx, "rotate", "SELECT 1", nil); err != nil {
				log.Fatal(err)
			}
			conns = append(conns, c)
		}
		lat := make([]time.Duration, 20000)
		for i := -1000; i < len(lat); i++ { // 1,000 to warm up
			c := conns[(i+1000)%n]
			start := time.Now()
			if _, err := c.ExecPrepared(ctx, "rotate", nil, nil, nil).Close(); err != nil {
				log.Fatal(err)
			}
			if i >= 0 {
				lat[i] = time.Since(start)
			}
		}
		fmt.Printf("postgres, round-robin over %d connection(s): %s\n", n, quantiles(lat))
	}
}

// quantiles sorts lat and returns its percentiles.
func quantiles(lat []time.Duration) string {
	slices.Sort(lat)
	at := func(p int) time.Duration { return lat[len(lat)*p/100].Round(100 * time.Nanosecond) }
	return fmt.Sprintf("p10 %v  p50 %v  p90 %v  p99 %v", at(10), at(50), at(90), at(99))
}

// runB runs B's loop for d and returns how many statements it ran.
func runB(dsn string, d time.Duration) int64 {
	db := open(dsn)
	defer func() { _ = db.Close() }()
	var n int64
	for start := time.Now(); time.Since(start) < d; n++ {
		if _, err := db.ExecContext(context.Background(), "SELECT 1"); err != nil {
			log.Fatal(err)
		}
	}
	return n
}

// beside measures A while B runs in a goroutine of this process.
func beside(a *sql.DB, bdsn string) (time.Duration, float64) {
	b := open(bdsn)
	defer func() { _ = b.Close() }()
	var stop atomic.Bool
	var ops atomic.Int64
	var wg sync.WaitGroup
	wg.Go(func() {
		for !stop.Load() {
			if _, err := b.ExecContext(context.Background(), "SELECT 1"); err != nil {
				log.Fatal(err)
			}
			ops.Add(1)
		}
	})
	time.Sleep(100 * time.Millisecond)
	start, o := time.Now(), ops.Load()
	d := serial(a, 5000)
	rate := float64(ops.Load()-o) / time.Since(start).Seconds()
	stop.Store(true)
	wg.Wait()
	return d, rate
}

// besideProcess measures A while B runs in another process (this command
// with -load).
func besideProcess(a *sql.DB, bdsn string) (time.Duration, float64) {
	cmd := exec.Command(os.Args[0], "-load", bdsn, "-for", "2s")
	cmd.Stderr = os.Stderr
	var out strings.Builder
	cmd.Stdout = &out
	if err := cmd.Start(); err != nil {
		log.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	d := serial(a, 5000)
	if err := cmd.Wait(); err != nil {
		log.Fatal(err)
	}
	var rate float64
	_, _ = fmt.Sscan(out.String(), &rate)
	return d, rate
}
