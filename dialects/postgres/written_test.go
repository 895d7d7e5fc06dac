package postgres

import (
	"bytes"
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"net"
	"net/url"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/pooldriver/pooldriver/dialects"
	"github.com/pooldriver/pooldriver/internal/faultproxy"
)

var _ dialects.WriteCounter = (*conn)(nil)

func execErr(ctx context.Context, c *conn, query string) error {
	_, err := c.Driver().(driver.ExecerContext).ExecContext(ctx, query, nil)
	return err
}

// TestWrittenCountsBytes: on a connection opened from a DSN, Written moves
// by the bytes of each message pgx sends, and not at all for a statement
// refused before its first byte.
func TestWrittenCountsBytes(t *testing.T) {
	c := opened(t)
	before := c.Written()
	if before == 0 {
		t.Fatal("the startup message went uncounted")
	}
	exec(t, c, "SELECT 1")
	// A Query message: its type, its length, the text and a NUL.
	if got, want := c.Written()-before, uint64(1+4+len("SELECT 1")+1); got != want {
		t.Errorf("SELECT 1 wrote %d bytes, want %d", got, want)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	before = c.Written()
	if err := execErr(ctx, c, "SELECT 1"); err == nil {
		t.Fatal("a statement with a done context ran")
	}
	if got := c.Written(); got != before {
		t.Errorf("a statement refused before it started moved Written by %d", got-before)
	}
}

// TestWrittenWrappedNoLoss: a connection of Wrap's cannot count bytes; its
// count stays put while pgx's connection lives, whatever the statements
// do.
func TestWrittenWrappedNoLoss(t *testing.T) {
	c := wrapped(t)
	before := c.Written()
	exec(t, c, "SELECT 1")
	if err := execErr(t.Context(), c, "SELECT * FROM no_such_table_pd"); err == nil {
		t.Fatal("a query of a missing table ran")
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := execErr(ctx, c, "SELECT 1"); err == nil {
		t.Fatal("a statement with a done context ran")
	}
	if got := c.Written(); got != before {
		t.Errorf("Written moved from %d to %d on a live connection", before, got)
	}
}

// TestWrittenReplyLost: the server runs a statement, then its reply is
// lost and the connection cut. pgx's stdlib reports driver.ErrBadConn
// although the statement ran (pgx's "conn closed" is marked safe to
// retry); Written must have moved, on a connection of a DSN and of Wrap's,
// so that pooldriver does not let database/sql run it again. A statement
// refused afterwards on the closed connection moves nothing.
func TestWrittenReplyLost(t *testing.T) {
	cfg, err := pgx.ParseConfig(serverDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	const marker = "pd-written-reply-lost"
	for _, kind := range []string{"dsn", "wrapped"} {
		t.Run(kind, func(t *testing.T) {
			px, err := faultproxy.New(net.JoinHostPort(cfg.Host, fmt.Sprint(cfg.Port)))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(px.Close)
			c := openThrough(t, kind, px.Addr())
			px.SetFilter(func(dir faultproxy.Direction, b []byte) faultproxy.Verdict {
				if dir == faultproxy.ToClient && bytes.Contains(b, []byte(marker)) {
					return faultproxy.DropAndCut
				}
				return faultproxy.Pass
			})
			before := c.Written()
			err = execErr(t.Context(), c, "SELECT '"+marker+"'")
			if err == nil {
				t.Fatal("the statement whose reply was lost succeeded")
			}
			t.Logf("pgx's stdlib: %v (driver.ErrBadConn: %t)", err, errors.Is(err, driver.ErrBadConn))
			if c.Written() == before {
				t.Fatal("Written did not move over a statement the server ran")
			}
			// pgx closes the connection in the background; once it is
			// done, a statement is refused without a byte.
			<-c.pgx().PgConn().CleanupDone()
			before = c.Written()
			if err := execErr(t.Context(), c, "SELECT 1"); !errors.Is(err, driver.ErrBadConn) {
				t.Fatalf("a statement on the closed connection: %v, want driver.ErrBadConn", err)
			}
			if got := c.Written(); got != before {
				t.Errorf("a statement refused on the closed connection moved Written by %d", got-before)
			}
		})
	}
}

// openThrough opens a connection to the test server at addr, from a DSN
// (kind "dsn") or through Wrap of pgx's stdlib ("wrapped").
func openThrough(t *testing.T, kind, addr string) *conn {
	t.Helper()
	u, err := url.Parse(serverDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	u.Host = addr
	var dc dialects.Conn
	if kind == "dsn" {
		tmpl, _, err := Dialect.Parse(u.String())
		if err != nil {
			t.Fatal(err)
		}
		dc, err = tmpl.Open(t.Context(), tmpl.Credentials())
		if err != nil {
			t.Fatal(err)
		}
	} else {
		cfg, err := pgx.ParseConfig(u.String())
		if err != nil {
			t.Fatal(err)
		}
		dc, err = dialects.Wrap(stdlib.GetConnector(*cfg)).Open(t.Context(), dialects.Credentials{})
		if err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { dc.Close() })
	c, ok := dc.(*conn)
	if !ok {
		t.Fatalf("opened %T, want the postgres dialect's *conn", dc)
	}
	if (c.watch != nil) != (kind == "dsn") {
		t.Fatalf("%s connection: watch %v", kind, c.watch != nil)
	}
	return c
}

// TestCountingWriter: a write counts what the writer accepted, a failed
// one too, and one that accepted nothing counts nothing.
func TestCountingWriter(t *testing.T) {
	w := new(paramWatch)
	fw := &failingWriter{accept: 3}
	cw := &countingWriter{w: fw, n: &w.written}
	if n, err := cw.Write([]byte("ab")); n != 2 || err != nil {
		t.Fatalf("Write = %d, %v", n, err)
	}
	if n, err := cw.Write([]byte("cdef")); n != 1 || err == nil {
		t.Fatalf("Write = %d, %v; want 1 and an error", n, err)
	}
	if n, err := cw.Write([]byte("gh")); n != 0 || err == nil {
		t.Fatalf("Write = %d, %v; want 0 and an error", n, err)
	}
	if got := w.written.Load(); got != 3 {
		t.Errorf("counted %d bytes, want 3", got)
	}
}

// failingWriter accepts its first accept bytes, then fails.
type failingWriter struct{ accept int }

func (f *failingWriter) Write(p []byte) (int, error) {
	n := min(len(p), f.accept)
	f.accept -= n
	if n < len(p) {
		return n, errors.New("broken pipe")
	}
	return n, nil
}
