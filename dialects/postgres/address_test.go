package postgres

import (
	"testing"

	"github.com/pooldriver/pooldriver/dialects"
)

func TestAddress(t *testing.T) {
	for _, tc := range []struct{ dsn, want string }{
		{"postgres://app:s3cret@db.example.com:6432/shop?sslmode=disable", "db.example.com:6432/shop"},
		{"postgres://app@db/shop", "db:5432/shop"},
		{"postgres://app@[::1]:5433/shop", "[::1]:5433/shop"},
		{"postgres://app@a:5432,b:5433/shop", "a:5432,b:5433/shop"},
		{"postgres://app@a:5432,b:5433/shop?sslmode=prefer", "a:5432,b:5433/shop"},
		{"host=a,b port=5432,5433 dbname=shop user=app", "a:5432,b:5433/shop"},
		{"host=db port=5434 dbname=orders user=app password=s3cret", "db:5434/orders"},
		{"postgres://app@/shop?host=/var/run/postgresql", "/var/run/postgresql:5432/shop"},
	} {
		tmpl, _, err := Dialect.Parse(tc.dsn)
		if err != nil {
			t.Fatalf("%s: %v", tc.dsn, err)
		}
		if got := tmpl.(dialects.AddressedTemplate).Address().String(); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.dsn, got, tc.want)
		}
	}
}
