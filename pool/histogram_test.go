package pool

import (
	"testing"
	"time"
)

func TestHistogramBuckets(t *testing.T) {
	bounds := HistogramBounds()
	if len(bounds) != HistogramBuckets-1 {
		t.Fatalf("%d bounds for %d buckets", len(bounds), HistogramBuckets)
	}
	for i := 1; i < len(bounds); i++ {
		if bounds[i] < 2*bounds[i-1] {
			t.Fatalf("bound %d less than twice the one before (bucketOf needs it): %v", i, bounds)
		}
	}
	bounds[0] = time.Hour // a copy: the pool's bounds do not change
	if HistogramBounds()[0] != time.Microsecond {
		t.Fatal("HistogramBounds returned the pool's own array")
	}
	for _, c := range []struct {
		d    time.Duration
		want int
	}{
		{-time.Second, 0}, // a clock that went backwards: never out of range
		{0, 0},
		{time.Microsecond, 0},
		{time.Microsecond + 1, 1},
		{3 * time.Microsecond, 2},
		{time.Millisecond, 9},
		{time.Second, 18},
		{time.Minute, HistogramBuckets - 2},
		{time.Minute + 1, HistogramBuckets - 1},
		{time.Hour, HistogramBuckets - 1},
	} {
		if got := bucketOf(c.d); got != c.want {
			t.Errorf("bucketOf(%v) = %d, want %d", c.d, got, c.want)
		}
	}
	// Around every bound and every power of two, the same as a scan.
	scan := func(d time.Duration) int {
		for i, b := range histogramBounds {
			if d <= b {
				return i
			}
		}
		return len(histogramBounds)
	}
	var ds []time.Duration
	for _, b := range histogramBounds {
		ds = append(ds, b-1, b, b+1)
	}
	for n := range 63 {
		p := time.Duration(1) << n
		ds = append(ds, p-1, p, p+1)
	}
	ds = append(ds, 1<<63-1)
	for _, d := range ds {
		if got, want := bucketOf(d), scan(d); got != want {
			t.Errorf("bucketOf(%v) = %d, a scan says %d", d, got, want)
		}
	}
}

// BenchmarkBucketOf counts durations like the waits and uses of a busy
// pool: each release and each wait ends in one bucketOf.
func BenchmarkBucketOf(b *testing.B) {
	b.ReportAllocs()
	ds := []time.Duration{300 * time.Microsecond, 800 * time.Microsecond, 40 * time.Microsecond, 2 * time.Millisecond}
	n := 0
	for i := 0; b.Loop(); i++ {
		n += bucketOf(ds[i&3])
	}
	_ = n
}

func TestHistogramQuantile(t *testing.T) {
	var h Histogram
	if q := h.Quantile(0.5); q != 0 {
		t.Fatalf("empty: %v", q)
	}
	for range 90 {
		h.observe(3 * time.Microsecond) // bucket ≤ 5µs
	}
	for range 9 {
		h.observe(40 * time.Millisecond) // bucket ≤ 50ms
	}
	h.observe(2 * time.Hour) // beyond the last bound
	if h.Count != 100 || h.Sum != 90*3*time.Microsecond+9*40*time.Millisecond+2*time.Hour {
		t.Fatalf("count %d sum %v", h.Count, h.Sum)
	}
	for _, c := range []struct {
		q    float64
		want time.Duration
	}{
		{0, 5 * time.Microsecond},
		{0.5, 5 * time.Microsecond},
		{0.9, 5 * time.Microsecond},
		{0.95, 50 * time.Millisecond},
		{0.99, 50 * time.Millisecond},
		{1, time.Minute},
	} {
		if got := h.Quantile(c.q); got != c.want {
			t.Errorf("Quantile(%v) = %v, want %v", c.q, got, c.want)
		}
	}
}
