package fakedb

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"io"
	"testing"
)

func BenchmarkSelect1(b *testing.B) {
	c := connect(b, newServer(b))
	ctx := context.Background()
	dest := make([]driver.Value, 2)
	b.ReportAllocs()
	for b.Loop() {
		r, err := c.QueryContext(ctx, "SELECT 1", nil)
		if err != nil {
			b.Fatal(err)
		}
		for r.Next(dest) != io.EOF {
		}
		r.Close()
	}
}

func BenchmarkInsert(b *testing.B) {
	c := connect(b, newServer(b))
	ctx := context.Background()
	args := nv(int64(7))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.ExecContext(ctx, "INSERT t ?", args); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkConnID(b *testing.B) {
	c := connect(b, newServer(b))
	ctx := context.Background()
	dest := make([]driver.Value, 1)
	b.ReportAllocs()
	for b.Loop() {
		r, err := c.QueryContext(ctx, "CONNID", nil)
		if err != nil {
			b.Fatal(err)
		}
		for r.Next(dest) != io.EOF {
		}
		r.Close()
	}
}

// BenchmarkDatabaseSQLSelect1 is the baseline pooldriver's benchmarks
// compare against: database/sql straight on the fake.
func BenchmarkDatabaseSQLSelect1(b *testing.B) {
	db := sql.OpenDB(newServer(b).Connector())
	defer db.Close()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		var n int64
		var s string
		for pb.Next() {
			if err := db.QueryRow("SELECT 1").Scan(&n, &s); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
