package loadgen

import (
	"encoding/json"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// The histograms record microseconds from 1 µs to histMaxMicros with
// histSigFigs significant digits: a reported quantile is the upper end of
// the value range its rank falls in, within 0.1 % of the recorded value.
// A longer duration is counted at histMaxMicros (Max stays exact).
const (
	histMaxMicros = int64(time.Hour / time.Microsecond)
	histSigFigs   = 3
)

// histogram records durations in two HdrHistograms: one for the whole run
// and one for the current interval (IntervalQuantile). Its zero value is
// ready; concurrent calls are safe (a mutex: an HdrHistogram is not).
type histogram struct {
	mu            sync.Mutex
	all, interval *hdrhistogram.Histogram
	max           int64 // exact, µs
	intervalMax   int64
}

func newHDR() *hdrhistogram.Histogram { return hdrhistogram.New(1, histMaxMicros, histSigFigs) }

// Record adds one duration.
func (h *histogram) Record(d time.Duration) {
	us := max(d.Microseconds(), 0)
	v := min(max(us, 1), histMaxMicros)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.all == nil {
		h.all, h.interval = newHDR(), newHDR()
	}
	// v is within the trackable range, so RecordValue cannot fail.
	_ = h.all.RecordValue(v)
	_ = h.interval.RecordValue(v)
	h.max = max(h.max, us)
	h.intervalMax = max(h.intervalMax, us)
}

// quantile is hdr's value at quantile q in [0, 1], at most maxUs; 0 when
// hdr is empty.
func quantile(hdr *hdrhistogram.Histogram, q float64, maxUs int64) time.Duration {
	if hdr == nil || hdr.TotalCount() == 0 {
		return 0
	}
	return time.Duration(min(hdr.ValueAtQuantile(q*100), maxUs)) * time.Microsecond
}

// IntervalQuantile returns the value at quantile q in [0, 1] of the
// durations recorded since the previous call (or since the first
// recording), 0 when there were none, and starts a new interval.
func (h *histogram) IntervalQuantile(q float64) time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	v := quantile(h.interval, q, h.intervalMax)
	if h.interval != nil {
		h.interval.Reset()
	}
	h.intervalMax = 0
	return v
}

// Percentiles summarises every duration recorded.
func (h *histogram) Percentiles() Percentiles {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.all == nil {
		return Percentiles{}
	}
	return Percentiles{
		Count: h.all.TotalCount(),
		P50:   quantile(h.all, 0.50, h.max),
		P95:   quantile(h.all, 0.95, h.max),
		P99:   quantile(h.all, 0.99, h.max),
		P999:  quantile(h.all, 0.999, h.max),
		Max:   time.Duration(h.max) * time.Microsecond,
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
