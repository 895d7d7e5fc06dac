package integration

import (
	"strings"
	"testing"

	"github.com/pooldriver/pooldriver"
)

// TestTargetWithStandbys: pool_target=primary asks of a PostgreSQL DSN
// what target_session_attrs=read-write does, reads on standbys included:
// the primary's pool takes the target, each standby's pool asks for a
// standby. A DSN whose target_session_attrs asks for another kind is
// refused, naming both and not the password. Nothing connects.
func TestTargetWithStandbys(t *testing.T) {
	const hosts = "postgres://u:secret@127.0.0.1:1,127.0.0.1:2/db?"
	for _, dsn := range []string{
		hosts + "pool_target=primary&pool_reads=standby",
		hosts + "target_session_attrs=read-write&pool_reads=standby",
	} {
		c := pooldriver.New(dsn)
		if err := c.Err(); err != nil {
			t.Fatalf("%s: %v", strings.ReplaceAll(dsn, "secret", "xxxxx"), err)
		}
		if n := len(c.Standbys()); n != 2 {
			t.Errorf("%s: %d standbys, want 2", strings.ReplaceAll(dsn, "secret", "xxxxx"), n)
		}
		_ = c.Close()
	}
	err := pooldriver.New(hosts + "target_session_attrs=standby&pool_target=primary").Err()
	if err == nil || !strings.Contains(err.Error(), "pool_target=primary") || !strings.Contains(err.Error(), "target_session_attrs") ||
		strings.Contains(err.Error(), "secret") {
		t.Errorf("Err() = %v; want one naming pool_target and target_session_attrs, without the password", err)
	}
}
