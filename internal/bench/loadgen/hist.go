package loadgen

import (
	"encoding/json"
	"fmt"
	"math"
	"math/bits"
	"sync/atomic"
	"time"
)

// subBits sets the histogram's precision: 2^subBits buckets per power of
// two, so a reported value is within about 3 % of the true one. Values are
// microseconds; the bucket array covers up to 2^63 µs.
const (
	subBits    = 5
	subCount   = 1 << subBits
	numBuckets = (64 - subBits) * subCount
)

// histogram is a fixed-size, lock-free log-linear histogram of durations
// (HDR-style). Concurrent Record calls are safe; snapshots are consistent
// enough for progress lines and exact once recording has stopped.
type histogram struct {
	counts [numBuckets]atomic.Int64
	total  atomic.Int64
	max    atomic.Int64
}

func bucketOf(us int64) int {
	if us < subCount {
		return int(max(us, 0))
	}
	e := bits.Len64(uint64(us)) - subBits - 1
	return (e+1)<<subBits + int(us>>e) - subCount
}

// bucketHigh is the greatest value that falls into bucket b.
func bucketHigh(b int) int64 {
	if b+1 < subCount {
		return int64(b)
	}
	next := b + 1
	e := next>>subBits - 1
	lo := (int64(next&(subCount-1)) + subCount) << e
	return lo - 1
}

func (h *histogram) Record(d time.Duration) {
	us := d.Microseconds()
	h.counts[bucketOf(us)].Add(1)
	h.total.Add(1)
	for {
		m := h.max.Load()
		if us <= m || h.max.CompareAndSwap(m, us) {
			return
		}
	}
}

// snapshot is a point-in-time copy of a histogram.
type snapshot struct {
	counts [numBuckets]int64
	total  int64
	max    int64
}

func (h *histogram) Snapshot() *snapshot {
	s := &snapshot{total: h.total.Load(), max: h.max.Load()}
	for i := range s.counts {
		s.counts[i] = h.counts[i].Load()
	}
	return s
}

// Sub returns the recordings made between prev and s (max is s's max, the
// best available without per-interval maxima).
func (s *snapshot) Sub(prev *snapshot) *snapshot {
	out := &snapshot{total: s.total - prev.total, max: s.max}
	for i := range s.counts {
		out.counts[i] = s.counts[i] - prev.counts[i]
	}
	return out
}

// Quantile returns the value at quantile q in [0, 1], or 0 when empty.
func (s *snapshot) Quantile(q float64) time.Duration {
	var n int64
	for _, c := range s.counts {
		n += c
	}
	if n == 0 {
		return 0
	}
	rank := int64(math.Ceil(q * float64(n)))
	rank = min(max(rank, 1), n)
	var cum int64
	for b, c := range s.counts {
		cum += c
		if cum >= rank {
			return time.Duration(min(bucketHigh(b), s.max)) * time.Microsecond
		}
	}
	return time.Duration(s.max) * time.Microsecond
}

func (s *snapshot) Percentiles() Percentiles {
	return Percentiles{
		Count: s.total,
		P50:   s.Quantile(0.50),
		P95:   s.Quantile(0.95),
		P99:   s.Quantile(0.99),
		P999:  s.Quantile(0.999),
		Max:   time.Duration(s.max) * time.Microsecond,
	}
}

// Percentiles summarises a distribution of durations.
type Percentiles struct {
	Count int64
	P50   time.Duration
	P95   time.Duration
	P99   time.Duration
	P999  time.Duration
	Max   time.Duration
}

func (p Percentiles) String() string {
	if p.Count == 0 {
		return "n=0"
	}
	return fmt.Sprintf("p50 %s  p95 %s  p99 %s  p99.9 %s  max %s  (n=%d)",
		round(p.P50), round(p.P95), round(p.P99), round(p.P999), round(p.Max), p.Count)
}

// MarshalJSON writes milliseconds, the unit the benchmarks report.
func (p Percentiles) MarshalJSON() ([]byte, error) {
	ms := func(d time.Duration) float64 { return math.Round(float64(d)/float64(time.Microsecond)) / 1000 }
	return json.Marshal(struct {
		Count int64   `json:"count"`
		P50   float64 `json:"p50_ms"`
		P95   float64 `json:"p95_ms"`
		P99   float64 `json:"p99_ms"`
		P999  float64 `json:"p999_ms"`
		Max   float64 `json:"max_ms"`
	}{p.Count, ms(p.P50), ms(p.P95), ms(p.P99), ms(p.P999), ms(p.Max)})
}

// round keeps three significant figures for display.
func round(d time.Duration) time.Duration {
	switch {
	case d >= time.Second:
		return d.Round(10 * time.Millisecond)
	case d >= 10*time.Millisecond:
		return d.Round(100 * time.Microsecond)
	case d >= 100*time.Microsecond:
		return d.Round(time.Microsecond)
	}
	return d
}
