package watch

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

type metrics struct {
	subscribers prometheus.Gauge
	channels    prometheus.Gauge
	entries     prometheus.Counter
	delivered   prometheus.Counter
	coalesced   prometheus.Counter
	overflows   prometheus.Counter
	snapshots   *prometheus.CounterVec
	readErrors  prometheus.Counter
	// clientRefusals counts subscriptions refused at MaxStreamsPerClient.
	clientRefusals prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) *metrics {
	f := promauto.With(reg)
	opts := func(name, help string) prometheus.CounterOpts {
		return prometheus.CounterOpts{Namespace: MetricsNamespace, Subsystem: MetricsSubsystem, Name: name, Help: help}
	}
	return &metrics{
		subscribers: f.NewGauge(prometheus.GaugeOpts{Namespace: MetricsNamespace, Subsystem: MetricsSubsystem,
			Name: "subscribers", Help: "Open watch subscriptions on this replica."}),
		channels: f.NewGauge(prometheus.GaugeOpts{Namespace: MetricsNamespace, Subsystem: MetricsSubsystem,
			Name: "channels", Help: "Channel streams the reader follows (watched by at least one local subscriber)."}),
		entries:        f.NewCounter(opts("stream_entries_total", "Channel stream entries read by the reader.")),
		delivered:      f.NewCounter(opts("updates_delivered_total", "Cursor updates handed to subscribers' streams (after coalescing).")),
		coalesced:      f.NewCounter(opts("updates_coalesced_total", "Entries folded into an update a subscriber had not sent yet.")),
		overflows:      f.NewCounter(opts("overflows_total", "Subscribers whose unsent updates passed MaxPending (sent a snapshot instead).")),
		snapshots:      f.NewCounterVec(opts("snapshots_total", "Snapshots sent, by reason (fresh, expired, overflow)."), []string{"reason"}),
		readErrors:     f.NewCounter(opts("read_errors_total", "Failed reads of the channel streams (retried).")),
		clientRefusals: f.NewCounter(opts("client_limit_refusals_total", "Subscriptions refused because their client had MaxStreamsPerClient streams on this replica.")),
	}
}
