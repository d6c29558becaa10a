package seam

import (
	"context"
	"errors"
	"fmt"
	"time"

	"connectrpc.com/connect"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
	"golang.org/x/time/rate"

	receiptsv1 "github.com/readstate/receipts/api/receipts/v1"
	"github.com/readstate/receipts/pkg/apierr"
	"github.com/readstate/receipts/pkg/errclass"
	"github.com/readstate/receipts/pkg/event"
	"github.com/readstate/receipts/pkg/kinds/cursors"
	"github.com/readstate/receipts/pkg/kinds/deletions"
	"github.com/readstate/receipts/pkg/kinds/groupmentions"
	"github.com/readstate/receipts/pkg/kinds/heads"
	"github.com/readstate/receipts/pkg/kinds/members"
	"github.com/readstate/receipts/pkg/kinds/mentions"
	"github.com/readstate/receipts/pkg/kinds/settings"
	"github.com/readstate/receipts/pkg/pgstore"
	"github.com/readstate/receipts/pkg/producer"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/redisstore"
	"github.com/readstate/receipts/pkg/tracing"
)

// Core is what every RPC handler of the gateway shares: the stores, the
// producer, the metrics, the restores after Redis lost data, and the
// steps every call goes through (admit, produce, stamp the erasure
// generation, the degraded answer).
type Core struct {
	Cfg     Config
	Log     *zap.Logger
	Redis   *redisstore.Store
	PG      *pgstore.Store
	Durable Producer
	M       *Metrics
	// restore puts back what Redis lost before a write or read uses it.
	Restore *Restorer
	// Parts are the kinds' additions to other calls' answers.
	Parts Parts

	// redisWarn lets the "Redis degraded" log line through once a second:
	// during an outage every call would log it.
	redisWarn rate.Sometimes
	// durableWarn does the same for "making marks durable": a full spool
	// refuses calls fast, and each would log.
	durableWarn rate.Sometimes
	// resolveWarn does the same for marks resolved without a store.
	ResolveWarn rate.Sometimes
}

// New fills defaults and validates cfg (all problems at once). It starts
// nothing and does not wait for Kafka or Redis.
func New(cfg Config) (*Core, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("configuring gate: %w", err)
	}
	m := newMetrics(cfg.Registerer)
	// Every Redis round trip of the gateway waits at most RedisTimeout:
	// bounded once, on its client.
	redisstore.Bound(cfg.Redis, cfg.RedisTimeout)
	g := &Core{
		Cfg:     cfg,
		Log:     cfg.Logger.Named("gate"),
		Redis:   redisstore.New(cfg.Redis, redisstore.Config{Prefix: cfg.RedisPrefix, Undecodable: m.undecodable}),
		PG:      cfg.Postgres,
		Durable: cfg.Producer,
		M:       m,
	}
	g.redisWarn.Interval, g.durableWarn.Interval, g.ResolveWarn.Interval = warnInterval, warnInterval, warnInterval
	g.Restore = newRestorer(g, cfg.Restore, cfg.Registerer)
	return g, nil
}

// RedisDegradedOn counts n items whose Redis step op failed with err (the
// answer goes on without the real-time view) and warns of it.
func (g *Core) RedisDegradedOn(ctx context.Context, op string, n int, err error) {
	g.M.RedisDegraded.WithLabelValues(op).Add(float64(n))
	g.WarnRedis(ctx, op, err)
}

// WarnRedis logs a Redis failure at most once a second; the
// redis_degraded_total metric counts every one.
func (g *Core) WarnRedis(ctx context.Context, op string, err error) {
	if redisstore.Classify(err) != errclass.Unavailable {
		// Redis answered and refused the command: a bug or a foreign
		// value under our prefix, not an outage.
		tracing.Logger(ctx, g.Log).Error("redis refuses the command; answering from the durable path", zap.String("op", op), zap.Error(err))
		return
	}
	g.redisWarn.Do(func() {
		tracing.Logger(ctx, g.Log).Warn("redis degraded; answering from the durable path", zap.String("op", op), zap.Error(err))
	})
}

// warnInterval spaces the gate's repeated warnings: the metrics count
// every occurrence, the log shows one a second.
const warnInterval = time.Second

// ContextError maps the caller's own cancellation or deadline to its code,
// so a client that went away is not counted as an outage.
func ContextError(ctx context.Context, err error) error {
	switch {
	case errors.Is(ctx.Err(), context.Canceled):
		return apierr.New(connect.CodeCanceled, apierr.Canceled, err)
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return apierr.New(connect.CodeDeadlineExceeded, apierr.DeadlineExceeded, err)
	}
	return nil
}

// UnavailableError is the answer when a store the call needs cannot
// answer: Unavailable (HTTP 503), reason UNAVAILABLE; nothing was
// acknowledged.
func UnavailableError(err error, meta ...apierr.Meta) error {
	return apierr.New(connect.CodeUnavailable, apierr.Unavailable, err, meta...)
}

// Internal is the answer to a bug (a record that does not encode).
func Internal(err error) error { return apierr.New(connect.CodeInternal, apierr.Internal, err) }

// NowMs is the gateway's clock (Config.Clock) in Unix milliseconds.
func (g *Core) NowMs() int64 {
	if g.Cfg.Clock != nil {
		return g.Cfg.Clock().UnixMilli()
	}
	return time.Now().UnixMilli()
}

// MakeDurable is the gateway's one call of the producer: records go to
// Kafka, or to the spool while Kafka is away, and the time it took is
// observed.
func (g *Core) MakeDurable(ctx context.Context, recs []*kgo.Record) (producer.Durability, error) {
	began := time.Now()
	dur, err := g.Durable.Write(ctx, recs)
	g.M.Produce.Observe(time.Since(began).Seconds())
	return dur, err
}

// Produce makes records durable and answers where; no records is a
// no-op (DURABILITY_UNSPECIFIED).
func (g *Core) Produce(ctx context.Context, recs []*kgo.Record) (receiptsv1.Durability, error) {
	if len(recs) == 0 {
		return receiptsv1.Durability_DURABILITY_UNSPECIFIED, nil
	}
	tracing.Inject(ctx, recs)
	dur, err := g.MakeDurable(ctx, recs)
	if err != nil {
		if cerr := ContextError(ctx, err); cerr != nil {
			g.M.Events.WithLabelValues(OutcomeUnavailable).Add(float64(len(recs)))
			return 0, cerr
		}
		return 0, g.Unavailable(ctx, len(recs), err)
	}
	outcome, durability := OutcomeKafka, receiptsv1.Durability_KAFKA
	if dur == producer.Spooled {
		outcome, durability = OutcomeSpooled, receiptsv1.Durability_SPOOLED
	}
	g.M.Events.WithLabelValues(outcome).Add(float64(len(recs)))
	return durability, nil
}

// ProduceUserRecord makes one user event durable, stamped with the
// erasure generation its Redis write read (gen; event.Unstamped or
// redisstore.GenerationUnknown when that write failed or read none:
// knownGenerations asks Postgres), so that an erasure drops it only if
// it came first.
func (g *Core) ProduceUserRecord(ctx context.Context, rec *kgo.Record, user string, gen int64) (receiptsv1.Durability, error) {
	rec.Topic = g.Durable.Topic()
	gens := []int64{gen}
	g.KnownGenerations(ctx, []string{user}, gens)
	event.StampGeneration(rec, gens[0])
	return g.Produce(ctx, []*kgo.Record{rec})
}

// Unavailable is the answer when a call's marks could not be made durable:
// Unavailable (HTTP 503) with a Retry-After hint, which connect sends as a
// header (trailer for gRPC) and vanguard as a REST header. Nothing was
// acknowledged; Redis may already hold the marks (the write path merges it
// first), which is harmless: the caller retries, and if it does not, the
// drift sweep makes Postgres agree with Redis.
func (g *Core) Unavailable(ctx context.Context, n int, err error) error {
	g.M.Events.WithLabelValues(OutcomeUnavailable).Add(float64(n))
	g.durableWarn.Do(func() {
		tracing.Logger(ctx, g.Log).Warn("making marks durable; answering unavailable", zap.Int("num_records", n), zap.String("topic", g.Durable.Topic()), zap.Error(err))
	})
	return UnavailableError(fmt.Errorf("making %d marks durable: %w; nothing was acknowledged, retry", n, err), apierr.RetryAfter(g.Cfg.RetryAfter))
}

// Admit readies one encoded record for the durable producer (its topic)
// and refuses the call at once, before Redis is touched, when the record
// is bound for a spool it does not fit in.
func (g *Core) Admit(ctx context.Context, rec *kgo.Record, err error) (*kgo.Record, error) {
	if err != nil {
		return nil, Internal(err)
	}
	rec.Topic = g.Durable.Topic()
	if err := g.Durable.Refuse([]*kgo.Record{rec}); err != nil {
		return nil, g.Unavailable(ctx, 1, err)
	}
	return rec, nil
}

// KnownGenerations replaces, in gens (the erasure generations the Redis
// writes of users[i] read), each redisstore.GenerationUnknown — Redis held
// no tombstone for the user: never looked up, or lost with its data — by
// the generation of the user's tombstone in Postgres (0 when none), and
// has Redis remember it, so the user's next writes read it there. A
// post-erasure write of a Redis that lost the tombstone is so stamped with
// the erasure Postgres holds, which is every acknowledged one (EraseUser
// applies it there first). When Postgres cannot answer the event travels
// unstamped (event.Unstamped, as when Redis cannot): the write is still
// acknowledged, and the time rule of tombstone.Drops judges it.
func (g *Core) KnownGenerations(ctx context.Context, users []string, gens []int64) {
	var unknown []string
	seen := map[string]bool{}
	for i, gen := range gens {
		if gen == redisstore.GenerationUnknown && !seen[users[i]] {
			seen[users[i]] = true
			unknown = append(unknown, users[i])
		}
	}
	if len(unknown) == 0 {
		return
	}
	pctx, cancel := context.WithTimeout(ctx, g.Cfg.PostgresTimeout)
	pg, err := g.PG.Tombstones(pctx, unknown)
	cancel()
	if err != nil {
		g.ResolveWarn.Do(func() {
			g.Log.Warn("reading tombstones Redis does not hold from Postgres; the writes travel unstamped", zap.Int("num_users", len(unknown)), zap.Error(err))
		})
		pg = nil
	}
	for i, gen := range gens {
		switch {
		case gen != redisstore.GenerationUnknown:
		case err != nil:
			gens[i] = event.Unstamped
		default:
			gens[i] = pg[users[i]].Generation
		}
	}
	if err != nil {
		return
	}
	if err := g.Redis.RememberTombstones(ctx, unknown, pg); err != nil {
		g.WarnRedis(ctx, RedisOpMerge, err)
	}
}

// GenerationOf is the generation to stamp on the event of a Redis write
// that read gen (GenerationUnknown: knownGenerations resolves it), or
// event.Unstamped when the write failed.
func GenerationOf(gen int64, err error) int64 {
	if err != nil {
		return event.Unstamped
	}
	return gen
}

// DurableErr is the answer when neither store could answer.
func (g *Core) DurableErr(ctx context.Context, err error) error {
	if cerr := ContextError(ctx, err); cerr != nil {
		return cerr
	}
	tracing.Logger(ctx, g.Log).Warn("reading durable state", zap.Error(err))
	return UnavailableError(fmt.Errorf("reading channel state: %w; retry", err))
}

// ValidateChannelSeq checks a message reference: its channel, its seq and
// its optional sender (the fields named with prefix).
func ValidateChannelSeq(prefix, ch string, seq int64, sender string) error {
	if err := receipt.ValidateID(prefix+"channel_id", ch); err != nil {
		return Invalid(apierr.InvalidID, err)
	}
	if err := receipt.ValidateSeq(prefix+"seq", seq); err != nil {
		return Invalid(apierr.InvalidSeq, err)
	}
	return Invalid(apierr.InvalidID, receipt.ValidateOptionalID(prefix+"sender_id", sender))
}

// PositionProto is a position as the API carries it.
func PositionProto(p receipt.Position) *receiptsv1.Position {
	return &receiptsv1.Position{Epoch: p.Epoch, Seq: p.Seq}
}

// ValidateKey checks a call's user and channel ids.
func ValidateKey(user, ch string) (receipt.Key, error) {
	if err := receipt.ValidateID("user_id", user); err != nil {
		return receipt.Key{}, Invalid(apierr.InvalidID, err)
	}
	if err := receipt.ValidateID("channel_id", ch); err != nil {
		return receipt.Key{}, Invalid(apierr.InvalidID, err)
	}
	return receipt.Key{User: user, Channel: ch}, nil
}

// The kinds' storage on the core's stores, shared by the handlers; the
// ones that keep mentions keep the configured cap's (Config.MentionCap).

// SettingsStore is the privacy settings registers'.
func (g *Core) SettingsStore() settings.Store { return settings.NewStore(g.PG, g.Redis) }

// CursorStore is the cursors' kind over the gateway's Redis.
func (g *Core) CursorStore() cursors.Store { return cursors.NewStore(g.Redis) }

// HeadStore is the channel heads' (Postgres).
func (g *Core) HeadStore() heads.Store { return heads.NewStore(g.PG, g.Redis) }

// MemberStore is the membership registers'.
func (g *Core) MemberStore() members.Store { return members.NewStore(g.PG, g.Redis) }

// MentionStore is the mention sets'.
func (g *Core) MentionStore() mentions.Store {
	return mentions.NewStore(g.PG, g.Redis).WithMentionCap(g.Cfg.MentionCap)
}

// DeletionStore is the deleted seqs'.
func (g *Core) DeletionStore() deletions.Store { return deletions.NewStore(g.PG, g.Redis) }

// GroupMentionStore is the channels' group mentions'.
func (g *Core) GroupMentionStore() groupmentions.Store {
	return groupmentions.NewStore(g.PG, g.Redis).WithMentionCap(g.Cfg.MentionCap)
}
