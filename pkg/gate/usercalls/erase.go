package usercalls

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
	"github.com/readstate/receipts/pkg/gate/seam"
	"github.com/readstate/receipts/pkg/kind"
	"github.com/readstate/receipts/pkg/kinds"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/tombstone"
	"github.com/readstate/receipts/pkg/views/readby"
)

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
func (g *Users) EraseUser(ctx context.Context, req *connect.Request[receiptsv1.EraseUserRequest]) (*connect.Response[receiptsv1.EraseUserResponse], error) {
	user := req.Msg.GetUserId()
	if err := receipt.ValidateID("user_id", user); err != nil {
		return nil, seam.Invalid(apierr.InvalidID, err)
	}
	// Sized like the real record, so a full spool refuses before Redis.
	sized, err := event.EncodeErasure(tombstone.Tombstone{User: user, Generation: math.MaxInt64, ErasedAtUnixMs: math.MaxInt64})
	if _, err := g.Admit(ctx, sized, err); err != nil {
		return nil, err
	}
	pctx, cancel := context.WithTimeout(ctx, g.Cfg.PostgresTimeout)
	durable, err := g.PG.Tombstones(pctx, []string{user})
	cancel()
	if err != nil {
		return nil, g.eraseUnavailable(ctx, user, "reading the user's tombstone from postgres", err)
	}
	env := &kind.Env{Redis: g.Redis}
	ts, err := g.Redis.Erase(ctx, user, g.NowMs(), tombstone.Next(durable[user].Generation), kind.ErasedHashes(kinds.All(), env, user), g.readBy.ViewStore().Redact(g.NowMs(), kind.RedisRedact(kinds.All(), env)))
	if err != nil {
		g.M.RedisDegraded.WithLabelValues(seam.RedisOpErase).Inc()
		return nil, g.eraseUnavailable(ctx, user, "erasing the user from redis", err)
	}
	pctx, cancel = context.WithTimeout(ctx, g.Cfg.PostgresTimeout)
	_, _, err = g.PG.Erase(pctx, ts, kind.PGErasure(kinds.All()).And(readby.MoveLogErasure))
	cancel()
	if err != nil {
		return nil, g.eraseUnavailable(ctx, user, "applying the erasure to postgres", err)
	}
	rec, err := event.EncodeErasure(ts)
	if err != nil {
		return nil, seam.Internal(err)
	}
	rec.Topic = g.Durable.Topic()
	durability, err := g.Produce(ctx, []*kgo.Record{rec})
	if err != nil {
		return nil, err
	}
	g.Log.Info("user erased", zap.String("user_id", user), zap.Int64("generation", ts.Generation), zap.Stringer("durability", durability))
	return connect.NewResponse(&receiptsv1.EraseUserResponse{UserId: user, Generation: ts.Generation, Durability: durability}), nil
}

// eraseUnavailable is the answer when a store could not take an erasure.
func (g *Users) eraseUnavailable(ctx context.Context, user, step string, err error) error {
	if cerr := seam.ContextError(ctx, err); cerr != nil {
		return cerr
	}
	g.Log.Warn(step+"; answering unavailable", zap.String("user_id", user), zap.Error(err))
	return seam.UnavailableError(fmt.Errorf("%s: %s: %w; nothing was acknowledged, retry", user, step, err), apierr.RetryAfter(g.Cfg.RetryAfter))
}
