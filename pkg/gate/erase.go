package gate

import (
	"context"
	"fmt"
	"math"

	"connectrpc.com/connect"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	receiptsv1 "github.com/readstate/receipts/api/receipts/v1"
	"github.com/readstate/receipts/pkg/apierr"
	"github.com/readstate/receipts/pkg/event"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/redisstore"
	"github.com/readstate/receipts/pkg/tombstone"
)

// admit readies one encoded record for the durable producer (its topic)
// and refuses the call at once, before Redis is touched, when the record
// is bound for a spool it does not fit in.
func (g *Gate) admit(rec *kgo.Record, err error) (*kgo.Record, error) {
	if err != nil {
		return nil, internal(err)
	}
	rec.Topic = g.durable.Topic()
	if err := g.durable.Refuse([]*kgo.Record{rec}); err != nil {
		return nil, g.unavailable(1, err)
	}
	return rec, nil
}

// EraseUser implements receiptsv1connect.ReceiptServiceHandler: it removes
// the user from Redis and raises their tombstone there (one script, atomic
// with every mark's merge, which stamps its event with the generation it
// read), then makes the erasure event durable on read-receipts like a
// mark (Kafka, or the spool). Only then is it acknowledged; the persister
// deletes the user's Postgres rows when it applies the event, and every
// consumer drops the user's events that predate it (tombstone.Drops).
// Redis must answer: an erasure is never acknowledged with the real-time
// view still holding the user. A failure after Redis is cleaned answers
// Unavailable; the retry erases again at a newer generation, harmlessly.
func (g *Gate) EraseUser(ctx context.Context, req *connect.Request[receiptsv1.EraseUserRequest]) (*connect.Response[receiptsv1.EraseUserResponse], error) {
	user := req.Msg.GetUserId()
	if err := receipt.ValidateID("user_id", user); err != nil {
		return nil, invalid(apierr.InvalidID, err)
	}
	// Sized like the real record, so a full spool refuses before Redis.
	if _, err := g.admit(event.EncodeErasure(tombstone.Tombstone{User: user, Generation: math.MaxInt64, ErasedAtUnixMs: math.MaxInt64})); err != nil {
		return nil, err
	}

	rctx, cancel := context.WithTimeout(ctx, g.cfg.RedisTimeout)
	ts, err := g.redis.Erase(rctx, user, g.nowMs())
	cancel()
	if err != nil {
		g.m.redisDegraded.WithLabelValues(redisOpErase).Inc()
		g.log.Warn("erasing a user from redis; answering unavailable", zap.String("user_id", user), zap.Error(err))
		return nil, unavailableError(fmt.Errorf("erasing %s from redis: %w; nothing was acknowledged, retry", user, err), apierr.RetryAfter(g.cfg.RetryAfter))
	}
	rec, err := event.EncodeErasure(ts)
	if err != nil {
		return nil, internal(err)
	}
	rec.Topic = g.durable.Topic()
	durability, err := g.produce(ctx, []*kgo.Record{rec})
	if err != nil {
		return nil, err
	}
	g.log.Info("user erased", zap.String("user_id", user), zap.Int64("generation", ts.Generation), zap.Stringer("durability", durability))
	return connect.NewResponse(&receiptsv1.EraseUserResponse{UserId: user, Generation: ts.Generation, Durability: durability}), nil
}

// knownGenerations replaces, in gens (the erasure generations the Redis
// writes of users[i] read), each redisstore.GenerationUnknown — Redis held
// no tombstone for the user: never looked up, or lost with its data — by
// the generation of the user's tombstone in Postgres (0 when none), and
// has Redis remember it, so the user's next writes read it there. A
// post-erasure write of a Redis that lost the tombstone is so stamped with
// the erasure Postgres applied, never with 0, which the time rule of
// tombstone.Drops would judge by the clocks. When Postgres cannot answer
// the stamp is 0 (as when Redis cannot): the write is still acknowledged.
// Postgres lags an erasure still on its way there; such an erasure that
// Redis lost too is the one case the stamp misses (then the time rule
// applies).
func (g *Gate) knownGenerations(ctx context.Context, users []string, gens []int64) {
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
	pctx, cancel := context.WithTimeout(ctx, g.cfg.PostgresTimeout)
	pg, err := g.pg.Tombstones(pctx, unknown)
	cancel()
	if err != nil {
		g.resolveWarn.Do(func() {
			g.log.Warn("reading tombstones Redis does not hold from Postgres; the writes travel unstamped", zap.Int("num_users", len(unknown)), zap.Error(err))
		})
		pg = nil
	}
	for i, gen := range gens {
		if gen == redisstore.GenerationUnknown {
			gens[i] = pg[users[i]].Generation
		}
	}
	if err != nil {
		return
	}
	rctx, cancel := context.WithTimeout(ctx, g.cfg.RedisTimeout)
	if err := g.redis.RememberTombstones(rctx, unknown, pg); err != nil {
		g.warnRedis(redisOpMerge, err)
	}
	cancel()
}
