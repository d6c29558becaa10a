package server

import (
	"math"
	runtimemetrics "runtime/metrics"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// gcPauseMetric is the runtime's histogram of stop-the-world pauses for
// GC since the process started.
const gcPauseMetric = "/sched/pauses/total/gc:seconds"

// gcPauseQuantiles are the quantiles exported of gcPauseMetric.
var gcPauseQuantiles = []float64{0.5, 0.99, 0.999, 1}

// gcPauseCollector exports the GC pause quantiles of the process
// (runtime/metrics) as receipts_kafkagate_gc_pause_seconds{quantile}, and
// their count, so tail latency can be set beside GC pauses on the same
// dashboard and in benchmarks.
type gcPauseCollector struct {
	quantile *prometheus.Desc
	count    *prometheus.Desc
}

func newGCPauseCollector() *gcPauseCollector {
	return &gcPauseCollector{
		quantile: prometheus.NewDesc(prometheus.BuildFQName(metricsNamespace, metricsSubsystem, "gc_pause_seconds"),
			"Stop-the-world GC pauses since the process started, by quantile (upper bound of the runtime's bucket; 1 is the longest).",
			[]string{"quantile"}, nil),
		count: prometheus.NewDesc(prometheus.BuildFQName(metricsNamespace, metricsSubsystem, "gc_pauses_total"),
			"Stop-the-world GC pauses since the process started.", nil, nil),
	}
}

func (c *gcPauseCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.quantile
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
	for _, n := range h.Counts {
		total += n
	}
	ch <- prometheus.MustNewConstMetric(c.count, prometheus.CounterValue, float64(total))
	for _, q := range gcPauseQuantiles {
		ch <- prometheus.MustNewConstMetric(c.quantile, prometheus.GaugeValue, histogramQuantile(h, total, q),
			strconv.FormatFloat(q, 'f', -1, 64))
	}
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
