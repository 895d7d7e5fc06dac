// What a context says of its reads (ReadOnly, WithMaxLag, and a token's
// position): read by the router (reads.go) and by a task started from it.

package pooldriver

import (
	"context"
	"fmt"
	"time"

	"github.com/pooldriver/pooldriver/dialects"
)

// WithMaxLag returns a context whose reads may go to a standby up to d
// behind the primary, instead of pool_max_replica_lag: a staleness budget
// for one request's reads, looser or stricter. What a read must see (its
// task's writes, a token) it still sees. d must be positive.
func WithMaxLag(ctx context.Context, d time.Duration) (context.Context, error) {
	if d <= 0 {
		return ctx, fmt.Errorf("pooldriver: WithMaxLag: %v is not a positive duration", d)
	}
	m := readMarkFrom(ctx)
	m.maxLag = d
	return context.WithValue(ctx, readsKey{}, m), nil
}

// readsKey is the context key of a readMark.
type readsKey struct{}

// readMark is what a context says of its reads: that its statements only
// read, and the log position they must see.
type readMark struct {
	readOnly bool
	primary  bool // a statement a standby refused, run again on the primary
	after    dialects.Position
	maxLag   time.Duration // WithMaxLag's; 0: pool_max_replica_lag
}

func readMarkFrom(ctx context.Context) readMark {
	m, _ := ctx.Value(readsKey{}).(readMark)
	return m
}

// ReadOnly returns a context whose statements only read: with
// pool_reads=standby they run on a standby (one that has replayed what
// they must see, and is within pool_max_replica_lag of the primary), else
// on the primary. A task started from it (WithTask) is read-only: all its
// statements run on standbys. A statement that writes, outside a
// transaction, is refused by the standby and runs again on the primary
// (once, where it was its hold's first); in a *sql.Tx it fails, as on a
// read-only connection. Without pool_reads=standby it changes nothing.
func ReadOnly(ctx context.Context) context.Context {
	m := readMarkFrom(ctx)
	m.readOnly = true
	return context.WithValue(ctx, readsKey{}, m)
}
