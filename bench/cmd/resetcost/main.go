// Command resetcost measures what a PostgreSQL session reset costs a serial
// caller when it is sent in the same write as the caller's statement:
// one connection through pgconn, no pool, each call a write of
// the reset's Query message and `SELECT pd_bench_f()`'s, and a read of
// both replies, or the reset's statements and the caller's in one Query
// message (one implicit transaction). Each variant of the reset is timed in turns of 500 calls,
// interleaved, and reported as its median per call and its ratio to the
// statement alone.
//
//	go run ./cmd/resetcost [-calls 20000]
//
// The server is $POOLDRIVER_POSTGRES_DSN (or the local default).
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
)

func main() {
	calls := flag.Int("calls", 20000, "calls per variant")
	flag.Parse()
	dsn := os.Getenv("POOLDRIVER_POSTGRES_DSN")
	if dsn == "" {
		dsn = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	}
	ctx := context.Background()
	pc, err := pgconn.Connect(ctx, dsn)
	if err != nil {
		log.Fatal(err)
	}
	defer func() { _ = pc.Close(ctx) }()
	if _, err := pc.Exec(ctx, "CREATE OR REPLACE FUNCTION pd_bench_f() RETURNS int LANGUAGE sql AS 'SELECT 1'").ReadAll(); err != nil {
		log.Fatal(err)
	}
	const seed = `SELECT pg_catalog.pg_advisory_unlock_all(), pg_catalog.setseed(0.25)`
	const origin = `, (SELECT pg_catalog.pg_replication_origin_session_reset() WHERE pg_catalog.pg_replication_origin_session_is_setup())`
	const utility = `CLOSE ALL; SET SESSION AUTHORIZATION DEFAULT; RESET ALL; DEALLOCATE ALL; UNLISTEN *; DISCARD TEMP; DISCARD SEQUENCES`
	const f = "SELECT pd_bench_f()"
	const all = utility + "; " + seed
	// Each variant's messages, NUL-separated; "%s" is the statement.
	variants := []struct{ name, reset string }{
		{"statement alone", "%s"},
		{"own message: BEGIN; COMMIT", "BEGIN; COMMIT\x00%s"},
		{"own message: block, utility + SELECT", "BEGIN; " + all + origin + "; COMMIT\x00%s"},
		{"own message: DISCARD ALL", "DISCARD ALL\x00%s"},
		{"same message: utility + SELECT + origin", all + origin + "; %s"},
		{"same message: utility + SELECT", all + "; %s"},
		{"same message: utility", utility + "; %s"},
		{"same message: SELECT unlock, setseed", seed + "; %s"},
		{"same message: SELECT setseed", "SELECT pg_catalog.setseed(0.25); %s"},
		{"same message: SELECT origin", "SELECT 1" + origin + "; %s"},
		{"same message: RESET ALL", "RESET ALL; %s"},
		{"same message: SET SESSION AUTHORIZATION", "SET SESSION AUTHORIZATION DEFAULT; %s"},
		{"same message: DISCARD TEMP; DISCARD SEQUENCES", "DISCARD TEMP; DISCARD SEQUENCES; %s"},
		{"same message: CLOSE ALL; UNLISTEN *; DEALLOCATE ALL", "CLOSE ALL; UNLISTEN *; DEALLOCATE ALL; %s"},
	}
	for i := range variants {
		variants[i].reset = strings.ReplaceAll(variants[i].reset, "%s", f)
	}
	took := make([][]time.Duration, len(variants))
	const chunk = 500
	for done := 0; done < *calls; done += chunk {
		for i, v := range variants {
			for range chunk {
				start := time.Now()
				run(ctx, pc, v.reset)
				took[i] = append(took[i], time.Since(start))
			}
		}
	}
	base := median(took[0])
	for i, v := range variants {
		m := median(took[i])
		fmt.Printf("%-50s p50 %6.1f µs  %.2fx of alone (throughput %.2f)\n", v.name, float64(m)/1e3, float64(m)/float64(base), float64(base)/float64(m))
	}
}

// run writes msgs' Query messages (NUL-separated) in one write, and reads
// every reply.
func run(ctx context.Context, pc *pgconn.PgConn, msgs string) {
	fe := pc.Frontend()
	n := 0
	for _, q := range split(msgs) {
		fe.Send(&pgproto3.Query{String: q})
		n++
	}
	if err := fe.Flush(); err != nil {
		log.Fatal(err)
	}
	for n > 0 {
		msg, err := pc.ReceiveMessage(ctx)
		if err != nil {
			log.Fatal(err)
		}
		switch m := msg.(type) {
		case *pgproto3.ErrorResponse:
			log.Fatalf("%s: %s", msgs, m.Message)
		case *pgproto3.ReadyForQuery:
			n--
		}
	}
}

func split(s string) []string {
	var out []string
	start := 0
	for i := 0; i < len(s); i++ {
		if s[i] == 0 {
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return append(out, s[start:])
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}
