package mysql

import (
	"fmt"
	"testing"

	"github.com/go-sql-driver/mysql"
)

func TestPermanentConnectError(t *testing.T) {
	for n, want := range map[uint16]bool{1044: true, 1045: true, 1049: true, 1698: true, 1040: false, 1226: false, 1053: false} {
		if got := permanentConnectError(fmt.Errorf("connect: %w", &mysql.MySQLError{Number: n})); got != want {
			t.Errorf("error %d: permanent = %v, want %v", n, got, want)
		}
	}
	if !permanentConnectError(mysql.ErrNoTLS) {
		t.Error("TLS required, the server has none: not permanent")
	}
}
