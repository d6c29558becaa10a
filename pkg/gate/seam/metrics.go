package seam

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/readstate/receipts/pkg/kinds/cursors"
	"github.com/readstate/receipts/pkg/receipt"
)

// Event outcomes (label values of events_total).
const (
	OutcomeKafka       = "kafka"
	OutcomeSpooled     = "spooled"
	OutcomeUnavailable = "unavailable"
)

// Why a mark did not advance (label values of stale_marks_total).
const (
	staleDuplicate = "duplicate" // the stored cursor is at the mark's position
	staleBehind    = "stale"     // the stored cursor is ahead of it
)

// Redis operations (label values of redis_degraded_total).
const (
	RedisOpMerge   = "merge"
	RedisOpGet     = "get"
	RedisOpHydrate = "hydrate"
	RedisOpErase   = "erase"
	// RedisOpRestore: a restore from Postgres after Redis lost data failed.
	RedisOpRestore = "restore"
	// RedisOpView and RedisOpSettings: the read-by view and the settings
	// registers it follows.
	RedisOpView     = "channel_view"
	RedisOpSettings = "settings"
	// RedisOpReplicate: Redis' replicas did not take a write of a user's
	// read in time (Config.ReplicaAcks).
	RedisOpReplicate = "replicate"
)

type Metrics struct {
	staleMarks    *prometheus.CounterVec
	Events        *prometheus.CounterVec
	Produce       prometheus.Histogram
	RedisDegraded *prometheus.CounterVec
	ReadFallbacks *prometheus.CounterVec
	// threadsCollected counts the thread registers collected past the
	// per-user bound (threadcalls/threadcollect.go).
	ThreadsCollected prometheus.Counter
	// undecodable counts the Redis fields reads skipped
	// (redisstore.Config.Undecodable).
	undecodable prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) *Metrics {
	f := promauto.With(reg)
	m := &Metrics{
		staleMarks: f.NewCounterVec(prometheus.CounterOpts{
			Namespace: MetricsNamespace, Subsystem: MetricsSubsystem, Name: "stale_marks_total",
			Help: "Marks Redis did not advance (cursor-regression attempts), by reason: duplicate (stored at the mark's position) or stale (stored ahead).",
		}, []string{"reason"}),
		Events: f.NewCounterVec(prometheus.CounterOpts{
			Namespace: MetricsNamespace, Subsystem: MetricsSubsystem, Name: "events_total",
			Help: "Validated marks by where they became durable (kafka, spooled) or unavailable.",
		}, []string{"outcome"}),
		Produce: f.NewHistogram(prometheus.HistogramOpts{
			Namespace: MetricsNamespace, Subsystem: MetricsSubsystem, Name: "produce_duration_seconds",
			Help:    "Time to make a call's records durable (Kafka's acks, or the spool's fsync after the bound), or to give up.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}),
		RedisDegraded: f.NewCounterVec(prometheus.CounterOpts{
			Namespace: MetricsNamespace, Subsystem: MetricsSubsystem, Name: "redis_degraded_total",
			Help: "Redis failures that degraded the real-time view, by operation (merge counts marks).",
		}, []string{"op"}),
		undecodable: f.NewCounter(prometheus.CounterOpts{
			Namespace: MetricsNamespace, Subsystem: MetricsSubsystem, Name: "redis_undecodable_fields_total",
			Help: "Stored Redis fields a read skipped because they could not be decoded (read as absent; the next merge or the drift sweep replaces them).",
		}),
		ThreadsCollected: f.NewCounter(prometheus.CounterOpts{
			Namespace: MetricsNamespace, Subsystem: MetricsSubsystem, Name: "threads_collected_total",
			Help: "Thread registers dropped from Redis past the per-user bound (the least recently active; the followed among them unfollowed first).",
		}),
		ReadFallbacks: f.NewCounterVec(prometheus.CounterOpts{
			Namespace: MetricsNamespace, Subsystem: MetricsSubsystem, Name: "read_fallbacks_total",
			Help: "Reads answered with Postgres, by reason (incomplete: hash not hydrated; redis_error; too_many_channels: a default channel set over the cap, which Postgres pages; hydrating: a large deletion set being copied into Redis).",
		}, []string{"reason"}),
	}
	// Every label value exists from the start, so a dashboard's or an
	// alert's rate() sees 0, not an absent series.
	m.staleMarks.WithLabelValues(staleDuplicate)
	m.staleMarks.WithLabelValues(staleBehind)
	for _, op := range []string{RedisOpMerge, RedisOpGet, RedisOpHydrate, RedisOpRestore, RedisOpReplicate} {
		m.RedisDegraded.WithLabelValues(op)
	}
	for _, reason := range []string{"incomplete", "redis_error", "too_many_channels", "hydrating"} {
		m.ReadFallbacks.WithLabelValues(reason)
	}
	return m
}

// CountStale counts the marks Redis did not advance: incoming is what a
// mark wrote, merged Redis's answer for it. Failed merges are not counted
// (redis_degraded_total has them).
func (m *Metrics) CountStale(incoming []receipt.State, merged []cursors.MergeResult) {
	for i := range merged {
		r := &merged[i]
		if r.Err != nil || r.Advanced || i >= len(incoming) {
			continue
		}
		// The cursor the mark names: a READ mark sets delivered too, and a
		// private read is stored only while ahead of the public read, so
		// it is compared with the greater of both.
		in, stored := incoming[i].Delivered, r.State.Delivered
		switch {
		case incoming[i].Read.Position.Seq != 0:
			in, stored = incoming[i].Read, r.State.Read
		case incoming[i].PrivateRead.Position.Seq != 0:
			in, stored = incoming[i].PrivateRead, receipt.MaxCursor(r.State.Read, r.State.PrivateRead)
		}
		reason := staleBehind
		if !r.Stale && stored.Position.Seq == in.Position.Seq {
			reason = staleDuplicate
		}
		m.staleMarks.WithLabelValues(reason).Inc()
	}
}
