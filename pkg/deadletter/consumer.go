// Package deadletter is the dlt-reconciler's dead-letter consumer: it reads
// the dead-letter topic in a consumer group and, for each decodable record,
// repairs both stores by the max rule (pkg/repair), retrying with jittered
// exponential backoff for a bounded time. What still fails, and every record
// that can never be repaired (undecodable, invalid, unknown schema), is
// parked in Postgres (parked_dead_letters) for an operator. The offset of a
// dead letter is committed only after it was repaired or parked.
package deadletter

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"github.com/sethvargo/go-retry"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/readstate/receipts/pkg/backoff"
	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/errclass"
	"github.com/readstate/receipts/pkg/event"
	"github.com/readstate/receipts/pkg/kafkaconf"
	"github.com/readstate/receipts/pkg/lifecycle"
	"github.com/readstate/receipts/pkg/parked"
	"github.com/readstate/receipts/pkg/pgstore"
	"github.com/readstate/receipts/pkg/redisstore"
	"github.com/readstate/receipts/pkg/repair"
	"github.com/readstate/receipts/pkg/tracing"
)

// Defaults.
const (
	// GroupDefault is the reconciler's consumer group.
	GroupDefault = "receipts-dlt-reconciler"
	// MaxPollRecordsDefault bounds one poll. Records are handled one by one
	// with rebalances blocked until the poll is done, so a small poll keeps
	// a rebalance waiting for at most a few records' retries.
	MaxPollRecordsDefault = 20
	// RetryMaxDurationDefault bounds the retries of one record before it is
	// parked.
	RetryMaxDurationDefault = 30 * time.Second
	// AttemptTimeoutDefault bounds one repair attempt.
	AttemptTimeoutDefault = 5 * time.Second
	// MetricsSubsystem names the consumer's metrics
	// (receipts_reconciler_…), shared with the drift sweep's.
	MetricsSubsystem = "reconciler"
	metricsNamespace = "receipts"
	// commitTimeout bounds an offset commit, also at shutdown.
	commitTimeout = 10 * time.Second
	// leaveTimeout bounds leaving the group at shutdown.
	leaveTimeout = 5 * time.Second
)

// Kinds of parked records, the values of the parked_total "kind" label and
// the prefix of the parked reason.
const (
	// KindUndecodable: the record can never be decoded or is invalid
	// (garbage bytes, invalid ids, unknown schema version).
	KindUndecodable = "undecodable"
	// KindRejected: Postgres refused the data itself.
	KindRejected = "rejected"
	// KindUnavailable: the repair still failed when the retry bound ran out.
	KindUnavailable = "unavailable"
)

// Config configures a Consumer.
type Config struct {
	// Postgres is the durable store; also where records are parked.
	// Required.
	Postgres *pgstore.Store
	// Redis is the real-time view, read before and merged after each
	// repair. Required (it may be down: then only Postgres is repaired).
	Redis *redisstore.Store
	// Kafka is the connection config.
	Kafka kafkaconf.Config
	// Tracing, when on, gives each dead letter's repair a span, a child
	// of the trace its record carries (the call that produced its source).
	Tracing *tracing.Tracing
	// DLTTopic is the dead-letter topic. Defaults to event.DLTTopicDefault.
	DLTTopic string
	// Group is the consumer group. Defaults to GroupDefault.
	Group string
	// MaxPollRecords bounds one poll. Defaults to MaxPollRecordsDefault.
	MaxPollRecords int
	// MentionCap is the mention cap (each key keeps its newest cap+1).
	// Defaults to channel.MentionCapDefault.
	MentionCap int
	// Retry is the backoff for retryable repair failures. Retry.MaxDuration
	// defaults to RetryMaxDurationDefault and cannot be unbounded here: a
	// record that cannot be repaired in that time is parked, so one bad key
	// never holds up the dead-letter topic for long. Parking itself retries
	// without a bound (with Retry's base and cap): there is nowhere else to
	// put the record, the offset stays uncommitted and Kafka keeps it, and
	// Ready reports the stall.
	Retry backoff.Config
	// AttemptTimeout bounds one repair or park attempt. Defaults to
	// AttemptTimeoutDefault.
	AttemptTimeout time.Duration
	// Logger defaults to a no-op logger.
	Logger *zap.Logger
	// Registerer receives the metrics. Defaults to a private registry.
	Registerer prometheus.Registerer
	// KafkaOpts are extra client options, appended last (tests use them to
	// shorten timers).
	KafkaOpts []kgo.Opt
}

// RegisterFlags registers the consumer's flags (Kafka, Postgres and Redis
// register theirs), with the defaults for zero fields.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	c.fill()
	fs.StringVar(&c.DLTTopic, "dlt-topic", c.DLTTopic, "dead-letter topic to consume")
	fs.StringVar(&c.Group, "group", c.Group, "consumer group")
	fs.IntVar(&c.MaxPollRecords, "max-poll-records", c.MaxPollRecords, "dead letters per poll")
	fs.DurationVar(&c.Retry.MaxDuration, "retry-max-duration", c.Retry.MaxDuration, "how long one dead letter is retried before it is parked")
	fs.DurationVar(&c.AttemptTimeout, "attempt-timeout", c.AttemptTimeout, "bound of one repair attempt")
	fs.IntVar(&c.MentionCap, "mention-cap", c.MentionCap, "mentions counted per (user, channel) before \"cap+\"; each keeps its newest cap+1 (must equal the gateway's and the persister's)")
}

// fill sets every zero field to its default.
func (c *Config) fill() {
	c.DLTTopic = cmp.Or(c.DLTTopic, event.DLTTopicDefault)
	c.Group = cmp.Or(c.Group, GroupDefault)
	c.MaxPollRecords = cmp.Or(c.MaxPollRecords, MaxPollRecordsDefault)
	c.Retry.MaxDuration = cmp.Or(c.Retry.MaxDuration, RetryMaxDurationDefault)
	c.AttemptTimeout = cmp.Or(c.AttemptTimeout, AttemptTimeoutDefault)
	c.MentionCap = cmp.Or(c.MentionCap, channel.MentionCapDefault)
	lifecycle.DefaultTelemetry(&c.Logger, &c.Registerer)
}

// validate reports every bad field at once.
func (c *Config) validate() error {
	var errs []error
	if c.Postgres == nil {
		errs = append(errs, errors.New("Postgres is required"))
	}
	if c.Redis == nil {
		errs = append(errs, errors.New("Redis is required"))
	}
	if c.MaxPollRecords < 0 {
		errs = append(errs, fmt.Errorf("MaxPollRecords must be > 0, got %d", c.MaxPollRecords))
	}
	if c.Retry.MaxDuration < 0 {
		errs = append(errs, fmt.Errorf("Retry.MaxDuration must be > 0 (retries are bounded), got %s", c.Retry.MaxDuration))
	}
	if c.AttemptTimeout < 0 {
		errs = append(errs, fmt.Errorf("AttemptTimeout must be > 0, got %s", c.AttemptTimeout))
	}
	return errors.Join(errs...)
}

type consumerMetrics struct {
	reconciled    prometheus.Counter
	parked        *prometheus.CounterVec
	retries       *prometheus.CounterVec
	redisDegraded prometheus.Counter
	commitErrors  prometheus.Counter
	parkStalled   prometheus.Gauge
}

func newConsumerMetrics(reg prometheus.Registerer) *consumerMetrics {
	f := promauto.With(reg)
	m := &consumerMetrics{
		reconciled: f.NewCounter(prometheus.CounterOpts{
			Namespace: metricsNamespace, Subsystem: MetricsSubsystem, Name: "reconciled_total",
			Help: "Dead letters repaired: merged with Redis and upserted into Postgres.",
		}),
		parked: f.NewCounterVec(prometheus.CounterOpts{
			Namespace: metricsNamespace, Subsystem: MetricsSubsystem, Name: "parked_total",
			Help: "Dead letters parked for an operator, by kind (undecodable, rejected, unavailable).",
		}, []string{"kind"}),
		retries: f.NewCounterVec(prometheus.CounterOpts{
			Namespace: metricsNamespace, Subsystem: MetricsSubsystem, Name: "retries_total",
			Help: "Retried attempts, by operation (repair, park).",
		}, []string{"op"}),
		redisDegraded: f.NewCounter(prometheus.CounterOpts{
			Namespace: metricsNamespace, Subsystem: MetricsSubsystem, Name: "redis_degraded_total",
			Help: "Repairs that could not read or write Redis (left to the drift sweep).",
		}),
		commitErrors: f.NewCounter(prometheus.CounterOpts{
			Namespace: metricsNamespace, Subsystem: MetricsSubsystem, Name: "commit_errors_total",
			Help: "Failed dead-letter offset commits (the records are consumed again; repairs are idempotent).",
		}),
		parkStalled: f.NewGauge(prometheus.GaugeOpts{
			Namespace: metricsNamespace, Subsystem: MetricsSubsystem, Name: "park_stalled",
			Help: "1 while a record waits to be parked because Postgres refuses the park.",
		}),
	}
	for _, k := range []string{KindUndecodable, KindRejected, KindUnavailable} {
		m.parked.WithLabelValues(k)
	}
	for _, op := range []string{"repair", "park"} {
		m.retries.WithLabelValues(op)
	}
	return m
}

// Consumer reads the dead-letter topic and repairs or parks each record.
type Consumer struct {
	cfg     Config
	cl      *kgo.Client
	log     *zap.Logger
	m       *consumerMetrics
	rep     *repair.Repairer
	tracer  trace.Tracer
	running atomic.Bool
	// stall holds why parking is stuck (nil when it is not), for Ready.
	stall     atomic.Pointer[error]
	runOnce   sync.Once
	closeOnce sync.Once
}

// NewConsumer validates the config and creates the Kafka client (which
// connects lazily: a broker that is down does not fail start-up).
func NewConsumer(cfg Config) (*Consumer, error) {
	cfg.fill()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("configuring dlt consumer: %w", err)
	}
	log := cfg.Logger.Named("deadletter")
	opts := append(cfg.Kafka.Opts(log, cfg.Registerer, MetricsSubsystem+"_kafka"),
		kgo.ConsumerGroup(cfg.Group),
		kgo.ConsumeTopics(cfg.DLTTopic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
	)
	opts = append(opts, cfg.KafkaOpts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("creating kafka client: %w", err)
	}
	c := &Consumer{cfg: cfg, cl: cl, log: log, m: newConsumerMetrics(cfg.Registerer),
		tracer: cfg.Tracing.Provider().Tracer("github.com/readstate/receipts/pkg/deadletter")}
	c.rep = &repair.Repairer{Postgres: cfg.Postgres, Redis: cfg.Redis, Logger: log, OnRedisDegraded: c.m.redisDegraded.Inc, MentionCap: cfg.MentionCap}
	return c, nil
}

// Run consumes until ctx ends. It returns nil on shutdown; a record being
// handled at that moment is left uncommitted and consumed again later.
func (c *Consumer) Run(ctx context.Context) error {
	started := false
	c.runOnce.Do(func() { started = true })
	if !started {
		return errors.New("dlt consumer already ran")
	}
	c.running.Store(true)
	defer c.running.Store(false)
	c.log.Info("consuming dead letters", zap.String("topic", c.cfg.DLTTopic), zap.String("group", c.cfg.Group))
	for ctx.Err() == nil {
		fetches := c.cl.PollRecords(ctx, c.cfg.MaxPollRecords)
		if fetches.IsClientClosed() {
			return nil
		}
		fetches.EachError(func(topic string, p int32, err error) {
			if !errors.Is(err, context.Canceled) {
				c.log.Warn("fetching dead letters", zap.String("topic", topic), zap.Int32("partition", p), zap.Error(err))
			}
		})
		err := c.handleBatch(ctx, fetches.Records())
		c.cl.AllowRebalance()
		if err != nil {
			return err
		}
	}
	return nil
}

// handleBatch repairs or parks each record in order and commits the ones
// done. It stops at shutdown, committing what was finished.
func (c *Consumer) handleBatch(ctx context.Context, recs []*kgo.Record) error {
	done := make([]*kgo.Record, 0, len(recs))
	var err error
	for _, r := range recs {
		if err = c.handle(ctx, r); err != nil {
			break
		}
		done = append(done, r)
	}
	if len(done) > 0 {
		// Detached: a record finished just before shutdown still commits.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), commitTimeout)
		if cerr := c.cl.CommitRecords(cctx, done...); cerr != nil {
			c.m.commitErrors.Inc()
			c.log.Warn("committing dead-letter offsets; they will be consumed again", zap.Int("num_records", len(done)), zap.Error(cerr))
		}
		cancel()
	}
	if err != nil && ctx.Err() != nil {
		return nil
	}
	return err
}

// handle repairs one record, or parks it. It returns an error only when ctx
// ended first; then the record is not committed.
func (c *Consumer) handle(ctx context.Context, r *kgo.Record) (err error) {
	if c.cfg.Tracing.Enabled() {
		var span trace.Span
		env := event.ParseDeadLetter(r)
		ctx, span = c.tracer.Start(tracing.Extract(ctx, r), "dlt-reconciler.repair", trace.WithSpanKind(trace.SpanKindConsumer),
			trace.WithAttributes(attribute.String("receipts.dlt_reason_kind", reasonKind(env.Reason)), attribute.Int("receipts.dlt_attempt", env.Attempt)))
		defer func() {
			if err != nil {
				span.SetStatus(codes.Error, "not handled")
			}
			span.End()
		}()
	}
	d, err := c.rep.Decode(r)
	if err != nil {
		return c.park(ctx, r, KindUndecodable, err, 1)
	}
	key := d.RecordKey()
	attempts := 0
	err = retry.Do(ctx, c.cfg.Retry.New(), func(ctx context.Context) error {
		attempts++
		if attempts > 1 {
			c.m.retries.WithLabelValues("repair").Inc()
		}
		actx, cancel := context.WithTimeout(ctx, c.cfg.AttemptTimeout)
		defer cancel()
		err := c.rep.RepairDecoded(actx, d)
		if class := pgstore.Classify(err); ctx.Err() == nil && (class == errclass.Unavailable || class == errclass.Permanent) {
			c.log.Debug("repair failed; retrying", zap.String("key", key), zap.Int("attempt", attempts), zap.Error(err))
			return retry.RetryableError(err)
		}
		return err
	})
	if err == nil {
		c.m.reconciled.Inc()
		c.log.Debug("reconciled dead letter", zap.String("key", key), zap.Int32("dlt_partition", r.Partition), zap.Int64("dlt_offset", r.Offset))
		return nil
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	kind := KindUnavailable
	if pgstore.Classify(err) == errclass.Rejected {
		kind = KindRejected
	}
	return c.park(ctx, r, kind, err, attempts)
}

// park stores the record in parked_dead_letters, retrying until it is
// stored or ctx ends: the offset must not be committed before.
func (c *Consumer) park(ctx context.Context, r *kgo.Record, kind string, cause error, attempts int) error {
	rec := ParkedFromRecord(r, kind, cause, attempts)
	b := backoff.Config{Base: c.cfg.Retry.Base, Cap: c.cfg.Retry.Cap, JitterPercent: c.cfg.Retry.JitterPercent}.New()
	var id int64
	tries := 0
	err := retry.Do(ctx, b, func(ctx context.Context) error {
		tries++
		if tries > 1 {
			c.m.retries.WithLabelValues("park").Inc()
		}
		actx, cancel := context.WithTimeout(ctx, c.cfg.AttemptTimeout)
		defer cancel()
		var err error
		id, err = parked.New(c.cfg.Postgres).Park(actx, rec)
		if err != nil && ctx.Err() == nil {
			// Every failure is retried, even a rejected park (a bug): the
			// stall is visible in Ready, the gauge and the log, whereas
			// skipping would lose the record.
			c.setStall(err)
			c.log.Warn("parking dead letter failed; retrying", zap.Int("try", tries), zap.Error(err))
			return retry.RetryableError(err)
		}
		return err
	})
	c.setStall(nil)
	if err != nil {
		return err
	}
	c.m.parked.WithLabelValues(kind).Inc()
	c.log.Warn("parked dead letter",
		zap.Int64("id", id), zap.String("kind", kind), zap.String("reason", rec.Reason),
		zap.String("source_topic", rec.SourceTopic), zap.Int32("source_partition", rec.SourcePartition),
		zap.Int64("source_offset", rec.SourceOffset), zap.Int32("dlt_partition", r.Partition),
		zap.Int64("dlt_offset", r.Offset), zap.Int("attempts", attempts), zap.ByteString("key", r.Key))
	return nil
}

func (c *Consumer) setStall(err error) {
	if err == nil {
		c.stall.Store(nil)
		c.m.parkStalled.Set(0)
		return
	}
	c.stall.Store(&err)
	c.m.parkStalled.Set(1)
}

// ParkedFromRecord builds the parked row for a dead letter: the reason is
// "<kind>: <cause>" followed by the reason the record was dead-lettered for,
// and the source coordinates come from its dead-letter envelope (-1 when
// missing or malformed).
func ParkedFromRecord(r *kgo.Record, kind string, cause error, attempts int) parked.Record {
	env := event.ParseDeadLetter(r)
	reason := kind + ": " + cause.Error()
	if env.Reason != "" {
		reason += " (dead-lettered for: " + env.Reason + ")"
	}
	return parked.Record{
		Reason:          pgText(reason),
		SourceTopic:     pgText(env.SourceTopic),
		SourcePartition: env.SourcePartition,
		SourceOffset:    env.SourceOffset,
		Attempts:        attempts,
		Key:             r.Key,
		Value:           r.Value,
	}
}

// pgText makes a string storable in a text column: valid UTF-8 without NUL
// bytes (headers and error texts may carry the garbage that got the record
// dead-lettered).
func pgText(s string) string {
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
}

// Ready reports nil when the consumer runs and Postgres, Redis and Kafka
// answer; otherwise every problem found.
func (c *Consumer) Ready(ctx context.Context) error {
	var errs []error
	if !c.running.Load() {
		errs = append(errs, errors.New("dlt consumer not running"))
	}
	if p := c.stall.Load(); p != nil {
		errs = append(errs, fmt.Errorf("parking stalled: %w", *p))
	}
	errs = append(errs, lifecycle.Ping(ctx, lifecycle.Dependency{Name: "postgres", Ping: c.cfg.Postgres.Ping},
		lifecycle.Dependency{Name: "redis", Ping: c.cfg.Redis.Ping}, lifecycle.Dependency{Name: "kafka", Ping: c.cl.Ping})...)
	return errors.Join(errs...)
}

// Close leaves the group and closes the Kafka client. Call it after Run
// returned. Leaving is bounded so a broker that is down cannot hold up
// shutdown; the group then expires the member by its session timeout.
func (c *Consumer) Close() {
	c.closeOnce.Do(func() {
		c.cl.AllowRebalance()
		ctx, cancel := context.WithTimeout(context.Background(), leaveTimeout)
		defer cancel()
		if err := c.cl.LeaveGroupContext(ctx); err != nil {
			c.log.Warn("leaving consumer group", zap.Error(err))
		}
		c.cl.Close()
	})
}

// AgreeSettings checks the mention cap, which repairs apply, against the
// one the deployment stored in Postgres (storing it when none is). It
// fails only on a disagreement; when Postgres cannot answer it logs and
// returns nil (the persister checks at its own start).
func (c *Consumer) AgreeSettings(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	err := c.cfg.Postgres.AgreeSetting(ctx, pgstore.SettingMentionCap, int64(c.cfg.MentionCap))
	if errors.Is(err, pgstore.ErrSettingDisagrees) {
		return fmt.Errorf("dlt consumer: %w", err)
	}
	if err != nil {
		c.log.Warn("cannot check the mention cap against Postgres; the persister checks it at its start", zap.Error(err))
	}
	return nil
}

// reasonKind is the first word of a dead letter's reason (a short,
// bounded attribute; the reason itself may hold ids).
func reasonKind(reason string) string {
	if i := strings.IndexAny(reason, " :"); i >= 0 {
		reason = reason[:i]
	}
	if len(reason) > 32 {
		reason = reason[:32]
	}
	return reason
}
