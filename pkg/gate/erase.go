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
	"github.com/readstate/receipts/pkg/kind"
	"github.com/readstate/receipts/pkg/kinds"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/redisstore"
	"github.com/readstate/receipts/pkg/tombstone"
)

// admit readies one encoded record for the durable producer (its topic)
// and refuses the call at once, before Redis is touched, when the record
// is bound for a spool it does not fit in.
func (g *Gate) admit(ctx context.Context, rec *kgo.Record, err error) (*kgo.Record, error) {
	if err != nil {
		return nil, internal(err)
	}
	rec.Topic = g.durable.Topic()
	if err := g.durable.Refuse([]*kgo.Record{rec}); err != nil {
		return nil, g.unavailable(ctx, 1, err)
	}
	return rec, nil
}

// EraseUser implements receiptsv1connect.ReceiptServiceHandler: it removes
// the user from Redis and raises their tombstone there (one script, atomic
// with every write's script, which stamps its event with the generation it
// read), applies the erasure to Postgres (pgstore.Erase: the tombstone
// and the deletes), then makes the erasure event durable on read-receipts
// like a mark (Kafka, or the spool). Only then is it acknowledged, so
// Postgres holds every acknowledged erasure: a Redis that loses its data
// later (a FLUSHALL) before the persister reaches the event still stamps
// the user's next writes with it (knownGenerations reads Postgres), and
// the persister, which drops the user's events that predate it
// (tombstone.Drops), never drops those. The generation is at least one
// above Postgres' tombstone, which a flushed Redis no longer knows.
// Redis and Postgres must answer: an erasure is never acknowledged with a
// store still holding the user. A failure after Redis is cleaned answers
// Unavailable; the retry erases again at a newer generation, harmlessly.
func (g *Gate) EraseUser(ctx context.Context, req *connect.Request[receiptsv1.EraseUserRequest]) (*connect.Response[receiptsv1.EraseUserResponse], error) {
	user := req.Msg.GetUserId()
	if err := receipt.ValidateID("user_id", user); err != nil {
		return nil, invalid(apierr.InvalidID, err)
	}
	// Sized like the real record, so a full spool refuses before Redis.
	sized, err := event.EncodeErasure(tombstone.Tombstone{User: user, Generation: math.MaxInt64, ErasedAtUnixMs: math.MaxInt64})
	if _, err := g.admit(ctx, sized, err); err != nil {
		return nil, err
	}
	pctx, cancel := context.WithTimeout(ctx, g.cfg.PostgresTimeout)
	durable, err := g.pg.Tombstones(pctx, []string{user})
	cancel()
	if err != nil {
		return nil, g.eraseUnavailable(ctx, user, "reading the user's tombstone from postgres", err)
	}
	env := &kind.Env{Redis: g.redis}
	ts, err := g.redis.Erase(ctx, user, g.nowMs(), tombstone.Next(durable[user].Generation), kind.ErasedHashes(kinds.All(), env, user), g.readBy().Redact(g.nowMs(), kind.RedisRedact(kinds.All(), env)))
	if err != nil {
		g.m.redisDegraded.WithLabelValues(redisOpErase).Inc()
		return nil, g.eraseUnavailable(ctx, user, "erasing the user from redis", err)
	}
	pctx, cancel = context.WithTimeout(ctx, g.cfg.PostgresTimeout)
	_, _, err = g.pg.Erase(pctx, ts, kind.PGErase(kinds.All()), kind.PGRedact(kinds.All()))
	cancel()
	if err != nil {
		return nil, g.eraseUnavailable(ctx, user, "applying the erasure to postgres", err)
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

// eraseUnavailable is the answer when a store could not take an erasure.
func (g *Gate) eraseUnavailable(ctx context.Context, user, step string, err error) error {
	if cerr := contextError(ctx, err); cerr != nil {
		return cerr
	}
	g.log.Warn(step+"; answering unavailable", zap.String("user_id", user), zap.Error(err))
	return unavailableError(fmt.Errorf("%s: %s: %w; nothing was acknowledged, retry", user, step, err), apierr.RetryAfter(g.cfg.RetryAfter))
}

// knownGenerations replaces, in gens (the erasure generations the Redis
// writes of users[i] read), each redisstore.GenerationUnknown — Redis held
// no tombstone for the user: never looked up, or lost with its data — by
// the generation of the user's tombstone in Postgres (0 when none), and
// has Redis remember it, so the user's next writes read it there. A
// post-erasure write of a Redis that lost the tombstone is so stamped with
// the erasure Postgres holds, which is every acknowledged one (EraseUser
// applies it there first). When Postgres cannot answer the event travels
// unstamped (event.Unstamped, as when Redis cannot): the write is still
// acknowledged, and the time rule of tombstone.Drops judges it.
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
	if err := g.redis.RememberTombstones(ctx, unknown, pg); err != nil {
		g.warnRedis(ctx, redisOpMerge, err)
	}
}

// generationOf is the generation to stamp on the event of a Redis write
// that read gen (GenerationUnknown: knownGenerations resolves it), or
// event.Unstamped when the write failed.
func generationOf(gen int64, err error) int64 {
	if err != nil {
		return event.Unstamped
	}
	return gen
}
