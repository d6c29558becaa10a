package server

import (
	"math"
	runtimemetrics "runtime/metrics"

	"github.com/prometheus/client_golang/prometheus"
)

// gcPauseMetric is the runtime's histogram of stop-the-world pauses for
// GC since the process started.
const gcPauseMetric = "/sched/pauses/total/gc:seconds"

// gcPauseQuantiles are the quantiles exported of gcPauseMetric.
var gcPauseQuantiles = []float64{0.5, 0.99, 0.999, 1}

// gcPauseCollector exports the GC pauses of the process (runtime/metrics)
// as the summary receipts_kafkagate_gc_pause_seconds (its quantiles, its
// count and its sum), and their count again as gc_pauses_total, so tail
// latency can be set beside GC pauses on the same dashboard and in
// benchmarks. A summary, not a gauge: only a summary may carry the
// reserved "quantile" label (promtool check metrics).
type gcPauseCollector struct {
	summary *prometheus.Desc
	count   *prometheus.Desc
}

func newGCPauseCollector() *gcPauseCollector {
	return &gcPauseCollector{
		summary: prometheus.NewDesc(prometheus.BuildFQName(metricsNamespace, metricsSubsystem, "gc_pause_seconds"),
			"Stop-the-world GC pauses since the process started: quantiles (upper bound of the runtime's bucket; 1 is the longest), count and sum (of the buckets' lower bounds: at most the true sum).",
			nil, nil),
		count: prometheus.NewDesc(prometheus.BuildFQName(metricsNamespace, metricsSubsystem, "gc_pauses_total"),
			"Stop-the-world GC pauses since the process started.", nil, nil),
	}
}

func (c *gcPauseCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.summary
	ch <- c.count
}

func (c *gcPauseCollector) Collect(ch chan<- prometheus.Metric) {
	s := []runtimemetrics.Sample{{Name: gcPauseMetric}}
	runtimemetrics.Read(s)
	if s[0].Value.Kind() != runtimemetrics.KindFloat64Histogram {
		return // not in this Go version
	}
	h := s[0].Value.Float64Histogram()
	var total uint64
	var sum float64
	for i, n := range h.Counts {
		total += n
		if lo := h.Buckets[i]; n > 0 && !math.IsInf(lo, -1) {
			sum += float64(n) * lo
		}
	}
	ch <- prometheus.MustNewConstMetric(c.count, prometheus.CounterValue, float64(total))
	qs := make(map[float64]float64, len(gcPauseQuantiles))
	for _, q := range gcPauseQuantiles {
		qs[q] = histogramQuantile(h, total, q)
	}
	ch <- prometheus.MustNewConstSummary(c.summary, total, sum, qs)
}

// histogramQuantile is the upper bound of the bucket holding quantile q
// (the lower bound when the upper one is +Inf); 0 when empty.
func histogramQuantile(h *runtimemetrics.Float64Histogram, total uint64, q float64) float64 {
	if total == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(total)))
	rank = min(max(rank, 1), total)
	var cum uint64
	for i, n := range h.Counts {
		cum += n
		if cum >= rank {
			if hi := h.Buckets[i+1]; !math.IsInf(hi, 1) {
				return hi
			}
			return h.Buckets[i]
		}
	}
	return 0
}
