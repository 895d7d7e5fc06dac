package pooldriver_test

import (
	"context"
	"database/sql"
	"fmt"
	"log"
	"log/slog"
	"strings"
	"time"

	"github.com/pooldriver/pooldriver"
	"github.com/pooldriver/pooldriver/internal/fakedb"
)

// lineWriter hands each line a log handler writes to a channel.
type lineWriter chan string

func (w lineWriter) Write(p []byte) (int, error) {
	w <- string(p)
	return len(p), nil
}

// Leak detection reports a physical connection kept out of the pool past
// a threshold, once, at WARN, with the stack of the code that took it.
func ExampleConfig_leakDetection() {
	srv := fakedb.NewServer("example-leak")
	defer srv.Close()

	// A real program: "postgres://app@db:5432/shop?pool_leak_detection_threshold=30s".
	// The in-memory fake server stands in for PostgreSQL here, with a
	// threshold short enough for an example.
	cfg, err := pooldriver.ParseConfig("fake://example-leak?pool_name=orders&pool_leak_detection_threshold=100ms")
	if err != nil {
		log.Fatal(err)
	}
	lines := make(lineWriter, 8)
	cfg.Logger = slog.New(slog.NewTextHandler(lines, &slog.HandlerOptions{
		Level: slog.LevelWarn,
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			switch a.Key {
			case slog.TimeKey, "held", "site": // they change from run to run
				return slog.Attr{}
			case "stack": // the code that took the connection, then its callers
				first, _, _ := strings.Cut(a.Value.String(), "\n")
				return slog.String("stack", first)
			}
			return a
		},
	}))
	c, err := pooldriver.NewConnectorWithConfig(cfg)
	if err != nil {
		log.Fatal(err)
	}
	db := sql.OpenDB(c)
	defer db.Close()

	// A *sql.Tx keeps its physical connection until Commit or Rollback,
	// which this code forgets.
	tx, err := db.BeginTx(context.Background(), nil)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := tx.Exec("INSERT orders 1"); err != nil {
		log.Fatal(err)
	}
	select {
	case line := <-lines:
		fmt.Print(line)
	case <-time.After(10 * time.Second):
		fmt.Println("no report")
	}
	fmt.Println("leaks:", c.Stats().Leaks)
	tx.Rollback()
	// Output:
	// level=WARN msg="pooldriver: connection held longer than the leak detection threshold; it was taken by" pool=orders threshold=100ms stack=github.com/pooldriver/pooldriver_test.ExampleConfig_leakDetection
	// leaks: 1
}
