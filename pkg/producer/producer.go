// Package producer makes records durable before a caller is answered:
// produced to Kafka with acks=all, or — when Kafka does not ack within a
// bound — appended and fsynced to a local spool (pkg/spool) that a replayer
// sends to Kafka in order once it is back. It knows nothing about receipts:
// records are opaque keys and values for one topic.
package producer

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/readstate/receipts/pkg/kafkaconf"
	"github.com/readstate/receipts/pkg/lifecycle"
	"github.com/readstate/receipts/pkg/spool"
)

// Durability says where a call's records became durable.
type Durability int

// Durabilities.
const (
	// Unacknowledged: nowhere (the call failed).
	Unacknowledged Durability = iota
	// Kafka: acknowledged by Kafka with acks=all.
	Kafka
	// Spooled: appended and fsynced to the local spool, replayed later.
	Spooled
)

// Defaults. Each Config field names its default.
const (
	// ProduceTimeoutDefault bounds the wait for all acks of one call.
	ProduceTimeoutDefault = 5 * time.Second
	// ProduceLingerDefault is none (negative): every call waits for its
	// acks, so a linger is added to every answer, and the gateway's group
	// commit already hands the producer whole batches; with several
	// requests in flight (ProduceInflightDefault) a flush's records never
	// wait for another's (see BENCHMARKS.md, why the defaults: produce
	// requests).
	ProduceLingerDefault = -time.Nanosecond
	// ProduceInflightDefault lets several flushes' produce requests
	// overlap (see Config.ProduceInflight).
	ProduceInflightDefault = 5
	// SpoolMaxBytesDefault bounds the spool's files: at ~100 bytes a record,
	// about two million records, minutes of full load.
	SpoolMaxBytesDefault = spool.MaxBytesDefault
	// SpoolAfterDefault is how long a call waits for Kafka's acks before it
	// spools instead: long enough for a leader election, short enough that
	// callers do not time out.
	SpoolAfterDefault = 2 * time.Second
	// SpoolDrainTimeoutDefault bounds the replay of the spool at shutdown
	// (the API stops first): within the process's stop timeout, with room
	// for the components stopped after it.
	SpoolDrainTimeoutDefault = 15 * time.Second
	// MetricsSubsystemDefault names the producer's metrics.
	MetricsSubsystemDefault = "producer"
	// minProduceTimeout is kgo's floor for RecordDeliveryTimeout.
	minProduceTimeout = time.Second
	// spoolSegmentHeader is the spool's per-file header (see pkg/spool's
	// doc.go); an append may start a file, so the fit check counts one.
	spoolSegmentHeader = 8
)

// ErrFull means a call's records did not fit in the spool; nothing was
// acknowledged (it wraps spool.ErrFull).
var ErrFull = spool.ErrFull

// Config configures a Producer. The zero value of each field means its
// default.
type Config struct {
	// Kafka is the broker connection. Brokers default to
	// kafkaconf.BrokersDefault.
	Kafka kafkaconf.Config
	// KafkaOpts are extra kgo options appended after the producer's own
	// (tests use them to shorten metadata refreshes).
	KafkaOpts []kgo.Opt
	// Topic receives every record. Required.
	Topic string
	// ProduceTimeout bounds the wait for the acks of one call when there is
	// no spool, and of one replayed spool batch; it is also the records'
	// kgo.RecordDeliveryTimeout, so kgo's idempotent producer stops
	// retrying a dead broker. At least 1s (kgo's floor). Defaults to
	// ProduceTimeoutDefault.
	ProduceTimeout time.Duration
	// ProduceLinger is kgo.ProducerLinger. Negative means no linger.
	// Defaults to ProduceLingerDefault.
	ProduceLinger time.Duration
	// ProduceInflight is the produce requests in flight per broker. 1 is
	// kgo's idempotent producer, which allows only one: every call's
	// records then wait for the request before theirs. More turn the
	// idempotence off; what it guards against — a retried batch written
	// twice, batches of a partition reordered by a retry — changes nothing
	// for consumers that max-merge every event (ARCHITECTURE.md). Defaults
	// to ProduceInflightDefault.
	ProduceInflight int

	// SpoolDir enables the local spool: a call whose records Kafka does not
	// ack within SpoolAfter is appended and fsynced there and answers
	// Spooled, and Run sends the spool to Kafka in order (also what a
	// previous process left). One producer per directory. Empty disables
	// the spool: a Kafka failure then fails the call.
	SpoolDir string
	// SpoolMaxBytes bounds the spool's files; a call that does not fit
	// fails with ErrFull. At least MinSpoolBytes(MaxRecordBytes). Defaults
	// to SpoolMaxBytesDefault (256 MiB).
	SpoolMaxBytes int64
	// SpoolAfter bounds a call's wait for Kafka's acks before it spools.
	// Used only with SpoolDir. Defaults to SpoolAfterDefault.
	SpoolAfter time.Duration
	// SpoolDrainTimeout bounds the replay of what is left in the spool
	// once Run is stopped (a pod scaled away takes no spool with it); 0
	// uses SpoolDrainTimeoutDefault, negative leaves the spool for the next
	// start. What is not sent in time stays in the spool.
	SpoolDrainTimeout time.Duration
	// MaxRecordBytes is the largest key plus value a caller ever writes
	// (the spool refuses larger frames). Required with SpoolDir.
	MaxRecordBytes int

	// MetricsSubsystem names the metrics (receipts_<subsystem>_spool_…).
	// Defaults to MetricsSubsystemDefault.
	MetricsSubsystem string
	// Logger defaults to zap.NewNop().
	Logger *zap.Logger
	// Registerer receives the producer's and the Kafka client's metrics.
	// Defaults to a private registry.
	Registerer prometheus.Registerer
}

// RegisterFlags registers the producer's flags, with the config's values
// (or the defaults, for zero fields) as defaults.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	d := c.withDefaults()
	c.ProduceTimeout, c.ProduceLinger, c.SpoolMaxBytes, c.SpoolAfter = d.ProduceTimeout, d.ProduceLinger, d.SpoolMaxBytes, d.SpoolAfter
	c.ProduceInflight, c.SpoolDrainTimeout = d.ProduceInflight, d.SpoolDrainTimeout
	fs.StringVar(&c.Topic, "topic", c.Topic, "topic receiving every record")
	fs.DurationVar(&c.ProduceTimeout, "produce-timeout", c.ProduceTimeout, "bound on waiting for the acks of one call without a spool (past it the call fails) and of one replayed spool batch (>= 1s)")
	fs.DurationVar(&c.ProduceLinger, "produce-linger", c.ProduceLinger, "producer linger; every call waits for its acks, so keep it short (negative: none)")
	fs.IntVar(&c.ProduceInflight, "produce-inflight", c.ProduceInflight, "produce requests in flight per broker; 1 keeps kgo's idempotent producer (one at a time), more turn idempotence off (retried duplicates and reordering are harmless to max-merged events)")
	fs.StringVar(&c.SpoolDir, "spool-dir", c.SpoolDir, "directory of the local spool for records Kafka does not ack in time (one process per directory; a persistent volume in production); empty disables it and Kafka failures fail the call")
	fs.Int64Var(&c.SpoolMaxBytes, "spool-max-bytes", c.SpoolMaxBytes, "bound on the spool's files; a call that does not fit fails (503 with Retry-After)")
	fs.DurationVar(&c.SpoolAfter, "spool-after", c.SpoolAfter, "bound on waiting for Kafka's acks before spooling a call (with --spool-dir)")
	fs.DurationVar(&c.SpoolDrainTimeout, "spool-drain-timeout", c.SpoolDrainTimeout, "at shutdown, bound on replaying what is left in the spool to Kafka (negative: leave it for the next start)")
}

// MinSpoolBytes is the smallest spool that holds one record of
// maxRecordBytes (a segment header, one frame).
func MinSpoolBytes(maxRecordBytes int) int64 {
	return int64(spoolSegmentHeader + spool.FrameOverhead + maxRecordBytes)
}

func (c Config) withDefaults() Config {
	c.ProduceTimeout = cmp.Or(c.ProduceTimeout, ProduceTimeoutDefault)
	c.ProduceLinger = cmp.Or(c.ProduceLinger, ProduceLingerDefault)
	c.ProduceInflight = cmp.Or(c.ProduceInflight, ProduceInflightDefault)
	c.SpoolMaxBytes = cmp.Or(c.SpoolMaxBytes, SpoolMaxBytesDefault)
	c.SpoolAfter = cmp.Or(c.SpoolAfter, SpoolAfterDefault)
	c.SpoolDrainTimeout = cmp.Or(c.SpoolDrainTimeout, SpoolDrainTimeoutDefault)
	c.MetricsSubsystem = cmp.Or(c.MetricsSubsystem, MetricsSubsystemDefault)
	lifecycle.DefaultTelemetry(&c.Logger, &c.Registerer)
	return c
}

func (c Config) validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if !ValidTopic(c.Topic) {
		bad("Topic: %q is not a Kafka topic name (1..249 of [a-zA-Z0-9._-])", c.Topic)
	}
	if c.ProduceTimeout < minProduceTimeout {
		bad("ProduceTimeout: %s is below kgo's minimum record delivery timeout of %s", c.ProduceTimeout, minProduceTimeout)
	}
	if c.ProduceLinger > time.Minute {
		bad("ProduceLinger: %s is above kgo's maximum of 1m", c.ProduceLinger)
	}
	if c.SpoolAfter < 0 {
		bad("SpoolAfter: must be positive, got %s", c.SpoolAfter)
	}
	if c.SpoolDir != "" {
		if c.MaxRecordBytes <= 0 {
			bad("MaxRecordBytes: must be > 0 with a spool, got %d", c.MaxRecordBytes)
		} else if c.SpoolMaxBytes < MinSpoolBytes(c.MaxRecordBytes) {
			bad("SpoolMaxBytes: %d cannot hold one record (minimum %d)", c.SpoolMaxBytes, MinSpoolBytes(c.MaxRecordBytes))
		}
	}
	return errors.Join(errs...)
}

// CallBound is the longest a call waits for Kafka: SpoolAfter with a spool
// (the spool's fsync follows), ProduceTimeout without. Defaults applied.
func (c Config) CallBound() time.Duration {
	c = c.withDefaults()
	if c.SpoolDir != "" {
		return min(c.SpoolAfter, c.ProduceTimeout)
	}
	return c.ProduceTimeout
}

// ValidTopic applies Kafka's topic name rule.
func ValidTopic(t string) bool {
	if t == "" || len(t) > 249 || t == "." || t == ".." {
		return false
	}
	for _, r := range t {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return false
		}
	}
	return true
}

// Producer is the durable writer. Build it with New, run its replayer with
// Run (a lifecycle component), and Close it after Run returned and every
// caller is done.
type Producer struct {
	cfg     Config
	log     *zap.Logger
	m       *metrics
	cl      *kgo.Client
	durable durableWriter
	spooler *spoolWriter // nil without a spool
	replay  *replayer    // nil without a spool
}

// New validates cfg (every problem at once), creates the Kafka client and,
// with a spool, opens it (logging what recovery found). It starts no
// goroutine of its own and does not wait for Kafka.
func New(cfg Config) (*Producer, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("configuring producer: %w", err)
	}
	p := &Producer{cfg: cfg, log: cfg.Logger.Named("producer"), m: &metrics{}}
	opts := append(cfg.Kafka.Opts(cfg.Logger, cfg.Registerer, cfg.MetricsSubsystem+"_kafka"),
		kgo.DefaultProduceTopic(cfg.Topic),
		// Without it the idempotent producer retries a dead broker forever.
		kgo.RecordDeliveryTimeout(cfg.ProduceTimeout),
		kgo.ProducerLinger(max(cfg.ProduceLinger, 0)),
	)
	if cfg.ProduceInflight > 1 {
		opts = append(opts, kgo.DisableIdempotentWrite(), kgo.MaxProduceRequestsInflightPerBroker(cfg.ProduceInflight))
	}
	cl, err := kgo.NewClient(append(opts, cfg.KafkaOpts...)...)
	if err != nil {
		return nil, fmt.Errorf("creating kafka client: %w", err)
	}
	p.cl = cl
	kw := &kafkaWriter{cl: cl, timeout: cfg.ProduceTimeout}
	p.durable = kw
	if cfg.SpoolDir != "" {
		if err := p.openSpool(kw); err != nil {
			cl.Close()
			return nil, err
		}
	}
	return p, nil
}

// openSpool opens the spool, logs its recovery, registers its metrics and
// puts the spooling writer in front of Kafka.
func (p *Producer) openSpool(kw *kafkaWriter) error {
	cfg := p.cfg
	sp, err := spool.Open(spool.Config{
		Dir:      cfg.SpoolDir,
		MaxBytes: cfg.SpoolMaxBytes,
		// Segments of 1/16 of the bound give drained space back in steps.
		SegmentBytes:   min(spool.SegmentBytesDefault, max(cfg.SpoolMaxBytes/16, 4<<10)),
		MaxRecordBytes: cfg.MaxRecordBytes,
	})
	if err != nil {
		return fmt.Errorf("opening spool in %s: %w", cfg.SpoolDir, err)
	}
	rec := sp.Recovery()
	fields := []zap.Field{
		zap.String("dir", cfg.SpoolDir), zap.Int64("pending_records", rec.Records), zap.Int("segments", rec.Segments),
		zap.Int64("discarded_bytes", rec.DiscardedBytes), zap.Int("damaged_segments", rec.DamagedSegments),
		zap.Bool("checkpoint_lost", rec.CheckpointLost),
	}
	if rec.DiscardedBytes > 0 || rec.CheckpointLost {
		// Discarded bytes are a torn tail (appends that never returned:
		// nothing acknowledged) or damage, moved aside to .damaged files
		// with every valid frame around them kept. A lost checkpoint
		// replays records twice.
		p.log.Warn("spool opened; recovered from a crash", fields...)
	} else {
		p.log.Info("spool opened", fields...)
	}
	p.m.addSpool(cfg.Registerer, cfg.MetricsSubsystem, sp)
	p.spooler = &spoolWriter{kafka: kw, sp: sp, after: cfg.CallBound(), m: p.m, log: p.log.Named("spool")}
	p.durable = p.spooler
	p.replay = &replayer{
		sp:        sp,
		kafka:     kw,
		topic:     cfg.Topic,
		delivered: p.spooler.delivered,
		m:         p.m,
		log:       p.log.Named("replay"),
	}
	return nil
}

// Write makes recs durable, all or nothing, and says where. Without a
// spool it waits for Kafka's acks up to ProduceTimeout; with one, up to
// SpoolAfter, then appends and fsyncs them to the spool (or at once while
// the circuit is open, after a Kafka failure, until a replay succeeds).
func (p *Producer) Write(ctx context.Context, recs []*kgo.Record) (Durability, error) {
	return p.durable.Write(ctx, recs)
}

// Spooling reports whether calls go to the spool (its circuit is open):
// only then can Refuse refuse, so a caller may skip building the records
// it would pass.
func (p *Producer) Spooling() bool {
	return p.spooler != nil && p.spooler.open.Load()
}

// Unsent reports whether records acknowledged as spooled are still
// waiting to reach Kafka: a reader of the topic cannot see them yet.
func (p *Producer) Unsent() bool {
	return p.spooler != nil && p.spooler.sp.Stats().Records > 0
}

// Admin is an admin client on the producer's connection (its lifetime is
// the producer's).
func (p *Producer) Admin() *kadm.Client { return kadm.NewClient(p.cl) }

// Refuse fails fast, with ErrFull, a call that is bound for the spool
// (circuit open) and cannot fit in it, so the caller can answer before
// doing any other work. Write still decides; nil without a spool.
func (p *Producer) Refuse(recs []*kgo.Record) error {
	if p.spooler == nil {
		return nil
	}
	return p.spooler.refuse(recs)
}

// Run replays the spool to Kafka in order until ctx ends (also what a
// previous process left); without a spool it only waits for ctx. Then it
// drains what is left, bounded by SpoolDrainTimeout (the API stopped
// before it: nothing new arrives). A batch being sent at the end is
// abandoned uncommitted: it stays in the spool for the next start.
func (p *Producer) Run(ctx context.Context) error {
	if p.replay == nil {
		<-ctx.Done()
		return nil
	}
	p.replay.run(ctx, false)
	if p.cfg.SpoolDrainTimeout < 0 {
		return nil
	}
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.cfg.SpoolDrainTimeout)
	defer cancel()
	if err := p.Drain(dctx); err != nil {
		p.log.Warn("the spool is not drained: the rest waits for the next start", zap.Int64("pending_records", p.replay.sp.Stats().Records), zap.Error(err))
	}
	return nil
}

// Drain replays the spool to Kafka until it is empty, or ctx ends (then
// it returns ctx's error and the rest stays in the spool). It is what
// `receiptsctl spool replay` runs on an orphaned spool directory.
func (p *Producer) Drain(ctx context.Context) error {
	if p.replay == nil {
		return nil
	}
	p.replay.run(ctx, true)
	if n := p.replay.sp.Stats().Records; n > 0 {
		return fmt.Errorf("%d records left in the spool: %w", n, context.Cause(ctx))
	}
	return nil
}

// Ready reports whether the producer can make records durable: the spool
// has room, or Kafka answers a metadata request for the topic. The error
// names what is down.
func (p *Producer) Ready(ctx context.Context) error {
	var serr error
	if p.spooler != nil {
		if serr = p.spooler.hasRoom(); serr == nil {
			return nil
		}
		serr = fmt.Errorf("spool: %w", serr)
	}
	if err := p.kafkaReady(ctx); err != nil {
		if serr == nil {
			serr = errors.New("spool: not configured")
		}
		return errors.Join(fmt.Errorf("kafka: %w", err), serr)
	}
	return nil
}

// kafkaReady asks a broker for the topic's metadata: it proves a broker
// answers and that the topic exists (a missing topic would otherwise show
// only as produce timeouts).
func (p *Producer) kafkaReady(ctx context.Context) error {
	md, err := kadm.NewClient(p.cl).Metadata(ctx, p.cfg.Topic)
	if err != nil {
		return fmt.Errorf("requesting metadata: %w", err)
	}
	td, ok := md.Topics[p.cfg.Topic]
	switch {
	case !ok:
		return fmt.Errorf("topic %s: not in metadata", p.cfg.Topic)
	case td.Err != nil:
		return fmt.Errorf("topic %s: %w", p.cfg.Topic, td.Err)
	}
	return nil
}

// CallBound is the longest Write waits for Kafka before it spools or fails.
func (p *Producer) CallBound() time.Duration { return p.cfg.CallBound() }

// Topic is the topic every record goes to.
func (p *Producer) Topic() string { return p.cfg.Topic }

// Close closes the spool and the Kafka client. Call it after Run returned
// and every Write is done: each acknowledged Write has its acks or its
// fsync, so nothing acknowledged is lost; spooled records not yet replayed
// stay in the spool for the next start.
func (p *Producer) Close() {
	if p.spooler != nil {
		if err := p.spooler.sp.Close(); err != nil {
			p.log.Warn("closing spool", zap.Error(err))
		}
	}
	p.cl.Close()
}
