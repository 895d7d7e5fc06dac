package postgres

import (
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// TestResetPrepared: the names resetSQL's last statement returns become
// DEALLOCATE statements with each name quoted as the server would read it
// back; no name, no statement; results that are not the reset's are an
// error rather than a reset that deallocates nothing.
func TestResetPrepared(t *testing.T) {
	names := func(ns ...string) []*pgconn.Result {
		last := &pgconn.Result{CommandTag: pgconn.NewCommandTag(fmt.Sprintf("SELECT %d", len(ns)))}
		for _, n := range ns {
			last.Rows = append(last.Rows, [][]byte{[]byte(n)})
		}
		return []*pgconn.Result{{}, {}, last}
	}
	for _, tc := range []struct {
		name string
		res  []*pgconn.Result
		want string
	}{
		{"none", names(), ""},
		{"one", names("s1"), `DEALLOCATE "s1"`},
		{"case and quotes kept", names(`Mixed"Case`, "a b; DROP TABLE t"), `DEALLOCATE "Mixed""Case"; DEALLOCATE "a b; DROP TABLE t"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := resetPrepared(tc.res)
			if err != nil || got != tc.want {
				t.Fatalf("resetPrepared = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
	twoColumns := names("a")
	twoColumns[2].Rows[0] = append(twoColumns[2].Rows[0], []byte("b"))
	notSelect := []*pgconn.Result{{}, {CommandTag: pgconn.NewCommandTag("DISCARD SEQUENCES")}}
	for _, bad := range [][]*pgconn.Result{nil, names()[2:], twoColumns, notSelect} {
		if got, err := resetPrepared(bad); err == nil {
			t.Errorf("resetPrepared(%d results) = %q, nil; want an error", len(bad), got)
		}
	}
}
