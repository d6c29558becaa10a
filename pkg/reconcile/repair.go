package reconcile

import (
	"context"
	"fmt"

	"go.uber.org/zap"

	"github.com/readstate/receipts/pkg/pgstore"
	"github.com/readstate/receipts/pkg/receipt"
	"github.com/readstate/receipts/pkg/redisstore"
)

// repairer applies one state to both stores by the max rule. The consumer
// wraps it in bounded retries; a replay runs it once.
type repairer struct {
	pg  *pgstore.Store
	rs  *redisstore.Store // nil: Postgres only
	log *zap.Logger
	// onRedisDegraded is called when Redis could not be read or written;
	// the drift sweep repairs Redis later.
	onRedisDegraded func()
}

// repair merges st with the key's Redis value, upserts Postgres with the
// result (max rule), then max-merges what Postgres now holds into Redis.
// Only a Postgres failure is returned (classified by pgstore): Redis is the
// degradable side, and a Redis outage must not park a record Postgres can
// take.
func (r *repairer) repair(ctx context.Context, st receipt.State) (receipt.State, error) {
	key := st.Key
	merged := st
	redisUp := r.rs != nil
	if redisUp {
		cur, _, err := r.rs.Get(ctx, key.User, []string{key.Channel})
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
	if _, err := r.pg.Upsert(ctx, []receipt.State{merged}); err != nil {
		return merged, fmt.Errorf("upserting %s: %w", key.KafkaKey(), err)
	}
	if !redisUp {
		return merged, nil
	}
	// Postgres may hold more than merged (it was ahead): read it back so
	// Redis converges to the same value, not just to the record's.
	final := merged
	if rows, err := r.pg.Get(ctx, key.User, []string{key.Channel}); err == nil && len(rows) == 1 {
		final, _ = receipt.Merge(rows[0], merged)
	}
	res, err := r.rs.Merge(ctx, []receipt.State{final})
	if err == nil && len(res) == 1 {
		err = res[0].Err
	}
	if err != nil {
		r.redisDegraded("merging into redis", key, err)
	}
	return final, nil
}

func (r *repairer) redisDegraded(what string, key receipt.Key, err error) {
	if r.onRedisDegraded != nil {
		r.onRedisDegraded()
	}
	r.log.Warn("redis degraded; the drift sweep will repair it", zap.String("op", what),
		zap.String("key", key.KafkaKey()), zap.Error(err))
}
