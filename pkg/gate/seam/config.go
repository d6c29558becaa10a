package seam

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/event"
	"github.com/readstate/receipts/pkg/kinds/threads"
	"github.com/readstate/receipts/pkg/lifecycle"
	"github.com/readstate/receipts/pkg/pgstore"
	"github.com/readstate/receipts/pkg/producer"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/redisstore"
	"github.com/readstate/receipts/pkg/views/readby"
	"github.com/readstate/receipts/pkg/watch"
)

// Defaults. Each Config field names its default.
const (
	// DetailThresholdDefault is the largest member count of a channel
	// whose receipts list members; larger channels answer counts only.
	DetailThresholdDefault = 50
	// ViewRefreshDefault is how long a channel view rebuilt from Postgres
	// is trusted before a read merges Postgres into it again.
	ViewRefreshDefault  = time.Minute
	RedisTimeoutDefault = 500 * time.Millisecond
	// ReplicaAckTimeoutDefault bounds the wait for Redis' replicas to take
	// a write of a user's read (Config.ReplicaAcks).
	ReplicaAckTimeoutDefault = 200 * time.Millisecond
	PostgresTimeoutDefault   = 2 * time.Second
	MaxBatchItemsDefault     = 500
	MaxReadChannelsDefault   = 500
	// MaxUnreadChannelsDefault bounds the channel ids of one GetUnread or
	// ReadAll call (the contract's 1,000).
	MaxUnreadChannelsDefault = 1000

	// RetryAfterDefault is the Retry-After hint of an Unavailable write.
	RetryAfterDefault = 2 * time.Second

	// MaxRecordBytes is the largest record the gate ever produces: a key
	// of two ids and a colon, and a value consumers still decode. The
	// producer's spool is configured with it.
	MaxRecordBytes = 2*receipt.MaxIDLength + 1 + event.MaxValueBytes
	// MetricsSubsystem names the gate's metrics (receipts_kafkagate_…); the
	// producer it is given should use the same.
	MetricsSubsystem = "kafkagate"
	MetricsNamespace = "receipts"
)

// Producer makes a call's records durable before the gate answers;
// *producer.Producer is the one kafkagate uses.
type Producer interface {
	// Write makes recs durable, all or nothing, and says where.
	Write(ctx context.Context, recs []*kgo.Record) (producer.Durability, error)
	// Refuse fails fast a call that cannot be made durable, before the
	// gate touches Redis; nil when Write may succeed.
	Refuse(recs []*kgo.Record) error
	// Spooling reports whether Refuse may refuse now (calls go to a
	// bounded spool), so the hot path builds records for it only then.
	Spooling() bool
	// Ready returns nil when Write can succeed.
	Ready(ctx context.Context) error
	// Topic is the topic the records go to.
	Topic() string
	// CallBound is the longest Write waits for Kafka.
	CallBound() time.Duration
}

// Config configures a Gate. The zero value of every field but Redis and
// Postgres is replaced by its default.
type Config struct {
	// ReadBy configures read-by, ticks and the privacy settings.
	ReadBy ReadByConfig

	// Producer makes each call's records durable (Kafka, or its spool).
	// Required; the caller runs and closes it (a *producer.Producer's
	// replayer is a lifecycle component of its own).
	Producer Producer
	// RetryAfter is sent as the Retry-After header (whole seconds, at least
	// 1) with every Unavailable answer of the write path. Defaults to
	// RetryAfterDefault.
	RetryAfter time.Duration

	// Redis is the real-time view's client. Required. The gate bounds
	// every command it runs by RedisTimeout (redisstore.Bound): a watch
	// hub's blocking reads need a client of their own.
	Redis redis.UniversalClient
	// RedisPrefix starts every Redis key. Defaults to
	// redisstore.PrefixDefault.
	RedisPrefix string
	// RedisTimeout bounds each Redis call, so a hung Redis degrades an
	// answer instead of hanging it. Defaults to RedisTimeoutDefault.
	RedisTimeout time.Duration

	// ReplicaAcks is how many replicas of its Redis node must take a write
	// of a user's read position (a mark, a mark-unread) before it is
	// answered (Redis WAIT): a failover then promotes a replica that has
	// it. A write they did not take within ReplicaAckTimeout is answered
	// realtime_degraded (still durable) and the user is restored from
	// Postgres before Redis answers of them again. 0, the default, waits
	// for none: with replicas, a failover can lose a write answered a few
	// milliseconds before it, and a read then answers below it.
	ReplicaAcks int
	// ReplicaAckTimeout bounds that wait; below RedisTimeout. Defaults to
	// ReplicaAckTimeoutDefault.
	ReplicaAckTimeout time.Duration

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
	// MaxUnreadChannels bounds the channel ids listed in one GetUnread or
	// ReadAll call. Defaults to MaxUnreadChannelsDefault.
	MaxUnreadChannels int
	// MentionCap is the mention count past which counts show as "cap+"
	// (mentions_capped); it must equal the persister's and the
	// reconciler's. Defaults to channel.MentionCapDefault.
	MentionCap int
	// AllowNonMemberMarks turns off the membership check of marks: by
	// default a mark by a user who is not a member of a channel that has
	// registered members is refused (PermissionDenied).
	AllowNonMemberMarks bool

	// Clock is the gateway's wall clock: the acceptance time of its events
	// and the erasure time. Nil is time.Now. Nothing a store keeps is
	// ordered by it across gateways: an erasure is ordered against writes
	// by the generation Redis hands out, which every event carries.
	Clock func() time.Time

	// Coalesce bounds the group commit of concurrent calls' marks.
	Coalesce CoalesceConfig
	// Restore configures the restores after Redis lost data.
	Restore RestoreConfig
	// ThreadsPerUser bounds a user's thread registers in Redis: past it
	// the least recently active are collected (threadcalls/threadcollect.go). At most
	// threads.MaxUserThreads, the default.
	ThreadsPerUser int
	// Watch serves WatchChannels (and the server's server-sent events
	// route); nil answers Unimplemented. The hub is its own lifecycle
	// component.
	Watch *watch.Hub

	// Logger defaults to zap.NewNop().
	Logger *zap.Logger
	// Registerer receives the gate's metrics.
	// Defaults to a private registry (metrics then go nowhere).
	Registerer prometheus.Registerer
}

// RegisterFlags registers the gate's flags, with the config's values (or
// the defaults, for zero fields) as defaults.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	d := c.withDefaults()
	c.RetryAfter, c.RedisTimeout, c.PostgresTimeout = d.RetryAfter, d.RedisTimeout, d.PostgresTimeout
	c.MaxBatchItems, c.MaxReadChannels = d.MaxBatchItems, d.MaxReadChannels
	fs.DurationVar(&c.RetryAfter, "retry-after", c.RetryAfter, "Retry-After hint (whole seconds) sent with Unavailable answers of writes")
	fs.DurationVar(&c.RedisTimeout, "redis-timeout", c.RedisTimeout, "bound on each Redis call; past it the answer is realtime_degraded")
	c.ReplicaAckTimeout = d.ReplicaAckTimeout
	fs.IntVar(&c.ReplicaAcks, "redis-replica-acks", c.ReplicaAcks, "replicas of its Redis node that must take a mark or mark-unread before it is answered (WAIT; 0: none). Set it to the replicas a master has, so that a failover loses no answered read")
	fs.DurationVar(&c.ReplicaAckTimeout, "redis-replica-ack-timeout", c.ReplicaAckTimeout, "bound on that wait; past it the answer is realtime_degraded and the user is restored from Postgres")
	fs.DurationVar(&c.PostgresTimeout, "pg-timeout", c.PostgresTimeout, "bound on each Postgres read")
	fs.IntVar(&c.MaxBatchItems, "max-batch-items", c.MaxBatchItems, "most receipts in one MarkReceipts call")
	fs.IntVar(&c.MaxReadChannels, "max-read-channels", c.MaxReadChannels, "most channel ids in one GetReadState call")
	c.MaxUnreadChannels, c.MentionCap = d.MaxUnreadChannels, d.MentionCap
	fs.IntVar(&c.MaxUnreadChannels, "max-unread-channels", c.MaxUnreadChannels, "most channel ids in one GetUnread or ReadAll call")
	fs.IntVar(&c.MentionCap, "mention-cap", c.MentionCap, "mention counts above it show as cap+ (must match the persister's and dlt-reconciler's)")
	fs.BoolVar(&c.AllowNonMemberMarks, "allow-non-member-marks", c.AllowNonMemberMarks, "accept marks by non-members of channels that have registered members (default: PermissionDenied)")
	c.Coalesce.RegisterFlags(fs)
	c.Restore.RegisterFlags(fs)
}

// withDefaults returns a copy with every zero field set to its default.
func (c Config) withDefaults() Config {
	c.RetryAfter = cmp.Or(c.RetryAfter, RetryAfterDefault)
	c.RedisPrefix = cmp.Or(c.RedisPrefix, redisstore.PrefixDefault)
	c.RedisTimeout = cmp.Or(c.RedisTimeout, RedisTimeoutDefault)
	c.ReplicaAckTimeout = cmp.Or(c.ReplicaAckTimeout, ReplicaAckTimeoutDefault)
	c.PostgresTimeout = cmp.Or(c.PostgresTimeout, PostgresTimeoutDefault)
	c.MaxBatchItems = cmp.Or(c.MaxBatchItems, MaxBatchItemsDefault)
	c.MaxReadChannels = cmp.Or(c.MaxReadChannels, MaxReadChannelsDefault)
	c.MaxUnreadChannels = cmp.Or(c.MaxUnreadChannels, MaxUnreadChannelsDefault)
	c.MentionCap = cmp.Or(c.MentionCap, channel.MentionCapDefault)
	c.Coalesce = c.Coalesce.withDefaults()
	c.Restore = c.Restore.withDefaults()
	c.ThreadsPerUser = cmp.Or(c.ThreadsPerUser, threads.MaxUserThreads)
	lifecycle.DefaultTelemetry(&c.Logger, &c.Registerer)
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
	if c.Producer == nil {
		bad("Producer: a producer is required")
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"RetryAfter", c.RetryAfter},
		{"RedisTimeout", c.RedisTimeout}, {"PostgresTimeout", c.PostgresTimeout},
		{"ReplicaAckTimeout", c.ReplicaAckTimeout},
	} {
		if d.v < 0 {
			bad("%s: must be positive, got %s", d.name, d.v)
		}
	}
	if c.ReplicaAcks < 0 {
		bad("ReplicaAcks: must be 0 or more, got %d", c.ReplicaAcks)
	}
	if c.ReplicaAcks > 0 && c.ReplicaAckTimeout >= c.RedisTimeout {
		bad("ReplicaAckTimeout: must be below RedisTimeout (%s), got %s", c.RedisTimeout, c.ReplicaAckTimeout)
	}
	if c.MaxBatchItems < 1 {
		bad("MaxBatchItems: must be >= 1, got %d", c.MaxBatchItems)
	}
	if c.MaxUnreadChannels < 1 {
		bad("MaxUnreadChannels: must be >= 1, got %d", c.MaxUnreadChannels)
	}
	if c.MentionCap < 1 {
		bad("MentionCap: must be >= 1, got %d", c.MentionCap)
	}
	if c.MaxReadChannels < 1 {
		bad("MaxReadChannels: must be >= 1, got %d", c.MaxReadChannels)
	}
	if c.ThreadsPerUser < 2 || c.ThreadsPerUser > threads.MaxUserThreads {
		bad("ThreadsPerUser: must be between 2 and %d, got %d", threads.MaxUserThreads, c.ThreadsPerUser)
	}
	if err := c.Coalesce.validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// ReadByConfig configures the read-by, ticks and settings paths. Zero
// fields take their defaults.
type ReadByConfig struct {
	// DetailThreshold: channels of at most this many members answer with
	// member lists. Defaults to DetailThresholdDefault.
	DetailThreshold int
	// ViewStreamMaxLen bounds each channel's move stream (approximately).
	// Defaults to readby.StreamMaxLenDefault.
	ViewStreamMaxLen int64
	// ViewRefresh: see ViewRefreshDefault.
	ViewRefresh time.Duration
}

func (c ReadByConfig) Threshold() int64 {
	if c.DetailThreshold <= 0 {
		return DetailThresholdDefault
	}
	return int64(c.DetailThreshold)
}

func (c ReadByConfig) Refresh() time.Duration {
	if c.ViewRefresh <= 0 {
		return ViewRefreshDefault
	}
	return c.ViewRefresh
}

// RegisterFlags registers the read-by flags.
func (c *ReadByConfig) RegisterFlags(fs *flag.FlagSet) {
	fs.IntVar(&c.DetailThreshold, "receipts-detail-threshold", DetailThresholdDefault, "largest member count of a channel whose receipts list members (larger: counts only)")
	fs.Int64Var(&c.ViewStreamMaxLen, "view-stream-maxlen", readby.StreamMaxLenDefault, "approximate bound on each channel's cursor-move stream in Redis")
	fs.DurationVar(&c.ViewRefresh, "view-refresh", ViewRefreshDefault, "how long a channel view rebuilt from Postgres is trusted before a read merges Postgres into it again")
}
