package producer

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/readstate/receipts/pkg/spool"
)

// Namespace starts every metric name of the project.
const Namespace = "receipts"

type metrics struct {
	// Spool metrics; registered (and non-nil) only with a spool.
	spoolFull         prometheus.Counter
	spoolReplayed     prometheus.Counter
	spoolReplayErrors prometheus.Counter
	spoolCircuitOpen  prometheus.Gauge
}

// addSpool registers the spool's metrics; the size gauges read Stats at
// scrape time.
func (m *metrics) addSpool(reg prometheus.Registerer, subsystem string, sp *spool.Spool) {
	f := promauto.With(reg)
	f.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: Namespace, Subsystem: subsystem, Name: "spool_bytes",
		Help: "Bytes of the spool's files (what the spool's byte bound limits).",
	}, func() float64 { return float64(sp.Stats().Bytes) })
	f.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: Namespace, Subsystem: subsystem, Name: "spool_max_bytes",
		Help: "The spool's bound in bytes.",
	}, func() float64 { return float64(sp.Stats().MaxBytes) })
	f.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: Namespace, Subsystem: subsystem, Name: "spool_records",
		Help: "Spooled records not yet replayed to Kafka.",
	}, func() float64 { return float64(sp.Stats().Records) })
	f.NewCounterFunc(prometheus.CounterOpts{
		Namespace: Namespace, Subsystem: subsystem, Name: "spool_damaged_bytes_total",
		Help: "Bytes the spool's recovery at start-up could not read as frames (a torn tail or damage) and moved aside to .damaged files; every valid frame around them is kept.",
	}, func() float64 { return float64(sp.Recovery().DiscardedBytes) })
	m.spoolFull = f.NewCounter(prometheus.CounterOpts{
		Namespace: Namespace, Subsystem: subsystem, Name: "spool_full_total",
		Help: "Calls refused (Unavailable) because their records did not fit in the spool.",
	})
	m.spoolReplayed = f.NewCounter(prometheus.CounterOpts{
		Namespace: Namespace, Subsystem: subsystem, Name: "spool_replayed_total",
		Help: "Spooled records acked by Kafka and committed by the replayer.",
	})
	m.spoolReplayErrors = f.NewCounter(prometheus.CounterOpts{
		Namespace: Namespace, Subsystem: subsystem, Name: "spool_replay_errors_total",
		Help: "Failed attempts of the replayer (producing a batch, reading or committing the spool).",
	})
	m.spoolCircuitOpen = f.NewGauge(prometheus.GaugeOpts{
		Namespace: Namespace, Subsystem: subsystem, Name: "spool_circuit_open",
		Help: "1 while calls spool without trying Kafka (after a Kafka failure, until a replay succeeds).",
	})
}
