package fakedb

import (
	"context"
	"database/sql/driver"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"
)

// TestStress runs random statements on many conns while the server breaks
// and kills them, under -race. Each conn is used by one goroutine only, so
// Overlaps must stay 0, and every tx must be gone once all conns close.
func TestStress(t *testing.T) {
	s := newServer(t)
	ctx := context.Background()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 1))
			var c *Conn
			for i := range 2000 {
				if g == 0 && i%100 == 99 { // chaos, concurrent with the other goroutines
					if i%200 == 99 {
						s.BreakAll()
					} else {
						s.KillAll()
					}
				}
				if c == nil || !c.IsValid() {
					if c != nil {
						c.Close()
					}
					dc, err := s.Connector().Connect(ctx)
					if err != nil {
						t.Error(err)
						return
					}
					c = dc.(*Conn)
				}
				switch rng.IntN(6) {
				case 0:
					_, _ = c.ExecContext(ctx, "BEGIN", nil)
				case 1:
					_, _ = c.ExecContext(ctx, "INSERT t ?", nv(int64(g)))
				case 2:
					_, _ = c.ExecContext(ctx, "COMMIT", nil)
				case 3:
					if r, err := c.QueryContext(ctx, "SELECT 3", nil); err == nil {
						dest := make([]driver.Value, 2)
						for r.Next(dest) == nil {
						}
						r.Close()
					}
				case 4:
					_, err := c.ExecContext(ctx, "FAIL", nil)
					if err != nil && !errors.Is(err, ErrFail) && !errors.Is(err, ErrTxAborted) &&
						!errors.Is(err, driver.ErrBadConn) && !errors.Is(err, ErrKilled) {
						t.Errorf("FAIL: %v", err)
					}
				case 5:
					_, _ = c.ExecContext(ctx, "ROLLBACK", nil)
				}
			}
			c.Close()
		})
	}
	wg.Wait()
	st := s.Stats()
	t.Logf("stats %+v", st)
	if st.Overlaps != 0 || st.Open != 0 || st.OpenTx != 0 || s.OpenTxCount() != 0 {
		t.Fatalf("stats %+v", st)
	}
}
