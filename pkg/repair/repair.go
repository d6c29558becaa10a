// Package repair applies one decoded event to both stores, every kind of
// state it carries by that kind's merge rule (kind.Spec): the key's
// Redis value (the real-time truth) is merged into it, Postgres is
// upserted with the result, and what Postgres then holds is merged back
// into Redis, so both converge. The dead-letter consumer wraps it in
// bounded retries; an operator's replay runs it once.
package repair

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/readstate/receipts/pkg/event"
	"github.com/readstate/receipts/pkg/kind"
	"github.com/readstate/receipts/pkg/kinds"
	"github.com/readstate/receipts/pkg/pgstore"
	"github.com/readstate/receipts/pkg/redisstore"
	"github.com/readstate/receipts/pkg/views/readby"
)

// Repairer applies events to both stores by their kinds' merge rules.
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
	// readby.StreamMaxLenDefault.
	ViewStreamMaxLen int64
	// Kinds are the kinds of state repaired. Defaults to kinds.All().
	Kinds []kind.Kind
}

// RepairDecoded applies every part of a decoded event to both stores,
// each by its kind's merge rule (see Repair). Only a Postgres failure is
// returned (classified by pgstore): Redis is the degradable side, and a
// Redis outage must not park a record Postgres can take.
//
// Erasures: an erasure event deletes the user's Postgres rows (pgstore.Erase,
// a no-op when Postgres already holds that generation; Redis was erased by
// the gateway before the event was produced, and is not erased again: a
// dead letter replayed late must not wipe what the user wrote since). An
// event of an erased user that predates the erasure (tombstone.Drops) is
// dropped, and one that does not first brings Postgres up to the erasure
// when Redis holds a newer one, so that no row the erasure deletes is
// merged back.
func (r *Repairer) RepairDecoded(ctx context.Context, d event.Decoded) error {
	if d.Erasure != nil {
		_, _, err := r.Postgres.Erase(ctx, *d.Erasure, r.erasure())
		return err
	}
	if d.User() != "" {
		drop, err := r.erased(ctx, d)
		if err != nil || drop {
			return err
		}
	}
	for _, k := range r.kindList() {
		if v, ok := k.FromEvent(&d); ok {
			if _, err := r.Repair(ctx, k, v); err != nil {
				return err
			}
		}
	}
	return nil
}

// Decode decodes a record with the payloads of the repaired kinds
// (kind.DecodeRecord).
func (r *Repairer) Decode(rec *kgo.Record) (event.Decoded, error) {
	return kind.DecodeRecord(r.kindList(), rec)
}

// kindList is Kinds, or every kind.
// erasure is the Postgres part of an erasure: the kinds' statements and
// the read-by view's move log.
func (r *Repairer) erasure() pgstore.Erasure {
	return kind.PGErasure(r.kindList()).And(readby.MoveLogErasure)
}

func (r *Repairer) kindList() []kind.Kind {
	if r.Kinds == nil {
		return kinds.All()
	}
	return r.Kinds
}

// Repair merges v (a value of kind k) with what Redis holds of its key,
// upserts Postgres with the result, then merges what Postgres then holds
// into Redis; it returns the value both stores then hold.
func (r *Repairer) Repair(ctx context.Context, k kind.Kind, v any) (any, error) {
	env := &kind.Env{Postgres: r.Postgres, Redis: r.Redis, MentionCap: r.MentionCap,
		SettingsApplied: readby.NewStore(r.Postgres, r.Redis).SettingsApplier(r.ViewStreamMaxLen)}
	key := k.KeyOf(v)
	merged := k.MergeValues(env, k.ZeroOf(key), v)
	redisUp := r.Redis != nil
	if redisUp {
		held, err := k.GetRedis(ctx, env, []any{key})
		if err != nil {
			redisUp = false
			r.redisDegraded("reading the redis value", k, key, err)
		} else {
			// A copy Redis does not hold is unknown, not zero: then the
			// record alone is merged, which is still safe.
			for _, c := range held[0] {
				if c != nil {
					merged = k.MergeValues(env, c, merged)
				}
			}
		}
	}
	if _, err := k.WritePG(ctx, env, []any{merged}); err != nil {
		return merged, fmt.Errorf("upserting %s %s: %w", k.Name(), k.RecordKeyOf(key), err)
	}
	if !redisUp {
		return merged, nil
	}
	// Postgres may hold more than merged (it was ahead): read it back so
	// Redis converges to the same value, not just to the record's.
	final := merged
	if rows, err := k.GetPG(ctx, env, []any{key}); err == nil && len(rows) == 1 {
		final = k.MergeValues(env, rows[0], merged)
	}
	errs, err := k.WriteRedis(ctx, env, []any{final})
	if err == nil && len(errs) == 1 {
		err = errs[0]
	}
	if err != nil {
		r.redisDegraded("merging into redis", k, key, err)
	}
	return final, nil
}

// erased reports whether the user event d predates its user's erasure, as
// the tombstones of both stores say; when Redis holds a newer erasure
// than Postgres (the persister has not applied it yet), it applies it to
// Postgres first. Redis is degradable: without it, Postgres' tombstone
// alone decides.
func (r *Repairer) erased(ctx context.Context, d event.Decoded) (bool, error) {
	user := d.User()
	pgT, err := r.Postgres.Tombstone(ctx, user)
	if err != nil {
		return false, err
	}
	t := pgT
	if r.Redis != nil {
		rdT, err := r.Redis.Tombstone(ctx, user)
		switch {
		case err != nil:
			r.redisDegraded("reading the redis tombstone", nil, d.RecordKey(), err)
		case rdT.Generation > pgT.Generation:
			if _, _, err := r.Postgres.Erase(ctx, rdT, r.erasure()); err != nil {
				return false, fmt.Errorf("applying the erasure of %s: %w", user, err)
			}
			t = rdT
		}
	}
	if !t.Drops(d.Generation, d.Stamped, d.AcceptedAt()) {
		return false, nil
	}
	if r.Logger != nil {
		r.Logger.Info("dropping an event that predates its user's erasure", zap.String("key", d.RecordKey()),
			zap.Int64("generation", d.Generation), zap.Int64("erased_generation", t.Generation))
	}
	return true, nil
}

// redisDegraded notes a Redis failure; key is a kind's key (k set) or a
// record key.
func (r *Repairer) redisDegraded(what string, k kind.Kind, key any, err error) {
	if r.OnRedisDegraded != nil {
		r.OnRedisDegraded()
	}
	if r.Logger == nil {
		return
	}
	name := fmt.Sprint(key)
	if k != nil {
		name = k.RecordKeyOf(key)
	}
	r.Logger.Warn("redis degraded; the drift sweep will repair it", zap.String("op", what),
		zap.String("key", name), zap.Error(err))
}
