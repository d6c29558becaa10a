package gate

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

	"github.com/readstate/receipts/pkg/apiauth"
	"github.com/readstate/receipts/pkg/channel"
	"github.com/readstate/receipts/pkg/event"
	"github.com/readstate/receipts/pkg/lifecycle"
	"github.com/readstate/receipts/pkg/pgstore"
	"github.com/readstate/receipts/pkg/producer"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/redisstore"
	"github.com/readstate/receipts/pkg/watch"
)

// Defaults. Each Config field names its default.
const (
	AddrDefault            = "127.0.0.1:8080"
	RedisTimeoutDefault    = 500 * time.Millisecond
	PostgresTimeoutDefault = 2 * time.Second
	MaxBatchItemsDefault   = 500
	MaxReadChannelsDefault = 500
	MaxBodyBytesDefault    = 1 << 20
	// MaxUnreadChannelsDefault bounds the channel ids of one GetUnread or
	// ReadAll call (the contract's 1,000).
	MaxUnreadChannelsDefault = 1000

	ReadHeaderTimeoutDefault = 5 * time.Second
	ReadTimeoutDefault       = 15 * time.Second
	WriteTimeoutDefault      = 30 * time.Second
	IdleTimeoutDefault       = 2 * time.Minute
	ShutdownTimeoutDefault   = 10 * time.Second

	// RetryAfterDefault is the Retry-After hint of an Unavailable write.
	RetryAfterDefault = 2 * time.Second
	// WatchHeartbeatDefault is the pause after which an idle server-sent
	// events stream gets a comment line, so proxies keep it open.
	WatchHeartbeatDefault = 15 * time.Second

	// MaxRecordBytes is the largest record the gate ever produces: a key
	// of two ids and a colon, and a value consumers still decode. The
	// producer's spool is configured with it.
	MaxRecordBytes = 2*receipt.MaxIDLength + 1 + event.MaxValueBytes
	// MetricsSubsystem names the gate's metrics (receipts_kafkagate_…); the
	// producer it is given should use the same.
	MetricsSubsystem = "kafkagate"
	metricsNamespace = "receipts"
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
	// Addr is the API listen address used by ListenAndServe. Defaults to
	// AddrDefault.
	Addr string

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

	// Coalesce bounds the group commit of concurrent calls' marks.
	Coalesce CoalesceConfig
	// Watch serves WatchChannels and its server-sent events route; nil
	// answers Unimplemented. The hub is its own lifecycle component.
	Watch *watch.Hub
	// WatchHeartbeat is the idle pause before a server-sent events
	// heartbeat. Defaults to WatchHeartbeatDefault.
	WatchHeartbeat time.Duration

	// Auth authenticates and rate-limits API callers (pkg/apiauth): bearer
	// tokens, mTLS, per-client events/s. Its zero value is an open API,
	// which only a loopback Addr may serve unless
	// Auth.InsecureAllowUnauthenticated. A rate limit's burst defaults to
	// at least MaxBatchItems, so that a full batch can pass.
	Auth apiauth.Config

	// Logger defaults to zap.NewNop().
	Logger *zap.Logger
	// Registerer receives the gate's and the Kafka client's metrics.
	// Defaults to a private registry (metrics then go nowhere).
	Registerer prometheus.Registerer
}

// RegisterFlags registers the gate's flags, with the config's values (or
// the defaults, for zero fields) as defaults.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	d := c.withDefaults()
	c.Addr, c.RetryAfter, c.RedisTimeout, c.PostgresTimeout = d.Addr, d.RetryAfter, d.RedisTimeout, d.PostgresTimeout
	c.MaxBatchItems, c.MaxReadChannels, c.MaxBodyBytes = d.MaxBatchItems, d.MaxReadChannels, d.MaxBodyBytes
	c.ReadHeaderTimeout, c.ReadTimeout, c.WriteTimeout, c.IdleTimeout, c.ShutdownTimeout = d.ReadHeaderTimeout, d.ReadTimeout, d.WriteTimeout, d.IdleTimeout, d.ShutdownTimeout
	fs.StringVar(&c.Addr, "listen", c.Addr, "API listen address: gRPC, gRPC-Web, Connect and HTTP/JSON on one port (HTTP/1.1 and h2c)")
	fs.DurationVar(&c.RetryAfter, "retry-after", c.RetryAfter, "Retry-After hint (whole seconds) sent with Unavailable answers of writes")
	fs.DurationVar(&c.RedisTimeout, "redis-timeout", c.RedisTimeout, "bound on each Redis call; past it the answer is realtime_degraded")
	fs.DurationVar(&c.PostgresTimeout, "pg-timeout", c.PostgresTimeout, "bound on each Postgres read")
	fs.IntVar(&c.MaxBatchItems, "max-batch-items", c.MaxBatchItems, "most receipts in one MarkReceipts call")
	fs.IntVar(&c.MaxReadChannels, "max-read-channels", c.MaxReadChannels, "most channel ids in one GetReadState call")
	c.MaxUnreadChannels, c.MentionCap = d.MaxUnreadChannels, d.MentionCap
	fs.IntVar(&c.MaxUnreadChannels, "max-unread-channels", c.MaxUnreadChannels, "most channel ids in one GetUnread or ReadAll call")
	fs.IntVar(&c.MentionCap, "mention-cap", c.MentionCap, "mention counts above it show as cap+ (must match the persister's and dlt-reconciler's)")
	fs.BoolVar(&c.AllowNonMemberMarks, "allow-non-member-marks", c.AllowNonMemberMarks, "accept marks by non-members of channels that have registered members (default: PermissionDenied)")
	fs.Int64Var(&c.MaxBodyBytes, "max-body-bytes", c.MaxBodyBytes, "largest request body (REST: 413) or message (RPC: ResourceExhausted)")
	fs.DurationVar(&c.ReadHeaderTimeout, "read-header-timeout", c.ReadHeaderTimeout, "HTTP server: bound on reading request headers")
	fs.DurationVar(&c.ReadTimeout, "read-timeout", c.ReadTimeout, "HTTP server: bound on reading a whole request")
	fs.DurationVar(&c.WriteTimeout, "write-timeout", c.WriteTimeout, "HTTP server: bound on a whole call; must exceed redis-timeout + the produce bound")
	fs.DurationVar(&c.IdleTimeout, "idle-timeout", c.IdleTimeout, "HTTP server: keep-alive idle bound")
	c.Coalesce.RegisterFlags(fs)
	fs.DurationVar(&c.ShutdownTimeout, "shutdown-timeout", c.ShutdownTimeout, "on SIGINT/SIGTERM, how long in-flight calls may finish")
	c.WatchHeartbeat = d.WatchHeartbeat
	fs.DurationVar(&c.WatchHeartbeat, "watch-heartbeat", c.WatchHeartbeat, "idle pause before a heartbeat comment on a server-sent events watch stream")
	c.Auth.RegisterFlags(fs)
}

// withDefaults returns a copy with every zero field set to its default.
func (c Config) withDefaults() Config {
	c.Addr = cmp.Or(c.Addr, AddrDefault)
	c.RetryAfter = cmp.Or(c.RetryAfter, RetryAfterDefault)
	c.RedisPrefix = cmp.Or(c.RedisPrefix, redisstore.PrefixDefault)
	c.RedisTimeout = cmp.Or(c.RedisTimeout, RedisTimeoutDefault)
	c.PostgresTimeout = cmp.Or(c.PostgresTimeout, PostgresTimeoutDefault)
	c.MaxBatchItems = cmp.Or(c.MaxBatchItems, MaxBatchItemsDefault)
	c.MaxReadChannels = cmp.Or(c.MaxReadChannels, MaxReadChannelsDefault)
	c.MaxBodyBytes = cmp.Or(c.MaxBodyBytes, MaxBodyBytesDefault)
	c.MaxUnreadChannels = cmp.Or(c.MaxUnreadChannels, MaxUnreadChannelsDefault)
	c.MentionCap = cmp.Or(c.MentionCap, channel.MentionCapDefault)
	c.ReadHeaderTimeout = cmp.Or(c.ReadHeaderTimeout, ReadHeaderTimeoutDefault)
	c.ReadTimeout = cmp.Or(c.ReadTimeout, ReadTimeoutDefault)
	c.WriteTimeout = cmp.Or(c.WriteTimeout, WriteTimeoutDefault)
	c.IdleTimeout = cmp.Or(c.IdleTimeout, IdleTimeoutDefault)
	c.ShutdownTimeout = cmp.Or(c.ShutdownTimeout, ShutdownTimeoutDefault)
	c.Coalesce = c.Coalesce.withDefaults()
	c.WatchHeartbeat = cmp.Or(c.WatchHeartbeat, WatchHeartbeatDefault)
	lifecycle.DefaultTelemetry(&c.Logger, &c.Registerer)
	if c.Auth.RateLimit > 0 && c.Auth.RateLimitBurst == 0 {
		c.Auth.RateLimitBurst = max(int(c.Auth.RateLimit+0.999), c.MaxBatchItems)
	}
	c.Auth.Namespace, c.Auth.Subsystem = metricsNamespace, MetricsSubsystem
	c.Auth.Logger, c.Auth.Registerer = c.Logger, c.Registerer
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
		{"ReadHeaderTimeout", c.ReadHeaderTimeout}, {"ReadTimeout", c.ReadTimeout},
		{"WriteTimeout", c.WriteTimeout}, {"IdleTimeout", c.IdleTimeout}, {"ShutdownTimeout", c.ShutdownTimeout},
		{"WatchHeartbeat", c.WatchHeartbeat},
	} {
		if d.v < 0 {
			bad("%s: must be positive, got %s", d.name, d.v)
		}
	}
	if c.Producer != nil && c.WriteTimeout > 0 && c.WriteTimeout <= c.RedisTimeout+c.Producer.CallBound() {
		bad("WriteTimeout: %s leaves no room for a call (RedisTimeout %s + produce bound %s)", c.WriteTimeout, c.RedisTimeout, c.Producer.CallBound())
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
	if err := c.Coalesce.validate(); err != nil {
		errs = append(errs, err)
	}
	// 1 KiB is below any real batch; 64 MiB keeps vanguard's uint32 buffer
	// limit and memory per request sane.
	if c.MaxBodyBytes < 1<<10 || c.MaxBodyBytes > 64<<20 {
		bad("MaxBodyBytes: must be within [1KiB, 64MiB], got %d", c.MaxBodyBytes)
	}
	if err := c.Auth.Check(c.Addr); err != nil {
		errs = append(errs, err)
	}
	if c.Auth.RateLimit > 0 && c.Auth.RateLimitBurst < c.MaxBatchItems {
		bad("RateLimitBurst: %d is below MaxBatchItems %d: a full batch could never pass", c.Auth.RateLimitBurst, c.MaxBatchItems)
	}
	return errors.Join(errs...)
}
