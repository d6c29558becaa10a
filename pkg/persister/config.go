package persister

import (
	"cmp"
	"errors"
	"flag"
	"fmt"
	"math"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/readstate/receipts/pkg/backoff"
	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/event"
	"github.com/readstate/receipts/pkg/kafkaconf"
	"github.com/readstate/receipts/pkg/kind"
	"github.com/readstate/receipts/pkg/kinds"
	"github.com/readstate/receipts/pkg/lifecycle"
	"github.com/readstate/receipts/pkg/pgstore"
	"github.com/readstate/receipts/pkg/tracing"
)

// Defaults.
const (
	// GroupDefault is the consumer group every persister replica joins.
	GroupDefault = "receipts-persister"
	// ClientIDDefault names the Kafka client in broker logs and metrics.
	ClientIDDefault = "receipts-persister"
	// MaxPollRecordsDefault bounds one poll.
	MaxPollRecordsDefault = 500
	// StatementRowsDefault bounds one upsert statement: the ADR's batch of
	// 500 stays the unit of a statement, large enough to amortise a round
	// trip, small enough that Writers statements spread a window's rows.
	StatementRowsDefault = 500
	// BatchRecordsDefault bounds a window: the records deduplicated
	// together before one write. Wide, because a hot key marked many
	// times costs one row per window (see BENCHMARKS.md, why the
	// defaults: window size), and small enough (a few MB) to settle well
	// inside a rebalance timeout.
	BatchRecordsDefault = 50000
	// LingerDefault is how long a window waits for more records after its
	// first before it is handed to the writer (when the writer is busy it
	// keeps growing meanwhile): the floor of the latency to Postgres when
	// traffic is light.
	LingerDefault = 20 * time.Millisecond
	// LingerMaxDefault and LingerMaxRateDefault make the linger follow the
	// rate: Linger up to a fifth of LingerMaxRate records/s, rising
	// linearly to LingerMax at LingerMaxRate. A light load keeps its lag
	// to Postgres; a heavy one writes fewer rows per event (a longer
	// window dedupes more; see BENCHMARKS.md, why the defaults: persister
	// linger) when Postgres' CPU is what the machine lacks.
	LingerMaxDefault     = 250 * time.Millisecond
	LingerMaxRateDefault = 50_000
	// FetchMaxBytesDefault and FetchMaxPartitionBytesDefault bound one
	// fetch response: kgo decodes a whole response before the first poll
	// returns, so its defaults (50 MB, 1 MB per partition: 32 MB over 32
	// partitions of backlog) delay a cold start by seconds, while smaller
	// fetches, pipelined, keep the same throughput.
	FetchMaxBytesDefault          = 4 << 20
	FetchMaxPartitionBytesDefault = 256 << 10
	// FetchMinBytesDefault and FetchMaxWaitDefault let the broker hold a
	// fetch until 256 KiB (some 2,500 records) are there or 20 ms passed:
	// answering each fetch with the few records that just arrived cost
	// the persister and the broker most of their CPU at moderate rates
	// (see BENCHMARKS.md, why the defaults: fetch minimum). The wait is at
	// most the linger's again.
	FetchMinBytesDefault = 256 << 10
	FetchMaxWaitDefault  = 20 * time.Millisecond
	// WrittenCacheKeysDefault bounds the keys whose written cursors are
	// remembered to skip stale rows (about 100 bytes each).
	WrittenCacheKeysDefault = 1 << 20
	// DrainTimeoutDefault bounds how long shutdown waits for the batch in
	// hand (and for leaving the group).
	DrainTimeoutDefault = 10 * time.Second
	// DLTDeliveryTimeoutDefault bounds one attempt to produce dead letters;
	// kgo's idempotent producer otherwise retries forever while the broker
	// is away, and readiness would never say so.
	DLTDeliveryTimeoutDefault = 30 * time.Second
	// WritersDefault is how many statements of a window are written at
	// once, each on its own connection: on two cores two keep Postgres
	// busy while one statement waits on the WAL flush of another.
	WritersDefault = 2
	// RetryBaseDefault and RetryCapDefault bound the outage backoff.
	RetryBaseDefault = 100 * time.Millisecond
	RetryCapDefault  = 10 * time.Second
	// MetricsSubsystem names the persister's metrics (receipts_persister_…).
	MetricsSubsystem = "persister"
	metricsNamespace = "receipts"
)

// Config configures a Persister. The zero value of each field means its
// default.
type Config struct {
	// Kafka is the connection. ClientID defaults to ClientIDDefault.
	Kafka kafkaconf.Config
	// KafkaOpts are appended to the client options (tests pass
	// kafkatest.FastClientOpts here).
	KafkaOpts []kgo.Opt
	// Topic is consumed. Defaults to event.TopicDefault.
	Topic string
	// DLTTopic receives undecodable and rejected records. Defaults to
	// event.DLTTopicDefault.
	DLTTopic string
	// ChangesTopic, when set, receives the change feed: one
	// ReadStateChange per public cursor a window left Postgres holding at
	// its incoming position (changes.go). Empty: no feed.
	ChangesTopic string
	// Group is the consumer group. Defaults to GroupDefault.
	Group string

	// Postgres opens the store when Store is nil (URL defaults to
	// pgstore.URLDefault; Schema lets a test point the persister at its
	// own schema). The persister then owns the store and closes it.
	Postgres pgstore.Config
	// Store, when set, is used instead of opening one; the caller keeps
	// ownership.
	Store *pgstore.Store

	// MaxPollRecords bounds one poll. Defaults to MaxPollRecordsDefault.
	MaxPollRecords int
	// BatchRecords bounds a window: the records of many polls decoded and
	// deduplicated together (the greatest value per key) before they are
	// written, and whose offsets are committed together after the write.
	// Defaults to BatchRecordsDefault.
	BatchRecords int
	// StatementRows bounds the rows of one upsert statement (one implicit
	// transaction). Defaults to StatementRowsDefault.
	StatementRows int
	// Linger is how long a window waits for more records after its first
	// before it is handed to the writer; while the writer is busy with the
	// previous window it keeps growing (up to BatchRecords). Negative
	// hands a window over as soon as the writer is free. Defaults to
	// LingerDefault.
	Linger time.Duration
	// LingerMax and LingerMaxRate scale the linger with the consumed rate
	// (records/s over the last second): Linger up to LingerMaxRate/5,
	// then linearly up to LingerMax at LingerMaxRate. A LingerMax not
	// above Linger keeps Linger at every rate. Default to
	// LingerMaxDefault and LingerMaxRateDefault.
	LingerMax     time.Duration
	LingerMaxRate float64
	// Writers is how many statements of a window are written concurrently,
	// each on its own pool connection; statements hold disjoint, sorted key
	// ranges. The pool must have at least Writers connections (one more
	// keeps a connection for readiness pings). Defaults to WritersDefault.
	Writers int
	// FetchMaxBytes and FetchMaxPartitionBytes bound one fetch response
	// (kgo.FetchMaxBytes, kgo.FetchMaxPartitionBytes). Default to
	// FetchMaxBytesDefault and FetchMaxPartitionBytesDefault.
	FetchMaxBytes, FetchMaxPartitionBytes int
	// FetchMinBytes and FetchMaxWait: the broker answers a fetch once it
	// holds FetchMinBytes or FetchMaxWait passed (kgo.FetchMinBytes,
	// kgo.FetchMaxWait). Default to FetchMinBytesDefault and
	// FetchMaxWaitDefault.
	FetchMinBytes int
	FetchMaxWait  time.Duration
	// MentionCap is the mention cap: each (user, channel) keeps its newest
	// MentionCap+1 mention seqs (channel.Mentions), in the window and in
	// Postgres (the retention deletes the rest). It must equal the
	// gateway's. Defaults to channel.MentionCapDefault.
	MentionCap int
	// Kinds are the kinds of state the persister writes. Defaults to
	// kinds.All().
	Kinds []kind.Kind
	// DetailThreshold: the cursor-move log keeps moves of channels of at
	// most this many joined members (it must equal the gateway's
	// --receipts-detail-threshold). Defaults to DetailThresholdDefault.
	DetailThreshold int
	// MoveRetention is how long the cursor-move log keeps moves (whole
	// weekly partitions dropped past it). Defaults to MoveRetentionDefault.
	MoveRetention time.Duration
	// WrittenCacheKeys bounds the keys whose written cursors are
	// remembered so that a row that cannot advance Postgres is not sent
	// (stale and duplicate events cost no write). Negative disables it.
	// Defaults to WrittenCacheKeysDefault.
	WrittenCacheKeys int
	// DrainTimeout bounds each step of the shutdown: finishing and
	// committing the batch in hand (counted from the cancellation), then
	// leaving the group. Defaults to DrainTimeoutDefault.
	DrainTimeout time.Duration
	// DLTDeliveryTimeout bounds one attempt to produce to the dead-letter
	// topic before it is retried. Defaults to DLTDeliveryTimeoutDefault.
	DLTDeliveryTimeout time.Duration
	// Retry is the backoff between attempts while Postgres or the
	// dead-letter topic is unavailable (pkg/backoff defaults: 100ms base,
	// 10s cap, 20% jitter). Its MaxDuration must stay 0: retrying without
	// end is a deliberate choice, because Kafka keeps the backlog and giving
	// up could only drop data or dead-letter good records. Readiness and the
	// retries metric make a long outage visible instead.
	Retry backoff.Config

	// MaxWriteRate caps the rows written to Postgres per second by this
	// replica (the ADR's backpressure): each statement waits for its rows'
	// share first, and Kafka holds the rest. 0 (the default) is no cap.
	MaxWriteRate float64

	// Tracing, when on, gives every window a span linked to the spans of
	// the records it wrote (their traceparent headers; at most MaxLinks),
	// with its statements as children (when the persister opens its own
	// store). Nil or off: nothing.
	Tracing *tracing.Tracing
	// Logger defaults to a no-op logger.
	Logger *zap.Logger
	// LagInterval is how often the consumer group's lag is read from the
	// brokers and exported as receipts_persister_consumer_lag_records.
	// Defaults to LagIntervalDefault; negative disables it.
	LagInterval time.Duration
	// Registerer receives the persister's and the Kafka client's metrics.
	// Defaults to a private registry (never the global one).
	Registerer prometheus.Registerer
}

// RegisterFlags registers the persister's own flags (Kafka and Postgres
// register theirs), with the config's values (or the defaults, for zero
// fields) as defaults.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	d := c.withDefaults()
	c.Topic, c.DLTTopic, c.Group, c.MaxPollRecords, c.Writers = d.Topic, d.DLTTopic, d.Group, d.MaxPollRecords, d.Writers
	c.DrainTimeout, c.DLTDeliveryTimeout, c.LagInterval = d.DrainTimeout, d.DLTDeliveryTimeout, d.LagInterval
	c.BatchRecords, c.StatementRows, c.Linger, c.WrittenCacheKeys = d.BatchRecords, d.StatementRows, d.Linger, d.WrittenCacheKeys
	c.LingerMax, c.LingerMaxRate = d.LingerMax, d.LingerMaxRate
	c.FetchMaxBytes, c.FetchMaxPartitionBytes = d.FetchMaxBytes, d.FetchMaxPartitionBytes
	c.FetchMinBytes, c.FetchMaxWait = d.FetchMinBytes, d.FetchMaxWait
	c.MentionCap = d.MentionCap
	c.DetailThreshold = d.DetailThreshold
	c.MoveRetention = d.MoveRetention
	if c.Retry.Base == 0 {
		c.Retry.Base = RetryBaseDefault
	}
	if c.Retry.Cap == 0 {
		c.Retry.Cap = RetryCapDefault
	}
	fs.StringVar(&c.Topic, "topic", c.Topic, "topic to consume")
	fs.StringVar(&c.DLTTopic, "dlt-topic", c.DLTTopic, "dead-letter topic for undecodable and rejected records")
	fs.StringVar(&c.ChangesTopic, "changes-topic", c.ChangesTopic, "change-feed topic (e.g. read-state-changes): one ReadStateChange per public cursor each window advanced, produced after the database commit; empty: off")
	fs.StringVar(&c.Group, "group", c.Group, "consumer group")
	fs.IntVar(&c.Writers, "writers", c.Writers, "statements of a window written concurrently, each on its own connection")
	fs.IntVar(&c.MaxPollRecords, "max-poll-records", c.MaxPollRecords, "most records in one poll")
	fs.IntVar(&c.BatchRecords, "batch-records", c.BatchRecords, "most records in one window (deduplicated together; offsets committed together after the write)")
	fs.IntVar(&c.StatementRows, "statement-rows", c.StatementRows, "most rows in one upsert statement")
	fs.DurationVar(&c.Linger, "linger", c.Linger, "how long a window waits for more records before it is written (it keeps growing while the writer is busy); negative: none")
	fs.DurationVar(&c.LingerMax, "linger-max", c.LingerMax, "the linger at --linger-max-rate: from a fifth of that rate the linger rises linearly from --linger to it (longer windows, fewer rows per event under heavy load); not above --linger: fixed")
	fs.Float64Var(&c.LingerMaxRate, "linger-max-rate", c.LingerMaxRate, "consumed records/s at which the linger reaches --linger-max")
	fs.IntVar(&c.FetchMaxBytes, "fetch-max-bytes", c.FetchMaxBytes, "bound of one fetch response in bytes")
	fs.IntVar(&c.FetchMaxPartitionBytes, "fetch-max-partition-bytes", c.FetchMaxPartitionBytes, "bound of one partition in a fetch response in bytes")
	fs.IntVar(&c.FetchMinBytes, "fetch-min-bytes", c.FetchMinBytes, "the broker answers a fetch once it holds this many bytes (or --fetch-max-wait passed): fewer, fuller fetches")
	fs.DurationVar(&c.FetchMaxWait, "fetch-max-wait", c.FetchMaxWait, "longest the broker holds a fetch for --fetch-min-bytes")
	fs.IntVar(&c.MentionCap, "mention-cap", c.MentionCap, "mentions counted per (user, channel) before \"cap+\"; each keeps its newest cap+1 mention seqs (must equal the gateway's)")
	fs.IntVar(&c.DetailThreshold, "receipts-detail-threshold", c.DetailThreshold, "channels of at most this many members get a cursor-move log (read-by times; must equal the gateway's)")
	fs.DurationVar(&c.MoveRetention, "receipts-log-retention", c.MoveRetention, "how long the cursor-move log keeps moves (weekly partitions dropped past it)")
	fs.IntVar(&c.WrittenCacheKeys, "written-cache-keys", c.WrittenCacheKeys, "keys whose written cursors are remembered to skip stale rows; negative disables")
	fs.DurationVar(&c.DrainTimeout, "drain-timeout", c.DrainTimeout, "on shutdown, how long to finish and commit the batch in hand and leave the group")
	fs.DurationVar(&c.LagInterval, "lag-interval", c.LagInterval, "how often the group's consumer lag is exported as receipts_persister_consumer_lag_records; negative disables")
	fs.Float64Var(&c.MaxWriteRate, "max-write-rate", c.MaxWriteRate, "most rows written to Postgres per second by this replica (backpressure: Kafka keeps the backlog); 0: no cap")
	fs.DurationVar(&c.DLTDeliveryTimeout, "dlt-delivery-timeout", c.DLTDeliveryTimeout, "bound of one attempt to produce dead letters before retrying")
	fs.DurationVar(&c.Retry.Base, "retry-base", c.Retry.Base, "first backoff while Postgres or the dead-letter topic is unavailable")
	fs.DurationVar(&c.Retry.Cap, "retry-cap", c.Retry.Cap, "longest backoff while Postgres or the dead-letter topic is unavailable (retries never give up)")
}

// PoolSize is the Postgres pool the persister needs: maxConns when set,
// else enough for every writer plus one connection for readiness pings (at
// least the store's default).
func PoolSize(maxConns int32, writers int) int32 {
	if maxConns > 0 {
		return maxConns
	}
	return int32(max(pgstore.MaxConnsDefault, writers+1))
}

// withDefaults returns a copy with every zero field filled.
func (c Config) withDefaults() Config {
	c.Kafka.ClientID = cmp.Or(c.Kafka.ClientID, ClientIDDefault)
	c.Topic = cmp.Or(c.Topic, event.TopicDefault)
	c.DLTTopic = cmp.Or(c.DLTTopic, event.DLTTopicDefault)
	c.Group = cmp.Or(c.Group, GroupDefault)
	c.MaxPollRecords = cmp.Or(c.MaxPollRecords, MaxPollRecordsDefault)
	c.BatchRecords = cmp.Or(c.BatchRecords, BatchRecordsDefault)
	c.StatementRows = cmp.Or(c.StatementRows, StatementRowsDefault)
	c.WrittenCacheKeys = cmp.Or(c.WrittenCacheKeys, WrittenCacheKeysDefault)
	c.MentionCap = cmp.Or(c.MentionCap, channel.MentionCapDefault)
	c.DetailThreshold = cmp.Or(c.DetailThreshold, DetailThresholdDefault)
	c.MoveRetention = cmp.Or(c.MoveRetention, MoveRetentionDefault)
	c.FetchMaxBytes = cmp.Or(c.FetchMaxBytes, FetchMaxBytesDefault)
	c.FetchMaxPartitionBytes = cmp.Or(c.FetchMaxPartitionBytes, FetchMaxPartitionBytesDefault)
	c.FetchMinBytes = cmp.Or(c.FetchMinBytes, FetchMinBytesDefault)
	c.FetchMaxWait = cmp.Or(c.FetchMaxWait, FetchMaxWaitDefault)
	c.Linger = cmp.Or(c.Linger, LingerDefault)
	c.LingerMax = cmp.Or(c.LingerMax, LingerMaxDefault)
	c.LingerMaxRate = cmp.Or(c.LingerMaxRate, LingerMaxRateDefault)
	c.Writers = cmp.Or(c.Writers, WritersDefault)
	c.DrainTimeout = cmp.Or(c.DrainTimeout, DrainTimeoutDefault)
	c.DLTDeliveryTimeout = cmp.Or(c.DLTDeliveryTimeout, DLTDeliveryTimeoutDefault)
	c.LagInterval = cmp.Or(c.LagInterval, LagIntervalDefault)
	if c.Kinds == nil {
		c.Kinds = kinds.All()
	}
	lifecycle.DefaultTelemetry(&c.Logger, &c.Registerer)
	return c
}

// validate reports every bad field at once.
func (c Config) validate() error {
	var errs []error
	if c.MaxPollRecords < 1 {
		errs = append(errs, fmt.Errorf("MaxPollRecords must be > 0, got %d", c.MaxPollRecords))
	}
	if c.Writers < 1 {
		errs = append(errs, fmt.Errorf("Writers must be > 0, got %d", c.Writers))
	}
	if c.Store == nil && c.Postgres.MaxConns > 0 && int(c.Postgres.MaxConns) < c.Writers {
		errs = append(errs, fmt.Errorf("Postgres.MaxConns %d must be >= Writers %d (one connection per writer)", c.Postgres.MaxConns, c.Writers))
	}
	if c.BatchRecords < 1 {
		errs = append(errs, fmt.Errorf("BatchRecords must be > 0, got %d", c.BatchRecords))
	}
	if c.FetchMinBytes < 1 || c.FetchMinBytes > c.FetchMaxBytes || c.FetchMaxWait < time.Millisecond {
		errs = append(errs, fmt.Errorf("FetchMinBytes (%d) must be within [1, FetchMaxBytes] and FetchMaxWait (%s) at least 1ms", c.FetchMinBytes, c.FetchMaxWait))
	}
	if c.FetchMaxBytes < 1 || c.FetchMaxBytes > math.MaxInt32 || c.FetchMaxPartitionBytes < 1 || c.FetchMaxPartitionBytes > c.FetchMaxBytes {
		errs = append(errs, fmt.Errorf("FetchMaxBytes (%d) and FetchMaxPartitionBytes (%d) must be within [1, 2^31) with the partition's at most the whole", c.FetchMaxBytes, c.FetchMaxPartitionBytes))
	}
	if c.LingerMaxRate <= 0 {
		errs = append(errs, fmt.Errorf("LingerMaxRate must be > 0, got %v", c.LingerMaxRate))
	}
	if len(c.Kinds) > maxKinds {
		errs = append(errs, fmt.Errorf("at most %d kinds of state, got %d", maxKinds, len(c.Kinds)))
	}
	if c.MentionCap < 1 {
		errs = append(errs, fmt.Errorf("MentionCap must be > 0, got %d", c.MentionCap))
	}
	if c.StatementRows < 1 {
		errs = append(errs, fmt.Errorf("StatementRows must be > 0, got %d", c.StatementRows))
	}
	if c.DrainTimeout < 0 {
		errs = append(errs, fmt.Errorf("DrainTimeout must be > 0, got %s", c.DrainTimeout))
	}
	if c.DLTDeliveryTimeout < 0 {
		errs = append(errs, fmt.Errorf("DLTDeliveryTimeout must be > 0, got %s", c.DLTDeliveryTimeout))
	}
	if c.MaxWriteRate < 0 || math.IsNaN(c.MaxWriteRate) || math.IsInf(c.MaxWriteRate, 0) {
		errs = append(errs, fmt.Errorf("MaxWriteRate must be a rate >= 0 (0: no cap), got %v", c.MaxWriteRate))
	}
	if c.ChangesTopic != "" && (c.ChangesTopic == c.Topic || c.ChangesTopic == c.DLTTopic) {
		errs = append(errs, fmt.Errorf("ChangesTopic %q must differ from Topic and DLTTopic", c.ChangesTopic))
	}
	if c.Topic == c.DLTTopic {
		errs = append(errs, fmt.Errorf("DLTTopic must differ from Topic %q", c.Topic))
	}
	if c.Retry.MaxDuration != 0 {
		errs = append(errs, fmt.Errorf("Retry.MaxDuration must be 0 (retry while the outage lasts; Kafka keeps the backlog), got %s", c.Retry.MaxDuration))
	}
	if c.Retry.Base < 0 || c.Retry.Cap < 0 {
		errs = append(errs, fmt.Errorf("Retry.Base and Retry.Cap must be >= 0, got %s and %s", c.Retry.Base, c.Retry.Cap))
	}
	if c.Retry.Base > 0 && c.Retry.Cap > 0 && c.Retry.Base > c.Retry.Cap {
		errs = append(errs, fmt.Errorf("Retry.Base %s exceeds Retry.Cap %s", c.Retry.Base, c.Retry.Cap))
	}
	if c.Store == nil && c.Postgres.MaxConns < 0 {
		errs = append(errs, fmt.Errorf("Postgres.MaxConns must be >= 0, got %d", c.Postgres.MaxConns))
	}
	if len(errs) > 0 {
		return fmt.Errorf("invalid persister config: %w", errors.Join(errs...))
	}
	return nil
}

// lingerAt is the linger of a window when records arrive at rate
// records/s (see LingerMax).
func (c Config) lingerAt(rate float64) time.Duration {
	if c.Linger < 0 || c.LingerMax <= c.Linger {
		return c.Linger
	}
	from := c.LingerMaxRate / 5
	f := (rate - from) / (c.LingerMaxRate - from)
	f = min(max(f, 0), 1)
	return c.Linger + time.Duration(f*float64(c.LingerMax-c.Linger))
}
