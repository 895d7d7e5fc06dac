package mysql

import (
	"testing"

	"github.com/pooldriver/pooldriver/dialects"
)

func TestAddress(t *testing.T) {
	for _, tc := range []struct{ dsn, want string }{
		{"mysql://app:s3cret@tcp(db.example.com:3307)/shop?parseTime=true", "db.example.com:3307/shop"},
		{"mysql://app@tcp(db)/shop", "db:3306/shop"},
		{"mysql://app@/shop", "127.0.0.1:3306/shop"},
		{"mysql://app@tcp([::1]:3306)/shop", "[::1]:3306/shop"},
		{"mysql://app@unix(/var/run/mysqld/mysqld.sock)/shop", "/var/run/mysqld/mysqld.sock/shop"},
		{"mysql://app@tcp(db:3306)/", "db:3306"},
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
