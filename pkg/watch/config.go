package watch

import (
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
)

// Defaults. Each Config field names its default.
const (
	CoalesceDefault       = 100 * time.Millisecond
	BlockDefault          = 250 * time.Millisecond
	ClusterPollDefault    = 25 * time.Millisecond
	ReadCountDefault      = 256
	MaxChannelsDefault    = 1000
	MaxSubscribersDefault = 10000
	// MaxStreamsPerClientDefault bounds one client's streams on a
	// replica: far above what one app user's devices hold, far below
	// MaxSubscribers, so that one client cannot take the replica's.
	MaxStreamsPerClientDefault = 100
	// SnapshotMembersDefault is the largest channel whose snapshot lists
	// members' cursors: the gateway's detail threshold by default.
	SnapshotMembersDefault = 50
	MaxPendingDefault      = 5000
	CatchUpPageDefault     = 1000
)

// MetricsNamespace and MetricsSubsystem name the metrics:
// receipts_watch_*.
const (
	MetricsNamespace = "receipts"
	MetricsSubsystem = "watch"
)

// Config configures a Hub.
type Config struct {
	// Redis holds the channel view (single node, sentinel or cluster).
	Redis redis.UniversalClient
	// Keys names the view's keys (required): readby.Store, the view
	// that owns them.
	Keys Keys
	// Coalesce is the window of a subscriber: at most one event per
	// window, with one update per (channel, user, kind). Defaults to
	// CoalesceDefault.
	Coalesce time.Duration
	// Block is how long one XREAD waits for entries on a single node (a
	// channel watched for the first time by a replica is read from the
	// next XREAD, so this also bounds that delay). Defaults to
	// BlockDefault.
	Block time.Duration
	// ClusterPoll is the pause after an empty round of reads in Redis
	// Cluster, where one blocking XREAD cannot span slots. Defaults to
	// ClusterPollDefault.
	ClusterPoll time.Duration
	// ReadCount bounds the entries one XREAD returns per stream. Defaults
	// to ReadCountDefault.
	ReadCount int64
	// MaxChannels bounds the channels of one subscription. Defaults to
	// MaxChannelsDefault.
	MaxChannels int
	// MaxSubscribers bounds this replica's subscriptions. Defaults to
	// MaxSubscribersDefault.
	MaxSubscribers int
	// MaxStreamsPerClient bounds the subscriptions of one client (its
	// token name, or its address on an open API) on this replica; past it
	// SubscribeAs fails with ErrTooManyClientStreams. Defaults to
	// MaxStreamsPerClientDefault.
	MaxStreamsPerClient int
	// SnapshotMembers is the largest channel (in members) whose snapshot
	// reads the members' cursors; a larger one's snapshot carries counts
	// and watermarks only (the ticks function's), read without touching
	// per-member state. Defaults to SnapshotMembersDefault.
	SnapshotMembers int
	// MaxPending bounds a subscriber's unsent updates (distinct (channel,
	// user, kind) keys): past it the subscriber is sent a snapshot, marked
	// expired, instead of the updates it could not keep. Defaults to
	// MaxPendingDefault.
	MaxPending int
	// CatchUpPage is the XRANGE page of a resume. Defaults to
	// CatchUpPageDefault.
	CatchUpPage int64
	// Logger defaults to a no-op logger; Registerer to a private registry.
	Logger     *zap.Logger
	Registerer prometheus.Registerer
}

func (c Config) withDefaults() Config {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&c.Coalesce, CoalesceDefault)
	def(&c.Block, BlockDefault)
	def(&c.ClusterPoll, ClusterPollDefault)
	if c.ReadCount == 0 {
		c.ReadCount = ReadCountDefault
	}
	if c.MaxChannels == 0 {
		c.MaxChannels = MaxChannelsDefault
	}
	if c.MaxSubscribers == 0 {
		c.MaxSubscribers = MaxSubscribersDefault
	}
	if c.MaxStreamsPerClient == 0 {
		c.MaxStreamsPerClient = MaxStreamsPerClientDefault
	}
	if c.SnapshotMembers == 0 {
		c.SnapshotMembers = SnapshotMembersDefault
	}
	if c.MaxPending == 0 {
		c.MaxPending = MaxPendingDefault
	}
	if c.CatchUpPage == 0 {
		c.CatchUpPage = CatchUpPageDefault
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	if c.Registerer == nil {
		c.Registerer = prometheus.NewRegistry()
	}
	return c
}

func (c Config) validate() error {
	var errs []error
	if c.Redis == nil {
		errs = append(errs, errors.New("Redis: required"))
	}
	if c.Keys == nil {
		errs = append(errs, errors.New("Keys: required"))
	}
	if c.Coalesce < 0 || c.Block < time.Millisecond || c.ClusterPoll < 0 {
		errs = append(errs, fmt.Errorf("Coalesce %v, Block %v, ClusterPoll %v: Block ≥ 1ms, none negative", c.Coalesce, c.Block, c.ClusterPoll))
	}
	if c.ReadCount < 1 || c.MaxChannels < 1 || c.MaxSubscribers < 1 || c.MaxStreamsPerClient < 1 || c.SnapshotMembers < 1 || c.MaxPending < 1 || c.CatchUpPage < 1 {
		errs = append(errs, errors.New("ReadCount, MaxChannels, MaxSubscribers, MaxStreamsPerClient, SnapshotMembers, MaxPending, CatchUpPage: must be positive"))
	}
	if c.MaxChannels > maxTokenChannels {
		errs = append(errs, fmt.Errorf("MaxChannels %d: at most %d", c.MaxChannels, maxTokenChannels))
	}
	return errors.Join(errs...)
}

// RegisterFlags registers the watch flags (--watch-*), with the config's
// values (or the defaults, for zero fields) as defaults.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	d := c.withDefaults()
	c.Coalesce, c.Block, c.ClusterPoll, c.ReadCount = d.Coalesce, d.Block, d.ClusterPoll, d.ReadCount
	c.MaxChannels, c.MaxSubscribers, c.MaxPending = d.MaxChannels, d.MaxSubscribers, d.MaxPending
	c.MaxStreamsPerClient = d.MaxStreamsPerClient
	fs.DurationVar(&c.Coalesce, "watch-coalesce", c.Coalesce, "watch streams: at most one event per subscriber per window, one update per (channel, user, kind)")
	fs.DurationVar(&c.Block, "watch-block", c.Block, "watch reader: how long one XREAD of the channel streams blocks (single-node Redis)")
	fs.DurationVar(&c.ClusterPoll, "watch-cluster-poll", c.ClusterPoll, "watch reader: pause after an empty round of reads (Redis Cluster)")
	fs.Int64Var(&c.ReadCount, "watch-read-count", c.ReadCount, "watch reader: most entries one XREAD returns per channel stream")
	fs.IntVar(&c.MaxChannels, "watch-max-channels", c.MaxChannels, "most channels in one watch stream")
	fs.IntVar(&c.MaxSubscribers, "watch-max-subscribers", c.MaxSubscribers, "most watch streams on this replica")
	fs.IntVar(&c.MaxStreamsPerClient, "watch-max-streams-per-client", c.MaxStreamsPerClient, "most watch streams of one client (token name, or remote address without auth) on this replica; the next is refused with 429 / ResourceExhausted")
	fs.IntVar(&c.MaxPending, "watch-max-pending", c.MaxPending, "a watch stream's unsent updates before it is sent a snapshot (marked expired) instead")
}
