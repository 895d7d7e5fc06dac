package postgres

import (
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pooldriver/pooldriver/dialects"
)

// TestReadPosition: positionSQL's row read as a role and positions; a
// standby that has replayed nothing (NULL) is at 0; a malformed row is an
// error.
func TestReadPosition(t *testing.T) {
	for _, tc := range []struct {
		row  [][]byte
		want dialects.LogState
		err  bool
	}{
		{row: [][]byte{[]byte("f"), []byte("0/16B3748"), []byte("0/16B3700"), []byte("2")}, want: dialects.LogState{Position: 0x16B3748, Flushed: 0x16B3700, Timeline: 2}},
		{row: [][]byte{[]byte("t"), []byte("1A/0000FF00"), nil, []byte("1")}, want: dialects.LogState{Standby: true, Position: 0x1A_0000FF00, Timeline: 1}},
		{row: [][]byte{[]byte("t"), []byte("0/10"), nil, []byte("-1")}, want: dialects.LogState{Standby: true, Position: 0x10}},
		{row: [][]byte{[]byte("t"), nil, nil, nil}, want: dialects.LogState{Standby: true}},
		{row: [][]byte{[]byte("f"), []byte("nonsense"), []byte("0/1"), []byte("1")}, err: true},
		{row: [][]byte{[]byte("f"), []byte("0/1"), []byte("nonsense"), []byte("1")}, err: true},
		{row: [][]byte{[]byte("f"), []byte("0/1"), []byte("0/1"), []byte("x")}, err: true},
		{row: [][]byte{[]byte("f"), []byte("0/1"), []byte("0/1")}, err: true},
	} {
		got, err := readPosition(&pgconn.Result{Rows: [][][]byte{tc.row}})
		if (err != nil) != tc.err || !tc.err && got != tc.want {
			t.Errorf("%q: %+v, %v; want %+v, error %v", tc.row, got, err, tc.want, tc.err)
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
