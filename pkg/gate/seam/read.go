package seam

import (
	"cmp"
	"context"
)

// ReadThrough is a read of state Redis may not hold whole, as the one
// read-through runs it (Read): what Redis answered, whole → the answer;
// otherwise (a hash not known complete, or Redis failed) → wait until
// Postgres holds what was in flight (Settle) → Postgres (Durable, which
// may refill Redis with what it read: a merge, never undoing a newer
// write) → what Redis answered merged over it.
type ReadThrough[T any] struct {
	// Op labels a Redis failure (redis_degraded_total); RedisOpGet when
	// empty.
	Op string
	// Settle waits until Postgres holds what Redis may have lost, or a
	// degraded write left in flight (Core.Settled, Restorer.Settle); nil
	// when nothing can be.
	Settle func(ctx context.Context) error
	// Durable reads Postgres; redisUp says Redis answered (a refill may
	// follow the read).
	Durable func(ctx context.Context, redisUp bool) (T, error)
	// Merge folds what Redis answered (nothing, when it failed) over what
	// Postgres did.
	Merge func(durable, cached T) T
}

// Read answers cached when Redis answered it whole (complete, rerr nil),
// else runs r. Neither store answering is Unavailable (DurableErr).
func Read[T any](ctx context.Context, g *Core, cached T, complete bool, rerr error, r ReadThrough[T]) (T, error) {
	if rerr == nil && complete {
		return cached, nil
	}
	var zero T
	if rerr != nil {
		g.RedisDegradedOn(ctx, cmp.Or(r.Op, RedisOpGet), 1, rerr)
		cached = zero
	}
	if r.Settle != nil {
		if err := r.Settle(ctx); err != nil {
			return zero, g.DurableErr(ctx, err)
		}
	}
	durable, err := r.Durable(ctx, rerr == nil)
	if err != nil {
		return zero, g.DurableErr(ctx, err)
	}
	return r.Merge(durable, cached), nil
}

// Postgres runs read under PostgresTimeout.
func Postgres[T any](ctx context.Context, g *Core, read func(ctx context.Context) (T, error)) (T, error) {
	pctx, cancel := context.WithTimeout(ctx, g.Cfg.PostgresTimeout)
	defer cancel()
	return read(pctx)
}
