package pooldriver_test

import (
	"database/sql"
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pooldriver/pooldriver"
	"github.com/pooldriver/pooldriver/internal/fakedb"
)

var serverSeq atomic.Int64

// newServer starts a fake server with a name unique to the test.
func newServer(t testing.TB) *fakedb.Server {
	t.Helper()
	name := strings.NewReplacer("/", "_", " ", "_").Replace(t.Name()) + "_" + itoa(serverSeq.Add(1))
	srv := fakedb.NewServer(name)
	t.Cleanup(srv.Close)
	return srv
}

func itoa(n int64) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
		if n == 0 {
			return string(b[i:])
		}
	}
}

// newDB opens sql.OpenDB(pooldriver.New("fake://<srv>?<params>")), failing
// the test on its Err, with database/sql left at its defaults. At cleanup it closes the DB and
// checks that the server has no connection, transaction or overlap left.
func newDB(t testing.TB, srv *fakedb.Server, params string, opts ...pooldriver.Option) (*sql.DB, *pooldriver.Connector) {
	t.Helper()
	dsn := "fake://" + srv.Name()
	if params != "" {
		dsn += "?" + params
	}
	c := pooldriver.New(dsn, opts...)
	if err := c.Err(); err != nil {
		t.Fatalf("New(%q).Err(): %v", dsn, err)
	}
	db := sql.OpenDB(c)
	t.Cleanup(func() {
		db.Close()
		waitFor(t, "server connections closed", func() bool { return srv.Stats().Open == 0 })
		if s := srv.Stats(); s.Overlaps != 0 || s.OpenTx != 0 {
			t.Errorf("at cleanup: %d overlapping calls, %d open transactions", s.Overlaps, s.OpenTx)
		}
	})
	return db, c
}

// waitFor polls cond until true or the deadline passes.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// checkNoGoroutineLeak fails the test if more goroutines run after its
// cleanup than before it.
func checkNoGoroutineLeak(t testing.TB) {
	before := runtime.NumGoroutine()
	t.Cleanup(func() {
		deadline := time.Now().Add(10 * time.Second)
		for runtime.NumGoroutine() > before {
			if time.Now().After(deadline) {
				buf := make([]byte, 1<<16)
				buf = buf[:runtime.Stack(buf, true)]
				t.Fatalf("goroutines leaked: %d before, %d after\n%s", before, runtime.NumGoroutine(), buf)
			}
			time.Sleep(time.Millisecond)
		}
	})
}

func sprint(v any) string { return fmt.Sprintf("%+v", v) }
