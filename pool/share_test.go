package pool

import (
	"context"
	"testing"
	"time"
)

// TestShare: below its share the pool neither keeps nor creates resources
// above it; lifting it lets the pool grow again; Min stays.
func TestShare(t *testing.T) {
	b := &backend{}
	cfg := b.config()
	cfg.Max, cfg.Min = 4, 1
	p := newPool(t, cfg)
	var held []*Resource[*item]
	for range 4 {
		held = append(held, mustAcquire(t, p))
	}
	held[3].Release() // idle
	p.SetShare(2)
	if got := p.Share(); got != 2 {
		t.Fatalf("Share() = %d after SetShare(2), want 2", got)
	}
	waitFor(t, "the idle resource above the share to go", func() bool { return b.live.Load() == 3 })
	held[2].Release() // above the share: destroyed
	waitFor(t, "the released resource above the share to go", func() bool { return b.live.Load() == 2 })
	if st := p.Stats(); st.Total != 2 || st.IdleTrimmed != 2 {
		t.Fatalf("Stats: Total %d, IdleTrimmed %d; want 2 and 2", st.Total, st.IdleTrimmed)
	}
	// At its share, with both in use: a caller waits, and nothing is made.
	made := b.made.Load()
	if r, ok := p.TryAcquire(); ok {
		t.Fatalf("TryAcquire got resource %d above the share", r.Value().id)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	_, err := p.Acquire(ctx)
	cancel()
	if err == nil {
		t.Fatal("Acquire got a resource above the share")
	}
	if b.made.Load() != made {
		t.Fatalf("the pool made %d resources above its share", b.made.Load()-made)
	}
	// A release at the share is kept and handed on.
	held[1].Release()
	r := mustAcquire(t, p)
	if b.live.Load() != 2 {
		t.Fatalf("live = %d, want 2: a release at the share is kept", b.live.Load())
	}
	// Lifted: the pool grows to Max again.
	p.SetShare(100)
	if got := p.Share(); got != 4 {
		t.Fatalf("Share() = %d after SetShare(100), want Max 4", got)
	}
	more := []*Resource[*item]{mustAcquire(t, p), mustAcquire(t, p)}
	if b.live.Load() != 4 {
		t.Fatalf("live = %d after the share was lifted, want 4", b.live.Load())
	}
	// Never below Min.
	p.SetShare(0)
	if got := p.Share(); got != 1 {
		t.Fatalf("Share() = %d after SetShare(0) with Min 1, want 1", got)
	}
	for _, x := range append(more, r, held[0]) {
		x.Release()
	}
	waitFor(t, "the pool to come down to Min", func() bool { return b.live.Load() == 1 })
}
