package mysql

import (
	"context"
	"testing"
)

// BenchmarkWireScan is the wire's cost on what go-sql-driver writes and
// reads for one statement: the command and its reply, an OK packet or a
// result set.
func BenchmarkWireScan(b *testing.B) {
	hs := newBuilder(mariaCaps, extCacheMetadata)
	hs.handshake(serverCaps)
	command := packets(0, append([]byte{comQuery}, "SELECT a, b FROM t WHERE a = 1"...))
	var rows [][]byte
	for range 100 {
		rows = append(rows, textRow([]byte("12345"), []byte("a short text value")))
	}
	for _, tc := range []struct {
		name  string
		reply [][]byte
	}{
		{"OK", [][]byte{okPayload(0, statusAutocommit|statusInTrans, true)}},
		{"1 row", resultSet(mariaCaps, statusAutocommit, true, rows[0])},
		{"100 rows", resultSet(mariaCaps, statusAutocommit, true, rows...)},
	} {
		var reply []byte
		for i, p := range tc.reply {
			reply = append(reply, packets(byte(1+i), p)...)
		}
		b.Run(tc.name, func(b *testing.B) {
			w := newWire(nil, true)
			for _, s := range hs.c.steps {
				if s.client {
					w.scan(&w.out, s.b, true)
				} else {
					w.scan(&w.in, s.b, false)
				}
			}
			b.ReportAllocs()
			b.SetBytes(int64(len(command) + len(reply)))
			for b.Loop() {
				w.scan(&w.out, command, true)
				w.scan(&w.in, reply, false)
			}
			if w.state.Load()&(wireLost|wireBusy) != 0 {
				b.Fatalf("state %#x", w.state.Load())
			}
		})
	}
}

// BenchmarkObserve is what learning a statement's effect costs on a real
// server, per statement (a raw BEGIN, then a COMMIT): from the watched
// flags, and by the follow-up query that connections without the wire
// make (the wire made to give up, so that the connection asks).
func BenchmarkObserve(b *testing.B) {
	for _, tc := range []struct {
		name string
		ask  bool
	}{{"wire", false}, {"query", true}} {
		b.Run(tc.name, func(b *testing.B) {
			tmpl, _, err := Dialect.Parse("mysql://" + serverDSN(b))
			if err != nil {
				b.Fatal(err)
			}
			dc, err := tmpl.Open(context.Background(), tmpl.Credentials())
			if err != nil {
				b.Fatal(err)
			}
			defer dc.Close()
			c := dc.(*wiredConn).conn
			if tc.ask {
				c.w.lose()
			}
			ctx := context.Background()
			b.Run("observe only", func(b *testing.B) {
				if _, err := c.execer.ExecContext(ctx, "BEGIN", nil); err != nil {
					b.Fatal(err)
				}
				b.ReportAllocs()
				for b.Loop() {
					if _, _, err := c.Observe(ctx, "BEGIN", true); err != nil {
						b.Fatal(err)
					}
				}
				if _, err := c.execer.ExecContext(ctx, "ROLLBACK", nil); err != nil {
					b.Fatal(err)
				}
			})
			b.Run("statement and observe", func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					for _, q := range [...]string{"BEGIN", "COMMIT"} {
						if _, err := c.execer.ExecContext(ctx, q, nil); err != nil {
							b.Fatal(err)
						}
						if _, _, err := c.Observe(ctx, q, true); err != nil {
							b.Fatal(err)
						}
					}
				}
			})
		})
	}
}
