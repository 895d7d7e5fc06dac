package postgres

import (
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

func TestPermanentConnectError(t *testing.T) {
	for code, want := range map[string]bool{"28P01": true, "28000": true, "3D000": true, "53300": false, "57P03": false, "08006": false} {
		err := fmt.Errorf("failed to connect: %w", &pgconn.PgError{Severity: "FATAL", Code: code})
		if got := permanentConnectError(err); got != want {
			t.Errorf("SQLSTATE %s: permanent = %v, want %v", code, got, want)
		}
	}
	if !permanentConnectError(errors.New("failed to connect: server refused TLS connection")) {
		t.Error("sslmode=require refused by the server: not permanent")
	}
}
