package integration

import (
	"database/sql"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/pooldriver/pooldriver"
)

// BenchmarkCustomSettingsRLS is the RLS pattern on PostgreSQL: a *sql.Tx
// that sets the tenant with SET LOCAL app.tenant = '<n>' (a text of its
// own per tenant, of 1000), reads through current_setting, and commits;
// one caller (serial) and 8 goroutines (parallel8) on the default pool.
// What the custom settings' names cost (custom.go: each text read for the
// names it defines, a connection's first statements defining those it
// lacks) is this against the same commit without them:
//
//	POOLDRIVER_POSTGRES_DSN=... go test -run '^$' -bench '^BenchmarkCustomSettingsRLS$' -benchtime 3s -count 5 ./integration
func BenchmarkCustomSettingsRLS(b *testing.B) {
	dsn := dsns["POOLDRIVER_POSTGRES_DSN"]
	if dsn == "" {
		b.Skip("POOLDRIVER_POSTGRES_DSN is not set")
	}
	for _, workers := range []int{1, 8} {
		name := "serial"
		if workers > 1 {
			name = "parallel" + strconv.Itoa(workers)
		}
		b.Run(name, func(b *testing.B) {
			db := sql.OpenDB(pooldriver.New(dsn))
			defer db.Close()
			db.SetMaxIdleConns(workers)
			var n atomic.Int64
			tx := func() error {
				t, err := db.Begin()
				if err != nil {
					return err
				}
				defer func() { _ = t.Rollback() }()
				if _, err := t.Exec("SET LOCAL app.tenant = '" + strconv.FormatInt(n.Add(1)%1000, 10) + "'"); err != nil {
					return err
				}
				var got int
				if err := t.QueryRow("SELECT pg_catalog.current_setting('app.tenant')::int").Scan(&got); err != nil {
					return err
				}
				return t.Commit()
			}
			for range workers { // every connection open and used once
				if err := tx(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			if workers == 1 {
				for b.Loop() {
					if err := tx(); err != nil {
						b.Fatal(err)
					}
				}
				return
			}
			var wg sync.WaitGroup
			var left atomic.Int64
			left.Store(int64(b.N))
			var failed atomic.Value
			for range workers {
				wg.Go(func() {
					for left.Add(-1) >= 0 {
						if err := tx(); err != nil {
							failed.Store(err)
							return
						}
					}
				})
			}
			wg.Wait()
			if err, _ := failed.Load().(error); err != nil {
				b.Fatal(err)
			}
		})
	}
}
