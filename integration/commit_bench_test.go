package integration

import (
	"context"
	"database/sql"
	"fmt"
	"testing"

	"github.com/pooldriver/pooldriver"
)

// BenchmarkTxThreeStatements: a *sql.Tx of an UPDATE, a SELECT and an
// UPDATE with arguments, then COMMIT, serial, on PostgreSQL: the plain
// pgx stdlib and pooldriver side by side, each with one connection. What
// a lost COMMIT's resolution costs on the way (the transaction's id learnt
// with its first writing statement) is the difference between two trees,
// counted in instructions:
//
//	go test -c -o /tmp/it.test ./integration/   # in each tree
//	for n in 2000 4000; do GOMAXPROCS=1 GOGC=off valgrind --tool=callgrind --callgrind-out-file=/tmp/cg.$n \
//	  /tmp/it.test -test.run '^$' -test.bench 'BenchmarkTxThreeStatements/pooldriver' -test.benchtime ${n}x; done
//	# (Ir at 4000 - Ir at 2000) / 2000: instructions per transaction
func BenchmarkTxThreeStatements(b *testing.B) {
	dsn := dsns["POOLDRIVER_POSTGRES_DSN"]
	if dsn == "" {
		b.Skip("no PostgreSQL")
	}
	admin, err := sql.Open("pgx", dsn)
	if err != nil {
		b.Fatal(err)
	}
	defer admin.Close()
	table := fmt.Sprintf("bench_tx_%d", b.N)
	if _, err := admin.Exec(fmt.Sprintf("DROP TABLE IF EXISTS %[1]s; CREATE TABLE %[1]s (id int PRIMARY KEY, v bigint); INSERT INTO %[1]s VALUES (1, 0), (2, 0)", table)); err != nil {
		b.Fatal(err)
	}
	defer admin.Exec("DROP TABLE " + table) //nolint:errcheck // the run's database is dropped at the end anyway
	for _, name := range []string{"plain", "pooldriver"} {
		b.Run(name, func(b *testing.B) {
			var db *sql.DB
			if name == "plain" {
				db, err = sql.Open("pgx", dsn)
			} else {
				db, err = sql.OpenDB(pooldriver.New(dsn+"&pool_max_conns=1")), nil
			}
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			db.SetMaxOpenConns(1)
			ctx := context.Background()
			run := func(i int) error {
				tx, err := db.BeginTx(ctx, nil)
				if err != nil {
					return err
				}
				defer tx.Rollback() //nolint:errcheck // after Commit: ErrTxDone
				if _, err := tx.ExecContext(ctx, "UPDATE "+table+" SET v = $1 WHERE id = $2", i, 1); err != nil {
					return err
				}
				var v int64
				if err := tx.QueryRowContext(ctx, "SELECT v FROM "+table+" WHERE id = $1", 1).Scan(&v); err != nil {
					return err
				}
				if _, err := tx.ExecContext(ctx, "UPDATE "+table+" SET v = $1 WHERE id = $2", v, 2); err != nil {
					return err
				}
				return tx.Commit()
			}
			if err := run(0); err != nil { // the connection opened, the statements prepared
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				if err := run(i); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
