package postgres

import (
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pooldriver/pooldriver/dialects"
)

// TestReadPosition: positionSQL's row read as a position and a role; a
// standby that has replayed nothing (NULL) is at 0; a malformed row is an
// error.
func TestReadPosition(t *testing.T) {
	for _, tc := range []struct {
		row     [][]byte
		pos     dialects.Position
		standby bool
		err     bool
	}{
		{row: [][]byte{[]byte("f"), []byte("0/16B3748")}, pos: 0x16B3748},
		{row: [][]byte{[]byte("t"), []byte("1A/0000FF00")}, pos: 0x1A_0000FF00, standby: true},
		{row: [][]byte{[]byte("t"), nil}, standby: true},
		{row: [][]byte{[]byte("f"), []byte("nonsense")}, err: true},
		{row: [][]byte{[]byte("f")}, err: true},
	} {
		pos, standby, err := readPosition(&pgconn.Result{Rows: [][][]byte{tc.row}})
		if pos != tc.pos || standby != tc.standby || (err != nil) != tc.err {
			t.Errorf("%q: %v, %v, %v; want %v, %v, error %v", tc.row, pos, standby, err, tc.pos, tc.standby, tc.err)
		}
	}
}

func TestQuoteKeywordValue(t *testing.T) {
	for in, want := range map[string]string{
		"db":           "db",
		"/tmp/my dir":  `'/tmp/my dir'`,
		`/tmp/o'brien`: `'/tmp/o\'brien'`,
		`/tmp/back\sl`: `'/tmp/back\\sl'`,
		"":             "''",
	} {
		if got := quoteKeywordValue(in); got != want {
			t.Errorf("%q: %s, want %s", in, got, want)
		}
	}
}
