package odbc

import (
	"testing"

	"github.com/pooldriver/pooldriver/dialects"
)

func TestAddress(t *testing.T) {
	for _, tc := range []struct{ dsn, want string }{
		{"odbc://Driver={PostgreSQL Unicode};Server=db;Port=5432;Database=shop;UID=app;PWD=s3cret", "db:5432/shop"},
		{"odbc://DRIVER=MariaDB;SERVER=db;DB=shop", "db/shop"},
		{"odbc://Driver={ODBC Driver 18 for SQL Server};Server=db,1433;Database=shop", "db:1433/shop"},
		{"odbc://Driver={PostgreSQL Unicode};Servername=db;Database=shop", "db/shop"},
		{"odbc://MyDSN;UID=app;PWD=s3cret", ""},
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
