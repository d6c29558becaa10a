package gate

import (
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/readstate/receipts/pkg/event"
	"github.com/readstate/receipts/pkg/kafkaconf"
	"github.com/readstate/receipts/pkg/pgstore"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/redisstore"
	"github.com/readstate/receipts/pkg/spool"
)

// Defaults. Each Config field names its default.
const (
	AddrDefault  = "127.0.0.1:8080"
	TopicDefault = event.TopicDefault
	// ProduceTimeoutDefault bounds the wait for all acks of one call.
	ProduceTimeoutDefault = 5 * time.Second
	// ProduceLingerDefault is short: every call waits for its acks, so a
	// linger is added to every answer; concurrent calls still share batches.
	ProduceLingerDefault   = 2 * time.Millisecond
	RedisTimeoutDefault    = 500 * time.Millisecond
	PostgresTimeoutDefault = 2 * time.Second
	MaxBatchItemsDefault   = 500
	MaxReadChannelsDefault = 500
	MaxBodyBytesDefault    = 1 << 20

	ReadHeaderTimeoutDefault = 5 * time.Second
	ReadTimeoutDefault       = 15 * time.Second
	WriteTimeoutDefault      = 30 * time.Second
	IdleTimeoutDefault       = 2 * time.Minute
	ShutdownTimeoutDefault   = 10 * time.Second

	// SpoolMaxBytesDefault bounds the spool's files: at ~100 bytes a mark,
	// about two million marks, minutes of full load.
	SpoolMaxBytesDefault = spool.MaxBytesDefault
	// SpoolAfterDefault is how long a call waits for Kafka's acks before it
	// spools instead: long enough for a leader election, short enough that
	// callers do not time out.
	SpoolAfterDefault = 2 * time.Second
	// RetryAfterDefault is the Retry-After hint of an Unavailable write.
	RetryAfterDefault = 2 * time.Second

	// minProduceTimeout is kgo's floor for RecordDeliveryTimeout.
	minProduceTimeout = time.Second
	// spoolMaxRecordBytes is the largest record the gate ever spools: a
	// key of two ids and a colon, and a value consumers still decode.
	spoolMaxRecordBytes = 2*receipt.MaxIDLength + 1 + event.MaxValueBytes
	// spoolMinBytes is the smallest spool that holds one such record (a
	// segment header of 8 bytes, one frame).
	spoolMinBytes = 8 + spool.FrameOverhead + spoolMaxRecordBytes
	// metricsNamespace prefixes the gate's own metrics; kprom's client
	// metrics get kafkaNamespace so the two sets never collide.
	metricsNamespace = "receipts_kafkagate"
	kafkaNamespace   = "receipts_kafkagate_kafka"
)

// Config configures a Gate. The zero value of every field but Redis and
// Postgres is replaced by its default.
type Config struct {
	// Addr is the API listen address used by ListenAndServe. Defaults to
	// AddrDefault.
	Addr string

	// Kafka is the broker connection (seeds, client id). Brokers default to
	// kafkaconf.BrokersDefault.
	Kafka kafkaconf.Config
	// KafkaOpts are extra kgo options appended after the gate's own (tests
	// use them to shorten metadata refreshes).
	KafkaOpts []kgo.Opt
	// Topic receives every mark. Defaults to TopicDefault.
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

	// SpoolDir enables the local spool: a call whose records Kafka does not
	// ack within SpoolAfter is appended and fsynced there and answers
	// SPOOLED, and a replayer sends the spool to Kafka in order (also what
	// a previous process left). One gate per directory. Empty disables
	// the spool: a Kafka failure then answers Unavailable.
	SpoolDir string
	// SpoolMaxBytes bounds the spool's files; a call that does not fit
	// answers Unavailable with Retry-After. At least about 4.4 KiB (one
	// record). Defaults to SpoolMaxBytesDefault (256 MiB).
	SpoolMaxBytes int64
	// SpoolAfter bounds a call's wait for Kafka's acks before it spools.
	// Used only with SpoolDir. Defaults to SpoolAfterDefault.
	SpoolAfter time.Duration
	// RetryAfter is sent as the Retry-After header (whole seconds, at least
	// 1) with every Unavailable answer of the write path. Defaults to
	// RetryAfterDefault.
	RetryAfter time.Duration

	// Redis is the real-time view's client. Required.
	Redis redis.UniversalClient
	// RedisPrefix starts every Redis key. Defaults to
	// redisstore.PrefixDefault.
	RedisPrefix string
	// RedisTimeout bounds each Redis call, so a hung Redis degrades an
	// answer instead of hanging it. Defaults to RedisTimeoutDefault.
	RedisTimeout time.Duration

	// Postgres is the durable store, read when Redis cannot answer alone.
	// Required.
	Postgres *pgstore.Store
	// PostgresTimeout bounds each Postgres read. Defaults to
	// PostgresTimeoutDefault.
	PostgresTimeout time.Duration

	// MaxBatchItems bounds the receipts of one MarkReceipts call. Defaults
	// to MaxBatchItemsDefault.
	MaxBatchItems int
	// MaxReadChannels bounds the channel ids of one GetReadState call.
	// Defaults to MaxReadChannelsDefault.
	MaxReadChannels int
	// MaxBodyBytes bounds a request body (REST) or message (RPC). Defaults
	// to MaxBodyBytesDefault (1 MiB).
	MaxBodyBytes int64

	// HTTP server timeouts. WriteTimeout must leave room for a whole call
	// (Redis, then the produce deadline). Default to the *TimeoutDefault
	// constants.
	ReadHeaderTimeout time.Duration
	ReadTimeout       time.Duration
	WriteTimeout      time.Duration
	IdleTimeout       time.Duration
	// ShutdownTimeout bounds the graceful drain of in-flight calls.
	// Defaults to ShutdownTimeoutDefault.
	ShutdownTimeout time.Duration

	// Logger defaults to zap.NewNop().
	Logger *zap.Logger
	// Registerer receives the gate's and the Kafka client's metrics.
	// Defaults to a private registry (metrics then go nowhere).
	Registerer prometheus.Registerer
}

// withDefaults returns a copy with every zero field set to its default.
func (c Config) withDefaults() Config {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	if c.Addr == "" {
		c.Addr = AddrDefault
	}
	if c.Topic == "" {
		c.Topic = TopicDefault
	}
	def(&c.ProduceTimeout, ProduceTimeoutDefault)
	def(&c.ProduceLinger, ProduceLingerDefault)
	if c.SpoolMaxBytes == 0 {
		c.SpoolMaxBytes = SpoolMaxBytesDefault
	}
	def(&c.SpoolAfter, SpoolAfterDefault)
	def(&c.RetryAfter, RetryAfterDefault)
	if c.RedisPrefix == "" {
		c.RedisPrefix = redisstore.PrefixDefault
	}
	def(&c.RedisTimeout, RedisTimeoutDefault)
	def(&c.PostgresTimeout, PostgresTimeoutDefault)
	if c.MaxBatchItems == 0 {
		c.MaxBatchItems = MaxBatchItemsDefault
	}
	if c.MaxReadChannels == 0 {
		c.MaxReadChannels = MaxReadChannelsDefault
	}
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = MaxBodyBytesDefault
	}
	def(&c.ReadHeaderTimeout, ReadHeaderTimeoutDefault)
	def(&c.ReadTimeout, ReadTimeoutDefault)
	def(&c.WriteTimeout, WriteTimeoutDefault)
	def(&c.IdleTimeout, IdleTimeoutDefault)
	def(&c.ShutdownTimeout, ShutdownTimeoutDefault)
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	if c.Registerer == nil {
		c.Registerer = prometheus.NewRegistry()
	}
	return c
}

// validate reports every bad field at once.
func (c Config) validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if c.Redis == nil {
		bad("Redis: a client is required")
	}
	if c.Postgres == nil {
		bad("Postgres: a store is required")
	}
	if !validTopic(c.Topic) {
		bad("Topic: %q is not a Kafka topic name (1..249 of [a-zA-Z0-9._-])", c.Topic)
	}
	if c.ProduceTimeout < minProduceTimeout {
		bad("ProduceTimeout: %s is below kgo's minimum record delivery timeout of %s", c.ProduceTimeout, minProduceTimeout)
	}
	if c.ProduceLinger > time.Minute {
		bad("ProduceLinger: %s is above kgo's maximum of 1m", c.ProduceLinger)
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"SpoolAfter", c.SpoolAfter}, {"RetryAfter", c.RetryAfter},
		{"RedisTimeout", c.RedisTimeout}, {"PostgresTimeout", c.PostgresTimeout},
		{"ReadHeaderTimeout", c.ReadHeaderTimeout}, {"ReadTimeout", c.ReadTimeout},
		{"WriteTimeout", c.WriteTimeout}, {"IdleTimeout", c.IdleTimeout}, {"ShutdownTimeout", c.ShutdownTimeout},
	} {
		if d.v < 0 {
			bad("%s: must be positive, got %s", d.name, d.v)
		}
	}
	if c.SpoolDir != "" && c.SpoolMaxBytes < spoolMinBytes {
		bad("SpoolMaxBytes: %d cannot hold one record (minimum %d)", c.SpoolMaxBytes, spoolMinBytes)
	}
	if c.WriteTimeout > 0 && c.WriteTimeout <= c.RedisTimeout+c.callBound() {
		bad("WriteTimeout: %s leaves no room for a call (RedisTimeout %s + produce bound %s)", c.WriteTimeout, c.RedisTimeout, c.callBound())
	}
	if c.MaxBatchItems < 1 {
		bad("MaxBatchItems: must be >= 1, got %d", c.MaxBatchItems)
	}
	if c.MaxReadChannels < 1 {
		bad("MaxReadChannels: must be >= 1, got %d", c.MaxReadChannels)
	}
	// 1 KiB is below any real batch; 64 MiB keeps vanguard's uint32 buffer
	// limit and memory per request sane.
	if c.MaxBodyBytes < 1<<10 || c.MaxBodyBytes > 64<<20 {
		bad("MaxBodyBytes: must be within [1KiB, 64MiB], got %d", c.MaxBodyBytes)
	}
	return errors.Join(errs...)
}

// callBound is the longest a call waits for Kafka: SpoolAfter with a spool
// (the spool's fsync follows), ProduceTimeout without.
func (c Config) callBound() time.Duration {
	if c.SpoolDir != "" {
		return min(c.SpoolAfter, c.ProduceTimeout)
	}
	return c.ProduceTimeout
}

// validTopic applies Kafka's topic name rule.
func validTopic(t string) bool {
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
