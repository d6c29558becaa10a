package persister

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// Batch triggers: why a batch was cut.
const (
	triggerCount    = "count"    // BatchRecords reached
	triggerLinger   = "linger"   // the linger ran out and the writer was free
	triggerRevoke   = "revoke"   // a rebalance is waiting: cut the linger short
	triggerShutdown = "shutdown" // the context ended with records in hand
)

// Dead-letter kinds.
const (
	kindUndecodable = "undecodable"
	kindRejected    = "rejected"
)

// Retried operations.
const (
	opUpsert     = "upsert"
	opDeadLetter = "dead_letter"
)

type metrics struct {
	consumed    prometheus.Counter
	batches     *prometheus.CounterVec
	batchSize   prometheus.Histogram
	rowsWritten prometheus.Counter
	movesLogged prometheus.Counter
	dedupeIn    prometheus.Counter
	dedupeOut   prometheus.Counter
	deadLetters *prometheus.CounterVec
	// deadLettersDropped counts dead letters the topic refused as too large.
	deadLettersDropped prometheus.Counter
	changes            prometheus.Counter
	upsertTime         prometheus.Histogram
	writeTime          prometheus.Histogram
	retries            *prometheus.CounterVec
	commitErrors       prometheus.Counter
	commits            prometheus.Counter
	ready              prometheus.Gauge
	staleSkipped       prometheus.Counter
	// mentionsTrimmed counts mention rows deleted by the retention.
	mentionsTrimmed prometheus.Counter
	dedupeRatio     prometheus.Gauge
	throttled       prometheus.Counter
	// erasedDropped counts events dropped as predating their user's erasure.
	erasedDropped prometheus.Counter
	// erasuresRaced counts users erased by another process while a
	// window's rows were written, whose rows were taken back.
	erasuresRaced prometheus.Counter
	// bulkGuessMissed counts bulk statements whose COPY met a row the
	// written cache did not know of.
	bulkGuessMissed prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) *metrics {
	f := promauto.With(reg)
	m := &metrics{
		erasedDropped: f.NewCounter(prometheus.CounterOpts{
			Namespace: metricsNamespace, Subsystem: MetricsSubsystem, Name: "erased_events_dropped_total",
			Help: "Events not written because they predate their user's erasure (tombstone).",
		}),
		erasuresRaced: f.NewCounter(prometheus.CounterOpts{
			Namespace: metricsNamespace, Subsystem: MetricsSubsystem, Name: "erasures_raced_total",
			Help: "Users erased by another process (the dlt-reconciler, another replica) after a window looked up its tombstones: the user's rows were deleted again and the window's events after the erasure written again.",
		}),
		bulkGuessMissed: f.NewCounter(prometheus.CounterOpts{
			Namespace: metricsNamespace, Subsystem: MetricsSubsystem, Name: "bulk_guess_missed_total",
			Help: "Bulk statements (--statement-rows >= 1000) whose COPY of keys this replica had not written met an existing row: the statement was merged by the upsert instead, and bulk statements ask Postgres which keys have a row for the next 30 s.",
		}),
		consumed: f.NewCounter(prometheus.CounterOpts{
			Namespace: metricsNamespace, Subsystem: MetricsSubsystem, Name: "records_consumed_total",
			Help: "Records polled from the topic.",
		}),
		batches: f.NewCounterVec(prometheus.CounterOpts{
			Namespace: metricsNamespace, Subsystem: MetricsSubsystem, Name: "batches_total",
			Help: "Batches processed, by what cut them: count (MaxPollRecords reached), linger (the poll or linger returned less), revoke (a rebalance was waiting), shutdown.",
		}, []string{"trigger"}),
		batchSize: f.NewHistogram(prometheus.HistogramOpts{
			Namespace: metricsNamespace, Subsystem: MetricsSubsystem, Name: "batch_records",
			Help:    "Records per batch.",
			Buckets: []float64{1, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000},
		}),
		rowsWritten: f.NewCounter(prometheus.CounterOpts{
			Namespace: metricsNamespace, Subsystem: MetricsSubsystem, Name: "rows_written_total",
			Help: "Deduplicated rows committed to Postgres (a row that advanced nothing still counts).",
		}),
		movesLogged: f.NewCounter(prometheus.CounterOpts{
			Namespace: metricsNamespace, Subsystem: MetricsSubsystem, Name: "cursor_moves_logged_total",
			Help: "Rows added to the cursor-move log (public moves of members of small channels).",
		}),
		dedupeIn: f.NewCounter(prometheus.CounterOpts{
			Namespace: metricsNamespace, Subsystem: MetricsSubsystem, Name: "dedupe_records_in_total",
			Help: "Decoded records given to the in-batch dedupe; rate(rows_out)/rate(records_in) is the dedupe ratio.",
		}),
		dedupeOut: f.NewCounter(prometheus.CounterOpts{
			Namespace: metricsNamespace, Subsystem: MetricsSubsystem, Name: "dedupe_rows_out_total",
			Help: "Rows left after the in-batch dedupe (one per key per batch).",
		}),
		deadLetters: f.NewCounterVec(prometheus.CounterOpts{
			Namespace: metricsNamespace, Subsystem: MetricsSubsystem, Name: "dead_letters_total",
			Help: "Records acked on the dead-letter topic, by kind: undecodable (or invalid) or rejected (by Postgres).",
		}, []string{"kind"}),
		deadLettersDropped: f.NewCounter(prometheus.CounterOpts{
			Namespace: metricsNamespace, Subsystem: MetricsSubsystem, Name: "dead_letters_dropped_total",
			Help: "Dead letters the dead-letter topic refused as too large, skipped with an error log naming the source offset (never retried: that would stall the partition).",
		}),
		changes: f.NewCounter(prometheus.CounterOpts{
			Namespace: metricsNamespace, Subsystem: MetricsSubsystem, Name: "changes_total",
			Help: "Change-feed records acked on --changes-topic (one per public cursor a window left at its incoming position).",
		}),
		upsertTime: f.NewHistogram(prometheus.HistogramOpts{
			Namespace: metricsNamespace, Subsystem: MetricsSubsystem, Name: "upsert_duration_seconds",
			Help:    "Time of one upsert transaction, of one shard of a batch (or of a part of it while a rejected row is bisected out), failed attempts included.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
		}),
		writeTime: f.NewHistogram(prometheus.HistogramOpts{
			Namespace: metricsNamespace, Subsystem: MetricsSubsystem, Name: "write_duration_seconds",
			Help:    "Time to settle a batch's rows in Postgres: every shard written concurrently, retries and bisection included. sum(upsert_duration)/sum(write_duration) is the writers' overlap.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
		}),
		retries: f.NewCounterVec(prometheus.CounterOpts{
			Namespace: metricsNamespace, Subsystem: MetricsSubsystem, Name: "retries_total",
			Help: "Attempts that failed and will be retried after a backoff, by operation (upsert, dead_letter).",
		}, []string{"op"}),
		commitErrors: f.NewCounter(prometheus.CounterOpts{
			Namespace: metricsNamespace, Subsystem: MetricsSubsystem, Name: "commit_errors_total",
			Help: "Offset commits that failed; the offsets are committed with the next batch or on revoke, and replays are harmless.",
		}),
		commits: f.NewCounter(prometheus.CounterOpts{
			Namespace: metricsNamespace, Subsystem: MetricsSubsystem, Name: "commits_total",
			Help: "Offset commits that succeeded (after a batch, or on revoke): a persister that consumes but stops committing shows here.",
		}),
		staleSkipped: f.NewCounter(prometheus.CounterOpts{
			Namespace: metricsNamespace, Subsystem: MetricsSubsystem, Name: "stale_rows_skipped_total",
			Help: "Deduplicated rows not written because Postgres is known to hold at least their cursors (stale or duplicate events).",
		}),
		mentionsTrimmed: f.NewCounter(prometheus.CounterOpts{
			Namespace: metricsNamespace, Subsystem: MetricsSubsystem, Name: "mentions_trimmed_total",
			Help: "Mention rows deleted because they are no longer among their key's newest cap+1.",
		}),
		dedupeRatio: f.NewGauge(prometheus.GaugeOpts{
			Namespace: metricsNamespace, Subsystem: MetricsSubsystem, Name: "dedupe_ratio",
			Help: "Share of the last window's decoded records that cost no row (folded into another record of their key, or stale): the ADR's dedup ratio.",
		}),
		ready: f.NewGauge(prometheus.GaugeOpts{
			Namespace: metricsNamespace, Subsystem: MetricsSubsystem, Name: "ready",
			Help: "1 while the persister runs with Postgres and the dead-letter topic usable, else 0.",
		}),
		throttled: f.NewCounter(prometheus.CounterOpts{
			Namespace: metricsNamespace, Subsystem: MetricsSubsystem, Name: "write_throttle_seconds_total",
			Help: "Time statements waited for the --max-write-rate cap (rate() near the writers' count: the cap limits throughput).",
		}),
	}
	for _, t := range []string{triggerCount, triggerLinger, triggerRevoke, triggerShutdown} {
		m.batches.WithLabelValues(t)
	}
	for _, k := range []string{kindUndecodable, kindRejected} {
		m.deadLetters.WithLabelValues(k)
	}
	for _, o := range []string{opUpsert, opDeadLetter} {
		m.retries.WithLabelValues(o)
	}
	return m
}
