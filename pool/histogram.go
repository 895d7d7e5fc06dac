package pool

import (
	"math/bits"
	"time"
)

// histogramBounds are the upper bounds of a Histogram's buckets: fixed, so
// that counting a duration is a table lookup, a comparison and three
// additions, cheap enough to be always on, and so that every exporter shows
// the same buckets. Each bound is at least twice the one before (bucketOf
// relies on it; TestHistogramBuckets checks it).
var histogramBounds = [...]time.Duration{
	time.Microsecond, 2500 * time.Nanosecond, 5 * time.Microsecond,
	10 * time.Microsecond, 25 * time.Microsecond, 50 * time.Microsecond,
	100 * time.Microsecond, 250 * time.Microsecond, 500 * time.Microsecond,
	time.Millisecond, 2500 * time.Microsecond, 5 * time.Millisecond,
	10 * time.Millisecond, 25 * time.Millisecond, 50 * time.Millisecond,
	100 * time.Millisecond, 250 * time.Millisecond, 500 * time.Millisecond,
	time.Second, 2500 * time.Millisecond, 5 * time.Second,
	10 * time.Second, 30 * time.Second, time.Minute,
}

// HistogramBuckets is the number of buckets of a [Histogram]: one per bound
// of [HistogramBounds], and one for longer durations.
const HistogramBuckets = len(histogramBounds) + 1

// HistogramBounds returns the upper bounds of a [Histogram]'s buckets, in
// increasing order, from 1µs to 1m. Bucket i counts the durations d with
// bounds[i-1] < d <= bounds[i]; the last bucket those longer than the last
// bound.
func HistogramBounds() []time.Duration {
	b := histogramBounds
	return b[:]
}

// Histogram counts durations in the fixed buckets of [HistogramBounds].
type Histogram struct {
	Buckets [HistogramBuckets]int64 // per bucket, not cumulative
	Count   int64                   // the sum of Buckets
	Sum     time.Duration           // the sum of the durations counted
}

// observe counts d. The pool calls it with its lock held.
func (h *Histogram) observe(d time.Duration) {
	h.Buckets[bucketOf(d)]++
	h.Count++
	h.Sum += d
}

// bucketOf returns the index of the bucket that counts d: that of the
// shortest power of two of d's bit length (bucketByLen), or the next one.
// No bucket spans less than a factor of two, so a power-of-two range holds
// at most one bound.
func bucketOf(d time.Duration) int {
	if d <= 0 {
		return 0
	}
	i := int(bucketByLen[bits.Len64(uint64(d))])
	if i < len(histogramBounds) && d > histogramBounds[i] {
		i++
	}
	return i
}

// bucketByLen maps a bit length n to the bucket of 1<<(n-1), the shortest
// duration of that length.
var bucketByLen = func() (t [65]uint8) {
	for n := 1; n < len(t); n++ {
		d := time.Duration(uint64(1) << (n - 1)) // negative at n = 64: never asked
		i := 0
		for i < len(histogramBounds) && d > histogramBounds[i] {
			i++
		}
		t[n] = uint8(i)
	}
	return t
}()

// Quantile estimates the q-quantile (0 ≤ q ≤ 1) of the durations counted:
// the upper bound of the bucket that holds it (for the last bucket, the
// last bound), or 0 when nothing was counted.
func (h Histogram) Quantile(q float64) time.Duration {
	if h.Count == 0 {
		return 0
	}
	rank := int64(q*float64(h.Count) + 0.5)
	rank = min(max(rank, 1), h.Count)
	var seen int64
	for i, n := range h.Buckets {
		seen += n
		if seen >= rank && i < len(histogramBounds) {
			return histogramBounds[i]
		}
	}
	return histogramBounds[len(histogramBounds)-1]
}
