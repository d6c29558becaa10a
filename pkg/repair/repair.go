// Package repair applies one state to both stores by its merge rule
// (RepairDecoded: cursors, heads, membership registers, mentions, privacy
// settings). For
// cursors it
// merges the key's Redis value (the real-time truth) into the state, upserts
// Postgres with the result and max-merges what Postgres then holds back into
// Redis, so both converge. The dead-letter consumer wraps it in bounded
// retries; an operator's replay runs it once.
package repair

import (
	"context"
	"fmt"

	"go.uber.org/zap"

	"github.com/readstate/receipts/pkg/pgstore"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/redisstore"
)

// Repairer applies one state to both stores by the max rule.
type Repairer struct {
	// Postgres is the durable store. Required.
	Postgres *pgstore.Store
	// Redis is the real-time view; nil repairs Postgres only (the drift
	// sweep brings Redis along).
	Redis *redisstore.Store
	// Logger defaults to a no-op logger.
	Logger *zap.Logger
	// OnRedisDegraded, when set, is called when Redis could not be read or
	// written; the drift sweep repairs Redis later.
	OnRedisDegraded func()
	// MentionCap is the mention cap (each key keeps its newest cap+1).
	// Defaults to channel.MentionCapDefault.
	MentionCap int
	// ViewStreamMaxLen bounds the channel views' move streams when a
	// settings repair re-applies a user's views. Defaults to
	// redisstore.ViewStreamMaxLenDefault.
	ViewStreamMaxLen int64
}

// Repair merges st with the key's Redis value, upserts Postgres with the
// result (max rule), then max-merges what Postgres now holds into Redis.
// Only a Postgres failure is returned (classified by pgstore): Redis is the
// degradable side, and a Redis outage must not park a record Postgres can
// take.
func (r *Repairer) Repair(ctx context.Context, st receipt.State) (receipt.State, error) {
	key := st.Key
	merged := st
	redisUp := r.Redis != nil
	if redisUp {
		cur, _, err := r.Redis.Get(ctx, key.User, []string{key.Channel})
		switch {
		case err != nil:
			redisUp = false
			r.redisDegraded("reading redis value", key, err)
		case len(cur) == 1:
			// A missing field in an incomplete hash is unknown, not zero:
			// then the record alone is merged, which is still safe.
			merged, _ = receipt.Merge(cur[0], st)
		}
	}
	if _, err := r.Postgres.Upsert(ctx, []receipt.State{merged}); err != nil {
		return merged, fmt.Errorf("upserting %s: %w", key.KafkaKey(), err)
	}
	if !redisUp {
		return merged, nil
	}
	// Postgres may hold more than merged (it was ahead): read it back so
	// Redis converges to the same value, not just to the record's.
	final := merged
	if rows, err := r.Postgres.Get(ctx, key.User, []string{key.Channel}); err == nil && len(rows) == 1 {
		final, _ = receipt.Merge(rows[0], merged)
	}
	res, err := r.Redis.Merge(ctx, []receipt.State{final})
	if err == nil && len(res) == 1 {
		err = res[0].Err
	}
	if err != nil {
		r.redisDegraded("merging into redis", key, err)
	}
	return final, nil
}

func (r *Repairer) redisDegraded(what string, key receipt.Key, err error) {
	if r.OnRedisDegraded != nil {
		r.OnRedisDegraded()
	}
	if r.Logger == nil {
		return
	}
	r.Logger.Warn("redis degraded; the drift sweep will repair it", zap.String("op", what),
		zap.String("key", key.KafkaKey()), zap.Error(err))
}
